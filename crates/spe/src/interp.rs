//! How to interpret one CPU's SPE records: its data-source table and the names of its
//! implementation-defined event bits, chosen by MIDR (heterogeneous systems differ per CPU).

use crate::datasource::DataSourceEncoding;
use crate::events::ImpDefEventNames;
use crate::midr::{CpuModel, Midr};

/// How to interpret one CPU's records: its data-source table and implementation-defined events.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CpuInterpretation {
    pub model: Option<CpuModel>,
    pub data_source: DataSourceEncoding,
    pub imp_def: ImpDefEventNames,
}

impl CpuInterpretation {
    pub fn for_midr(midr: Option<Midr>) -> Self {
        let model = midr.and_then(|m| m.model());
        CpuInterpretation {
            model,
            data_source: midr
                .map(DataSourceEncoding::for_midr)
                .unwrap_or(DataSourceEncoding::EventsOnly),
            imp_def: match model {
                Some(CpuModel::NeoverseN1) => ImpDefEventNames::NEOVERSE_N1,
                _ => ImpDefEventNames::default(),
            },
        }
    }
}

/// The interpretation for every CPU of a recording (heterogeneous systems differ per CPU).
#[derive(Clone, Debug)]
pub struct Interpretation {
    pub default: CpuInterpretation,
    /// Per-CPU overrides, indexed by CPU number (looked up once per record).
    per_cpu: Vec<Option<CpuInterpretation>>,
}

/// CPU numbers at or above this use the default interpretation (bounds the table).
const MAX_INTERPRETED_CPUS: u32 = 1 << 16;

impl Interpretation {
    pub fn uniform(midr: Option<Midr>) -> Self {
        Interpretation {
            default: CpuInterpretation::for_midr(midr),
            per_cpu: Vec::new(),
        }
    }

    /// Interprets `cpu`'s records with `interp` (heterogeneous systems).
    pub fn set_cpu(&mut self, cpu: u32, interp: CpuInterpretation) {
        if cpu < MAX_INTERPRETED_CPUS {
            let i = cpu as usize;
            if self.per_cpu.len() <= i {
                self.per_cpu.resize(i + 1, None);
            }
            self.per_cpu[i] = Some(interp);
        }
    }

    #[inline]
    pub fn for_cpu(&self, cpu: Option<u32>) -> &CpuInterpretation {
        cpu.and_then(|c| self.per_cpu.get(c as usize))
            .and_then(|o| o.as_ref())
            .unwrap_or(&self.default)
    }
}
