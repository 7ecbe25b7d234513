//! CPU detection on recorded sysfs/procfs trees (tests/data/sysfs-*).

use spelunk_pmu::catalog;
use spelunk_pmu::detect::{detect, MidrSource};
use spelunk_spe::Midr;
use std::path::PathBuf;

fn root(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

#[test]
fn ampere_altra_n1() {
    let s = detect(&root("sysfs-altra-n1")).unwrap();
    assert_eq!(s.core_types.len(), 1);
    let t = &s.core_types[0];
    assert_eq!(t.midr, Midr(0x413fd0c1));
    assert_eq!(t.cpus, vec![0, 1, 2, 3]);
    assert_eq!(t.midr_source, MidrSource::Sysfs);
    let pmu = t.pmu.as_ref().unwrap();
    assert_eq!((pmu.name.as_str(), pmu.perf_type), ("armv8_pmuv3_0", 8));
    assert_eq!(pmu.slots, None, "N1 has no PMMIR: no caps/slots");
    assert_eq!(pmu.events["STALL_BACKEND"], 0x24);
    // The CMN uncore PMU (cpumask, no cpus) is not a core PMU.
    assert!(s.pmu_names.contains(&"arm_cmn_0".to_string()));
    assert_eq!(
        catalog::for_midr(t.midr, false).unwrap().catalog.id,
        "neoverse-n1"
    );
}

#[test]
fn grace_v2_slots_from_caps() {
    let s = detect(&root("sysfs-grace-v2")).unwrap();
    let pmu = s.core_types[0].pmu.as_ref().unwrap();
    assert_eq!(pmu.slots, Some(8));
    assert_eq!(pmu.perf_type, 10);
}

#[test]
fn heterogeneous_core_types_get_their_own_pmu_and_catalog() {
    let s = detect(&root("sysfs-hetero")).unwrap();
    assert_eq!(s.core_types.len(), 2);
    let (n2, a55) = (&s.core_types[0], &s.core_types[1]);
    assert_eq!(n2.cpus, vec![0, 1]);
    assert_eq!(n2.pmu.as_ref().unwrap().name, "armv9_neoverse_n2");
    assert_eq!(n2.pmu.as_ref().unwrap().slots, Some(5));
    assert_eq!(
        catalog::for_midr(n2.midr, false).unwrap().catalog.id,
        "neoverse-n2-r0p3"
    );
    assert_eq!(a55.cpus, vec![2, 3]);
    assert_eq!(a55.pmu.as_ref().unwrap().perf_type, 9);
    let c = catalog::for_midr(a55.midr, false).unwrap();
    assert_eq!(c.catalog.id, "armv8");
    assert!(c.note.unwrap().contains("MIDR 0x412fd050"));
}

#[test]
fn cpuinfo_fallback() {
    let s = detect(&root("sysfs-cpuinfo-only")).unwrap();
    let t = &s.core_types[0];
    assert_eq!(t.midr_source, MidrSource::Cpuinfo);
    assert_eq!(t.midr, Midr(0x411fd401));
    assert_eq!(t.cpus, vec![0, 1]);
    assert_eq!(
        catalog::for_midr(t.midr, false).unwrap().catalog.id,
        "neoverse-v1"
    );
}

#[test]
fn x86_vm_is_named_honestly() {
    let err = detect(&root("sysfs-x86-vm")).unwrap_err().to_string();
    assert!(err.contains("no Arm CPU"), "{err}");
    assert!(err.contains("GenuineIntel"), "{err}");
}
