//! The `spelunk` binary: argument parsing and wiring only. Each subcommand's module holds its
//! clap arguments (with their help), turns them into the option struct of the library crate of
//! its pipeline stage (spelunk_record::flow, spelunk_pmu::flow, spelunk_engine::select and
//! ::report, spelunk_report::decode_tables, ...), calls it, and hands the typed result to a
//! spelunk-report renderer; flows with logic of their own belong in those crates, where every
//! front end (the Python bindings too) shares them.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod advise;
mod annotate;
mod archive;
mod bench;
mod c2c;
mod check;
mod common;
mod completions;
mod decode;
mod diff;
mod estimate;
mod export;
mod fleet;
mod progress;
mod record;
mod recording;
mod report;
mod topdown;

/// Memory-centric performance analysis for Arm Neoverse: SPE precise sampling, memory latency
/// and data sources, top-down PMU metrics.
#[derive(Parser, Debug)]
#[command(name = "spelunk", version, about, long_about = None, propagate_version = true)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    Advise(advise::AdviseArgs),
    Annotate(annotate::AnnotateArgs),
    Archive(archive::ArchiveArgs),
    Bench(bench::BenchArgs),
    C2c(c2c::C2cArgs),
    Check(check::CheckArgs),
    Completions(completions::CompletionsArgs),
    Decode(decode::DecodeArgs),
    Diff(diff::DiffArgs),
    Estimate(estimate::EstimateArgs),
    Export(export::ExportArgs),
    Fleet(fleet::FleetArgs),
    Man(completions::ManArgs),
    Record(record::RecordArgs),
    Report(report::ReportArgs),
    Topdown(topdown::TopdownArgs),
}

fn main() -> ExitCode {
    restore_sigpipe();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Advise(args) => advise::run(args),
        Command::Annotate(args) => annotate::run(args),
        Command::Archive(args) => archive::run(args),
        Command::Bench(args) => bench::run(args),
        Command::C2c(args) => c2c::run(args),
        Command::Check(args) => check::run(args),
        Command::Completions(args) => completions::completions(args),
        Command::Decode(args) => decode::run(args),
        Command::Diff(args) => diff::run(args),
        Command::Estimate(args) => estimate::run(args),
        Command::Export(args) => export::run(args),
        Command::Fleet(args) => fleet::run(args),
        Command::Man(args) => completions::man(args),
        Command::Record(args) => record::run(args),
        Command::Report(args) => report::run(args),
        Command::Topdown(args) => topdown::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("spelunk: error: {}", one_line(&e));
            ExitCode::FAILURE
        }
    }
}

/// Dies quietly of SIGPIPE when standard output is a pipe whose reader has gone (`spelunk
/// report --json | head`), as `cat` and `grep` do: the Rust runtime ignores SIGPIPE, which
/// turns the closed pipe into a panic in `println!`. Programs `spelunk record` runs get the
/// default disposition either way (the standard library restores it in children).
fn restore_sigpipe() {
    // SAFETY: setting a signal's disposition to SIG_DFL at the start of main, before any
    // thread exists; no handler runs Rust code.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// The error and its causes on one line (as the Python bindings word their exceptions).
fn one_line(e: &anyhow::Error) -> String {
    spelunk_engine::recording::error_line(e.chain())
}
