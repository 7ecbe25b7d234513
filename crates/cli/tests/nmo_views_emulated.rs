//! NMO's region views on a real program under the emulator: tests/data/c/hot_cold.c reads a
//! 64 KiB hot array (16 pages) 15 times and a 960 KiB cold array (240 pages) once, in one
//! ascending sweep, after the hot one. From the source: 6.25 % of the footprint receives 50 %
//! of main's loads; each cold page gets 1/15 of a hot page's loads. The expectations come from
//! that source, with sampling's spread allowed for (binomial: ~640 sampled loads at -c 256,
//! an applied interval of 384 with jitter).
//!
//! Needs gcc and the emulator (`emulator/build.sh`); skipped otherwise, unless
//! SPELUNK_REQUIRE_EMULATOR is set.

mod planted;

use planted::*;
use serde_json::Value;
use std::path::Path;

fn emulator_lib() -> Option<std::path::PathBuf> {
    let arch = if cfg!(target_arch = "aarch64") {
        "arm64"
    } else {
        "amd64"
    };
    let lib = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../emulator/build/lib");
    if lib.join(format!("spelunk-{arch}-linux")).exists() && have("gcc") {
        return Some(lib);
    }
    if std::env::var_os("SPELUNK_REQUIRE_EMULATOR").is_some() {
        panic!("emulator not built: run emulator/build.sh");
    }
    eprintln!("skipped: emulator not built (run emulator/build.sh)");
    None
}

fn run(lib: &Path, args: &[&str]) -> Vec<u8> {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_spelunk"))
        .env("SPELUNK_EMULATOR_LIB", lib)
        .args(args)
        .output()
        .expect("run spelunk");
    assert!(
        out.status.success(),
        "spelunk {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn view<'a>(r: &'a Value, name: &str) -> &'a Value {
    r["object_timelines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == name)
        .unwrap_or_else(|| panic!("no view of {name} in {}", r["object_timelines"]))
}

/// The offsets of a view's points, in time order.
fn offsets(view: &Value) -> Vec<u64> {
    view["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["offset_bytes"].as_u64().unwrap())
        .collect()
}

#[test]
fn hot_pages_hold_half_the_loads_and_the_cold_sweep_ascends() {
    let Some(lib) = emulator_lib() else { return };
    let dir = Scratch::new("nmoviews-emulated");
    let exe = compile("gcc", "hot_cold.c", &dir.join("hot_cold"), &[]);
    let data = dir.join("hot_cold.data");
    run(
        &lib,
        &[
            "record",
            "--emulate",
            "-c",
            "256",
            "-o",
            data.to_str().unwrap(),
            "--",
            exe.to_str().unwrap(),
        ],
    );
    let json = run(
        &lib,
        &[
            "report",
            data.to_str().unwrap(),
            "--json",
            "--symbol",
            "main",
            "--event",
            "load",
        ],
    );
    let r: Value = serde_json::from_slice(&json).unwrap();
    let f = &r["footprint"];
    let loads = f["accesses"].as_u64().unwrap();
    let regions = f["regions"].as_u64().unwrap();
    // 245760 loads / 384: about 640 sampled.
    assert!((450..=850).contains(&loads), "{loads} sampled loads");
    // 256 pages at most; a cold page gets ~1.3 samples, so most are seen.
    assert!((150..=256).contains(&regions), "{regions} pages");
    // 50 % of the loads sit in the 16 hot pages: the hottest 16 pages reach 50 % give or take
    // three standard deviations (±6 %: ~38 samples, some 15 cold pages of the most sampled)
    // — against ~128 pages for a uniform spread.
    let half = &f["key_points"][0];
    assert_eq!(half["access_percent"], 50);
    let k = half["regions"].as_u64().unwrap();
    assert!((12..=40).contains(&k), "50 % of the loads in {k} pages");

    let hot = view(&r, "hot");
    let cold = view(&r, "cold");
    assert_eq!(hot["size_bytes"], 64 * 1024);
    assert_eq!(cold["size_bytes"], 960 * 1024);
    let t = |v: &Value, k: &str| v[k].as_u64().unwrap();
    assert!(
        t(hot, "last_t_ns") < t(cold, "first_t_ns"),
        "hot before cold"
    );
    assert!(t(cold, "max_offset_bytes") < 960 * 1024);
    // One ascending sweep: in time order, the offsets never go down.
    let cold_offsets = offsets(cold);
    assert!(cold_offsets.len() > 100, "{} points", cold_offsets.len());
    assert!(
        cold_offsets.windows(2).all(|w| w[0] <= w[1]),
        "{cold_offsets:?}"
    );
    // The hot array is read 15 times: its offsets go back to the start 14 times, and the
    // points are spread over the whole array.
    let hot_offsets = offsets(hot);
    let restarts = hot_offsets.windows(2).filter(|w| w[1] < w[0]).count();
    assert!((10..=14).contains(&restarts), "{restarts} restarts");
    assert!(t(hot, "min_offset_bytes") < 4096 && t(hot, "max_offset_bytes") >= 60 * 1024);
}
