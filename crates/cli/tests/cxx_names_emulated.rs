//! Issue 26, item 0: C++ followed to the user's own line. tests/data/cxx/names.cc (templates,
//! overloads, a lambda, `std::vector` growth, a function GCC splits into hot and cold pieces,
//! an inlined `std::atomic` update) is built with g++ -O2 -g, recorded with
//! `spelunk record --emulate`, and its report, annotate (by demangled, short and mangled
//! names), allocation sites and diff must name the user's functions and lines.
//!
//! The expected lines are the source's `// LINE:tag` markers, read from the source here; the
//! expected names are the program's functions as the Itanium C++ ABI demangles them (what
//! `c++filt` prints), written out below. Needs g++ and the emulator (`emulator/test.sh`
//! builds it; SPELUNK_REQUIRE_EMULATOR=1 makes its absence a failure); skipped otherwise.

use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn run(lib: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_spelunk"))
        .env("SPELUNK_EMULATOR_LIB", lib)
        .env_remove("COLUMNS")
        .args(args)
        .output()
        .expect("run spelunk")
}

fn ok(lib: &Path, args: &[&str]) -> Vec<u8> {
    let out = run(lib, args);
    assert!(
        out.status.success(),
        "spelunk {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn json(lib: &Path, args: &[&str]) -> Value {
    serde_json::from_slice(&ok(lib, args)).expect("JSON")
}

/// The line of each `// LINE:tag` marker in `source`.
fn marked_lines(source: &str) -> HashMap<String, u32> {
    source
        .lines()
        .enumerate()
        .filter_map(|(i, l)| {
            let tag = l.split("// LINE:").nth(1)?;
            Some((tag.trim().to_string(), i as u32 + 1))
        })
        .collect()
}

const WALK_LONG: &str = "walk(long const*, unsigned long)";
const WALK_DOUBLE: &str = "walk(double const*, unsigned long)";
const SUM_EVERY: &str = "shapes::Grid<long>::sum_every(unsigned long) const";
const COUNT_HITS: &str = "count_hits(int const*, int)";
const CHECK: &str = "check(long const*, int)";
const GROW: &str = "grow(int)";

#[test]
fn cxx_names_and_lines_are_the_users() {
    let Some(lib) = spelunk_testkit::emulator_lib("g++") else {
        return;
    };
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cxx-names");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let src = root().join("tests/data/cxx/names.cc");
    let lines = marked_lines(&std::fs::read_to_string(&src).unwrap());
    let exe = dir.join("names");
    let st = Command::new("g++")
        .args(["-O2", "-g", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .expect("g++");
    assert!(st.success());
    let data = dir.join("names.data");
    let data_s = data.to_str().unwrap();
    ok(
        &lib,
        &[
            "record",
            "--emulate",
            "-o",
            data_s,
            "--",
            exe.to_str().unwrap(),
            "100000",
            "2",
        ],
    );

    // Report: demangled function names; a split function is one row; lines are the user's.
    let r = json(&lib, &["report", data_s, "--json", "--limit", "500"]);
    let functions: Vec<&str> = r["hotspots"]["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["key"].as_str().unwrap())
        .collect();
    for f in [WALK_LONG, WALK_DOUBLE, SUM_EVERY, COUNT_HITS, CHECK, GROW] {
        assert!(functions.contains(&f), "no function row {f}: {functions:?}");
    }
    assert!(
        !functions
            .iter()
            .any(|f| f.contains("[clone") || f.starts_with("_Z")),
        "clone pieces or mangled names as rows: {functions:?}"
    );
    let line_rows = r["hotspots"]["lines"].as_array().unwrap();
    let names_cc: Vec<u32> = line_rows
        .iter()
        .filter(|h| h["file"].as_str().is_some_and(|f| f.ends_with("names.cc")))
        .map(|h| h["line"].as_u64().unwrap() as u32)
        .collect();
    for tag in [
        "walk_long",
        "walk_double",
        "sum_every",
        "count_hits",
        "check",
        "lambda",
    ] {
        assert!(
            names_cc.contains(&lines[tag]),
            "no row for names.cc:{} ({tag}): {names_cc:?}",
            lines[tag]
        );
    }
    // Nothing of the program's own functions is shown at a library header's line: the
    // inlined atomic update and vector growth are at the user's lines.
    for h in line_rows {
        let dso = h["dso"].as_str().unwrap_or("");
        let file = h["file"].as_str().unwrap_or("");
        if dso.ends_with("/names") {
            let function = h["function"].as_str().unwrap_or("");
            if [COUNT_HITS, GROW, "main", CHECK].contains(&function) {
                assert!(
                    file.ends_with("names.cc"),
                    "{function} shown at {file}:{}",
                    h["line"]
                );
            }
        }
    }

    // --symbol by short name: only that function's samples.
    let s = json(&lib, &["report", data_s, "--json", "--symbol", "sum_every"]);
    let only: Vec<&str> = s["hotspots"]["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["key"].as_str().unwrap())
        .collect();
    assert_eq!(only, vec![SUM_EVERY]);

    // Allocation sites: std::vector growth at the push_back line in grow().
    let sites: Vec<&str> = r["allocation_sites"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["site"].as_str().unwrap())
        .collect();
    let grow_site = format!("names.cc:{} ({GROW})", lines["grow"]);
    assert!(
        sites.contains(&grow_site.as_str()),
        "{grow_site} not in {sites:?}"
    );
    assert!(
        !sites.iter().any(|s| s.contains("new_allocator.h")),
        "{sites:?}"
    );

    // Annotate by full, short and mangled names (_Z4walkPKlm: Itanium mangling of
    // walk(long const*, unsigned long)).
    for (given, full) in [
        (COUNT_HITS, COUNT_HITS),
        ("count_hits", COUNT_HITS),
        ("Grid::sum_every", SUM_EVERY),
        ("_Z4walkPKlm", WALK_LONG),
        (WALK_DOUBLE, WALK_DOUBLE),
    ] {
        let a = json(&lib, &["annotate", given, data_s, "--json"]);
        assert_eq!(a["function"], full, "annotate {given}");
        assert!(a["samples"].as_u64().unwrap() > 0, "annotate {given}");
    }
    let a = json(&lib, &["annotate", "count_hits", data_s, "--json"]);
    let at_line: u64 = a["instructions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["line"].as_u64() == Some(u64::from(lines["count_hits"])))
        .map(|i| i["samples"].as_u64().unwrap())
        .sum();
    assert!(at_line > 0, "no samples at count_hits' atomic line");

    // An overloaded short name: refused, with both full names to choose from.
    let out = run(&lib, &["annotate", "walk", data_s]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(WALK_LONG) && err.contains(WALK_DOUBLE),
        "annotate walk: {err}"
    );

    // The split function: its body and its .cold part, both with samples, one function.
    let a = json(&lib, &["annotate", "check", data_s, "--json"]);
    assert_eq!(a["function"], CHECK);
    let parts = a["parts"].as_array().unwrap();
    assert_eq!(parts.len(), 1, "{parts:?}");
    assert_eq!(parts[0]["function"], format!("{CHECK} [clone .cold]"));
    let part_samples = parts[0]["samples"].as_u64().unwrap();
    assert!(part_samples > 0);
    let body: u64 = a["instructions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["samples"].as_u64().unwrap())
        .sum();
    assert_eq!(a["samples"].as_u64().unwrap(), body + part_samples);
    assert!(parts[0]["instructions"]
        .as_array()
        .unwrap()
        .iter()
        .any(|i| i["line"].as_u64() == Some(u64::from(lines["check_cold"]))));
    let row = r["hotspots"]["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["key"] == CHECK)
        .unwrap();
    assert_eq!(
        row["samples"], a["samples"],
        "report and annotate of {CHECK}"
    );

    // Diff of the recording against itself names the same functions and lines.
    let d = json(&lib, &["diff", data_s, data_s, "--json"]);
    let keys: Vec<&str> = d["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["key"].as_str().unwrap())
        .collect();
    for f in [WALK_LONG, WALK_DOUBLE, SUM_EVERY, COUNT_HITS, CHECK, GROW] {
        assert!(keys.contains(&f), "diff has no {f}");
    }
    let line_key = format!("{COUNT_HITS} names.cc:{}", lines["count_hits"]);
    assert!(d["lines"]
        .as_array()
        .unwrap()
        .iter()
        .any(|x| x["key"] == line_key.as_str()));

    // Text tables cut long names to $COLUMNS (the numeric columns and a 24-character name
    // column fit in 125); --wide prints them.
    let narrow = Command::new(env!("CARGO_BIN_EXE_spelunk"))
        .env("COLUMNS", "125")
        .args(["report", data_s])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&narrow.stdout);
    let table_lines = text
        .lines()
        .skip_while(|l| !l.starts_with("Hotspots by function"));
    for l in table_lines.take_while(|l| !l.is_empty()).skip(1) {
        assert!(l.chars().count() <= 125, "{l}");
    }
    assert!(
        !text.contains(SUM_EVERY) && text.contains("..."),
        "nothing cut at 125 columns"
    );
    // The function table shows a name that does not fit by its short form when no other row
    // has that short form (sum_every), and cuts overloads (walk) instead.
    assert!(text.contains("  shapes::Grid::sum_every  "), "{text}");
    assert!(!text.contains("  walk  "), "{text}");
    let wide = String::from_utf8_lossy(&ok(&lib, &["report", data_s, "--wide"])).to_string();
    assert!(wide.contains(SUM_EVERY));
}
