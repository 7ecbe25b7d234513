//! Every numeric option refuses the same bad values the same way (issue 14 item 5): 0 where 0
//! means nothing, negative, a fraction for a count, NaN, infinite and too large are refused by
//! the argument parser, before any file is opened, with the accepted range in the message.

use std::process::Command;

/// `(arguments before the value, the option, a value it accepts, values it must refuse)`.
/// The file arguments do not exist: a refused value must be reported before any file is read.
fn cases() -> Vec<(
    Vec<&'static str>,
    &'static str,
    &'static str,
    Vec<&'static str>,
)> {
    let counts = vec!["0", "-1", "1.5", "nan", "inf", "99999999999999999999999"];
    let reals = vec!["0", "-1", "nan", "inf", "-inf", "1e400"];
    vec![
        (vec!["report", "x.data"], "--limit", "5", counts.clone()),
        (
            vec!["report", "x.data", "--c2c"],
            "--line-size",
            "128",
            vec!["0", "-64", "100", "nan"],
        ),
        (vec!["c2c", "x.data"], "--limit", "5", counts.clone()),
        (
            vec!["c2c", "x.data"],
            "--line-size",
            "64",
            vec!["0", "3", "-64", "1e9"],
        ),
        (
            vec!["diff", "a.data", "b.data"],
            "--limit",
            "5",
            counts.clone(),
        ),
        (
            vec!["report", "x.data"],
            "--pid",
            "7",
            vec!["-1", "1.5", "nan", "4294967296"],
        ),
        (
            vec!["report", "x.data"],
            "--tid",
            "7",
            vec!["-1", "x", "4294967296"],
        ),
        (
            vec!["report", "x.data"],
            "--cpus",
            "0",
            vec!["-1", "inf", "4294967296"],
        ),
        (
            vec!["estimate", "latency", "x.data"],
            "--interval",
            "1024",
            counts.clone(),
        ),
        (
            vec!["estimate", "latency", "x.data"],
            "--bytes-per-op",
            "8",
            counts.clone(),
        ),
        (
            vec!["estimate", "latency", "x.data"],
            "--ernd",
            "1",
            vec!["2", "-1", "nan"],
        ),
        (
            vec!["estimate", "latency", "x.data"],
            "--timer-hz",
            "1e8",
            reals.clone(),
        ),
        (
            vec!["estimate", "latency", "x.data"],
            "--cpu-ghz",
            "2.8",
            reals.clone(),
        ),
        (
            vec!["record", "--emulate", "-o", "o.data"],
            "--period",
            "1024",
            vec!["0", "100", "-256", "nan", "4294967296"],
        ),
        (
            vec!["record", "--emulate", "-o", "o.data"],
            "--min-latency",
            "10",
            vec!["-1", "4096", "nan"],
        ),
        (
            vec!["record", "-o", "o.data"],
            "--aux-pages",
            "64",
            vec!["0", "3", "-2", "1e3"],
        ),
        (
            vec!["record", "--no-spe", "-o", "o.data"],
            "--capacity-interval",
            "10",
            counts.clone(),
        ),
        (
            vec!["topdown", "--import", "x.csv", "--cpu-model", "neoverse-n1"],
            "-I",
            "0.5",
            reals.clone(),
        ),
        (
            vec!["topdown", "--import", "x.csv", "--cpu-model", "neoverse-n1"],
            "--slots",
            "8",
            counts.clone(),
        ),
        (
            vec!["topdown", "--import", "x.csv", "--cpu-model", "neoverse-n1"],
            "--counters",
            "6",
            counts,
        ),
        (vec!["topdown", "-a"], "--duration", "1", reals),
    ]
}

#[test]
fn numeric_options_refuse_bad_values_with_the_range() {
    let dir = std::env::temp_dir().join(format!("spelunk-numeric-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (before, option, good, bad) in cases() {
        for value in std::iter::once(good).chain(bad.iter().copied()) {
            // `--opt=VALUE`, so that a value starting with '-' is never taken for an option.
            let arg = format!("{option}={value}");
            let mut args: Vec<&str> = before.clone();
            args.push(&arg);
            if before[0] == "record" {
                args.extend(["--", "true"]);
            }
            let out = Command::new(env!("CARGO_BIN_EXE_spelunk"))
                .args(&args)
                .current_dir(&dir)
                .env("SPELUNK_EMULATOR", dir.join("no-emulator"))
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(!err.contains("panicked"), "{args:?}: {err}");
            let refused_by_parser = err.contains(&format!("invalid value '{value}'"));
            if value == good {
                // Accepted by the parser; the command then fails on the missing file (or
                // the machine), which is not a value error.
                assert!(!refused_by_parser, "{args:?} refused a good value: {err}");
                continue;
            }
            assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
            assert!(refused_by_parser, "{args:?}: {err}");
            assert!(
                err.contains("expected a"),
                "{args:?} does not give the range: {err}"
            );
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}
