//! Data-source values: where a load's data came from. The encoding is implementation-defined,
//! so it is chosen per CPU model (by MIDR).
//!
//! Provenance:
//! - Common Arm encoding (Neoverse N1/N2/V1/V2, Cortex-A720/A725/X1C/X3/X925): [SPE methodology table 4.2]
//!   ("Neoverse N1 data source bit encoding") and the cores' TRMs.
//! - AmpereOne: Ampere's IMPDEF values as documented in Linux perf's arm-spe support
//!   (0 local-chip cache or device, 3 SLC, 5 remote-chip cache, 7 DDR, 8 L1D, 9 L2D).
//! - HiSilicon HIP12: HiSilicon's IMPDEF values as documented in Linux perf's arm-spe support.
//! - Unknown CPUs: a fallback derived from the record's cache events (see [`DataSource::from_events`]).

use crate::events::{Event, Events};
use crate::midr::{CpuModel, Midr};
use core::fmt;

/// Where the data came from, normalised across encodings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DataSource {
    /// Level 1 data cache.
    L1D,
    /// Level 2 cache of the same core.
    L2,
    /// L2 hit on a line another agent had modified (HiSilicon).
    L2Hitm,
    /// Snooped from another core in the same cluster (DSU).
    PeerCore,
    /// Peer-core snoop that found the line modified (HiSilicon).
    PeerCoreHitm,
    /// Cluster-level cache (L3 in the DSU).
    LocalCluster,
    /// Shared L3 (HiSilicon).
    L3,
    L3Hitm,
    /// System-level / last-level cache in the interconnect.
    SystemCache,
    /// A core in another cluster of the same chip.
    PeerCluster,
    PeerClusterHitm,
    /// Another socket's caches.
    Remote,
    RemoteHitm,
    /// Local DRAM.
    Dram,
    /// DRAM attached to another socket.
    RemoteDram,
    /// AmpereOne value 0: a local-chip cache or a device.
    LocalChipCacheOrDevice,
    /// Non-cacheable device memory.
    Device,
    /// Derived from events only: the access missed L1D but the events do not say where it was served.
    BeyondL1D,
    /// A value the CPU's table does not define; kept raw.
    Unknown(u16),
}

/// How the data source of a record was obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DataSourceOrigin {
    /// Decoded from the Data Source packet with the CPU's table.
    Packet,
    /// Derived from the cache events because the CPU's encoding is unknown or the packet was absent.
    Events,
}

/// Which table turns a Data Source packet value into a [`DataSource`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DataSourceEncoding {
    /// The Arm (Neoverse/Cortex) encoding of [SPE methodology table 4.2].
    Common,
    AmpereOne,
    HiSiliconHip,
    /// Unknown CPU: the packet value is not interpreted; events are used instead.
    EventsOnly,
}

impl DataSourceEncoding {
    pub fn for_model(model: CpuModel) -> Self {
        use CpuModel::*;
        match model {
            NeoverseN1 | NeoverseN2 | NeoverseV1 | NeoverseV2 | CortexA720 | CortexA725
            | CortexX1C | CortexX3 | CortexX925 | AzureCobalt100 => DataSourceEncoding::Common,
            // N3/V3 use Arm's common encoding per their TRMs' SPE data-source tables.
            NeoverseN3 | NeoverseV3 | NeoverseV3AE => DataSourceEncoding::Common,
            AmpereOneA | AmpereOne => DataSourceEncoding::AmpereOne,
            HiSiliconHip12 => DataSourceEncoding::HiSiliconHip,
            NeoverseE1 => DataSourceEncoding::EventsOnly,
        }
    }

    pub fn for_midr(midr: Midr) -> Self {
        midr.model()
            .map(Self::for_model)
            .unwrap_or(DataSourceEncoding::EventsOnly)
    }

    /// Decodes a packet value. `None` for [`DataSourceEncoding::EventsOnly`].
    pub fn decode(self, value: u64) -> Option<DataSource> {
        use DataSource::*;
        let v = u16::try_from(value).unwrap_or(u16::MAX);
        Some(match self {
            DataSourceEncoding::Common => match value {
                0b0000 => L1D,
                0b1000 => L2,
                0b1001 => PeerCore,
                0b1010 => LocalCluster,
                0b1011 => SystemCache,
                0b1100 => PeerCluster,
                0b1101 => Remote,
                0b1110 => Dram,
                _ => Unknown(v),
            },
            DataSourceEncoding::AmpereOne => match value {
                0x0 => LocalChipCacheOrDevice,
                0x3 => SystemCache,
                0x5 => Remote,
                0x7 => Dram,
                0x8 => L1D,
                0x9 => L2,
                _ => Unknown(v),
            },
            DataSourceEncoding::HiSiliconHip => match value {
                0 => PeerCore,
                1 => PeerCoreHitm,
                2 => L3,
                3 => L3Hitm,
                4 => PeerCluster,
                5 => PeerClusterHitm,
                6 => Remote,
                7 => RemoteHitm,
                8 => Dram,
                9 => RemoteDram,
                13 => Device,
                16 => L2,
                17 => L2Hitm,
                18 => L1D,
                _ => Unknown(v),
            },
            DataSourceEncoding::EventsOnly => return None,
        })
    }

    /// The data source of a record: from the packet with the CPU's table; for a CPU whose table
    /// is unknown ([`DataSourceEncoding::EventsOnly`]), derived from the events. On a known CPU an
    /// absent packet stays absent (e.g. Neoverse N1 records data sources for loads only).
    pub fn resolve(
        self,
        packet: Option<u64>,
        events: Option<Events>,
    ) -> Option<(DataSource, DataSourceOrigin)> {
        match self {
            DataSourceEncoding::EventsOnly => events
                .and_then(DataSource::from_events)
                .map(|d| (d, DataSourceOrigin::Events)),
            known => packet
                .and_then(|v| known.decode(v))
                .map(|d| (d, DataSourceOrigin::Packet)),
        }
    }
}

impl DataSource {
    /// Best-effort level from cache events, for CPUs whose data-source encoding is unknown.
    /// Rules (documented in docs/methodology/data-sources.md): no L1D access → unknown;
    /// L1D access without refill → L1D; refill with REMOTE-ACCESS → Remote; LLC access without
    /// LLC miss → SystemCache; LLC miss → Dram; L2D access without L2D miss → L2; else BeyondL1D.
    pub fn from_events(ev: Events) -> Option<DataSource> {
        if !ev.contains(Event::L1dAccess) {
            return None;
        }
        if !ev.contains(Event::L1dRefill) {
            return Some(DataSource::L1D);
        }
        Some(if ev.contains(Event::RemoteAccess) {
            DataSource::Remote
        } else if ev.contains(Event::LlcMiss) {
            DataSource::Dram
        } else if ev.contains(Event::LlcAccess) {
            DataSource::SystemCache
        } else if ev.contains(Event::L2dAccess) && !ev.contains(Event::L2dMiss) {
            DataSource::L2
        } else {
            DataSource::BeyondL1D
        })
    }

    /// Name as printed in tables and CSV (spe-parser's names for the common sources).
    pub fn name(self) -> &'static str {
        use DataSource::*;
        match self {
            L1D => "L1D",
            L2 => "L2D",
            L2Hitm => "L2D-HITM",
            PeerCore => "PEER-CPU",
            PeerCoreHitm => "PEER-CPU-HITM",
            LocalCluster => "LOCAL-CLUSTER",
            L3 => "L3",
            L3Hitm => "L3-HITM",
            SystemCache => "LL-CACHE",
            PeerCluster => "PEER-CLUSTER",
            PeerClusterHitm => "PEER-CLUSTER-HITM",
            Remote => "REMOTE",
            RemoteHitm => "REMOTE-HITM",
            Dram => "DRAM",
            RemoteDram => "REMOTE-DRAM",
            LocalChipCacheOrDevice => "LOCAL-CHIP-CACHE-OR-DEVICE",
            Device => "NC-DEVICE",
            BeyondL1D => "BEYOND-L1D",
            Unknown(_) => "UNKNOWN",
        }
    }

    /// True when another core's cache supplied the data (the basis of c2c analysis).
    pub fn is_peer_snoop(self) -> bool {
        use DataSource::*;
        matches!(
            self,
            PeerCore
                | PeerCoreHitm
                | PeerCluster
                | PeerClusterHitm
                | Remote
                | RemoteHitm
                | L2Hitm
                | L3Hitm
        )
    }

    /// True when the data came from another socket.
    pub fn is_remote(self) -> bool {
        matches!(
            self,
            DataSource::Remote | DataSource::RemoteHitm | DataSource::RemoteDram
        )
    }
}

impl fmt::Display for DataSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DataSource::Unknown(v) => write!(f, "UNKNOWN-{v}"),
            other => f.write_str(other.name()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn n1_table_matches_seed_000_table_4_2() {
        let enc = DataSourceEncoding::for_midr(Midr(0x413fd0c1));
        assert_eq!(enc, DataSourceEncoding::Common);
        let expect = [
            (0b0000, "L1D"),
            (0b1000, "L2D"),
            (0b1001, "PEER-CPU"),
            (0b1010, "LOCAL-CLUSTER"),
            (0b1011, "LL-CACHE"),
            (0b1100, "PEER-CLUSTER"),
            (0b1101, "REMOTE"),
            (0b1110, "DRAM"),
        ];
        for (v, name) in expect {
            assert_eq!(enc.decode(v).unwrap().to_string(), name);
        }
        assert_eq!(enc.decode(0b0001), Some(DataSource::Unknown(1)));
    }

    #[test]
    fn unknown_cpu_falls_back_to_events() {
        let enc = DataSourceEncoding::for_midr(Midr(0x12345678));
        let ev = Events(0)
            .with(Event::L1dAccess)
            .with(Event::L1dRefill)
            .with(Event::LlcAccess);
        assert_eq!(
            enc.resolve(Some(0), Some(ev)),
            Some((DataSource::SystemCache, DataSourceOrigin::Events))
        );
        let ev = Events(0).with(Event::L1dAccess);
        assert_eq!(
            enc.resolve(None, Some(ev)),
            Some((DataSource::L1D, DataSourceOrigin::Events))
        );
        assert_eq!(
            enc.resolve(None, Some(Events(0).with(Event::Retired))),
            None
        );
    }

    #[test]
    fn vendor_tables() {
        assert_eq!(
            DataSourceEncoding::AmpereOne.decode(7),
            Some(DataSource::Dram)
        );
        assert_eq!(
            DataSourceEncoding::AmpereOne.decode(8),
            Some(DataSource::L1D)
        );
        assert_eq!(
            DataSourceEncoding::HiSiliconHip.decode(18),
            Some(DataSource::L1D)
        );
        assert_eq!(
            DataSourceEncoding::HiSiliconHip.decode(1),
            Some(DataSource::PeerCoreHitm)
        );
        assert!(DataSource::PeerCoreHitm.is_peer_snoop());
    }
}
