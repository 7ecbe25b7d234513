//! Options and setup shared by the subcommands that read SPE recordings.

use anyhow::bail;
use clap::Args;
use spelunk_analysis::recording::Recording;
use spelunk_decode::StreamDesc;
use spelunk_perf::PerfDataFile;
use spelunk_spe::{CpuModel, Interpretation, Midr};

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
        Ok(spelunk_analysis::recording::interpretation(
            file,
            streams,
            self.midr_override()?,
        ))
    }

    /// Opens the SPE recording `path`, interpreted as these options say.
    pub fn open(&self, path: &std::path::Path) -> anyhow::Result<Recording> {
        Ok(Recording::open(path, self.midr_override()?)?)
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
