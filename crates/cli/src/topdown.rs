//! `spelunk topdown`: top-down methodology from PMU counters (being built).

use clap::Args;
use std::process::ExitCode;

/// Top-down PMU analysis (cycle accounting, MPKI, miss ratios, operation mix).
#[derive(Args, Debug)]
pub struct TopdownArgs {}

pub fn run(_args: TopdownArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("topdown is not implemented yet")
}
