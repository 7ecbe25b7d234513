//! `spelunk check`: can this machine record, and if not, exactly why and what to do.
//!
//! Everything is read under a root directory (`/` live; `--sysroot DIR` replays a machine from
//! a copy of its `sys/` and `proc/` files), so every verdict is tested on fixture trees of real
//! platforms (crates/pmu/tests/data/machines). The facts behind each verdict (docs/check.md):
//! the SPE driver refuses to probe when the kernel unmaps itself at EL0 (KPTI) and is not
//! offered to virtual machines; per-task user-space SPE needs `perf_event_paranoid` ≤ 2, CPU-wide
//! recording ≤ 0 (or CAP_PERFMON), physical addresses and timestamps from the physical counter
//! (`pa_enable`, `pct_enable`) need CAP_PERFMON; Debian and Ubuntu set the paranoid level to 3
//! or 4, which refuses every unprivileged perf event.

use crate::catalog::for_midr;
use crate::detect::{detect, System};
use spelunk_perf::spe_pmu::{spe_pmus, SpePmu};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// One kind of core (one MIDR) and what its PMU can count of its top-down catalog.
#[derive(Clone, Debug, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct CoreCheck {
    pub midr: String,
    /// `neoverse-n1`, ... (None: a core spelunk has no name for).
    pub model: Option<String>,
    pub cpus: Vec<u32>,
    /// The core PMU (`armv8_pmuv3_0`) and its perf type; None when the kernel exposes none.
    pub pmu: Option<String>,
    pub pmu_type: Option<u32>,
    /// `caps/slots` (PMMIR_EL1.SLOTS).
    pub slots: Option<u32>,
    /// The top-down catalog used for this core.
    pub catalog: String,
    /// Events the PMU lists under `events/`, and the catalog's common events (PMCEID ranges) it
    /// does not list: those are "not counted", never 0. Implementation-defined events are
    /// never listed by the kernel, so they are not judged here.
    pub events_listed: usize,
    pub events_missing: Vec<String>,
    /// Catalog metrics that read at least one missing event.
    pub metrics_not_counted: Vec<String>,
    pub metrics_total: usize,
}

/// Physical machine or virtual machine, and why spelunk thinks so.
#[derive(Clone, Debug, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct Platform {
    /// DMI `sys_vendor` and `product_name`, when present.
    pub vendor: Option<String>,
    pub product: Option<String>,
    /// True: a virtual machine; false: metal; None: cannot tell.
    pub virtual_machine: Option<bool>,
    pub evidence: String,
}

/// Whether one capability works, and if not why and what to do.
#[derive(Clone, Debug, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct Capability {
    /// `spe-record`, `spe-physical-addresses`, `live-topdown`, `capacity-sampling`.
    pub name: &'static str,
    pub works: bool,
    pub detail: String,
    /// What to do, most likely first.
    pub fixes: Vec<String>,
}

/// Everything `spelunk check` reports.
#[derive(Clone, Debug, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct MachineCheck {
    pub schema: &'static str,
    /// The root read: `/`, or the `--sysroot` directory.
    pub root: PathBuf,
    pub kernel_release: Option<String>,
    /// Arm cores found (MIDR_EL1 in sysfs or /proc/cpuinfo).
    pub arm: bool,
    /// What the CPUs are when they are not Arm (from /proc/cpuinfo).
    pub cpu_description: Option<String>,
    pub cores: Vec<CoreCheck>,
    pub spe_pmus: Vec<SpePmu>,
    /// `sys/module/arm_spe_pmu` exists (the driver is loaded or built in).
    pub spe_driver_loaded: bool,
    pub perf_event_paranoid: Option<i64>,
    pub perf_event_mlock_kb: Option<u64>,
    /// Root, or CAP_PERFMON / CAP_SYS_ADMIN in the effective set.
    pub privileged: Option<bool>,
    /// KPTI on (the `meltdown` vulnerabilities file says "Mitigation: PTI").
    pub kpti: Option<bool>,
    pub platform: Platform,
    pub numa_nodes: Vec<u32>,
    pub capabilities: Vec<Capability>,
    /// Files that exist but could not be understood.
    pub problems: Vec<String>,
}

/// Schema of `spelunk check --json`.
pub const CHECK_SCHEMA: &str = "spelunk-check/1";

fn read(root: &Path, rel: &str) -> Option<String> {
    let bytes = spelunk_fsio::read_bounded(&root.join(rel), 1 << 20).ok()?;
    Some(String::from_utf8_lossy(&bytes).trim().to_string())
}

/// CAP_SYS_ADMIN is bit 21, CAP_PERFMON bit 38 (linux/capability.h).
fn privileged_from_status(status: &str) -> Option<bool> {
    let mut uid_root = None;
    let mut caps = None;
    for line in status.lines() {
        if let Some(v) = line.strip_prefix("Uid:") {
            // real, effective, saved, fs
            uid_root = v.split_whitespace().nth(1).map(|e| e == "0");
        }
        if let Some(v) = line.strip_prefix("CapEff:") {
            caps = u64::from_str_radix(v.trim(), 16).ok();
        }
    }
    let cap = caps.map(|c| c & (1 << 21 | 1 << 38) != 0);
    match (uid_root, cap) {
        (Some(true), _) | (_, Some(true)) => Some(true),
        (None, None) => None,
        _ => Some(false),
    }
}

fn platform(root: &Path, cpuinfo: Option<&str>) -> Platform {
    let vendor = read(root, "sys/class/dmi/id/sys_vendor").filter(|s| !s.is_empty());
    let product = read(root, "sys/class/dmi/id/product_name").filter(|s| !s.is_empty());
    let dt = read(root, "proc/device-tree/compatible")
        .or_else(|| read(root, "sys/firmware/devicetree/base/compatible"))
        .unwrap_or_default();
    let v = vendor.as_deref().unwrap_or("");
    let p = product.as_deref().unwrap_or("");
    let hypervisor_flag = cpuinfo
        .map(|c| {
            c.lines()
                .any(|l| l.starts_with("flags") && l.split_whitespace().any(|f| f == "hypervisor"))
        })
        .unwrap_or(false);
    let (vm, evidence) = if p.contains("metal") {
        (
            Some(false),
            format!("DMI product name \"{p}\" (a metal instance)"),
        )
    } else if hypervisor_flag {
        (
            Some(true),
            "the CPU flags include \"hypervisor\"".to_string(),
        )
    } else if dt.contains("linux,dummy-virt") {
        (
            Some(true),
            "device tree \"linux,dummy-virt\" (QEMU/KVM virt machine)".to_string(),
        )
    } else if ["QEMU", "KVM", "Xen", "VMware", "innotek"]
        .iter()
        .any(|x| v.contains(x) || p.contains(x))
        || p.contains("Virtual Machine")
    {
        (Some(true), format!("DMI says \"{v} {p}\""))
    } else if v.contains("Amazon EC2") {
        (
            Some(true),
            format!("DMI product name \"{p}\" on Amazon EC2 (not a .metal instance)"),
        )
    } else if root.join("sys/hypervisor/type").exists() {
        (Some(true), "sys/hypervisor/type exists".to_string())
    } else if !v.is_empty() {
        (
            Some(false),
            format!("DMI says \"{v} {p}\", no sign of a hypervisor"),
        )
    } else {
        (None, "no DMI or hypervisor information".to_string())
    };
    Platform {
        vendor,
        product,
        virtual_machine: vm,
        evidence,
    }
}

fn core_checks(system: &System) -> Vec<CoreCheck> {
    system
        .core_types
        .iter()
        .map(|t| {
            let pmu_events: BTreeSet<&str> = t
                .pmu
                .as_ref()
                .map(|p| p.events.keys().map(|k| k.as_str()).collect())
                .unwrap_or_default();
            let has_topdown = pmu_events.contains("STALL_SLOT");
            let (catalog, missing, not_counted, total) = match for_midr(t.midr, has_topdown) {
                Ok(choice) => {
                    let c = choice.catalog;
                    let used: BTreeSet<&str> = c
                        .metrics
                        .values()
                        .flat_map(|m| m.events.iter().map(|e| e.as_str()))
                        .collect();
                    // The armv8_pmuv3 driver lists a common event (0x0000-0x003F,
                    // 0x4000-0x403F) under `events/` only when the PMCEID registers say the
                    // core implements it; implementation-defined events (0x0040 and up) are
                    // never listed, so their absence proves nothing. An empty list proves
                    // nothing either.
                    let absent = |e: &str| {
                        let code = c.events.get(e).copied();
                        !pmu_events.is_empty()
                            && !pmu_events.contains(e)
                            && code.is_some_and(|k| k < 0x40 || (0x4000..0x4040).contains(&k))
                    };
                    let missing: Vec<String> = used
                        .iter()
                        .filter(|e| absent(e))
                        .map(|e| e.to_string())
                        .collect();
                    let not_counted: Vec<String> = c
                        .metrics
                        .values()
                        .filter(|m| m.events.iter().any(|e| absent(e)))
                        .map(|m| m.name.clone())
                        .collect();
                    (c.id.clone(), missing, not_counted, c.metrics.len())
                }
                Err(e) => (format!("none ({e})"), Vec::new(), Vec::new(), 0),
            };
            CoreCheck {
                midr: t.midr.to_string(),
                model: t.midr.model().map(|m| m.name().to_string()),
                cpus: t.cpus.clone(),
                pmu: t.pmu.as_ref().map(|p| p.name.clone()),
                pmu_type: t.pmu.as_ref().map(|p| p.perf_type),
                slots: t.pmu.as_ref().and_then(|p| p.slots),
                catalog,
                events_listed: pmu_events.len(),
                events_missing: missing,
                metrics_not_counted: not_counted,
                metrics_total: total,
            }
        })
        .collect()
}

impl MachineCheck {
    /// Reads the machine under `root` (`/` live).
    pub fn probe(root: &Path) -> MachineCheck {
        let mut problems = Vec::new();
        let cpuinfo = read(root, "proc/cpuinfo");
        let (arm, cores, cpu_description) = match detect(root) {
            Ok(system) => (true, core_checks(&system), None),
            Err(e) => {
                let model = cpuinfo.as_deref().and_then(|c| {
                    c.lines()
                        .find(|l| l.starts_with("model name"))
                        .and_then(|l| l.split_once(':'))
                        .map(|(_, v)| v.trim().to_string())
                });
                (
                    false,
                    Vec::new(),
                    Some(model.unwrap_or_else(|| e.to_string())),
                )
            }
        };
        let spe = match spe_pmus(&root.join("sys/bus/event_source/devices")) {
            Ok(v) => v,
            Err(e) => {
                problems.push(e.to_string());
                Vec::new()
            }
        };
        for p in &spe {
            for (field, text) in &p.unknown_format {
                problems.push(format!(
                    "{}: format/{field} = {text:?} is not a config field this spelunk understands",
                    p.name
                ));
            }
        }
        let paranoid =
            read(root, "proc/sys/kernel/perf_event_paranoid").and_then(|s| s.parse().ok());
        let mlock = read(root, "proc/sys/kernel/perf_event_mlock_kb").and_then(|s| s.parse().ok());
        let privileged = read(root, "proc/self/status").and_then(|s| privileged_from_status(&s));
        let kpti = read(root, "sys/devices/system/cpu/vulnerabilities/meltdown")
            .map(|s| s.contains("PTI"));
        let mut numa_nodes: Vec<u32> = std::fs::read_dir(root.join("sys/devices/system/node"))
            .map(|rd| {
                rd.flatten()
                    .filter_map(|e| {
                        e.file_name()
                            .to_string_lossy()
                            .strip_prefix("node")?
                            .parse()
                            .ok()
                    })
                    .collect()
            })
            .unwrap_or_default();
        numa_nodes.sort_unstable();
        let mut check = MachineCheck {
            schema: CHECK_SCHEMA,
            root: root.to_path_buf(),
            kernel_release: read(root, "proc/sys/kernel/osrelease"),
            arm,
            cpu_description,
            cores,
            spe_driver_loaded: root.join("sys/module/arm_spe_pmu").exists(),
            spe_pmus: spe,
            perf_event_paranoid: paranoid,
            perf_event_mlock_kb: mlock,
            privileged,
            kpti,
            platform: platform(root, cpuinfo.as_deref()),
            numa_nodes,
            capabilities: Vec::new(),
            problems,
        };
        check.capabilities = vec![
            check.spe_record(),
            check.spe_physical(),
            check.live_topdown(),
            check.capacity(root),
        ];
        check
    }

    /// True when SPE recording works: `spelunk check` exits 0.
    pub fn can_record_spe(&self) -> bool {
        self.capabilities
            .iter()
            .any(|c| c.name == "spe-record" && c.works)
    }

    fn unprivileged_blocked(&self, max_level: i64) -> Option<i64> {
        match (self.privileged, self.perf_event_paranoid) {
            (Some(true), _) => None,
            (_, Some(level)) if level > max_level => Some(level),
            _ => None,
        }
    }

    fn spe_record(&self) -> Capability {
        let cap = |works, detail: String, fixes: Vec<String>| Capability {
            name: "spe-record",
            works,
            detail,
            fixes,
        };
        let emulate =
            "record under spelunk's emulator instead: spelunk record --emulate -- CMD".to_string();
        if let Some(p) = self.spe_pmus.first() {
            if let Some(level) = self.unprivileged_blocked(2) {
                return cap(
                    false,
                    format!(
                        "{} is present, but perf_event_paranoid is {level}: unprivileged SPE \
                         recording of your own processes needs 2 or less",
                        p.name
                    ),
                    vec![
                        "sudo sysctl kernel.perf_event_paranoid=2".into(),
                        "or grant the capability: sudo setcap cap_perfmon+ep $(command -v spelunk)"
                            .into(),
                        "or run as root".into(),
                    ],
                );
            }
            let cpus = if p.cpus.is_empty() {
                "all CPUs".to_string()
            } else {
                format!("CPUs {}", ranges(&p.cpus))
            };
            return cap(
                true,
                format!("{} (perf type {}) samples on {cpus}", p.name, p.perf_type),
                Vec::new(),
            );
        }
        if !self.arm {
            return cap(
                false,
                format!(
                    "this is not an Arm CPU ({}): SPE exists only on Arm cores",
                    self.cpu_description.as_deref().unwrap_or("unknown")
                ),
                vec![emulate],
            );
        }
        if self.kpti == Some(true) {
            return cap(
                false,
                "the kernel unmaps itself at EL0 (KPTI is on), and the SPE driver refuses to \
                 probe under KPTI (\"profiling buffer inaccessible\")"
                    .into(),
                vec![
                    "boot with kpti=off on the kernel command line (a CPU with E0PD, or on the \
                     kernel's list of Meltdown-safe cores, needs no KPTI)"
                        .into(),
                    emulate,
                ],
            );
        }
        if self.platform.virtual_machine == Some(true) {
            return cap(
                false,
                format!(
                    "this is a virtual machine ({}): hypervisors do not give guests SPE",
                    self.platform.evidence
                ),
                vec![
                    "record on a metal instance (AWS: *.metal, e.g. c6g.metal, c7g.metal, \
                     c8g.metal-24xl; Azure and OCI: bare-metal shapes)"
                        .into(),
                    emulate,
                ],
            );
        }
        if !self.spe_driver_loaded {
            return cap(
                false,
                "no arm_spe_* PMU, and the arm_spe_pmu driver is not loaded".into(),
                vec![
                    "sudo modprobe arm_spe_pmu".into(),
                    "if no arm_spe_0 appears then, `dmesg | grep -i spe` says why (firmware \
                     that does not describe SPE, a buffer owned by a higher exception level)"
                        .into(),
                    emulate,
                ],
            );
        }
        cap(
            false,
            "the arm_spe_pmu driver is loaded but found no SPE device (the cores or the \
             firmware do not provide one)"
                .into(),
            vec!["`dmesg | grep -i spe` says why".into(), emulate],
        )
    }

    fn spe_physical(&self) -> Capability {
        let name = "spe-physical-addresses";
        let Some(p) = self.spe_pmus.first() else {
            return Capability {
                name,
                works: false,
                detail: "no SPE".into(),
                fixes: Vec::new(),
            };
        };
        if p.field("pa_enable").is_none() {
            return Capability {
                name,
                works: false,
                detail: format!("{} has no pa_enable format field", p.name),
                fixes: Vec::new(),
            };
        }
        match self.privileged {
            Some(true) => Capability {
                name,
                works: true,
                detail: "pa_enable and pct_enable can be set (privileged)".into(),
                fixes: Vec::new(),
            },
            _ => Capability {
                name,
                works: false,
                detail: "physical addresses (pa_enable) and the physical timer (pct_enable) \
                         need CAP_PERFMON or root; without them spelunk records virtual \
                         addresses only and says so"
                    .into(),
                fixes: vec![
                    "sudo setcap cap_perfmon+ep $(command -v spelunk)".into(),
                    "or run as root".into(),
                ],
            },
        }
    }

    fn live_topdown(&self) -> Capability {
        let name = "live-topdown";
        if self.cores.is_empty() {
            return Capability {
                name,
                works: false,
                detail: "no Arm cores".into(),
                fixes: vec![
                    "import perf stat output from an Arm machine: spelunk topdown --import".into(),
                ],
            };
        }
        let no_pmu: Vec<&CoreCheck> = self.cores.iter().filter(|c| c.pmu.is_none()).collect();
        if !no_pmu.is_empty() {
            return Capability {
                name,
                works: false,
                detail: "the kernel exposes no core PMU (no armv8_pmuv3 device): a VM without a \
                         virtual PMU, or the driver is missing"
                    .into(),
                fixes: vec!["use a metal instance or a VM type with a vPMU".into()],
            };
        }
        if let Some(level) = self.unprivileged_blocked(2) {
            return Capability {
                name,
                works: false,
                detail: format!(
                    "perf_event_paranoid is {level}: counting your own processes needs 2 or less"
                ),
                fixes: vec![
                    "sudo sysctl kernel.perf_event_paranoid=2".into(),
                    "or run as root".into(),
                ],
            };
        }
        let parts: Vec<String> = self
            .cores
            .iter()
            .map(|c| {
                if c.metrics_not_counted.is_empty() {
                    format!(
                        "{}: all {} metrics of {}",
                        c.model.as_deref().unwrap_or(&c.midr),
                        c.metrics_total,
                        c.catalog
                    )
                } else {
                    let shown: Vec<&str> = c
                        .events_missing
                        .iter()
                        .take(6)
                        .map(|s| s.as_str())
                        .collect();
                    let more = c.events_missing.len().saturating_sub(shown.len());
                    format!(
                        "{}: {} of {} metrics of {} are not counted (the PMU lacks {}{})",
                        c.model.as_deref().unwrap_or(&c.midr),
                        c.metrics_not_counted.len(),
                        c.metrics_total,
                        c.catalog,
                        shown.join(", "),
                        if more > 0 {
                            format!(" and {more} more")
                        } else {
                            String::new()
                        }
                    )
                }
            })
            .collect();
        Capability {
            name,
            works: true,
            detail: parts.join("; "),
            fixes: Vec::new(),
        }
    }

    fn capacity(&self, root: &Path) -> Capability {
        let name = "capacity-sampling";
        let rollup = root.join("proc/self/smaps_rollup").exists();
        let numa = root.join("proc/self/numa_maps").exists();
        if rollup {
            Capability {
                name,
                works: true,
                detail: format!(
                    "resident memory from /proc/PID/smaps_rollup{}",
                    if numa && self.numa_nodes.len() > 1 {
                        ", per NUMA node from numa_maps"
                    } else {
                        ""
                    }
                ),
                fixes: Vec::new(),
            }
        } else {
            Capability {
                name,
                works: false,
                detail: "/proc/PID/smaps_rollup is missing (kernel older than 4.14, or /proc not mounted)".into(),
                fixes: vec!["mount /proc; a 4.14 or newer kernel".into()],
            }
        }
    }
}

/// `0-3,8` from a sorted CPU list.
pub fn ranges(cpus: &[u32]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            cpus[i].to_string()
        } else {
            format!("{}-{}", cpus[i], cpus[j])
        });
        i = j + 1;
    }
    out.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn privilege_from_proc_status() {
        let root = "Uid:\t0\t0\t0\t0\nCapEff:\t000001ffffffffff\n";
        assert_eq!(privileged_from_status(root), Some(true));
        let user = "Uid:\t1000\t1000\t1000\t1000\nCapEff:\t0000000000000000\n";
        assert_eq!(privileged_from_status(user), Some(false));
        // CAP_PERFMON (38) alone.
        let perfmon = "Uid:\t1000\t1000\t1000\t1000\nCapEff:\t0000004000000000\n";
        assert_eq!(privileged_from_status(perfmon), Some(true));
        assert_eq!(privileged_from_status(""), None);
    }

    #[test]
    fn cpu_ranges() {
        assert_eq!(ranges(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(ranges(&[]), "");
    }
}
