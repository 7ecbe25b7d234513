//! Issue 26, item 1: spelunk reads the build-id table (HEADER_BUILD_ID) of a perf.data written
//! by Linux perf itself, and gives each mapping of a recorded file the build-id it had when
//! recorded. The expected id is what `readelf -n` prints for the program. Needs cc, readelf
//! and a `perf record` that may sample `cpu-clock`; skipped (with a message) otherwise.

use spelunk_analysis::context::RecordingContext;
use spelunk_perf::PerfDataFile;
use std::path::Path;
use std::process::Command;

#[test]
fn perf_written_build_ids_reach_the_mappings() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("perf-build-ids");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("spin.c");
    std::fs::write(
        &src,
        "int main(void) { volatile long s = 0; for (long i = 0; i < 50000000; i++) s += i; \
         return 0; }\n",
    )
    .unwrap();
    let exe = dir.join("spin");
    let built = Command::new("cc").arg("-o").arg(&exe).arg(&src).status();
    if !built.is_ok_and(|s| s.success()) {
        eprintln!("skipped: cc is missing");
        return;
    }
    let data = dir.join("perf.data");
    let recorded = Command::new("perf")
        .args(["record", "-q", "-e", "cpu-clock", "-o"])
        .arg(&data)
        .arg(&exe)
        .output();
    if !recorded.as_ref().is_ok_and(|o| o.status.success()) {
        eprintln!("skipped: perf record -e cpu-clock does not work here: {recorded:?}");
        return;
    }
    let readelf = Command::new("readelf")
        .arg("-n")
        .arg(&exe)
        .output()
        .unwrap();
    let want = String::from_utf8_lossy(&readelf.stdout)
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("Build ID:")
                .map(|s| s.trim().to_string())
        })
        .expect("readelf prints a build ID");

    let f = PerfDataFile::open(&data).unwrap();
    let exe_s = exe.to_str().unwrap();
    let entry = f
        .features
        .build_ids
        .iter()
        .find(|e| e.path == exe_s)
        .unwrap_or_else(|| panic!("{exe_s} not in {:?}", f.features.build_ids));
    assert_eq!(entry.build_id.hex(), want);
    // The kernel, when listed (perf lists the files with samples: the kernel only when the
    // run was sampled in it, which depends on the machine), has the kernel cpumode.
    for e in f
        .features
        .build_ids
        .iter()
        .filter(|e| e.path.starts_with("[kernel"))
    {
        assert_eq!(e.cpu_mode, 1, "{e:?}");
    }

    let ctx = RecordingContext::from_perf(&f, None, Vec::new());
    let mapped: Vec<_> = ctx
        .spaces
        .pids()
        .flat_map(|p| ctx.spaces.mappings(p).to_vec())
        .filter(|m| &*m.path == exe_s)
        .collect();
    assert!(!mapped.is_empty());
    for m in mapped {
        let hex: Option<String> = m
            .build_id
            .as_ref()
            .map(|b| b.iter().map(|x| format!("{x:02x}")).collect());
        assert_eq!(hex.as_deref(), Some(want.as_str()));
    }
}
