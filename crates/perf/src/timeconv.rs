//! `PERF_RECORD_TIME_CONV`: how to turn the hardware timer values inside AUX data (for SPE, the
//! generic-timer counts in TIMESTAMP packets) into perf timestamps (the nanosecond clock of
//! every sample_id `time`).
//!
//! Provenance:
//! - layout: `struct perf_record_time_conv` (tools/lib/perf/include/perf/event.h): header,
//!   time_shift, time_mult, time_zero (the "short" 32-byte record written before Linux 5.10),
//!   then time_cycles, time_mask, cap_user_time_zero (u8), cap_user_time_short (u8), 6 reserved
//!   bytes (the 56-byte "long" record). perf 6.1 reads time_cycles and the rest only when
//!   `header.size` covers them.
//! - formula: the `perf_event_mmap_page` comment in the kernel UAPI perf_event.h, including
//!   the `cap_user_time_short` extension:
//!   `if (cap_user_time_short) cyc = time_cycles + ((cyc - time_cycles) & time_mask);`
//!   `quot = cyc >> time_shift; rem = cyc & ((1 << time_shift) - 1);`
//!   `time = time_zero + quot * time_mult + ((rem * time_mult) >> time_shift);`
//!   All arithmetic is u64 and wraps, as in C.

use crate::abi;

/// The conversion parameters of a recording (see the module docs for the formula).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TimeConv {
    pub time_shift: u16,
    pub time_mult: u32,
    pub time_zero: u64,
    pub time_cycles: u64,
    pub time_mask: u64,
    pub cap_user_time_zero: bool,
    pub cap_user_time_short: bool,
}

/// Which on-disk layout a TIME_CONV record has.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TimeConvLayout {
    /// header + time_shift, time_mult, time_zero (32 bytes; kernels before 5.10).
    Short,
    /// + time_cycles, time_mask, cap_user_time_zero, cap_user_time_short, reserved (56 bytes).
    Long,
}

impl TimeConv {
    /// A conversion for a timer running at `hz` ticks per second whose count 0 is perf time
    /// `time_zero`. Like the kernel's clocksource code it starts from the largest shift (at
    /// most 32) whose multiplier fits in 32 bits, then halves an even multiplier while it can,
    /// which gives the same results with less overflow: 1 GHz gives shift 0, mult 1 (ticks are
    /// nanoseconds), 25 MHz gives shift 0, mult 40.
    pub fn from_frequency(hz: u64, time_zero: u64) -> TimeConv {
        let hz = hz.max(1);
        let mut shift = 32u16;
        let mult = loop {
            // mult = round(1e9 * 2^shift / hz)
            let m = ((1_000_000_000u128 << shift) + (hz as u128 / 2)) / hz as u128;
            if m <= u32::MAX as u128 || shift == 0 {
                break m.min(u32::MAX as u128) as u32;
            }
            shift -= 1;
        };
        // Prefer the smallest exact representation (e.g. 1 GHz -> shift 0, mult 1).
        let (mut mult, mut shift) = (mult, shift);
        while shift > 0 && mult % 2 == 0 {
            mult /= 2;
            shift -= 1;
        }
        TimeConv {
            time_shift: shift,
            time_mult: mult,
            time_zero,
            time_cycles: 0,
            time_mask: u64::MAX,
            cap_user_time_zero: true,
            cap_user_time_short: false,
        }
    }

    /// Converts a timer value (SPE TIMESTAMP payload) to perf time in nanoseconds.
    pub fn tsc_to_perf_time(&self, ticks: u64) -> u64 {
        let mut cyc = ticks;
        if self.cap_user_time_short {
            cyc = self
                .time_cycles
                .wrapping_add(cyc.wrapping_sub(self.time_cycles) & self.time_mask);
        }
        let shift = u32::from(self.time_shift);
        let mult = u64::from(self.time_mult);
        // `shift >= 64` is not a valid file value; behave as if every bit were in `quot`'s
        // complement (quot = 0), never panic.
        let quot = cyc.checked_shr(shift).unwrap_or(0);
        let rem_mask = 1u64
            .checked_shl(shift)
            .map_or(u64::MAX, |b| b.wrapping_sub(1));
        let rem = cyc & rem_mask;
        self.time_zero
            .wrapping_add(quot.wrapping_mul(mult))
            .wrapping_add(rem.wrapping_mul(mult).checked_shr(shift).unwrap_or(0))
    }

    /// The inverse of [`TimeConv::tsc_to_perf_time`] for writers: the largest timer value whose
    /// perf time is at or before `time_ns` (exact when one tick is a whole number of ns).
    /// Returns 0 for a zero multiplier or a time before `time_zero`. Ignores the
    /// `cap_user_time_short` wrap (writers produce unwrapped counts).
    pub fn perf_time_to_tsc(&self, time_ns: u64) -> u64 {
        if self.time_mult == 0 || time_ns < self.time_zero {
            return 0;
        }
        let t = u128::from(time_ns - self.time_zero);
        let mult = u128::from(self.time_mult);
        let shift = u32::from(self.time_shift.min(64));
        let quot = t / mult;
        let rem = t % mult;
        let ticks = (quot << shift) + ((rem << shift) / mult);
        ticks.min(u128::from(u64::MAX)) as u64
    }

    /// Parses a TIME_CONV record body (the bytes after the 8-byte header, `header.size - 8`
    /// of them). Returns the value and its layout, or a description of what is missing.
    pub fn parse_body(body: &[u8]) -> Result<(TimeConv, TimeConvLayout), String> {
        let u64_at = |off: usize| -> Option<u64> {
            body.get(off..off + 8)
                .and_then(|b| b.try_into().ok())
                .map(u64::from_le_bytes)
        };
        let short = abi::size::TIME_CONV_SHORT - abi::size::HEADER;
        if body.len() < short {
            return Err(format!(
                "record has {} bytes, the short layout needs {}",
                body.len() + abi::size::HEADER,
                abi::size::TIME_CONV_SHORT
            ));
        }
        let (shift, mult, zero) = match (u64_at(0), u64_at(8), u64_at(16)) {
            (Some(s), Some(m), Some(z)) => (s, m, z),
            _ => return Err("record too short".into()),
        };
        // The kernel's fields are u16 time_shift and u32 time_mult; perf widens them to u64.
        let time_shift = u16::try_from(shift)
            .ok()
            .filter(|s| *s < 64)
            .ok_or_else(|| format!("time_shift {shift} is not below 64"))?;
        let time_mult =
            u32::try_from(mult).map_err(|_| format!("time_mult {mult} does not fit in 32 bits"))?;
        let mut tc = TimeConv {
            time_shift,
            time_mult,
            time_zero: zero,
            time_cycles: 0,
            time_mask: u64::MAX,
            // Short records predate the capability bytes; perf treats the conversion as usable.
            cap_user_time_zero: true,
            cap_user_time_short: false,
        };
        let long = abi::size::TIME_CONV_LONG - abi::size::HEADER;
        if body.len() < long {
            return Ok((tc, TimeConvLayout::Short));
        }
        tc.time_cycles = u64_at(24).unwrap_or(0);
        tc.time_mask = u64_at(32).unwrap_or(u64::MAX);
        tc.cap_user_time_zero = body.get(40).is_some_and(|b| *b != 0);
        tc.cap_user_time_short = body.get(41).is_some_and(|b| *b != 0);
        Ok((tc, TimeConvLayout::Long))
    }

    /// The complete record (header included) in `layout`.
    pub fn to_record(&self, layout: TimeConvLayout) -> Vec<u8> {
        let size = match layout {
            TimeConvLayout::Short => abi::size::TIME_CONV_SHORT,
            TimeConvLayout::Long => abi::size::TIME_CONV_LONG,
        };
        let mut v = Vec::with_capacity(size);
        v.extend_from_slice(&abi::record::TIME_CONV.to_le_bytes());
        v.extend_from_slice(&0u16.to_le_bytes());
        v.extend_from_slice(&(size as u16).to_le_bytes());
        v.extend_from_slice(&u64::from(self.time_shift).to_le_bytes());
        v.extend_from_slice(&u64::from(self.time_mult).to_le_bytes());
        v.extend_from_slice(&self.time_zero.to_le_bytes());
        if layout == TimeConvLayout::Long {
            v.extend_from_slice(&self.time_cycles.to_le_bytes());
            v.extend_from_slice(&self.time_mask.to_le_bytes());
            v.push(self.cap_user_time_zero as u8);
            v.push(self.cap_user_time_short as u8);
            v.extend_from_slice(&[0u8; 6]);
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_ghz_is_identity() {
        let tc = TimeConv::from_frequency(1_000_000_000, 0);
        assert_eq!((tc.time_shift, tc.time_mult), (0, 1));
        assert_eq!(tc.tsc_to_perf_time(123_456_789), 123_456_789);
        assert_eq!(tc.perf_time_to_tsc(123_456_789), 123_456_789);
    }

    #[test]
    fn twenty_five_mhz_hand_computed() {
        // 25 MHz: 40 ns per tick = 2684354560 / 2^26 (2684354560 = 40 * 67108864).
        let tc = TimeConv {
            time_shift: 26,
            time_mult: 2_684_354_560,
            time_zero: 1000,
            cap_user_time_zero: true,
            ..Default::default()
        };
        // ticks = 3: quot = 0, rem = 3, (3 * 2684354560) >> 26 = 8053063680 >> 26 = 120.
        assert_eq!(tc.tsc_to_perf_time(3), 1120);
        // ticks = 2^26 + 1: quot = 1 -> 2684354560, rem = 1 -> 40.
        assert_eq!(
            tc.tsc_to_perf_time((1 << 26) + 1),
            1000 + 2_684_354_560 + 40
        );
        // Inverse: 1120 ns -> t = 120 -> (120 << 26) / 2684354560 = 3.
        assert_eq!(tc.perf_time_to_tsc(1120), 3);
        // 1139 ns is still tick 3 (the next tick is at 1160 ns).
        assert_eq!(tc.perf_time_to_tsc(1139), 3);
        assert_eq!(tc.perf_time_to_tsc(1160), 4);
        assert_eq!(tc.perf_time_to_tsc(999), 0);
        // from_frequency picks the same exact pair, reduced: 40 = 40 / 2^0.
        let f = TimeConv::from_frequency(25_000_000, 1000);
        assert_eq!(
            f.tsc_to_perf_time((1 << 26) + 1),
            tc.tsc_to_perf_time((1 << 26) + 1)
        );
        assert_eq!((f.time_shift, f.time_mult), (0, 40));
    }

    #[test]
    fn non_integer_period_rounds_like_the_kernel() {
        // 19.2 MHz (a common arm64 timer): 52.083.. ns per tick. shift 32 would need
        // mult = 1e9 * 2^32 / 19.2e6 = 223696213333 > 2^32, so the shift drops until it fits.
        let tc = TimeConv::from_frequency(19_200_000, 0);
        assert!(tc.time_shift < 32);
        // One second of ticks is one second of perf time to within a nanosecond or two.
        let t = tc.tsc_to_perf_time(19_200_000);
        assert!(t.abs_diff(1_000_000_000) <= 2, "{t}");
        // Round trip: the tick at or before a time converts back to at most that time.
        for ns in [0u64, 1, 52, 53, 1_000_000_007, 86_400_000_000_000] {
            let ticks = tc.perf_time_to_tsc(ns);
            let back = tc.tsc_to_perf_time(ticks);
            assert!(back <= ns && ns - back <= 53, "{ns} -> {ticks} -> {back}");
        }
    }

    #[test]
    fn short_counter_wrap_is_undone() {
        // A 32-bit counter that wrapped: last reference point at 0xffff_ff00, now reads 0x10.
        let tc = TimeConv {
            time_shift: 0,
            time_mult: 1,
            time_zero: 0,
            time_cycles: 0xffff_ff00,
            time_mask: 0xffff_ffff,
            cap_user_time_zero: true,
            cap_user_time_short: true,
        };
        // cyc = 0xffffff00 + ((0x10 - 0xffffff00) & 0xffffffff) = 0xffffff00 + 0x110.
        assert_eq!(tc.tsc_to_perf_time(0x10), 0x1_0000_0010);
        // Without the capability the raw value is used.
        let raw = TimeConv {
            cap_user_time_short: false,
            ..tc
        };
        assert_eq!(raw.tsc_to_perf_time(0x10), 0x10);
    }

    #[test]
    fn hand_laid_out_records_parse() {
        // Long layout, laid out by hand from struct perf_record_time_conv.
        let mut rec = Vec::new();
        rec.extend_from_slice(&79u32.to_le_bytes()); // type
        rec.extend_from_slice(&0u16.to_le_bytes()); // misc
        rec.extend_from_slice(&56u16.to_le_bytes()); // size
        rec.extend_from_slice(&26u64.to_le_bytes()); // time_shift
        rec.extend_from_slice(&2_684_354_560u64.to_le_bytes()); // time_mult
        rec.extend_from_slice(&0x1122_3344u64.to_le_bytes()); // time_zero
        rec.extend_from_slice(&0x55u64.to_le_bytes()); // time_cycles
        rec.extend_from_slice(&0x00ff_ffff_ffff_ffffu64.to_le_bytes()); // time_mask (56 bits)
        rec.extend_from_slice(&[1, 1, 0, 0, 0, 0, 0, 0]); // caps + 6 reserved bytes
        assert_eq!(rec.len(), 56);
        let (tc, layout) = TimeConv::parse_body(&rec[8..]).unwrap();
        assert_eq!(layout, TimeConvLayout::Long);
        assert_eq!(
            tc,
            TimeConv {
                time_shift: 26,
                time_mult: 2_684_354_560,
                time_zero: 0x1122_3344,
                time_cycles: 0x55,
                time_mask: 0x00ff_ffff_ffff_ffff,
                cap_user_time_zero: true,
                cap_user_time_short: true,
            }
        );
        assert_eq!(tc.to_record(TimeConvLayout::Long), rec);

        // Short layout: first 32 bytes with size 32.
        let mut short = rec[..32].to_vec();
        short[6..8].copy_from_slice(&32u16.to_le_bytes());
        let (s, layout) = TimeConv::parse_body(&short[8..]).unwrap();
        assert_eq!(layout, TimeConvLayout::Short);
        assert_eq!(
            (s.time_shift, s.time_mult, s.time_zero),
            (26, 2_684_354_560, 0x1122_3344)
        );
        assert!(s.cap_user_time_zero && !s.cap_user_time_short);
        assert_eq!(s.to_record(TimeConvLayout::Short), short);

        assert!(TimeConv::parse_body(&rec[8..20]).is_err());
        let mut bad = rec.clone();
        bad[8..16].copy_from_slice(&64u64.to_le_bytes());
        assert!(TimeConv::parse_body(&bad[8..]).is_err());
    }

    #[test]
    fn hostile_values_do_not_panic() {
        let tc = TimeConv {
            time_shift: 63,
            time_mult: u32::MAX,
            time_zero: u64::MAX,
            time_cycles: u64::MAX,
            time_mask: u64::MAX,
            cap_user_time_zero: true,
            cap_user_time_short: true,
        };
        let _ = tc.tsc_to_perf_time(u64::MAX);
        let _ = tc.perf_time_to_tsc(u64::MAX);
        let weird = TimeConv {
            time_shift: 200,
            ..tc
        };
        let _ = weird.tsc_to_perf_time(12345);
        let _ = weird.perf_time_to_tsc(u64::MAX);
    }
}
