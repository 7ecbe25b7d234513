//! The Events packet bitmask.
//!
//! Provenance: Arm ARM (DDI 0487), SPE "Events packet" payload (also the bit positions of the
//! PMSEVFR_EL1 event filter). Bits 0–11 since FEAT_SPE; 16 (transactional, FEAT_TME); 17–18 SVE
//! predicate (FEAT_SPEv1p1); 19–23 (FEAT_SPEv1p4: L2D access/miss, cache data modified, recently
//! fetched, data snooped); 24–25 (FEAT_SPE_SME: streaming SVE mode, SMCU). Bits 12–15 are
//! IMPLEMENTATION DEFINED; Neoverse N1 uses bit 12 for "late prefetch" (N1 TRM, SPE section).
//! Short names follow the ones Linux perf and Arm's spe-parser print, so outputs compare directly.

use core::fmt;

/// One architected (or known implementation-defined) event bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Event {
    ExceptionGenerated = 0,
    Retired = 1,
    L1dAccess = 2,
    L1dRefill = 3,
    TlbAccess = 4,
    TlbWalk = 5,
    NotTaken = 6,
    Mispredicted = 7,
    LlcAccess = 8,
    LlcMiss = 9,
    RemoteAccess = 10,
    Alignment = 11,
    Transactional = 16,
    SvePartialPredicate = 17,
    SveEmptyPredicate = 18,
    L2dAccess = 19,
    L2dMiss = 20,
    CacheDataModified = 21,
    RecentlyFetched = 22,
    DataSnooped = 23,
    StreamingSve = 24,
    Smcu = 25,
}

/// Every architected event, in bit order.
pub const ARCHITECTED_EVENTS: [Event; 22] = [
    Event::ExceptionGenerated,
    Event::Retired,
    Event::L1dAccess,
    Event::L1dRefill,
    Event::TlbAccess,
    Event::TlbWalk,
    Event::NotTaken,
    Event::Mispredicted,
    Event::LlcAccess,
    Event::LlcMiss,
    Event::RemoteAccess,
    Event::Alignment,
    Event::Transactional,
    Event::SvePartialPredicate,
    Event::SveEmptyPredicate,
    Event::L2dAccess,
    Event::L2dMiss,
    Event::CacheDataModified,
    Event::RecentlyFetched,
    Event::DataSnooped,
    Event::StreamingSve,
    Event::Smcu,
];

impl Event {
    pub const fn bit(self) -> u8 {
        self as u8
    }

    pub const fn mask(self) -> u64 {
        1u64 << (self as u8)
    }

    /// Short name as perf and spe-parser print it.
    pub const fn name(self) -> &'static str {
        match self {
            Event::ExceptionGenerated => "EXCEPTION-GEN",
            Event::Retired => "RETIRED",
            Event::L1dAccess => "L1D-ACCESS",
            Event::L1dRefill => "L1D-REFILL",
            Event::TlbAccess => "TLB-ACCESS",
            Event::TlbWalk => "TLB-REFILL",
            Event::NotTaken => "NOT-TAKEN",
            Event::Mispredicted => "MISPRED",
            Event::LlcAccess => "LLC-ACCESS",
            Event::LlcMiss => "LLC-REFILL",
            Event::RemoteAccess => "REMOTE-ACCESS",
            Event::Alignment => "ALIGNMENT",
            Event::Transactional => "TXN",
            Event::SvePartialPredicate => "SVE-PARTIAL-PRED",
            Event::SveEmptyPredicate => "SVE-EMPTY-PRED",
            Event::L2dAccess => "L2D-ACCESS",
            Event::L2dMiss => "L2D-MISS",
            Event::CacheDataModified => "HITM",
            Event::RecentlyFetched => "LFB",
            Event::DataSnooped => "SNOOPED",
            Event::StreamingSve => "STREAMING-SVE",
            Event::Smcu => "SMCU",
        }
    }

    pub fn from_bit(bit: u8) -> Option<Event> {
        ARCHITECTED_EVENTS.iter().copied().find(|e| e.bit() == bit)
    }

    /// Parses a short name (`L1D-REFILL`) case-insensitively; also accepts `_` for `-`.
    pub fn from_name(name: &str) -> Option<Event> {
        let norm = name.trim().replace('_', "-");
        ARCHITECTED_EVENTS
            .iter()
            .copied()
            .find(|e| e.name().eq_ignore_ascii_case(&norm))
    }
}

/// Names of implementation-defined event bits (12–15) for a CPU, where known.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct ImpDefEventNames {
    pub names: [Option<&'static str>; 4],
}

impl ImpDefEventNames {
    /// Neoverse N1: bit 12 is "late prefetch".
    pub const NEOVERSE_N1: ImpDefEventNames = ImpDefEventNames {
        names: [Some("LATE-PREFETCH"), None, None, None],
    };
}

/// The Events packet payload: one bit per event, unknown bits kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Events(pub u64);

impl Events {
    pub const fn bits(self) -> u64 {
        self.0
    }

    #[inline]
    pub const fn contains(self, e: Event) -> bool {
        self.0 & e.mask() != 0
    }

    pub fn with(self, e: Event) -> Events {
        Events(self.0 | e.mask())
    }

    /// Bits that are neither architected nor implementation-defined (reserved bits).
    pub fn unknown_bits(self) -> u64 {
        let known = ARCHITECTED_EVENTS.iter().fold(0u64, |m, e| m | e.mask()) | (0xf << 12);
        self.0 & !known
    }

    /// Names of the set bits in bit order. Implementation-defined bits use `imp_def` when it
    /// names them, `IMPDEF-<bit>` otherwise; reserved bits appear as `BIT-<bit>`.
    pub fn names(self, imp_def: &ImpDefEventNames) -> Vec<String> {
        let mut out = Vec::new();
        self.for_each_name(imp_def, |n| out.push(n.to_string()));
        out
    }

    /// Calls `f` with the name of each set bit, in bit order, without allocating for known bits.
    pub fn for_each_name(self, imp_def: &ImpDefEventNames, mut f: impl FnMut(&str)) {
        let mut bits = self.0;
        while bits != 0 {
            let bit = bits.trailing_zeros() as u8;
            bits &= bits - 1;
            if let Some(e) = Event::from_bit(bit) {
                f(e.name());
            } else if (12..16).contains(&bit) {
                match imp_def.names[(bit - 12) as usize] {
                    Some(n) => f(n),
                    None => f(&format!("IMPDEF-{bit}")),
                }
            } else {
                f(&format!("BIT-{bit}"));
            }
        }
    }

    /// Names joined with `sep` (spe-parser joins with `:`, perf with a space).
    pub fn join(self, imp_def: &ImpDefEventNames, sep: &str) -> String {
        let mut s = String::new();
        self.for_each_name(imp_def, |n| {
            if !s.is_empty() {
                s.push_str(sep);
            }
            s.push_str(n);
        });
        s
    }
}

impl fmt::Display for Events {
    /// `EV RETIRED L1D-ACCESS TLB-ACCESS` (perf style; implementation-defined bits unnamed).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("EV")?;
        let s = self.join(&ImpDefEventNames::default(), " ");
        if !s.is_empty() {
            write!(f, " {s}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_in_bit_order() {
        // 0x031e = bits 1,2,3,4,8,9.
        assert_eq!(
            Events(0x031e).to_string(),
            "EV RETIRED L1D-ACCESS L1D-REFILL TLB-ACCESS LLC-ACCESS LLC-REFILL"
        );
        assert_eq!(
            Events(1 << 12).names(&ImpDefEventNames::NEOVERSE_N1),
            vec!["LATE-PREFETCH"]
        );
        assert_eq!(
            Events(1 << 13).names(&ImpDefEventNames::default()),
            vec!["IMPDEF-13"]
        );
        assert_eq!(
            Events(1 << 40).names(&ImpDefEventNames::default()),
            vec!["BIT-40"]
        );
        assert_eq!(Events(1 << 40 | 1 << 26).unknown_bits(), 1 << 40 | 1 << 26);
    }

    #[test]
    fn name_round_trip() {
        for e in ARCHITECTED_EVENTS {
            assert_eq!(Event::from_name(e.name()), Some(e));
            assert_eq!(Event::from_bit(e.bit()), Some(e));
        }
        assert_eq!(Event::from_name("l1d_refill"), Some(Event::L1dRefill));
    }
}
