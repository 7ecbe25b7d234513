//! `spelunk record --emulate` and `spelunk topdown --emulate` refuse, before anything runs, a
//! program the emulator (a Valgrind tool for this machine) cannot run: here a program for the
//! other 64-bit architecture. The program is an ELF header made by hand (System V ABI ELF-64:
//! magic, class 2 = 64-bit, data 1 = little-endian, version 1, e_machine at 0x12 = 183
//! EM_AARCH64 or 62 EM_X86_64), so no cross compiler and no emulator build is needed.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("emulate-unsupported")
        .join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The other architecture's name and an executable ELF header for it.
fn foreign_program(dir: &Path) -> (&'static str, &'static str, PathBuf) {
    let (name, host, e_machine) = if cfg!(target_arch = "aarch64") {
        ("x86-64", "aarch64", 62u16)
    } else {
        ("aarch64", "x86-64", 183u16)
    };
    let mut h = vec![0u8; 64];
    h[..7].copy_from_slice(&[0x7f, b'E', b'L', b'F', 2, 1, 1]);
    h[0x10] = 2; // ET_EXEC
    h[0x12..0x14].copy_from_slice(&e_machine.to_le_bytes());
    let p = dir.join("foreign");
    std::fs::write(&p, h).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    (name, host, p)
}

fn spelunk(args: &[&str], dir: &Path) -> Output {
    // Whether or not an emulator is built: the refusal comes before it is looked for.
    spelunk_emulated(args, dir, &dir.join("no-emulator-here"))
}

#[test]
fn another_architecture_is_refused_before_the_run() {
    let dir = scratch("arch");
    let (machine, host, _) = foreign_program(&dir);
    let expected =
        format!("./foreign: a program for {machine}; the emulator runs {host} programs only");
    for (cmd, args) in [
        (
            "record",
            vec!["record", "--emulate", "-o", "out.data", "--", "./foreign"],
        ),
        ("topdown", vec!["topdown", "--emulate", "--", "./foreign"]),
    ] {
        let o = spelunk(&args, &dir);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{cmd}: {err}");
        assert!(err.contains(&expected), "{cmd}: {err}");
        assert!(
            err.contains(&format!("build the program for {host}")),
            "{cmd}: {err}"
        );
        assert!(!err.contains("running"), "{cmd}: nothing runs: {err}");
    }
    assert!(!dir.join("out.data").exists());
}

#[test]
fn a_missing_program_is_refused_before_the_run() {
    let dir = scratch("missing");
    for (args, expected) in [
        (
            vec![
                "record",
                "--emulate",
                "-o",
                "out.data",
                "--",
                "./no-such-program",
            ],
            "./no-such-program: no such file; nothing was run",
        ),
        (
            vec!["topdown", "--emulate", "--", "no-such-program-on-path"],
            "no-such-program-on-path: not found on PATH; nothing was run",
        ),
    ] {
        let o = spelunk(&args, &dir);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?}: {err}");
        assert!(err.contains(expected), "{args:?}: {err}");
        assert!(!err.contains("running"), "{args:?}: nothing runs: {err}");
    }
    assert!(!dir.join("out.data").exists());
}

/// Compiles `source` with the host's gcc into `dir/name` (None, skipped, without gcc or on a
/// machine that is not x86-64: the programs carry x86-64 bytes).
fn x86_program(dir: &Path, name: &str, source: &str) -> Option<PathBuf> {
    if !cfg!(target_arch = "x86_64") || Command::new("gcc").arg("--version").output().is_err() {
        eprintln!("skipped: not an x86-64 machine with gcc");
        return None;
    }
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source).unwrap();
    let exe = dir.join(name);
    let st = Command::new("gcc")
        .args(["-O1", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .unwrap();
    assert!(st.success());
    Some(exe)
}

/// vpxord zmm0, zmm0, zmm0 (Intel SDM: EVEX.512.66.0F.W0 EF /r), as bytes, in `wide`.
const WIDE: &str = r#"
__attribute__((noinline)) void wide(void) {
    __asm__ volatile(".byte 0x62, 0xf1, 0x7d, 0x48, 0xef, 0xc0" ::: "xmm0");
}
"#;

#[test]
fn avx512_used_unconditionally_is_refused_before_the_run() {
    let dir = scratch("avx512");
    let Some(exe) = x86_program(
        &dir,
        "avx",
        &format!("{WIDE}int main(void) {{ wide(); return 0; }}\n"),
    ) else {
        return;
    };
    // Where objdump (binutils, an independent disassembler) puts the instruction.
    let listing = Command::new("objdump")
        .args(["-d", "--no-show-raw-insn", "--disassemble=wide"])
        .arg(&exe)
        .output()
        .unwrap();
    let listing = String::from_utf8_lossy(&listing.stdout);
    let Some(addr) = listing
        .lines()
        .find(|l| l.contains("vpxord"))
        .and_then(|l| l.trim_start().split(':').next())
    else {
        eprintln!("skipped: objdump missing or without --disassemble=");
        return;
    };
    let o = spelunk(
        &["record", "--emulate", "-o", "out.data", "--", "./avx"],
        &dir,
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains(&format!(
            "./avx: 1 AVX-512 (EVEX-encoded) instruction (at 0x{addr} in wide); Valgrind \
             cannot run AVX-512"
        )),
        "{err}"
    );
    assert!(
        err.contains("`spelunk record --emulate --ignore-unsupported` runs it anyway"),
        "the way out for a program that guards them another way: {err}"
    );
    assert!(!err.contains("running"), "{err}");
}

/// The emulator's tool directory, or None (skipped) when it is not built.
fn built_emulator() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let lib = root.join("emulator/build/lib");
    if lib.join("spelunk-amd64-linux").exists() {
        return Some(lib);
    }
    assert!(
        std::env::var_os("SPELUNK_REQUIRE_EMULATOR").is_none(),
        "emulator not built: run emulator/test.sh"
    );
    eprintln!("skipped: emulator not built (run emulator/test.sh)");
    None
}

#[test]
fn ignore_unsupported_runs_a_program_that_guards_them_another_way() {
    let Some(lib) = built_emulator() else { return };
    let dir = scratch("ignore");
    // AVX-512 reached only with an argument (as a program that reads /proc/cpuinfo would
    // decide): nothing spelunk recognises guards it, so it is refused without the flag.
    let Some(_) = x86_program(
        &dir,
        "guarded",
        &format!(
            "{WIDE}int main(int argc, char **argv) {{ (void)argv;\n\
             if (argc > 1) wide();\n return 7; }}\n"
        ),
    ) else {
        return;
    };
    let run = |extra: &[&str]| {
        let mut args = vec!["record", "--emulate", "-o", "out.data"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--", "./guarded"]);
        spelunk_emulated(&args, &dir, &lib)
    };
    let o = run(&[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("--ignore-unsupported"),
        "{err}"
    );
    assert!(!dir.join("out.data").exists(), "{err}");
    let o = run(&["--ignore-unsupported"]);
    let err = String::from_utf8_lossy(&o.stderr);
    // The program's own exit status passes through: it ran to its end.
    assert_eq!(o.status.code(), Some(7), "{err}");
    assert!(
        err.contains("warning: ./guarded: 1 AVX-512 (EVEX-encoded) instruction")
            && err.contains("running anyway, as --ignore-unsupported was given"),
        "{err}"
    );
    assert!(dir.join("out.data").exists(), "{err}");
    // Not meaningful without --emulate.
    let o = Command::new(env!("CARGO_BIN_EXE_spelunk"))
        .args([
            "record",
            "--ignore-unsupported",
            "-o",
            "hw.data",
            "--",
            "./guarded",
        ])
        .current_dir(&dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("apply to --emulate only"),
        "{err}"
    );
}

/// `dir/disp`: checks the CPU (so spelunk warns and runs), then uses AVX-512 anyway when given
/// an argument: Valgrind, which implements no EVEX instruction, stops it with SIGILL.
fn dispatching_program(dir: &Path) -> Option<PathBuf> {
    x86_program(
        dir,
        "disp",
        &format!(
            "{WIDE}int main(int argc, char **argv) {{ (void)argv;\n\
             if (__builtin_cpu_supports(\"avx512f\") || argc > 1) wide();\n return 0; }}\n"
        ),
    )
}

/// `spelunk ARGS` in `dir` with the emulator in `lib`.
fn spelunk_emulated(args: &[&str], dir: &Path, lib: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_spelunk"))
        .args(args)
        .current_dir(dir)
        .env("SPELUNK_EMULATOR_LIB", lib)
        .output()
        .unwrap()
}

#[test]
fn sigill_under_the_emulator_is_said_plainly() {
    let Some(lib) = built_emulator() else { return };
    let dir = scratch("sigill");
    if dispatching_program(&dir).is_none() {
        return;
    }
    let o = spelunk_emulated(
        &[
            "record",
            "--emulate",
            "-o",
            "out.data",
            "--",
            "./disp",
            "now",
        ],
        &dir,
        &lib,
    );
    let err = String::from_utf8_lossy(&o.stderr);
    // 128 + SIGILL (4), as shells pass a signal on.
    assert_eq!(o.status.code(), Some(132), "{err}");
    assert!(
        err.contains("warning: ./disp: 1 AVX-512 (EVEX-encoded) instruction")
            && err.contains("running anyway, as the file uses __cpu_"),
        "{err}"
    );
    assert!(
        err.contains("warning: the program stopped with SIGILL at 0x")
            && err.contains(": wide (in ")
            && err.contains("(AVX-512 (EVEX-encoded), found in it before the run)"),
        "{err}"
    );
}

/// `spelunk record --overhead --emulate` checks the program once for its whole series: the
/// warning about AVX-512 in a program that checks the CPU first is said once, not once per
/// recorded run (without an argument the program runs its other path under Valgrind and exits
/// normally).
#[test]
fn an_overhead_series_checks_the_program_once() {
    let Some(lib) = built_emulator() else { return };
    let dir = scratch("overhead");
    if dispatching_program(&dir).is_none() {
        return;
    }
    let o = spelunk_emulated(
        &[
            "record",
            "--overhead",
            "--runs",
            "2",
            "--emulate",
            "-o",
            "out.data",
            "--",
            "./disp",
        ],
        &dir,
        &lib,
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let warning = "warning: ./disp: 1 AVX-512 (EVEX-encoded) instruction";
    assert_eq!(err.matches(warning).count(), 1, "{err}");
    // ... while both recorded runs ran
    assert_eq!(err.matches("running ./disp under").count(), 2, "{err}");
}
