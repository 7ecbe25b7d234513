//! Symbolization and data objects on a real program compiled here, checked against binutils
//! (nm, readelf, addr2line) as the independent truth.

use spelunk_analysis::maps::{AddressSpaces, Mapping};
use spelunk_analysis::objects::{DataObjects, ObjectKind};
use spelunk_analysis::symbolize::CodeSymbolizer;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

fn tool(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd}: {e}"));
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Compiles the test program into a directory of its own for test `name` (tests run in
/// parallel and remove their directory).
fn build(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("spelunk-realbin-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join("objects");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/c/objects.c");
    tool(
        "gcc",
        &[
            "-O2",
            "-g",
            "-fPIE",
            "-pie",
            "-o",
            exe.to_str().unwrap(),
            src.to_str().unwrap(),
        ],
    );
    exe
}

/// nm -S: name -> (vaddr, size).
fn nm(exe: &Path) -> HashMap<String, (u64, u64)> {
    let mut m = HashMap::new();
    for line in tool("nm", &["-S", "--defined-only", exe.to_str().unwrap()]).lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() == 4 {
            let addr = u64::from_str_radix(f[0], 16).unwrap();
            let size = u64::from_str_radix(f[1], 16).unwrap();
            m.insert(f[3].to_string(), (addr, size));
        }
    }
    m
}

const BIAS: u64 = 0x5555_5555_4000;

/// The mappings the kernel would create for the PT_LOAD segments readelf lists, at BIAS.
fn mappings(exe: &Path) -> Vec<Mapping> {
    let path = exe.to_str().unwrap();
    let mut out = Vec::new();
    for line in tool("readelf", &["-lW", path]).lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.first() != Some(&"LOAD") {
            continue;
        }
        let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
        let (offset, vaddr, filesz) = (hex(f[1]), hex(f[2]), hex(f[4]));
        let exec = f[6..].iter().any(|x| x.contains('E'));
        let start = BIAS + (vaddr & !0xfff);
        let end = BIAS + ((vaddr + filesz + 0xfff) & !0xfff);
        out.push(Mapping::new(
            start,
            end - start,
            offset & !0xfff,
            path,
            exec,
            0,
        ));
    }
    assert!(out.len() >= 2, "expected several PT_LOAD segments");
    out
}

#[test]
fn functions_lines_and_objects_agree_with_binutils() {
    let exe = build("binutils");
    let syms = nm(&exe);
    let mut spaces = AddressSpaces::new();
    for m in mappings(&exe) {
        spaces.add(Some(7), m);
    }
    spaces.finish();

    // Code: every 4th byte of three functions.
    let mut items = Vec::new();
    let mut want = Vec::new();
    for f in ["sum_array", "fill", "uses_inline"] {
        let (vaddr, size) = syms[f];
        for off in (0..size).step_by(4) {
            let pc = BIAS + vaddr + off;
            let m = spaces
                .lookup(Some(7), pc, None)
                .expect("pc is mapped")
                .clone();
            items.push((m, pc));
            want.push((f, vaddr + off));
        }
    }
    let mut sym = CodeSymbolizer::new(None);
    let locs = sym.symbolize(&items);
    let addrs: Vec<String> = want.iter().map(|(_, a)| format!("{a:#x}")).collect();
    let mut args = vec!["-e", exe.to_str().unwrap()];
    args.extend(addrs.iter().map(|s| s.as_str()));
    let a2l: Vec<String> = tool("addr2line", &args).lines().map(String::from).collect();
    assert_eq!(a2l.len(), want.len());
    let mut with_lines = 0;
    for ((loc, (f, vaddr)), expected) in locs.iter().zip(&want).zip(&a2l) {
        assert_eq!(loc.function.as_deref(), Some(*f), "at {vaddr:#x}");
        // addr2line prints the innermost location as "file:line" (or "??:?"/"??:0").
        if let Some((file, line)) = expected.rsplit_once(':') {
            if let Ok(line) = line.split_whitespace().next().unwrap_or("").parse::<u32>() {
                if line > 0 {
                    with_lines += 1;
                    assert_eq!(
                        loc.line,
                        Some(line),
                        "line at {vaddr:#x}: addr2line says {expected}"
                    );
                    let ours = loc.file.as_deref().unwrap_or("");
                    assert!(
                        ours.ends_with(Path::new(file).file_name().unwrap().to_str().unwrap()),
                        "{ours} vs {file}"
                    );
                }
            }
        }
    }
    assert!(
        with_lines > want.len() / 2,
        "too few addresses with line info: {with_lines}"
    );
    // The inlined helper shows up as an inlined frame somewhere in uses_inline.
    assert!(
        locs.iter()
            .any(|l| l.inlined.iter().any(|f| &*f.function == "helper")),
        "helper not seen inlined"
    );

    // Data: globals in .bss, .data and .rodata resolve to their names, at their ends too.
    let objects = DataObjects::build(&spaces, None);
    for name in ["big_array", "small_table", "message"] {
        let (vaddr, size) = syms[name];
        for addr in [BIAS + vaddr, BIAS + vaddr + size - 1] {
            let o = objects
                .resolve(Some(7), addr, None)
                .unwrap_or_else(|| panic!("{name} not resolved"));
            assert_eq!(&*o.name, name);
            assert_eq!(o.kind, ObjectKind::Global);
        }
    }
    assert!(objects
        .resolve(
            Some(7),
            BIAS + syms["big_array"].0 + syms["big_array"].1,
            None
        )
        .is_none_or(|o| &*o.name != "big_array"));
    let _ = std::fs::remove_dir_all(exe.parent().unwrap());
}

#[test]
fn missing_files_are_reported_not_fatal() {
    let mut spaces = AddressSpaces::new();
    spaces.add(
        Some(1),
        Mapping::new(0x40_0000, 0x1000, 0, "/nonexistent/app", true, 0),
    );
    spaces.finish();
    let m = spaces.lookup(Some(1), 0x40_0010, None).unwrap().clone();
    let mut sym = CodeSymbolizer::new(None);
    let locs = sym.symbolize(&[(m, 0x40_0010)]);
    assert_eq!(&*locs[0].dso, "/nonexistent/app");
    assert_eq!(locs[0].function, None);
    assert_eq!(locs[0].function_name(), "[unknown in app]");
    assert_eq!(
        sym.missing_files().collect::<Vec<_>>(),
        vec!["/nonexistent/app"]
    );
    assert_eq!(sym.unreadable_files().count(), 0);
    let objects = DataObjects::build(&spaces, None);
    assert_eq!(
        objects.unreadable_files,
        vec![Arc::<str>::from("/nonexistent/app")]
    );
}

/// A file that exists but is not an ELF file is not "missing": it is unreadable, with the
/// reason, so the user is not sent looking for it.
#[test]
fn unreadable_files_say_why() {
    let dir = std::env::temp_dir().join(format!("spelunk-unreadable-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let text = dir.join("app");
    std::fs::write(&text, "not an ELF file\n").unwrap();
    let path = text.to_str().unwrap();
    let mut spaces = AddressSpaces::new();
    spaces.add(Some(1), Mapping::new(0x40_0000, 0x1000, 0, path, true, 0));
    spaces.finish();
    let m = spaces.lookup(Some(1), 0x40_0010, None).unwrap().clone();
    let mut sym = CodeSymbolizer::new(None);
    let locs = sym.symbolize(&[(m, 0x40_0010)]);
    assert_eq!(locs[0].function, None);
    assert_eq!(sym.missing_files().count(), 0);
    let unreadable: Vec<(&str, &str)> = sym.unreadable_files().collect();
    assert_eq!(unreadable.len(), 1);
    assert_eq!(unreadable[0].0, path);
    assert_eq!(unreadable[0].1, "not an ELF file");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Loading symbols ahead (while a report decodes) changes no location, and a file that is
/// missing or not an ELF file is not reported for it: only files with sampled PCs are.
#[test]
fn preloading_symbols_changes_nothing_but_the_timing() {
    let exe = build("preload");
    let syms = nm(&exe);
    let dir = exe.parent().unwrap();
    let text = dir.join("notelf");
    std::fs::write(&text, "not an ELF file\n").unwrap();
    let mut spaces = AddressSpaces::new();
    for m in mappings(&exe) {
        spaces.add(Some(7), m);
    }
    spaces.add(
        Some(9),
        Mapping::new(0x40_0000, 0x1000, 0, text.to_str().unwrap(), true, 0),
    );
    spaces.add(
        Some(8),
        Mapping::new(0x40_0000, 0x1000, 0, "/nonexistent/app", true, 0),
    );
    spaces.add(
        Some(8),
        Mapping::new(0x50_0000, 0x1000, 0, "/nonexistent/data", false, 0),
    );
    spaces.finish();
    // Programs by pid; non-executable mappings left out.
    let files: Vec<String> = spaces
        .executable_files()
        .iter()
        .map(|m| m.path.to_string())
        .collect();
    assert_eq!(
        files,
        [
            exe.to_str().unwrap(),
            "/nonexistent/app",
            text.to_str().unwrap()
        ]
    );
    let items: Vec<_> = ["sum_array", "fill", "uses_inline"]
        .iter()
        .map(|f| {
            let pc = BIAS + syms[*f].0 + 4;
            (spaces.lookup(Some(7), pc, None).unwrap().clone(), pc)
        })
        .collect();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let mut ahead = CodeSymbolizer::new(None);
    assert_eq!(ahead.preload(&spaces.executable_files(), &stop), 1);
    assert_eq!(ahead.missing_files().count(), 0);
    assert_eq!(ahead.unreadable_files().count(), 0);
    let mut fresh = CodeSymbolizer::new(None);
    assert_eq!(ahead.symbolize(&items), fresh.symbolize(&items));
    // Told to stop, it loads nothing more.
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(
        CodeSymbolizer::new(None).preload(&spaces.executable_files(), &stop),
        0
    );
    let _ = std::fs::remove_dir_all(dir);
}
