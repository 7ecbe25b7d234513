//! `spelunk completions SHELL` and `spelunk man DIR`: the bash script parses (`bash -n`) and
//! offers every subcommand; the man pages are roff that `man -l` could render (a .TH header),
//! one per subcommand.

use std::process::Command;

const SUBCOMMANDS: &[&str] = &[
    "annotate", "bench", "c2c", "check", "decode", "diff", "estimate", "record", "report",
    "topdown",
];

#[test]
fn bash_completions_parse_and_list_every_subcommand() {
    let out = Command::new(env!("CARGO_BIN_EXE_spelunk"))
        .args(["completions", "bash"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let script = String::from_utf8(out.stdout).unwrap();
    for sub in SUBCOMMANDS {
        assert!(script.contains(sub), "{sub}");
    }
    let dir = std::env::temp_dir().join(format!("spelunk-completions-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("spelunk.bash");
    std::fs::write(&path, &script).unwrap();
    let st = Command::new("bash").arg("-n").arg(&path).status().unwrap();
    assert!(st.success(), "bash -n rejects the completion script");
    let pages = dir.join("man");
    let out = Command::new(env!("CARGO_BIN_EXE_spelunk"))
        .args(["man", pages.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for sub in SUBCOMMANDS {
        let page = std::fs::read_to_string(pages.join(format!("spelunk-{sub}.1"))).unwrap();
        assert!(page.starts_with(".ie") || page.contains(".TH"), "{sub}");
        assert!(page.contains(&format!("spelunk\\-{sub}")), "{sub}: NAME");
    }
    assert!(pages.join("spelunk.1").is_file());
    std::fs::remove_dir_all(&dir).unwrap();
}
