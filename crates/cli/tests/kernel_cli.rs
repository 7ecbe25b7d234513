//! Kernel PCs: named from a kallsyms file of the recorded kernel (`--kallsyms`), left as
//! `[kernel.kallsyms]` without one, and a kallsyms read without privileges is refused by name.
//! A planted recording: perf's kernel MMAP (`[kernel.kallsyms]_text`, pid -1) and samples at
//! EL1 PCs whose functions are known from the hand-written kallsyms below.

mod planted;

use planted::*;
use spelunk_perf::{
    AuxFlags, Mmap2, MmapFileId, RecordingSpec, SpeConfig, SpeRecordingWriter, Task, TimeConv,
};
use spelunk_spe::{CodeAddress, CpuModel, RecordLayout};
use std::path::Path;
use std::process::{Command, Output};

const KALLSYMS: &str = "\
ffff800008010000 T _text
ffff800008011000 T do_page_fault
ffff800008011800 t handle_mm_fault
ffff800008030000 T clear_page
ffff800009000000 t ext4_readdir\t[ext4]
";
const KTEXT: u64 = 0xffff_8000_0801_0000;

fn spelunk(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_spelunk"))
        .args(args)
        .output()
        .expect("run spelunk")
}

/// 30 samples in handle_mm_fault (+0x10), 20 in clear_page (+0x40), 10 user samples in main.
fn plant(dir: &Scratch) -> std::path::PathBuf {
    let exe = compile("gcc", "objects.c", &dir.join("objects"), &[]);
    let main = BIAS + nm("nm", &exe)["main"].0;
    let tc = TimeConv::from_frequency(1_000_000_000, 0);
    let data = dir.join("kernel.data");
    let spec = RecordingSpec {
        midr: CpuModel::NeoverseN1.midr(),
        time_conv: tc,
        workload_pid: PID,
        spe: SpeConfig {
            ts_enable: true,
            ..Default::default()
        },
        ..Default::default()
    };
    let mut w = SpeRecordingWriter::create(&data, spec).unwrap();
    w.comm(0, 500, Task::new(PID, PID), "planted", true)
        .unwrap();
    w.mmap2(
        0,
        500,
        &Mmap2 {
            task: Task::new(-1, -1),
            address: KTEXT,
            length: 0x100_0000,
            page_offset: KTEXT,
            file_id: MmapFileId::None,
            prot: 5,
            flags: 2,
            cpu_mode: 1, // PERF_RECORD_MISC_KERNEL
            executable: true,
            path: "[kernel.kallsyms]_text".into(),
        },
    )
    .unwrap();
    for m in mmaps(&exe, PID) {
        w.mmap2(0, 500, &m).unwrap();
    }
    let mut bytes = Vec::new();
    let mut t = 1000;
    let mut put = |pc: u64, el: u8, n: u32, bytes: &mut Vec<u8>| {
        for _ in 0..n {
            let mut r = Op::other(pc).record(t);
            r.pc = Some(CodeAddress::new(pc, el, true));
            r.encode(RecordLayout::N1Padded64, bytes);
            t += 1;
        }
    };
    put(0xffff_8000_0801_1810, 1, 30, &mut bytes);
    put(0xffff_8000_0803_0040, 1, 20, &mut bytes);
    put(main, 0, 10, &mut bytes);
    w.aux(
        0,
        Task::new(PID, PID),
        tc.tsc_to_perf_time(t),
        AuxFlags(0),
        &bytes,
    )
    .unwrap();
    w.finish().unwrap();
    data
}

fn functions(r: &serde_json::Value) -> Vec<(String, u64)> {
    r["hotspots"]["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["key"].as_str().unwrap().to_string(),
                f["samples"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn kernel_pcs_are_named_from_kallsyms() {
    let dir = Scratch::new("kernel-syms");
    let data = plant(&dir);
    let ks = dir.join("kallsyms");
    std::fs::write(&ks, KALLSYMS).unwrap();
    let out = spelunk(&[
        "report",
        data.to_str().unwrap(),
        "--json",
        "--kallsyms",
        ks.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        functions(&r),
        [
            ("handle_mm_fault".to_string(), 30),
            ("clear_page".to_string(), 20),
            ("main".to_string(), 10)
        ]
    );
    let insn = &r["hotspots"]["instructions"][0];
    assert_eq!(insn["key"], "handle_mm_fault+0x10");
    assert_eq!(insn["dso"], "[kernel.kallsyms]_text");

    // Without kallsyms (this machine is not the recording's), the kernel is one unknown group.
    let out = spelunk(&["report", data.to_str().unwrap(), "--json"]);
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        functions(&r)[0],
        ("[unknown in [kernel.kallsyms]_text]".to_string(), 50)
    );
}

#[test]
fn unusable_kallsyms_files_are_refused_by_name() {
    let dir = Scratch::new("kernel-bad");
    let data = plant(&dir);
    let ks = dir.join("restricted");
    std::fs::write(&ks, "0000000000000000 T _text\n0000000000000000 T x\n").unwrap();
    let out = spelunk(&[
        "report",
        data.to_str().unwrap(),
        "--kallsyms",
        ks.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("restricted") && err.contains("kptr_restrict"),
        "{err}"
    );
    let out = spelunk(&[
        "annotate",
        "main",
        data.to_str().unwrap(),
        "--kallsyms",
        Path::new("/nonexistent/kallsyms").to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/kallsyms"));
}
