//! CPU and PMU detection from sysfs/procfs under a configurable root, so tests run on recorded
//! trees (crates/pmu/tests/data/sysfs-*).
//!
//! * MIDR per CPU: `sys/devices/system/cpu/cpuN/regs/identification/midr_el1`, else the
//!   `CPU implementer/variant/part/revision` fields of `proc/cpuinfo`.
//! * Core PMUs: `sys/bus/event_source/devices/*` with a `cpus` file (Arm core PMUs have one;
//!   uncore PMUs have `cpumask`), their perf `type`, `caps/slots` (PMMIR_EL1.SLOTS, Armv8.4+),
//!   and the events they list under `events/`.
//! * Core types: CPUs grouped by MIDR, each with its PMU; heterogeneous systems get one core
//!   type per MIDR.

use crate::error::PmuError;
use spelunk_spe::Midr;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// How a CPU's MIDR was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MidrSource {
    Sysfs,
    Cpuinfo,
}

/// A core PMU as sysfs describes it.
#[derive(Clone, Debug, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct CorePmu {
    pub name: String,
    /// perf_event_attr.type for this PMU.
    pub perf_type: u32,
    pub cpus: Vec<u32>,
    /// `caps/slots` when present and non-zero.
    pub slots: Option<u32>,
    /// Event name (upper case) -> number, from `events/`.
    pub events: BTreeMap<String, u16>,
}

/// CPUs of one MIDR and the PMU that counts on them.
#[derive(Clone, Debug, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct CoreType {
    #[serde(serialize_with = "ser_midr")]
    #[schemars(with = "String")]
    pub midr: Midr,
    pub cpus: Vec<u32>,
    pub midr_source: MidrSource,
    pub pmu: Option<CorePmu>,
}

fn ser_midr<S: serde::Serializer>(m: &Midr, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&m.to_string())
}

/// What the machine has.
#[derive(Clone, Debug, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct System {
    pub core_types: Vec<CoreType>,
    /// Every PMU directory name seen (for messages when no core PMU is found).
    pub pmu_names: Vec<String>,
}

/// Reads a sysfs or procfs file: a regular file of at most 1 MiB (a FIFO, a device or a
/// directory in a `--sysroot` copy is refused, not read: it could block or never end).
fn read_small(p: impl AsRef<Path>) -> std::io::Result<String> {
    spelunk_fsio::read_to_string_bounded(p.as_ref(), 1 << 20)
}

/// Reads the system under `root` (`/` on a live machine).
pub fn detect(root: &Path) -> Result<System, PmuError> {
    let cpu_dir = root.join("sys/devices/system/cpu");
    let mut midrs: BTreeMap<u32, (Midr, MidrSource)> = BTreeMap::new();
    let mut cpu_ids = Vec::new();
    if let Ok(rd) = fs::read_dir(&cpu_dir) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            let Some(n) = name.strip_prefix("cpu").and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            cpu_ids.push(n);
            let p = e.path().join("regs/identification/midr_el1");
            if let Ok(s) = read_small(&p) {
                if let Some(m) = Midr::parse(&s) {
                    midrs.insert(n, (m, MidrSource::Sysfs));
                }
            }
        }
    }
    cpu_ids.sort_unstable();
    let cpuinfo_path = root.join("proc/cpuinfo");
    let cpuinfo = read_small(&cpuinfo_path).ok();
    if midrs.len() < cpu_ids.len() || cpu_ids.is_empty() {
        if let Some(text) = &cpuinfo {
            for (cpu, m) in parse_cpuinfo(text) {
                midrs.entry(cpu).or_insert((m, MidrSource::Cpuinfo));
            }
        }
    }
    if midrs.is_empty() {
        let what = cpuinfo
            .as_deref()
            .and_then(describe_non_arm)
            .unwrap_or_else(|| "no MIDR_EL1 in sysfs and no Arm fields in /proc/cpuinfo".into());
        return Err(PmuError::Detect(format!(
            "no Arm CPU found under {} ({what})",
            root.display()
        )));
    }
    let (pmus, pmu_names) = read_pmus(&root.join("sys/bus/event_source/devices"))?;
    let mut by_midr: BTreeMap<u64, CoreType> = BTreeMap::new();
    for (cpu, (m, src)) in &midrs {
        let t = by_midr.entry(m.0).or_insert_with(|| CoreType {
            midr: *m,
            cpus: Vec::new(),
            midr_source: *src,
            pmu: None,
        });
        t.cpus.push(*cpu);
    }
    let mut core_types: Vec<CoreType> = by_midr.into_values().collect();
    for t in &mut core_types {
        t.pmu = pmus
            .iter()
            .find(|p| t.cpus.iter().any(|c| p.cpus.contains(c)))
            .cloned();
    }
    core_types.sort_by_key(|t| t.cpus.first().copied());
    Ok(System {
        core_types,
        pmu_names,
    })
}

fn read_pmus(dir: &Path) -> Result<(Vec<CorePmu>, Vec<String>), PmuError> {
    let mut pmus = Vec::new();
    let mut names = Vec::new();
    let Ok(rd) = fs::read_dir(dir) else {
        return Ok((pmus, names));
    };
    let mut entries: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        names.push(name.clone());
        let Ok(cpus) = read_small(p.join("cpus")) else {
            continue;
        };
        let type_path = p.join("type");
        let ty = read_small(&type_path).map_err(|e| PmuError::io(&type_path, e))?;
        let perf_type = ty.trim().parse().map_err(|_| {
            PmuError::Detect(format!("{}: not a number: {ty:?}", type_path.display()))
        })?;
        let cpus = parse_cpu_list(&cpus).ok_or_else(|| {
            PmuError::Detect(format!(
                "{}: not a CPU list: {cpus:?}",
                p.join("cpus").display()
            ))
        })?;
        let slots = read_small(p.join("caps/slots"))
            .ok()
            .and_then(|s| parse_num(&s))
            .filter(|&s| s > 0)
            .map(|s| s as u32);
        let mut events = BTreeMap::new();
        if let Ok(rd) = fs::read_dir(p.join("events")) {
            for e in rd.flatten() {
                let ev = e.file_name().to_string_lossy().to_ascii_uppercase();
                if let Ok(s) = read_small(e.path()) {
                    if let Some(code) = s
                        .trim()
                        .split(',')
                        .find_map(|t| t.trim().strip_prefix("event="))
                        .and_then(parse_num)
                    {
                        events.insert(ev, code as u16);
                    }
                }
            }
        }
        pmus.push(CorePmu {
            name,
            perf_type,
            cpus,
            slots,
            events,
        });
    }
    Ok((pmus, names))
}

fn parse_num(s: &str) -> Option<u64> {
    let s = s.trim();
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Parses a kernel CPU list (`0-3,8,10-11`): one parser for core and SPE PMUs.
pub use spelunk_perf::spe_pmu::parse_cpu_list;

/// (cpu, MIDR) from the Arm fields of /proc/cpuinfo.
pub fn parse_cpuinfo(text: &str) -> Vec<(u32, Midr)> {
    let mut out = Vec::new();
    for block in text.split("\n\n") {
        let mut f: BTreeMap<&str, &str> = BTreeMap::new();
        for line in block.lines() {
            if let Some((k, v)) = line.split_once(':') {
                f.insert(k.trim(), v.trim());
            }
        }
        let num = |k: &str| f.get(k).and_then(|v| parse_num(v));
        let (Some(cpu), Some(imp), Some(part)) =
            (num("processor"), num("CPU implementer"), num("CPU part"))
        else {
            continue;
        };
        let var = num("CPU variant").unwrap_or(0);
        let rev = num("CPU revision").unwrap_or(0);
        out.push((
            cpu as u32,
            Midr::new(imp as u8, var as u8, part as u16, rev as u8),
        ));
    }
    out
}

fn describe_non_arm(cpuinfo: &str) -> Option<String> {
    let field = |k: &str| {
        cpuinfo.lines().find_map(|l| {
            let (a, b) = l.split_once(':')?;
            (a.trim() == k).then(|| b.trim().to_string())
        })
    };
    let vendor = field("vendor_id")?;
    let model = field("model name").unwrap_or_default();
    Some(format!("this machine's CPUs are {vendor} {model}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,8\n"), Some(vec![0, 1, 2, 3, 8]));
        assert_eq!(parse_cpu_list(""), Some(vec![]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("x"), None);
    }

    #[test]
    fn cpuinfo_fields() {
        let t = "processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\nCPU architecture: 8\n\
                 CPU variant\t: 0x3\nCPU part\t: 0xd0c\nCPU revision\t: 1\n\n\
                 processor\t: 1\nCPU implementer\t: 0x41\nCPU variant\t: 0x3\nCPU part\t: 0xd0c\nCPU revision\t: 1\n";
        let v = parse_cpuinfo(t);
        assert_eq!(v, vec![(0, Midr(0x413fd0c1)), (1, Midr(0x413fd0c1))]);
    }
}
