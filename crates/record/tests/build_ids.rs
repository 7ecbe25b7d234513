//! Issue 26, item 1: every recording lists the build-ids of the files it mapped
//! (HEADER_BUILD_ID), so `perf buildid-list` (Linux perf 6.1, an independent reader) shows
//! them and a later report can tell a rebuilt file from the recorded one. The expected ids
//! are what `readelf -n` prints for the files (binutils, independent of spelunk's reader).
//! Needs cc, readelf and perf; skipped (with a message) when one is missing.

use spelunk_perf::records::MmapFileId;
use spelunk_perf::{Mmap2, PerfDataFile, RecordingSpec, SpeRecordingWriter, Task};
use spelunk_testkit::readelf_build_id;
use std::path::Path;
use std::process::Command;

fn tool(name: &str) -> bool {
    let ok = Command::new(name).arg("--version").output().is_ok();
    if !ok {
        eprintln!("skipped: {name} is not installed");
    }
    ok
}

fn mmap(path: &str, address: u64, executable: bool) -> Mmap2 {
    Mmap2 {
        task: Task::new(42, 42),
        address,
        length: 0x1000,
        page_offset: 0,
        file_id: MmapFileId::None,
        prot: 5,
        flags: 2,
        cpu_mode: 2,
        executable,
        path: path.into(),
    }
}

#[test]
fn recordings_list_the_mapped_files_build_ids_for_perf() {
    if !(tool("cc") && tool("readelf") && tool("perf")) {
        return;
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("build-ids");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // Two programs with build-ids (sha1 and, with the md5 style, 16 bytes), one without, and a
    // data file that is not ELF.
    let src = dir.join("p.c");
    std::fs::write(&src, "int main(void) { return 0; }\n").unwrap();
    let build = |name: &str, style: &str| {
        let exe = dir.join(name);
        let st = Command::new("cc")
            .arg(format!("-Wl,--build-id={style}"))
            .arg("-o")
            .arg(&exe)
            .arg(&src)
            .status()
            .unwrap();
        assert!(st.success());
        exe
    };
    let sha1 = build("sha1", "sha1");
    let md5 = build("md5", "md5");
    let none = build("none", "none");
    let data = dir.join("table.bin");
    std::fs::write(&data, [0u8; 4096]).unwrap();
    let s = |p: &Path| p.to_str().unwrap().to_string();

    let out = dir.join("ours.data");
    let mut w = SpeRecordingWriter::create(&out, RecordingSpec::default()).unwrap();
    for (i, (p, exec)) in [(&sha1, true), (&md5, true), (&none, true), (&data, false)]
        .into_iter()
        .enumerate()
    {
        w.mmap2(
            0,
            10 + i as u64,
            &mmap(&s(p), 0x40_0000 * (i as u64 + 1), exec),
        )
        .unwrap();
    }
    // The same file mapped twice is listed once.
    w.mmap2(0, 20, &mmap(&s(&sha1), 0x90_0000, false)).unwrap();
    let mut warnings = Vec::new();
    spelunk_record::buildids::attach(&mut w, &mut warnings);
    w.finish().unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");

    let want = [
        (readelf_build_id(&sha1), s(&sha1)),
        (readelf_build_id(&md5), s(&md5)),
    ];
    assert_eq!(want[0].0.len(), 40);
    assert_eq!(want[1].0.len(), 32);
    let listed = Command::new("perf")
        .args(["buildid-list", "-i"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(listed.status.success(), "{listed:?}");
    let mut got: Vec<(String, String)> = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .filter_map(|l| {
            let (id, path) = l.split_once(' ')?;
            Some((id.to_string(), path.trim().to_string()))
        })
        .collect();
    got.sort();
    let mut want = want.to_vec();
    want.sort();
    assert_eq!(got, want, "perf buildid-list");

    // spelunk's reader reads the same table.
    let f = PerfDataFile::open(&out).unwrap();
    let mut read: Vec<(String, String)> = f
        .features
        .build_ids
        .iter()
        .map(|e| (e.build_id.hex(), e.path.clone()))
        .collect();
    read.sort();
    assert_eq!(read, want);
    assert!(f.summary.is_clean(), "{:?}", f.summary);
}
