//! The check before an emulated run (spelunk_record::unsupported) on ELF files built here:
//! where it says an unsupported instruction is, binutils' objdump (an independent
//! disassembler) must show that instruction, and nothing else of that set.
//!
//! The aarch64 cases need aarch64-linux-gnu-gcc and -objdump (scripts/ensure-deps.sh cross);
//! the x86-64 ones gcc and objdump on an x86-64 machine. Each is skipped, saying so, without
//! (the aarch64 ones fail instead under SPELUNK_REQUIRE_CROSS=1, as in `make test`).

use spelunk_record::unsupported::{
    check_files, CodeSite, Finding, InstructionSet, Machine, UnsupportedCode,
};
use std::path::{Path, PathBuf};
use std::process::Command;

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("unsupported")
        .join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Compiles C `source` into `dir/name` with `cc` and `flags`.
fn compile(cc: &str, dir: &Path, name: &str, source: &str, flags: &[&str]) -> PathBuf {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source).unwrap();
    let out = dir.join(name);
    let st = Command::new(cc)
        .args(["-O1", "-g"])
        .arg(&src)
        .arg("-o")
        .arg(&out)
        .args(flags)
        .current_dir(dir)
        .status()
        .unwrap();
    assert!(st.success(), "{cc} {name}.c failed");
    out
}

/// (address, mnemonic) of `function`'s instructions as objdump lists them.
fn objdump(objdump: &str, exe: &Path, function: &str) -> Vec<(u64, String)> {
    let o = Command::new(objdump)
        .arg("-d")
        .arg("--no-show-raw-insn")
        .arg(format!("--disassemble={function}"))
        .arg(exe)
        .output()
        .unwrap();
    assert!(o.status.success());
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| {
            let (addr, rest) = l.trim_start().split_once(":\t")?;
            let addr = u64::from_str_radix(addr, 16).ok()?;
            let mnemonic = rest.split(['\t', ' ']).next()?.to_string();
            Some((addr, mnemonic))
        })
        .collect()
}

fn code_findings(findings: &[Finding]) -> Vec<&UnsupportedCode> {
    findings
        .iter()
        .map(|f| match f {
            Finding::Code(c) => c,
            other => panic!("expected unsupported code, got {other:?}"),
        })
        .collect()
}

/// SVE in a function, with a literal word holding SVE bits (`.word`, under a `$d` mapping
/// symbol) that is data, not an instruction.
const SVE_KERNEL: &str = r#"
void sve_kernel(const double *p) {
    __asm__ volatile(".arch_extension sve\n\t"
                     "ptrue p0.b\n\t"
                     "ld1d {z0.d}, p0/z, [%0]\n\t"
                     "b 1f\n\t"
                     ".word 0x2518e3e0\n"
                     "1:" :: "r"(p) : "memory");
}
"#;

fn cross() -> bool {
    if have("aarch64-linux-gnu-gcc") && have("aarch64-linux-gnu-objdump") {
        return true;
    }
    assert!(
        std::env::var_os("SPELUNK_REQUIRE_CROSS").is_none(),
        "SPELUNK_REQUIRE_CROSS is set but aarch64-linux-gnu-gcc or -objdump is missing"
    );
    eprintln!("skipped: no aarch64-linux-gnu-gcc/objdump (scripts/ensure-deps.sh cross)");
    false
}

#[test]
fn sve_is_found_where_objdump_shows_it_and_refused() {
    if !cross() {
        return;
    }
    let dir = scratch("sve");
    let source =
        format!("{SVE_KERNEL}int main(void) {{ double d[8] = {{0}}; sve_kernel(d); return 0; }}\n");
    let exe = compile("aarch64-linux-gnu-gcc", &dir, "sve", &source, &[]);
    let listing = objdump("aarch64-linux-gnu-objdump", &exe, "sve_kernel");
    let sve: Vec<u64> = listing
        .iter()
        .filter(|(_, m)| m == "ptrue" || m == "ld1d")
        .map(|(a, _)| *a)
        .collect();
    assert_eq!(sve.len(), 2, "{listing:?}");
    assert!(
        listing.iter().any(|(_, m)| m == ".word"),
        "the literal is data to objdump: {listing:?}"
    );

    let check = check_files(&exe, Machine::Aarch64);
    let code = code_findings(&check.findings);
    assert_eq!(code.len(), 1, "{check:?}");
    assert_eq!(code[0].set, InstructionSet::Sve);
    assert_eq!(code[0].count, 2);
    // The first of them in each function.
    assert_eq!(
        code[0].first,
        vec![CodeSite {
            address: sve[0],
            function: Some("sve_kernel".into())
        }]
    );
    assert_eq!(code[0].maybe_avoided, None);
    let refusal = check.refusal("spelunk record").unwrap_or_default();
    assert!(
        refusal.contains(": 2 SVE/SVE2 instructions (first at ")
            && refusal.contains("Valgrind cannot run SVE/SVE2 instructions"),
        "{refusal}"
    );

    // The same program checked for an x86-64 emulator: another machine, nothing else read.
    let check = check_files(&exe, Machine::X86_64);
    assert_eq!(
        check.findings,
        vec![Finding::WrongMachine {
            file: exe.clone(),
            machine: Machine::Aarch64,
            host: Machine::X86_64
        }]
    );
}

/// A static aarch64 program without SVE of its own: objdump shows libgcc's unwinder holding
/// SVE's `cntd` (to read VG for SVE frames, which this program has none of); it is accepted.
#[test]
fn a_static_program_with_libgccs_unwinder_is_accepted() {
    if !cross() {
        return;
    }
    let dir = scratch("static-plain");
    let exe = compile(
        "aarch64-linux-gnu-gcc",
        &dir,
        "plain",
        "int main(void) { return 0; }\n",
        &["-static"],
    );
    let listing = objdump("aarch64-linux-gnu-objdump", &exe, "uw_update_context");
    assert!(
        listing.iter().any(|(_, m)| m == "cntd"),
        "libgcc's unwinder reads VG with cntd: {listing:?}"
    );
    let check = check_files(&exe, Machine::Aarch64);
    assert_eq!(check.findings, vec![], "{check:?}");
    assert_eq!(check.refusal("spelunk record"), None);
}

#[test]
fn sve_behind_a_hwcap_check_is_a_warning() {
    if !cross() {
        return;
    }
    let dir = scratch("sve-hwcap");
    let source = format!(
        "#include <sys/auxv.h>\n#include <asm/hwcap.h>\n{SVE_KERNEL}\
         int main(void) {{ double d[8] = {{0}};\n\
         if (getauxval(AT_HWCAP) & HWCAP_SVE) sve_kernel(d);\n return 0; }}\n"
    );
    let exe = compile("aarch64-linux-gnu-gcc", &dir, "sve-hwcap", &source, &[]);
    let check = check_files(&exe, Machine::Aarch64);
    let code = code_findings(&check.findings);
    assert_eq!((code.len(), code[0].count), (1, 2), "{check:?}");
    assert!(
        code[0]
            .maybe_avoided
            .as_deref()
            .is_some_and(|w| w.contains("getauxval")),
        "{check:?}"
    );
    assert_eq!(check.refusal("spelunk record"), None);
    assert_eq!(check.warnings().len(), 1);
}

/// vpxord zmm0, zmm0, zmm0 (Intel SDM: EVEX.512.66.0F.W0 EF /r), as bytes.
const EVEX: &str = r#"__asm__ volatile(".byte 0x62, 0xf1, 0x7d, 0x48, 0xef, 0xc0" ::: "xmm0");"#;

fn x86() -> bool {
    if cfg!(target_arch = "x86_64") && have("gcc") && have("objdump") {
        return true;
    }
    eprintln!("skipped: not an x86-64 machine with gcc and objdump");
    false
}

#[test]
fn avx512_is_found_where_objdump_shows_it() {
    if !x86() {
        return;
    }
    let dir = scratch("avx512");
    let source = format!("int main(void) {{ {EVEX} return 0; }}\n");
    let exe = compile("gcc", &dir, "avx", &source, &[]);
    let evex: Vec<u64> = objdump("objdump", &exe, "main")
        .into_iter()
        .filter(|(_, m)| m == "vpxord")
        .map(|(a, _)| a)
        .collect();
    assert_eq!(evex.len(), 1);
    let check = check_files(&exe, Machine::X86_64);
    let code = code_findings(&check.findings);
    assert_eq!(code.len(), 1, "{check:?}");
    assert_eq!((code[0].set, code[0].count), (InstructionSet::Avx512, 1));
    assert_eq!(code[0].first[0].address, evex[0]);
    assert_eq!(code[0].first[0].function.as_deref(), Some("main"));
    assert!(check.refusal("spelunk record").is_some());
}

#[test]
fn a_plain_program_passes_and_its_own_libraries_are_read() {
    if !x86() {
        return;
    }
    // A plain program: nothing, although the C library it needs has AVX-512 variants.
    let dir = scratch("libs");
    let plain = compile(
        "gcc",
        &dir,
        "plain",
        "#include <stdio.h>\n#include <string.h>\nint main(void) { char a[64], b[64] = \"x\"; \
         memcpy(a, b, sizeof a); puts(a); return 0; }\n",
        &[],
    );
    let check = check_files(&plain, Machine::X86_64);
    assert_eq!(check.findings, vec![], "{check:?}");

    // Its own library (found through RUNPATH $ORIGIN) is read, and named.
    let lib_src = dir.join("wide.c");
    std::fs::write(&lib_src, format!("void wide(void) {{ {EVEX} }}\n")).unwrap();
    let st = Command::new("gcc")
        .args(["-O1", "-shared", "-fPIC", "-o"])
        .arg(dir.join("libwide.so"))
        .arg(&lib_src)
        .status()
        .unwrap();
    assert!(st.success());
    let exe = compile(
        "gcc",
        &dir,
        "uses-wide",
        "void wide(void);\nint main(void) { wide(); return 0; }\n",
        &["-L.", "-lwide", "-Wl,-rpath,$ORIGIN"],
    );
    let evex: Vec<u64> = objdump("objdump", &dir.join("libwide.so"), "wide")
        .into_iter()
        .filter(|(_, m)| m == "vpxord")
        .map(|(a, _)| a)
        .collect();
    let check = check_files(&exe, Machine::X86_64);
    let code = code_findings(&check.findings);
    assert_eq!(code.len(), 1, "{check:?}");
    assert_eq!(code[0].file.file_name(), Some("libwide.so".as_ref()));
    let at: Vec<u64> = code[0].first.iter().map(|s| s.address).collect();
    assert_eq!(at, evex);
    assert_eq!(code[0].first[0].function.as_deref(), Some("wide"));
    assert_eq!(code[0].maybe_avoided, None);

    // Stripped, the library is read whole: the same instruction, no name, and only a warning
    // (without a symbol table its code cannot be told from run-time-selected variants).
    if !have("strip") {
        return;
    }
    let st = Command::new("strip")
        .arg(dir.join("libwide.so"))
        .status()
        .unwrap();
    assert!(st.success());
    let check = check_files(&exe, Machine::X86_64);
    let code = code_findings(&check.findings);
    assert_eq!(code.len(), 1, "{check:?}");
    assert_eq!(
        code[0].first,
        vec![CodeSite {
            address: evex[0],
            function: None
        }]
    );
    assert!(code[0]
        .maybe_avoided
        .as_deref()
        .is_some_and(|w| w.contains("no symbol table")));
    assert_eq!(check.refusal("spelunk record"), None);
}
