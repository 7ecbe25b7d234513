//! `spelunk check` as text: the machine, then each capability with its reason and fixes.

use spelunk_pmu::check::{ranges, MachineCheck};
use std::fmt::Write;

/// Renders the check for a terminal.
pub fn render_check(c: &MachineCheck) -> String {
    let mut o = String::new();
    let yes_no = |b: Option<bool>| match b {
        Some(true) => "yes",
        Some(false) => "no",
        None => "unknown",
    };
    let _ = writeln!(o, "Machine");
    if c.root.as_os_str() != "/" {
        let _ = writeln!(o, "  replayed from    {}", c.root.display());
    }
    let _ = writeln!(
        o,
        "  kernel           {}",
        c.kernel_release.as_deref().unwrap_or("unknown")
    );
    let vm = match c.platform.virtual_machine {
        Some(true) => "virtual machine",
        Some(false) => "metal",
        None => "unknown",
    };
    let _ = writeln!(o, "  platform         {vm} ({})", c.platform.evidence);
    if !c.arm {
        let _ = writeln!(
            o,
            "  CPU              not Arm: {}",
            c.cpu_description.as_deref().unwrap_or("unknown")
        );
    }
    for core in &c.cores {
        let _ = writeln!(
            o,
            "  CPUs {:<11} {} (MIDR {}), PMU {}{}",
            ranges(&core.cpus),
            core.model.as_deref().unwrap_or("unknown core"),
            core.midr,
            core.pmu.as_deref().unwrap_or("none"),
            core.slots
                .map(|s| format!(", {s} slots"))
                .unwrap_or_default()
        );
    }
    if !c.numa_nodes.is_empty() {
        let _ = writeln!(o, "  NUMA nodes       {}", ranges(&c.numa_nodes));
    }
    let _ = writeln!(
        o,
        "  perf_event_paranoid {}, perf_event_mlock_kb {}, privileged (root or CAP_PERFMON) {}, KPTI {}",
        c.perf_event_paranoid.map(|v| v.to_string()).unwrap_or_else(|| "unknown".into()),
        c.perf_event_mlock_kb.map(|v| v.to_string()).unwrap_or_else(|| "unknown".into()),
        yes_no(c.privileged),
        match c.kpti {
            Some(true) => "on",
            Some(false) => "off",
            None => "unknown",
        }
    );
    if c.spe_pmus.is_empty() {
        let _ = writeln!(
            o,
            "  SPE              none (arm_spe_pmu driver {})",
            if c.spe_driver_loaded {
                "loaded"
            } else {
                "not loaded"
            }
        );
    }
    for p in &c.spe_pmus {
        let _ = writeln!(
            o,
            "  SPE {:<12} perf type {}, CPUs {}",
            p.name,
            p.perf_type,
            ranges(&p.cpus)
        );
        let caps: Vec<String> = p.caps.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let _ = writeln!(o, "    caps           {}", caps.join(" "));
        let fields: Vec<String> = p
            .format
            .iter()
            .map(|(k, f)| format!("{k}={}", f.describe()))
            .collect();
        let _ = writeln!(o, "    format         {}", fields.join(" "));
    }
    let _ = writeln!(o, "\nWhat works");
    for cap in &c.capabilities {
        let _ = writeln!(
            o,
            "  {:<24} {}  {}",
            cap.name,
            if cap.works { "yes" } else { "NO " },
            cap.detail
        );
        for f in &cap.fixes {
            let _ = writeln!(o, "  {:<24}      fix: {f}", "");
        }
    }
    for core in &c.cores {
        if !core.metrics_not_counted.is_empty() {
            let _ = writeln!(
                o,
                "\nNot counted on {} (events its PMU does not list): {}",
                core.model.as_deref().unwrap_or(&core.midr),
                core.metrics_not_counted.join(", ")
            );
        }
    }
    if !c.problems.is_empty() {
        let _ = writeln!(o, "\nProblems");
        for p in &c.problems {
            let _ = writeln!(o, "  {p}");
        }
    }
    let _ = writeln!(
        o,
        "\n{}",
        if c.can_record_spe() {
            "SPE recording works on this machine."
        } else {
            "SPE recording does not work on this machine (exit status 1); see the fixes above."
        }
    );
    o
}
