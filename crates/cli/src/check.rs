//! `spelunk check`: can this machine record, and if not, why and what to do. Wiring only: the
//! probe is spelunk-pmu's `check`, the text spelunk-report's `check_text`.

use clap::Args;
use spelunk_pmu::check::MachineCheck;
use std::path::PathBuf;
use std::process::ExitCode;

/// Check whether this machine can record SPE, count top-down PMU metrics live and sample
/// memory capacity; for each that cannot, say why and what to do.
///
/// Reads sysfs and procfs only (nothing is opened on the PMU): the CPUs and their MIDRs, each
/// arm_spe_* PMU with its caps and format fields (which config bits each uses), the core PMUs
/// and which top-down events they implement, perf_event_paranoid, perf_event_mlock_kb,
/// privileges, KPTI, VM or metal, NUMA nodes. Exit status 0 when SPE recording works, 1 when it
/// does not.
#[derive(Args, Debug)]
#[command(after_long_help = "\
Examples:
  spelunk check                       # this machine
  spelunk check --json > machine.json # for a bug report
  spelunk check --sysroot DIR         # replay a machine from a copy of its /sys and /proc

docs/check.md explains every line and fix.")]
pub struct CheckArgs {
    /// Print the findings as JSON (schema spelunk-check/1)
    #[arg(long)]
    pub json: bool,

    /// Read DIR/sys and DIR/proc instead of /sys and /proc
    #[arg(long, value_name = "DIR")]
    pub sysroot: Option<PathBuf>,
}

pub fn run(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let root = args.sysroot.clone().unwrap_or_else(|| PathBuf::from("/"));
    match std::fs::metadata(&root) {
        Err(e) => anyhow::bail!("--sysroot {}: {e}", root.display()),
        Ok(m) if !m.is_dir() => anyhow::bail!(
            "--sysroot {}: not a directory (a copy of a machine's /sys and /proc is one)",
            root.display()
        ),
        Ok(_) => {}
    }
    let check = MachineCheck::probe(&root);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&check)?);
    } else {
        print!("{}", spelunk_report::check_text::render_check(&check));
    }
    Ok(if check.can_record_spe() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
