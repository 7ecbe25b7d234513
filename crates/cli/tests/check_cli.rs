//! `spelunk check` on replayed machines (crates/pmu/tests/data/machines, written by
//! make_machines.py from the facts its README cites) and on this one. Every expectation is
//! read off the fixture by hand: the core's MIDR, whether an arm_spe PMU is there, the paranoid
//! level and privileges, KPTI, the DMI/device-tree platform.

use std::path::PathBuf;
use std::process::Command;

fn machines() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../pmu/tests/data/machines")
}

fn check(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_spelunk"))
        .arg("check")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn capability<'a>(j: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    j["capabilities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap()
}

#[test]
fn each_replayed_machine_gets_its_verdict_and_reason() {
    // (fixture, exit, core model, SPE record works, words the reason must hold, NUMA nodes)
    type Case = (
        &'static str,
        i32,
        Option<&'static str>,
        bool,
        &'static str,
        usize,
    );
    let cases: &[Case] = &[
        (
            "graviton2-metal",
            0,
            Some("neoverse-n1"),
            true,
            "arm_spe_0 (perf type 9)",
            1,
        ),
        (
            "graviton3-metal",
            0,
            Some("neoverse-v1"),
            true,
            "arm_spe_0 (perf type 9)",
            1,
        ),
        (
            "graviton4-metal",
            0,
            Some("neoverse-v2"),
            true,
            "arm_spe_0 (perf type 9)",
            1,
        ),
        (
            "grace",
            0,
            Some("neoverse-v2"),
            true,
            "samples on CPUs 0-3",
            2,
        ),
        (
            "altra-ubuntu",
            1,
            Some("neoverse-n1"),
            false,
            "perf_event_paranoid is 4",
            1,
        ),
        (
            "cobalt100-vm",
            1,
            Some("azure-cobalt-100"),
            false,
            "virtual machine",
            1,
        ),
        (
            "graviton2-vm",
            1,
            Some("neoverse-n1"),
            false,
            "c6g.xlarge",
            1,
        ),
        ("kpti-on", 1, Some("neoverse-n1"), false, "KPTI is on", 1),
        (
            "qemu-neoverse-n1",
            1,
            Some("neoverse-n1"),
            false,
            "linux,dummy-virt",
            1,
        ),
        ("x86-64-vm", 1, None, false, "not an Arm CPU (AMD EPYC)", 1),
    ];
    for (name, exit, model, works, reason, nodes) in cases {
        let root = machines().join(name);
        let (code, out, err) = check(&["--sysroot", root.to_str().unwrap(), "--json"]);
        assert_eq!(code, Some(*exit), "{name}: {err}");
        let j: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(j["schema"], "spelunk-check/1");
        assert_eq!(j["cores"][0]["model"].as_str(), *model, "{name}");
        let spe = capability(&j, "spe-record");
        assert_eq!(spe["works"], *works, "{name}");
        assert!(
            spe["detail"].as_str().unwrap().contains(reason),
            "{name}: {spe}"
        );
        if !works {
            assert!(
                !spe["fixes"].as_array().unwrap().is_empty(),
                "{name}: a fix is named"
            );
        }
        assert_eq!(j["numa_nodes"].as_array().unwrap().len(), *nodes, "{name}");
        // The text says the same.
        let (code, text, _) = check(&["--sysroot", root.to_str().unwrap()]);
        assert_eq!(code, Some(*exit));
        assert!(text.contains(reason), "{name}: {text}");
    }
}

#[test]
fn format_fields_come_from_sysfs_not_a_table() {
    let root = machines().join("graviton2-metal");
    let (_, out, _) = check(&["--sysroot", root.to_str().unwrap(), "--json"]);
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    let f = &j["spe_pmus"][0]["format"];
    assert_eq!(
        f["ts_enable"],
        serde_json::json!({"word": "config", "lo": 0, "hi": 0})
    );
    assert_eq!(
        f["min_latency"],
        serde_json::json!({"word": "config2", "lo": 0, "hi": 11})
    );
    assert_eq!(
        f["event_filter"],
        serde_json::json!({"word": "config1", "lo": 0, "hi": 63})
    );
    assert_eq!(j["spe_pmus"][0]["caps"]["min_interval"], "1024");
    // A user, not root, at paranoid 2: SPE of your own processes yes, physical addresses no.
    assert_eq!(capability(&j, "spe-physical-addresses")["works"], false);
}

#[test]
fn the_qemu_pmu_counts_only_what_it_lists() {
    // QEMU's neoverse-n1 PMU lists cpu_cycles, inst_retired, stall_backend, stall_frontend:
    // of the N1 catalog's metrics only ipc and the two stall shares use no common event
    // (0x00-0x3F, 0x4000-0x403F) outside that list (worked out from Arm's N1 specification's
    // metric event lists and event codes); every other metric is "not counted", never 0.
    let root = machines().join("qemu-neoverse-n1");
    let (_, out, _) = check(&["--sysroot", root.to_str().unwrap(), "--json"]);
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    let core = &j["cores"][0];
    let not_counted: Vec<&str> = core["metrics_not_counted"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect();
    let total = core["metrics_total"].as_u64().unwrap() as usize;
    assert_eq!(total - not_counted.len(), 3, "{not_counted:?}");
    for counted in ["ipc", "backend_stalled_cycles", "frontend_stalled_cycles"] {
        assert!(!not_counted.contains(&counted), "{counted}");
    }
    assert!(not_counted.contains(&"l1d_cache_mpki"));
    // ASE_SPEC (0x74) is implementation defined: the kernel never lists it, so its absence
    // is not held against the PMU; INST_SPEC (0x1B) is common and absent.
    let missing = core["events_missing"].to_string();
    assert!(
        !missing.contains("ASE_SPEC") && missing.contains("INST_SPEC"),
        "{missing}"
    );
    assert_eq!(capability(&j, "live-topdown")["works"], true);
}

#[test]
fn this_machine_and_bad_sysroots() {
    // This machine has no SPE (CI runs on x86-64 VMs): exit 1 with a reason, never a panic.
    let (code, out, err) = check(&[]);
    if code == Some(0) {
        assert!(out.contains("SPE recording works"), "{out}");
    } else {
        assert_eq!(code, Some(1), "{err}");
        assert!(out.contains("spe-record") && out.contains("fix:"), "{out}");
    }
    let (code, _, err) = check(&["--sysroot", "/nonexistent/machine"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("No such file or directory"), "{err}");
    let (code, _, err) = check(&["--sysroot", "/etc/hostname"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("not a directory"), "{err}");
    // An empty directory: nothing known, still a verdict.
    let empty = std::env::temp_dir().join(format!("spelunk-check-empty-{}", std::process::id()));
    std::fs::create_dir_all(&empty).unwrap();
    let (code, out, _) = check(&["--sysroot", empty.to_str().unwrap()]);
    assert_eq!(code, Some(1));
    assert!(out.contains("spe-record"), "{out}");
    // Garbage in sysfs: named in the problems, the rest still read.
    let spe = empty.join("sys/bus/event_source/devices/arm_spe_0");
    std::fs::create_dir_all(spe.join("format")).unwrap();
    std::fs::write(spe.join("type"), "9\n").unwrap();
    std::fs::write(spe.join("format/ts_enable"), "config:0\n").unwrap();
    std::fs::write(spe.join("format/future_field"), "config7:99-1\n").unwrap();
    let (_, out, _) = check(&["--sysroot", empty.to_str().unwrap(), "--json"]);
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["spe_pmus"][0]["format"]["ts_enable"]["word"], "config");
    let problems = j["problems"].to_string();
    assert!(problems.contains("format/future_field"), "{problems}");
    std::fs::write(spe.join("type"), "nine\n").unwrap();
    let (code, out, _) = check(&["--sysroot", empty.to_str().unwrap(), "--json"]);
    assert_eq!(code, Some(1));
    assert!(
        out.contains("arm_spe_0/type: unreadable, or not a number"),
        "{out}"
    );
    std::fs::remove_dir_all(&empty).unwrap();
}
