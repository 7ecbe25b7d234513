//! Which samples of a recording to analyse and how to name their code, from the options every
//! front end offers (`--event`, `--pid`, `--tid`, `--cpus`, `--time-range`, `--phase`,
//! `--pc-range`; `--symfs`, `--kallsyms`; `--cpu-model`, `--midr`) as the user wrote them: the
//! parsing and the checks against the recording live here so that the options mean the same
//! in every command.

use crate::recording::{Recording, RecordingError};
use spelunk_analysis::context::RecordingContext;
use spelunk_analysis::kallsyms::KernelSymbols;
use spelunk_analysis::profile::{EventClass, Filter, PhaseFilter};
use spelunk_analysis::symbolize::CodeSymbolizer;
use spelunk_spe::{CpuModel, Midr};
use std::path::PathBuf;
use std::sync::Arc;

fn refuse<T>(message: String) -> Result<T, RecordingError> {
    Err(RecordingError::Options(message))
}

/// The sample filters, as given.
#[derive(Clone, Debug, Default)]
pub struct SampleSelection {
    /// An event class name ([`EventClass::parse`]).
    pub event: Option<String>,
    pub pids: Vec<u32>,
    pub tids: Vec<u32>,
    pub cpus: Vec<u32>,
    /// `FROM,TO` seconds since the first sample.
    pub time_range: Option<String>,
    /// A phase name from the sidecar.
    pub phase: Option<String>,
    /// `FROM,TO` PCs, hex or decimal.
    pub pc_range: Option<String>,
}

impl SampleSelection {
    /// The filter, with `phase` checked against the recording's phases.
    pub fn filter(&self, ctx: &RecordingContext) -> Result<Filter, RecordingError> {
        let event = match &self.event {
            Some(e) => match EventClass::parse(e) {
                Some(class) => Some(class),
                None => {
                    let known: Vec<&str> = EventClass::ALL.iter().map(|(n, _)| *n).collect();
                    return refuse(format!(
                        "unknown event class '{e}'; known: {}",
                        known.join(", ")
                    ));
                }
            },
            None => None,
        };
        let time_range_s = self.time_range.as_deref().map(time_range).transpose()?;
        let phase = self
            .phase
            .as_deref()
            .map(|name| phase_filter(ctx, name))
            .transpose()?;
        Ok(Filter {
            pids: self.pids.clone(),
            tids: self.tids.clone(),
            cpus: self.cpus.clone(),
            time_range_s,
            pc_range: self.pc_range.as_deref().map(pc_range).transpose()?,
            event,
            pcs: None,
            phase,
        })
    }
}

/// A number in decimal or 0x-hex (`_` allowed).
pub fn parse_u64(s: &str) -> Option<u64> {
    let s = s.trim().replace('_', "");
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// `FROM,TO` parsed with `parse`; `what` names the option.
fn pair<T>(
    s: &str,
    what: &str,
    parse: impl Fn(&str) -> Option<T>,
) -> Result<(T, T), RecordingError> {
    let Some((a, b)) = s.split_once(',') else {
        return refuse(format!("{what} '{s}': expected FROM,TO"));
    };
    match (parse(a), parse(b)) {
        (Some(a), Some(b)) => Ok((a, b)),
        _ => refuse(format!("{what} '{s}': expected two numbers FROM,TO")),
    }
}

/// A `--time-range FROM,TO` value: seconds since the first sample, finite, 0 <= FROM < TO.
pub fn time_range(s: &str) -> Result<(f64, f64), RecordingError> {
    let finite = |x: &str| x.trim().parse::<f64>().ok().filter(|v| v.is_finite());
    match pair(s, "--time-range", finite) {
        Ok((a, b)) if 0.0 <= a && a < b => Ok((a, b)),
        _ => refuse(format!(
            "--time-range '{s}': expected FROM,TO in seconds since the first sample, two finite \
             numbers with 0 <= FROM < TO"
        )),
    }
}

/// A `--pc-range FROM,TO` value.
pub fn pc_range(s: &str) -> Result<(u64, u64), RecordingError> {
    let (a, b) = pair(s, "--pc-range", parse_u64)?;
    if a >= b {
        return refuse(format!("--pc-range '{s}': FROM must be below TO"));
    }
    Ok((a, b))
}

/// `--phase NAME` against the recording's phases: a name it does not have is an error that
/// lists the names it has.
pub fn phase_filter(ctx: &RecordingContext, name: &str) -> Result<PhaseFilter, RecordingError> {
    if ctx.sidecar.is_none() {
        return refuse(format!(
            "--phase {name}: this recording has no sidecar (FILE.spelunk.json), so no phases; \
             phases are recorded by `spelunk record` from spelunk_phase_begin/end calls"
        ));
    }
    let names = ctx.phases.names();
    if !names.iter().any(|n| &**n == name) {
        let known: Vec<&str> = names.iter().map(|n| &**n).collect();
        return refuse(format!(
            "--phase {name}: no such phase; the recording has {}",
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        ));
    }
    Ok(PhaseFilter {
        name: name.to_string(),
        index: ctx.phases.clone(),
    })
}

/// Where the recorded binaries and the kernel's symbols are.
#[derive(Clone, Debug, Default)]
pub struct SymbolOptions {
    /// Look for the recorded binaries under this directory (like perf --symfs).
    pub symfs: Option<PathBuf>,
    /// A kallsyms file of the recorded kernel.
    pub kallsyms: Option<PathBuf>,
}

impl SymbolOptions {
    /// The code symbolizer for `rec` (see [`Recording::symbolizer`]), with the kernel symbols
    /// of `kallsyms` when given.
    pub fn symbolizer(&self, rec: &Recording) -> Result<CodeSymbolizer, RecordingError> {
        let kernel = match self.kallsyms.as_deref() {
            Some(path) => {
                let input =
                    |source: Box<dyn std::error::Error + Send + Sync>| RecordingError::Input {
                        what: format!("--kallsyms {}", path.display()),
                        source,
                    };
                // A kallsyms file has a few hundred thousand lines (~10 MB).
                let text = spelunk_fsio::read_to_string_bounded(path, 1 << 30)
                    .map_err(|e| input(Box::new(e)))?;
                let k = KernelSymbols::parse(&text).map_err(|e| input(Box::new(e)))?;
                Some(Arc::new(k))
            }
            None => None,
        };
        Ok(rec.symbolizer(self.symfs.clone(), kernel))
    }
}

/// The MIDR a `--cpu-model NAME` or `--midr HEX` option asks for, if any.
pub fn midr_override(
    cpu_model: Option<&str>,
    midr: Option<&str>,
) -> Result<Option<Midr>, RecordingError> {
    if let Some(name) = cpu_model {
        let Some(m) = CpuModel::from_name(name) else {
            let known: Vec<&str> = CpuModel::ALL.iter().map(|m| m.name()).collect();
            return refuse(format!(
                "unknown CPU model '{name}'; known models: {}",
                known.join(", ")
            ));
        };
        return Ok(Some(m.midr()));
    }
    if let Some(s) = midr {
        let Some(m) = Midr::parse(s) else {
            return refuse(format!(
                "--midr '{s}' is not a number (expected e.g. 0x413fd0c1)"
            ));
        };
        return Ok(Some(m));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recording::{error_chain, error_line};

    fn message<T: std::fmt::Debug>(r: Result<T, RecordingError>) -> String {
        error_line(error_chain(&r.unwrap_err()))
    }

    #[test]
    fn ranges_are_from_below_to() {
        assert_eq!(time_range("0.5,1.25").unwrap(), (0.5, 1.25));
        assert_eq!(pc_range("0x10,0x1_00").unwrap(), (16, 256));
        assert_eq!(pc_range("10,20").unwrap(), (10, 20));
        assert_eq!(
            message(pc_range("5,2")),
            "--pc-range '5,2': FROM must be below TO"
        );
        assert_eq!(
            message(pc_range("0x10")),
            "--pc-range '0x10': expected FROM,TO"
        );
        assert!(message(time_range("2,1")).starts_with("--time-range '2,1': expected FROM,TO"));
        assert!(time_range("-1,1").is_err() && time_range("0,inf").is_err());
    }

    #[test]
    fn cpu_options_name_a_midr() {
        // Neoverse N1: implementer 0x41 (Arm), part number 0xd0c (Arm's N1 TRM, MIDR_EL1).
        let n1 = midr_override(Some("neoverse-n1"), None).unwrap().unwrap();
        assert_eq!((n1.implementer(), n1.part()), (0x41, 0xd0c));
        let given = midr_override(None, Some("0x413fd0c1")).unwrap().unwrap();
        assert_eq!(given.0, 0x413f_d0c1);
        assert_eq!(midr_override(None, None).unwrap(), None);
        assert_eq!(
            message(midr_override(None, Some("zz"))),
            "--midr 'zz' is not a number (expected e.g. 0x413fd0c1)"
        );
        assert!(message(midr_override(Some("cortex-z9"), None))
            .starts_with("unknown CPU model 'cortex-z9'; known models: "));
    }
}
