//! `spelunk decode`: SPE recordings to typed Parquet/CSV (being built).

use clap::Args;
use std::process::ExitCode;

/// Decode an SPE recording (perf.data or a raw SPE buffer) into Parquet or CSV tables.
#[derive(Args, Debug)]
pub struct DecodeArgs {
    /// perf.data file (or raw SPE buffer with --raw)
    pub file: std::path::PathBuf,
}

pub fn run(_args: DecodeArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("decode is not implemented yet")
}
