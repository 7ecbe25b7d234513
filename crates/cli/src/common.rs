//! Options and setup shared by the subcommands that read SPE recordings.

use anyhow::bail;
use clap::Args;
use spelunk_decode::StreamDesc;
use spelunk_perf::sidecar::{Sidecar, SidecarUse};
use spelunk_perf::PerfDataFile;
use spelunk_spe::{CpuInterpretation, CpuModel, Interpretation, Midr};
use std::path::Path;

/// How to interpret the recording's CPUs (data-source tables), overriding its MIDR.
#[derive(Args, Debug, Clone, Default)]
pub struct CpuArgs {
    /// Interpret data sources for this CPU model (e.g. neoverse-n1) instead of the recording's MIDR
    #[arg(long, value_name = "NAME", conflicts_with = "midr")]
    pub cpu_model: Option<String>,

    /// Interpret data sources for this MIDR_EL1 value (e.g. 0x413fd0c1)
    #[arg(long, value_name = "HEX")]
    pub midr: Option<String>,
}

impl CpuArgs {
    /// The MIDR the user asked for, if any.
    pub fn midr_override(&self) -> anyhow::Result<Option<Midr>> {
        if let Some(name) = &self.cpu_model {
            let Some(m) = CpuModel::from_name(name) else {
                let known: Vec<&str> = CpuModel::ALL.iter().map(|m| m.name()).collect();
                bail!(
                    "unknown CPU model '{name}'; known models: {}",
                    known.join(", ")
                );
            };
            return Ok(Some(m.midr()));
        }
        if let Some(s) = &self.midr {
            let Some(m) = Midr::parse(s) else {
                bail!("--midr '{s}' is not a number (expected e.g. 0x413fd0c1)")
            };
            return Ok(Some(m));
        }
        Ok(None)
    }

    /// The interpretation of every CPU of `file`: the override, else each CPU's recorded MIDR.
    pub fn interpretation(
        &self,
        file: &PerfDataFile,
        streams: &[StreamDesc],
    ) -> anyhow::Result<Interpretation> {
        Ok(match self.midr_override()? {
            Some(m) => Interpretation::uniform(Some(m)),
            None => {
                let mut i = Interpretation::uniform(file.features.midr());
                for cpu in streams.iter().filter_map(|s| s.cpu) {
                    i.set_cpu(cpu, CpuInterpretation::for_midr(file.cpu_midr(cpu)));
                }
                i
            }
        })
    }
}

/// Refuses, before any work, an output that would overwrite an input (docs/files.md): the
/// recording, its sidecar, an imported file, the program being recorded.
pub fn guard_outputs(
    inputs: &[&std::path::Path],
    outputs: &[&std::path::Path],
) -> anyhow::Result<()> {
    let mut guard = spelunk_fsio::OutputGuard::new();
    guard.inputs(inputs.iter().copied());
    guard.check_all(outputs.iter().copied())?;
    Ok(())
}

/// A recording and the sidecar next to it: the inputs of every command that reads one.
pub fn recording_inputs(file: &std::path::Path) -> [std::path::PathBuf; 2] {
    [
        file.to_path_buf(),
        spelunk_perf::sidecar::Sidecar::path_for(file),
    ]
}

/// Whether to read the recording's sidecar (`FILE.spelunk.json`).
#[derive(Args, Debug, Clone, Default)]
pub struct SidecarArgs {
    /// Analyse the recording without its sidecar (FILE.spelunk.json): no phases, named objects,
    /// heap blocks or PMU counts, and a warning that says so. Without it, a sidecar that
    /// cannot be read (cut, not JSON, another schema, not a regular file) is an error
    #[arg(long)]
    pub ignore_sidecar: bool,
}

/// The sidecar of the recording `file`, read the one way every command reads it
/// ([`Sidecar::for_recording`]): an unreadable sidecar is an error that says how to go on
/// without it; `--ignore-sidecar` leaves it out with a warning on standard error (and a problem
/// in the losses). Returns the sidecar and the problems to list with the recording's losses.
pub fn recording_sidecar(
    file: &Path,
    args: &SidecarArgs,
) -> anyhow::Result<(Option<Sidecar>, Vec<String>)> {
    let how = if args.ignore_sidecar {
        SidecarUse::Ignore
    } else {
        SidecarUse::Read
    };
    let (sidecar, problems) = Sidecar::for_recording(file, how).map_err(|e| {
        anyhow::anyhow!(
            "{e}; repair or move it, or pass --ignore-sidecar to analyse {} without it",
            file.display()
        )
    })?;
    if args.ignore_sidecar {
        for p in &problems {
            eprintln!("spelunk: warning: {p}");
        }
    }
    Ok((sidecar, problems))
}

/// Why a recording that gave nothing may have given nothing: `; the recording is damaged:
/// ...` when it is (cut short, a record cut off or malformed), else nothing. For the
/// "no samples" errors, so a cut file is never reported as merely empty.
pub fn damage_note(file: &PerfDataFile) -> String {
    match file.damage() {
        Some(p) => format!("; the recording is damaged: {}", p.message),
        None => String::new(),
    }
}
