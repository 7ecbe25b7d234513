//! `PERF_RECORD_AUXTRACE_INFO` for Arm SPE: which PMU recorded the AUX data and, in the newer
//! layout, each CPU's MIDR.
//!
//! The record is `struct perf_record_auxtrace_info { header; u32 type; u32 reserved; u64 priv[] }`
//! (tools/lib/perf/include/perf/event.h); `type` is 4 for Arm SPE (perf's `enum auxtrace_type`).
//! Two layouts of `priv[]` exist (facts from perf's tools/perf/util/arm-spe.h as of Linux 6.12;
//! the version is told apart by size because version 1 has no version field):
//!
//! * **Version 1** (what perf 6.1 writes and the only one it reads): exactly 2 u64s,
//!   `[pmu_type, per_cpu_mmaps]`.
//! * **Version 2**: a header `[header_version = 2, header_size (in u64s, 4), pmu_type, cpus_num]`
//!   then, per CPU, `[magic = 0x1010101010101010, cpu, nr_params, midr, pmu_type,
//!   min_interval, (event_filter)]` where `nr_params` counts the u64s after itself (3, or 4 when
//!   the event-filter capability is present) and `pmu_type` is `u64::MAX` for a CPU without an
//!   SPE PMU. Readers use `header_size` and `nr_params` to skip fields they do not know.
//!
//! perf 6.1 rejects anything but version 1 (`perf report -D` prints nothing for the AUX data),
//! which is why [`crate::writer::SpeRecordingWriter`] writes version 1 by default.

use spelunk_spe::Midr;

use crate::abi;

/// `ARM_SPE_CPU_MAGIC`: the first u64 of each per-CPU block in version 2.
pub const SPE_CPU_MAGIC: u64 = 0x1010_1010_1010_1010;
/// The version-2 header length in u64s (`ARM_SPE_AUXTRACE_PRIV_MAX - ARM_SPE_HEADER_VERSION`).
pub const V2_HEADER_U64S: u64 = 4;
/// Length of `priv[]` in version 1.
pub const V1_PRIV_U64S: usize = 2;

/// What went wrong parsing SPE AUXTRACE_INFO `priv[]`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AuxInfoError {
    #[error("priv[] has {0} u64s; Arm SPE metadata needs at least 2")]
    TooShort(usize),
    #[error("unknown Arm SPE metadata version {0} (spelunk reads version 1, the 2-u64 layout, and version 2)")]
    UnknownVersion(u64),
    #[error("version 2 header_size {header_size} is below 4 or beyond the {len} u64s of priv[]")]
    BadHeaderSize { header_size: u64, len: usize },
    #[error("per-CPU block {index} at priv[{at}] is cut off (priv[] has {len} u64s)")]
    CpuBlockTruncated { index: u64, at: usize, len: usize },
    #[error(
        "per-CPU block {index} at priv[{at}] has magic {found:#x}, expected 0x1010101010101010"
    )]
    BadMagic { index: u64, at: usize, found: u64 },
    #[error("per-CPU block {index} has nr_params {nr_params}; at least 3 (midr, pmu_type, min_interval) are needed")]
    TooFewParams { index: u64, nr_params: u64 },
    #[error("{field} {value} does not fit in 32 bits")]
    TooLarge { field: &'static str, value: u64 },
}

/// Per-CPU metadata of version 2.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SpeCpuMetadata {
    /// Logical CPU number.
    pub cpu: u32,
    pub midr: Midr,
    /// The SPE PMU bound to this CPU; `None` when the CPU has none (stored as `u64::MAX`).
    pub pmu_type: Option<u32>,
    /// `caps/min_interval` of the PMU (0 when unknown).
    pub min_interval: u64,
    /// The PMU's supported event-filter mask, when the block has a 4th parameter.
    pub event_filter: Option<u64>,
    /// Parameters after the ones named above (from newer perf versions), kept verbatim.
    pub extra: Vec<u64>,
}

/// Arm SPE metadata from AUXTRACE_INFO.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum SpeAuxtraceInfo {
    /// The 2-u64 layout (perf up to 6.11; the only one perf 6.1 reads).
    V1 {
        /// `perf_event_attr.type` of the SPE PMU (its sysfs `type`).
        pmu_type: u32,
        /// True when AUX buffers are per CPU (the usual case), false for per-thread buffers.
        per_cpu_mmaps: bool,
    },
    /// The versioned layout with per-CPU blocks.
    V2 {
        pmu_type: u32,
        cpus: Vec<SpeCpuMetadata>,
    },
}

fn to_u32(field: &'static str, value: u64) -> Result<u32, AuxInfoError> {
    u32::try_from(value).map_err(|_| AuxInfoError::TooLarge { field, value })
}

impl SpeAuxtraceInfo {
    /// The metadata version: 1 or 2.
    pub fn version(&self) -> u32 {
        match self {
            SpeAuxtraceInfo::V1 { .. } => 1,
            SpeAuxtraceInfo::V2 { .. } => 2,
        }
    }

    /// `perf_event_attr.type` of the SPE PMU; the attr with this type is the SPE event.
    pub fn pmu_type(&self) -> u32 {
        match self {
            SpeAuxtraceInfo::V1 { pmu_type, .. } | SpeAuxtraceInfo::V2 { pmu_type, .. } => {
                *pmu_type
            }
        }
    }

    /// The per-CPU blocks (empty for version 1).
    pub fn cpus(&self) -> &[SpeCpuMetadata] {
        match self {
            SpeAuxtraceInfo::V1 { .. } => &[],
            SpeAuxtraceInfo::V2 { cpus, .. } => cpus,
        }
    }

    /// The MIDR version 2 records for `cpu`.
    pub fn cpu_midr(&self, cpu: u32) -> Option<Midr> {
        self.cpus().iter().find(|c| c.cpu == cpu).map(|c| c.midr)
    }

    /// Parses `priv[]` (see the module docs for both layouts).
    pub fn parse(priv_: &[u64]) -> Result<SpeAuxtraceInfo, AuxInfoError> {
        if priv_.len() < V1_PRIV_U64S {
            return Err(AuxInfoError::TooShort(priv_.len()));
        }
        if priv_.len() == V1_PRIV_U64S {
            return Ok(SpeAuxtraceInfo::V1 {
                pmu_type: to_u32("pmu_type", priv_[0])?,
                per_cpu_mmaps: priv_[1] != 0,
            });
        }
        let version = priv_[0];
        if version != 2 {
            return Err(AuxInfoError::UnknownVersion(version));
        }
        let len = priv_.len();
        let header_size = priv_[1];
        if header_size < V2_HEADER_U64S || header_size > len as u64 {
            return Err(AuxInfoError::BadHeaderSize { header_size, len });
        }
        let pmu_type = to_u32("pmu_type", priv_[2])?;
        let cpus_num = priv_[3];
        let mut at = header_size as usize;
        // Each block has at least 3 u64s, which bounds the allocation by the record size.
        let mut cpus = Vec::with_capacity((cpus_num as usize).min((len - at) / 3));
        for index in 0..cpus_num {
            let head = priv_
                .get(at..at + 3)
                .ok_or(AuxInfoError::CpuBlockTruncated { index, at, len })?;
            let (magic, cpu, nr_params) = (head[0], head[1], head[2]);
            if magic != SPE_CPU_MAGIC {
                return Err(AuxInfoError::BadMagic {
                    index,
                    at,
                    found: magic,
                });
            }
            if nr_params < 3 {
                return Err(AuxInfoError::TooFewParams { index, nr_params });
            }
            let params_at = at + 3;
            let params = usize::try_from(nr_params)
                .ok()
                .and_then(|n| priv_.get(params_at..params_at.checked_add(n)?))
                .ok_or(AuxInfoError::CpuBlockTruncated { index, at, len })?;
            let pmu = params[1];
            cpus.push(SpeCpuMetadata {
                cpu: to_u32("cpu", cpu)?,
                midr: Midr(params[0]),
                pmu_type: if pmu == u64::MAX {
                    None
                } else {
                    Some(to_u32("pmu_type", pmu)?)
                },
                min_interval: params[2],
                event_filter: params.get(3).copied(),
                extra: params.get(4..).map(<[u64]>::to_vec).unwrap_or_default(),
            });
            at = params_at + params.len();
        }
        Ok(SpeAuxtraceInfo::V2 { pmu_type, cpus })
    }

    /// `priv[]` in this value's layout.
    pub fn to_priv(&self) -> Vec<u64> {
        match self {
            SpeAuxtraceInfo::V1 {
                pmu_type,
                per_cpu_mmaps,
            } => vec![u64::from(*pmu_type), u64::from(*per_cpu_mmaps)],
            SpeAuxtraceInfo::V2 { pmu_type, cpus } => {
                let mut v = vec![2, V2_HEADER_U64S, u64::from(*pmu_type), cpus.len() as u64];
                for c in cpus {
                    let nr_params = 3 + c.event_filter.is_some() as u64 + c.extra.len() as u64;
                    v.extend_from_slice(&[
                        SPE_CPU_MAGIC,
                        u64::from(c.cpu),
                        nr_params,
                        c.midr.0,
                        c.pmu_type.map_or(u64::MAX, u64::from),
                        c.min_interval,
                    ]);
                    // `extra` only makes sense after an event filter; write 0 for a missing one.
                    if c.event_filter.is_some() || !c.extra.is_empty() {
                        v.push(c.event_filter.unwrap_or(0));
                    }
                    v.extend_from_slice(&c.extra);
                }
                v
            }
        }
    }

    /// The complete PERF_RECORD_AUXTRACE_INFO record (header, type 4, reserved, priv[]).
    pub fn to_record(&self) -> Vec<u8> {
        let priv_ = self.to_priv();
        let size = abi::size::AUXTRACE_INFO_FIXED + 8 * priv_.len();
        let mut v = Vec::with_capacity(size);
        v.extend_from_slice(&abi::record::AUXTRACE_INFO.to_le_bytes());
        v.extend_from_slice(&0u16.to_le_bytes());
        v.extend_from_slice(&(size as u16).to_le_bytes());
        v.extend_from_slice(&abi::auxtrace_type::ARM_SPE.to_le_bytes());
        v.extend_from_slice(&0u32.to_le_bytes());
        for p in priv_ {
            v.extend_from_slice(&p.to_le_bytes());
        }
        v
    }
}

/// Splits an AUXTRACE_INFO record body (after the 8-byte header) into its type and `priv[]`.
/// Trailing bytes that do not make a whole u64 are ignored (perf sizes records in u64s).
pub fn split_record_body(body: &[u8]) -> Option<(u32, Vec<u64>)> {
    let ty = u32::from_le_bytes(body.get(0..4)?.try_into().ok()?);
    let priv_ = body
        .get(8..)?
        .chunks_exact(8)
        .filter_map(|c| c.try_into().ok().map(u64::from_le_bytes))
        .collect();
    Some((ty, priv_))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn le(words: &[u64]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    #[test]
    fn v1_hand_laid_out() {
        // type=70, misc=0, size=32; type=4 (ARM SPE), reserved; priv = [pmu_type 10, per-cpu 1]
        let mut rec = vec![70, 0, 0, 0, 0, 0, 32, 0, 4, 0, 0, 0, 0, 0, 0, 0];
        rec.extend(le(&[10, 1]));
        let (ty, p) = split_record_body(&rec[8..]).unwrap();
        assert_eq!(ty, 4);
        let info = SpeAuxtraceInfo::parse(&p).unwrap();
        assert_eq!(
            info,
            SpeAuxtraceInfo::V1 {
                pmu_type: 10,
                per_cpu_mmaps: true
            }
        );
        assert_eq!(info.version(), 1);
        assert!(info.cpus().is_empty());
        assert_eq!(info.to_record(), rec);
    }

    #[test]
    fn v2_hand_laid_out() {
        // Header [version 2, header_size 4, pmu_type 10, 2 CPUs]; CPU 0 with 3 params
        // (N1 MIDR, pmu 10, min_interval 1024); CPU 5 with 4 params and no SPE PMU.
        let words = [
            2,
            4,
            10,
            2,
            0x1010_1010_1010_1010,
            0,
            3,
            0x413f_d0c1,
            10,
            1024,
            0x1010_1010_1010_1010,
            5,
            4,
            0x410f_d490,
            u64::MAX,
            0,
            0x1_0000_00aa,
        ];
        let info = SpeAuxtraceInfo::parse(&words).unwrap();
        let SpeAuxtraceInfo::V2 { pmu_type, cpus } = &info else {
            panic!("not v2: {info:?}");
        };
        assert_eq!(*pmu_type, 10);
        assert_eq!(
            cpus[0],
            SpeCpuMetadata {
                cpu: 0,
                midr: Midr(0x413f_d0c1),
                pmu_type: Some(10),
                min_interval: 1024,
                event_filter: None,
                extra: vec![]
            }
        );
        assert_eq!(cpus[1].cpu, 5);
        assert_eq!(cpus[1].pmu_type, None);
        assert_eq!(cpus[1].event_filter, Some(0x1_0000_00aa));
        assert_eq!(info.cpu_midr(0), Some(Midr(0x413f_d0c1)));
        assert_eq!(info.cpu_midr(1), None);
        assert_eq!(info.to_priv(), words);
        let rec = info.to_record();
        assert_eq!(rec.len(), 16 + 8 * words.len());
        assert_eq!(&rec[16..], le(&words).as_slice());
    }

    #[test]
    fn v2_with_larger_header_and_extra_params_is_read() {
        let words = [
            2,
            5,
            10,
            1,
            0xdead, // unknown 5th header word
            0x1010_1010_1010_1010,
            3,
            6,
            0x410f_d0c0,
            10,
            256,
            0xff,
            7,
            8,
        ];
        let info = SpeAuxtraceInfo::parse(&words).unwrap();
        assert_eq!(info.cpus()[0].cpu, 3);
        assert_eq!(info.cpus()[0].extra, vec![7, 8]);
    }

    #[test]
    fn rejects_with_reasons() {
        assert_eq!(
            SpeAuxtraceInfo::parse(&[3, 4, 10, 0]),
            Err(AuxInfoError::UnknownVersion(3))
        );
        let e = SpeAuxtraceInfo::parse(&[7, 4, 10, 0]).unwrap_err();
        assert!(e.to_string().contains("version 7"), "{e}");
        assert_eq!(
            SpeAuxtraceInfo::parse(&[10]),
            Err(AuxInfoError::TooShort(1))
        );
        assert!(matches!(
            SpeAuxtraceInfo::parse(&[2, 9, 10, 0]),
            Err(AuxInfoError::BadHeaderSize { .. })
        ));
        assert!(matches!(
            SpeAuxtraceInfo::parse(&[2, 4, 10, 1, 0x1234, 0, 3, 0, 0, 0]),
            Err(AuxInfoError::BadMagic { found: 0x1234, .. })
        ));
        assert!(matches!(
            SpeAuxtraceInfo::parse(&[2, 4, 10, 1, SPE_CPU_MAGIC, 0, 3, 0]),
            Err(AuxInfoError::CpuBlockTruncated { .. })
        ));
        // A huge CPU count with no blocks is an error, not an allocation.
        assert!(SpeAuxtraceInfo::parse(&[2, 4, 10, u64::MAX]).is_err());
        assert!(SpeAuxtraceInfo::parse(&[2, 4, 10, 1, SPE_CPU_MAGIC, 0, u64::MAX]).is_err());
        assert!(matches!(
            SpeAuxtraceInfo::parse(&[1 << 40, 1]),
            Err(AuxInfoError::TooLarge { .. })
        ));
    }
}
