//! `spelunk fleet report DIR`: the report's tables over a whole dataset of recordings
//! (`spelunk export --dataset`), computed by the Python package's `spelunk.fleet` on embedded
//! DuckDB. Wiring only: this runs `python3 -m spelunk.fleet report ...` (through a few lines
//! that turn a missing package into one clear message) and returns its exit status.

use anyhow::Context;
use clap::{Args, Subcommand};
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Command, ExitCode};

/// Analyse a dataset of many recordings (hosts, runs) on embedded DuckDB
///
/// The report's questions (hot functions, data sources, data objects, allocation sites, load
/// latency percentiles) over every partition of a dataset written by `spelunk export
/// --dataset`. Runs the Python package `spelunk` (`python3 -m spelunk.fleet`; the interpreter
/// from SPELUNK_PYTHON, else python3), which needs the `duckdb` package. The same tables on a
/// Spark cluster: `python -m spelunk.spark DIR`. Tables and definitions: docs/dataset.md,
/// "Fleet analysis".
#[derive(Args, Debug)]
pub struct FleetArgs {
    #[command(subcommand)]
    pub command: FleetCommand,
}

#[derive(Subcommand, Debug)]
pub enum FleetCommand {
    Report(FleetReportArgs),
}

/// Hot functions, data sources, objects, allocation sites and partitions of a dataset
#[derive(Args, Debug)]
#[command(after_long_help = "\
Examples:
  spelunk fleet report fleet/
  spelunk fleet report fleet/ --host graviton-7 --json --limit 0
  SPELUNK_PYTHON=~/spelunk-env/bin/python spelunk fleet report fleet/")]
pub struct FleetReportArgs {
    /// A dataset directory written by `spelunk export --dataset`
    #[arg(value_name = "DIR")]
    pub dataset: PathBuf,

    /// Print the tables as JSON (schema spelunk-fleet/1)
    #[arg(long)]
    pub json: bool,

    /// Rows per table (0: all) [default: 20]
    #[arg(long, value_name = "N")]
    pub limit: Option<u64>,

    /// Only this host's partitions (repeatable)
    #[arg(long, value_name = "NAME")]
    pub host: Vec<String>,

    /// Only this run's partitions (repeatable)
    #[arg(long, value_name = "NAME")]
    pub run: Vec<String>,

    /// DuckDB's memory limit, e.g. 512MB (it spills to a temporary directory beyond it)
    /// [default: 2GB]
    #[arg(long, value_name = "SIZE")]
    pub memory_limit: Option<String>,

    /// DuckDB's threads [default: every core]
    #[arg(long, value_name = "N")]
    pub threads: Option<u32>,
}

/// Imports `spelunk.fleet` and runs its `main` with our arguments, or says in one line which
/// package is missing and how to install it (exit status 3, `spelunk.fleet`'s own for a
/// missing package such as duckdb).
const BOOTSTRAP: &str = r#"import sys
try:
    import spelunk.fleet
except ModuleNotFoundError as e:
    name = e.name or str(e)
    how = ("python3 -m pip install . (in spelunk's source directory, docs/python.md)"
           if name.split(".")[0] == "spelunk" else "python3 -m pip install " + name.split(".")[0])
    sys.stderr.write("spelunk: error: spelunk fleet needs the Python package '%s', which %s "
                     "cannot import: install it with %s, or set SPELUNK_PYTHON to a Python "
                     "that has it\n" % (name, sys.executable, how))
    sys.exit(3)
sys.exit(spelunk.fleet.main(sys.argv[1:]))
"#;

pub fn run(args: FleetArgs) -> anyhow::Result<ExitCode> {
    let FleetCommand::Report(a) = args.command;
    let python = std::env::var_os("SPELUNK_PYTHON").unwrap_or_else(|| OsString::from("python3"));
    let mut argv: Vec<OsString> = vec!["report".into(), a.dataset.into_os_string()];
    if a.json {
        argv.push("--json".into());
    }
    if let Some(n) = a.limit {
        argv.extend(["--limit".into(), n.to_string().into()]);
    }
    for h in a.host {
        argv.extend(["--host".into(), h.into()]);
    }
    for r in a.run {
        argv.extend(["--run".into(), r.into()]);
    }
    if let Some(m) = a.memory_limit {
        argv.extend(["--memory-limit".into(), m.into()]);
    }
    if let Some(t) = a.threads {
        argv.extend(["--threads".into(), t.to_string().into()]);
    }
    let status = Command::new(&python)
        .arg("-c")
        .arg(BOOTSTRAP)
        .args(&argv)
        .status()
        .with_context(|| {
            format!(
                "running {}: spelunk fleet needs Python 3 with the packages spelunk and duckdb \
                 (python3 -m pip install . duckdb); set SPELUNK_PYTHON to its interpreter",
                python.to_string_lossy()
            )
        })?;
    Ok(match status.code() {
        Some(0) => ExitCode::SUCCESS,
        Some(c) => ExitCode::from(u8::try_from(c).unwrap_or(1)),
        None => ExitCode::FAILURE,
    })
}
