//! `perf_event_attr` as stored in perf.data, with the raw fields kept (linux-perf-data's typed
//! attr folds `type`/`config` into enums and loses unknown values), and the Arm SPE PMU's
//! `config*` bit fields.

use crate::bytes::{u32_at, u64_at};
use linux_perf_event_reader::{Endianness, PerfEventAttr, RecordParseInfo};

use crate::abi::{self, attr as off, attr_flag};

/// One event's attributes, read from the file's attrs section (and EVENT_DESC for the name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventAttr {
    /// `perf_event_attr.type`: 0-5 are the generic types, larger values are dynamic PMUs
    /// (the SPE PMU's type is its sysfs `type`, also stored in AUXTRACE_INFO).
    pub type_: u32,
    /// `perf_event_attr.size` as recorded (128 for perf 6.1).
    pub size: u32,
    pub config: u64,
    pub config1: u64,
    pub config2: u64,
    /// Present when the recorded attr is large enough (`PERF_ATTR_SIZE_VER8`, 136 bytes).
    pub config3: Option<u64>,
    /// `sample_period`, or `sample_freq` when [`EventAttr::freq`] is true.
    pub sample_period_or_freq: u64,
    /// `PERF_SAMPLE_*` bits ([`crate::abi::sample`]).
    pub sample_type: u64,
    pub read_format: u64,
    /// The attr bitfield word ([`crate::abi::attr_flag`]).
    pub flags: u64,
    pub wakeup_events_or_watermark: u32,
    /// `clockid` when `use_clockid` is set.
    pub clockid: Option<i32>,
    /// `aux_watermark` when the attr is large enough (`PERF_ATTR_SIZE_VER5`).
    pub aux_watermark: Option<u32>,
    /// The event name from the EVENT_DESC feature (e.g. `arm_spe_0//`, `dummy:u`).
    pub name: Option<String>,
    /// The event ids (one per CPU or thread the event was opened on).
    pub ids: Vec<u64>,
}

impl EventAttr {
    /// An attr of perf 6.1's size (128 bytes) for event `config` of PMU `type_`, with these
    /// flags and `sample_type`; every other field zero or absent (set them with `..`).
    pub fn new(type_: u32, config: u64, period: u64, sample_type: u64, flags: u64) -> EventAttr {
        EventAttr {
            type_,
            size: abi::attr::SIZE_PERF_6_1,
            config,
            config1: 0,
            config2: 0,
            config3: None,
            sample_period_or_freq: period,
            sample_type,
            read_format: 0,
            flags,
            wakeup_events_or_watermark: 0,
            clockid: None,
            aux_watermark: None,
            name: None,
            ids: Vec::new(),
        }
    }

    /// Parses the attr at the start of `bytes`, which must hold at least `PERF_ATTR_SIZE_VER0`
    /// (64) bytes and at least as many as the attr's own `size` says, up to what is given.
    pub fn parse(bytes: &[u8]) -> Result<EventAttr, String> {
        let size = u32_at(bytes, off::OFF_SIZE).ok_or("attr shorter than 8 bytes")?;
        if size < abi::attr::SIZE_VER0 {
            return Err(format!(
                "attr size {size} is below PERF_ATTR_SIZE_VER0 (64)"
            ));
        }
        let avail = bytes.len().min(size as usize);
        let b = &bytes[..avail];
        if b.len() < abi::attr::SIZE_VER0 as usize {
            return Err(format!(
                "attr says {size} bytes but only {} are present",
                bytes.len()
            ));
        }
        let flags = u64_at(b, off::OFF_FLAGS).unwrap_or(0);
        Ok(EventAttr {
            type_: u32_at(b, off::OFF_TYPE).unwrap_or(0),
            size,
            config: u64_at(b, off::OFF_CONFIG).unwrap_or(0),
            config1: u64_at(b, off::OFF_CONFIG1).unwrap_or(0),
            config2: u64_at(b, off::OFF_CONFIG2).unwrap_or(0),
            config3: u64_at(b, off::OFF_CONFIG3),
            sample_period_or_freq: u64_at(b, off::OFF_SAMPLE_PERIOD).unwrap_or(0),
            sample_type: u64_at(b, off::OFF_SAMPLE_TYPE).unwrap_or(0),
            read_format: u64_at(b, off::OFF_READ_FORMAT).unwrap_or(0),
            flags,
            wakeup_events_or_watermark: u32_at(b, off::OFF_WAKEUP).unwrap_or(0),
            clockid: (flags & attr_flag::USE_CLOCKID != 0)
                .then(|| u32_at(b, off::OFF_CLOCKID).map(|c| c as i32))
                .flatten(),
            aux_watermark: u32_at(b, off::OFF_AUX_WATERMARK),
            name: None,
            ids: Vec::new(),
        })
    }

    /// True when `flag` ([`crate::abi::attr_flag`]) is set.
    pub fn has_flag(&self, flag: u64) -> bool {
        self.flags & flag != 0
    }

    /// True when non-SAMPLE records carry a sample_id trailer. perf 6.1 never decodes SPE AUX
    /// data of an event without it.
    pub fn sample_id_all(&self) -> bool {
        self.has_flag(attr_flag::SAMPLE_ID_ALL)
    }

    /// True when [`EventAttr::sample_period_or_freq`] is a frequency.
    pub fn freq(&self) -> bool {
        self.has_flag(attr_flag::FREQ)
    }

    /// The sample period, unless the event samples by frequency.
    pub fn sample_period(&self) -> Option<u64> {
        (!self.freq()).then_some(self.sample_period_or_freq)
    }

    /// The Arm SPE fields of `config`/`config1`/`config2`/`config3` (meaningful for the SPE
    /// attr only).
    pub fn spe_config(&self) -> SpeConfig {
        SpeConfig::from_configs(
            self.config,
            self.config1,
            self.config2,
            self.config3.unwrap_or(0),
        )
    }

    /// Size in bytes of the sample_id trailer of non-SAMPLE records (0 without
    /// sample_id_all): TID, TIME, ID, STREAM_ID, CPU and IDENTIFIER take 8 bytes each.
    pub fn sample_id_size(&self) -> usize {
        if !self.sample_id_all() {
            return 0;
        }
        use abi::sample::*;
        [TID, TIME, ID, STREAM_ID, CPU, IDENTIFIER]
            .iter()
            .filter(|b| self.sample_type & **b != 0)
            .count()
            * 8
    }

    /// linux-perf-event-reader's parse info for this attr. Built from a normalized copy (type
    /// RAW, no clockid) so that attrs its typed parser rejects (unknown software events,
    /// invalid clock ids) still yield the sample layout, which is all the parse info needs.
    pub(crate) fn parse_info(&self) -> Option<RecordParseInfo> {
        let mut b = vec![0u8; abi::attr::SIZE_VER7 as usize];
        b[off::OFF_TYPE..off::OFF_TYPE + 4].copy_from_slice(&abi::event_type::RAW.to_le_bytes());
        b[off::OFF_SIZE..off::OFF_SIZE + 4].copy_from_slice(&abi::attr::SIZE_VER7.to_le_bytes());
        b[off::OFF_SAMPLE_TYPE..off::OFF_SAMPLE_TYPE + 8]
            .copy_from_slice(&self.sample_type.to_le_bytes());
        b[off::OFF_READ_FORMAT..off::OFF_READ_FORMAT + 8]
            .copy_from_slice(&self.read_format.to_le_bytes());
        let flags = self.flags & !attr_flag::USE_CLOCKID;
        b[off::OFF_FLAGS..off::OFF_FLAGS + 8].copy_from_slice(&flags.to_le_bytes());
        let (attr, _) = PerfEventAttr::parse::<_, byteorder::LittleEndian>(&b[..]).ok()?;
        Some(RecordParseInfo::new(&attr, Endianness::LittleEndian))
    }

    /// The attr as perf 6.1 writes it: 128 bytes (`PERF_ATTR_SIZE_VER7`), size field 128.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = vec![0u8; abi::attr::SIZE_PERF_6_1 as usize];
        let mut put64 = |o: usize, v: u64| b[o..o + 8].copy_from_slice(&v.to_le_bytes());
        put64(off::OFF_CONFIG, self.config);
        put64(off::OFF_SAMPLE_PERIOD, self.sample_period_or_freq);
        put64(off::OFF_SAMPLE_TYPE, self.sample_type);
        put64(off::OFF_READ_FORMAT, self.read_format);
        put64(off::OFF_FLAGS, self.flags);
        put64(off::OFF_CONFIG1, self.config1);
        put64(off::OFF_CONFIG2, self.config2);
        b[off::OFF_TYPE..off::OFF_TYPE + 4].copy_from_slice(&self.type_.to_le_bytes());
        b[off::OFF_SIZE..off::OFF_SIZE + 4]
            .copy_from_slice(&abi::attr::SIZE_PERF_6_1.to_le_bytes());
        b[off::OFF_WAKEUP..off::OFF_WAKEUP + 4]
            .copy_from_slice(&self.wakeup_events_or_watermark.to_le_bytes());
        if let Some(c) = self.clockid {
            b[off::OFF_CLOCKID..off::OFF_CLOCKID + 4].copy_from_slice(&c.to_le_bytes());
        }
        if let Some(w) = self.aux_watermark {
            b[off::OFF_AUX_WATERMARK..off::OFF_AUX_WATERMARK + 4].copy_from_slice(&w.to_le_bytes());
        }
        b
    }
}

/// The Arm SPE PMU's user ABI, decoded. Bit positions are the driver's sysfs `format` entries
/// (drivers/perf/arm_spe_pmu.c, `/sys/bus/event_source/devices/arm_spe_0/format/*`):
/// `ts_enable config:0`, `pa_enable config:1`, `pct_enable config:2`, `jitter config:16`,
/// `branch_filter config:32`, `load_filter config:33`, `store_filter config:34`,
/// `event_filter config1:0-63`, `min_latency config2:0-11`, `inv_event_filter config3:0-63`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SpeConfig {
    /// PMSCR_EL1.TS: records carry TIMESTAMP packets.
    pub ts_enable: bool,
    /// PMSCR_EL1.PA: loads/stores carry physical addresses.
    pub pa_enable: bool,
    /// PMSCR_EL1.PCT: timestamps are physical rather than virtual counter values.
    pub pct_enable: bool,
    /// PMSIRR_EL1.RND: random perturbation of the sampling interval.
    pub jitter: bool,
    /// PMSFCR_EL1.B: keep branches.
    pub branch_filter: bool,
    /// PMSFCR_EL1.LD: keep loads.
    pub load_filter: bool,
    /// PMSFCR_EL1.ST: keep stores.
    pub store_filter: bool,
    /// PMSEVFR_EL1: keep records with all these events.
    pub event_filter: u64,
    /// PMSLATFR_EL1.MINLAT: keep records with at least this total latency (12 bits).
    pub min_latency: u16,
    /// PMSNEVFR_EL1: drop records with any of these events (newer kernels, config3).
    pub inv_event_filter: u64,
}

impl SpeConfig {
    pub const TS_ENABLE: u64 = 1 << 0;
    pub const PA_ENABLE: u64 = 1 << 1;
    pub const PCT_ENABLE: u64 = 1 << 2;
    pub const JITTER: u64 = 1 << 16;
    pub const BRANCH_FILTER: u64 = 1 << 32;
    pub const LOAD_FILTER: u64 = 1 << 33;
    pub const STORE_FILTER: u64 = 1 << 34;
    pub const MIN_LATENCY_MASK: u64 = 0xfff;

    /// Decodes the fields from the attr's config words.
    pub fn from_configs(config: u64, config1: u64, config2: u64, config3: u64) -> SpeConfig {
        SpeConfig {
            ts_enable: config & Self::TS_ENABLE != 0,
            pa_enable: config & Self::PA_ENABLE != 0,
            pct_enable: config & Self::PCT_ENABLE != 0,
            jitter: config & Self::JITTER != 0,
            branch_filter: config & Self::BRANCH_FILTER != 0,
            load_filter: config & Self::LOAD_FILTER != 0,
            store_filter: config & Self::STORE_FILTER != 0,
            event_filter: config1,
            min_latency: (config2 & Self::MIN_LATENCY_MASK) as u16,
            inv_event_filter: config3,
        }
    }

    /// `config` with the bits of this value.
    pub fn config(&self) -> u64 {
        let mut c = 0;
        for (on, bit) in [
            (self.ts_enable, Self::TS_ENABLE),
            (self.pa_enable, Self::PA_ENABLE),
            (self.pct_enable, Self::PCT_ENABLE),
            (self.jitter, Self::JITTER),
            (self.branch_filter, Self::BRANCH_FILTER),
            (self.load_filter, Self::LOAD_FILTER),
            (self.store_filter, Self::STORE_FILTER),
        ] {
            if on {
                c |= bit;
            }
        }
        c
    }

    /// `config1` (the event filter).
    pub fn config1(&self) -> u64 {
        self.event_filter
    }

    /// `config2` (the minimum latency, 12 bits).
    pub fn config2(&self) -> u64 {
        u64::from(self.min_latency) & Self::MIN_LATENCY_MASK
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spe_config_bits_match_the_driver_format() {
        // arm_spe_0/ts_enable=1,pa_enable=1,jitter=1,load_filter=1,min_latency=10,event_filter=2/
        let c = SpeConfig::from_configs((1 << 0) | (1 << 1) | (1 << 16) | (1 << 33), 2, 10, 0);
        assert!(c.ts_enable && c.pa_enable && c.jitter && c.load_filter);
        assert!(!c.pct_enable && !c.branch_filter && !c.store_filter);
        assert_eq!((c.event_filter, c.min_latency), (2, 10));
        assert_eq!(c.config(), 0x2_0001_0003);
        assert_eq!((c.config1(), c.config2()), (2, 10));
        // min_latency is 12 bits wide.
        assert_eq!(SpeConfig::from_configs(0, 0, 0xffff, 0).min_latency, 0xfff);
    }

    #[test]
    fn attr_round_trip_and_hand_layout() {
        let a = EventAttr {
            type_: 10,
            size: 128,
            config: 0x3,
            config1: 0,
            config2: 0,
            config3: None,
            sample_period_or_freq: 4096,
            sample_type: 0x1_0087,
            read_format: 4,
            flags: attr_flag::SAMPLE_ID_ALL | attr_flag::DISABLED,
            wakeup_events_or_watermark: 0,
            clockid: None,
            aux_watermark: Some(0),
            name: None,
            ids: vec![],
        };
        let b = a.to_bytes();
        assert_eq!(b.len(), 128);
        assert_eq!(&b[0..8], &[10, 0, 0, 0, 128, 0, 0, 0]);
        assert_eq!(&b[16..24], &4096u64.to_le_bytes());
        assert_eq!(&b[40..48], &((1u64 << 18) | 1).to_le_bytes());
        let back = EventAttr::parse(&b).unwrap();
        assert_eq!(back, a);
        assert!(back.sample_id_all());
        assert_eq!(back.sample_period(), Some(4096));
        // TID, TIME, CPU, IDENTIFIER -> 32 bytes of sample_id.
        assert_eq!(back.sample_id_size(), 32);
        assert!(back.parse_info().is_some());
        assert!(EventAttr::parse(&b[..40]).is_err());
    }
}
