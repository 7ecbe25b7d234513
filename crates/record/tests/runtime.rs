//! The LD_PRELOAD runtime (runtime/, libspelunk.so) on real programs on this machine: a
//! program with three heap arrays, a reused address, phases, a named object, two threads, a fork
//! and an exec (runtime/tests/heap_sites.c), and a program written against NMO's documented API
//! (runtime/tests/nmo_api.c). Allocation sites are checked against binutils' addr2line (an
//! independent symbolizer) and the source's `SITE:` markers; sizes against the source.
//!
//! Needs gcc and addr2line; skipped without them unless SPELUNK_REQUIRE_RUNTIME=1 (make test).

use spelunk_perf::sidecar::MappingClass;
use spelunk_record::runtime_log::{RuntimeLog, RuntimeParts};
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Builds the runtime and a test program into a fresh directory; None when the tools are
/// missing (and not required).
fn setup(name: &str) -> Option<PathBuf> {
    if !have("gcc") || !have("addr2line") {
        assert!(
            std::env::var_os("SPELUNK_REQUIRE_RUNTIME").is_none(),
            "SPELUNK_REQUIRE_RUNTIME is set but gcc or addr2line is missing"
        );
        eprintln!("skipped: gcc or addr2line missing");
        return None;
    }
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("runtime-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let st = Command::new(root().join("runtime/build.sh"))
        .env("OUT", dir.join("lib"))
        .status()
        .unwrap();
    assert!(st.success(), "runtime/build.sh failed");
    Some(dir)
}

fn compile(dir: &Path, source: &str, extra: &[&str]) -> PathBuf {
    let exe = dir.join(Path::new(source).file_stem().unwrap());
    let st = Command::new("gcc")
        .args(["-O1", "-g", "-fPIE", "-pie", "-I"])
        .arg(root().join("include"))
        .arg(root().join("runtime/tests").join(source))
        .arg("-o")
        .arg(&exe)
        .args(extra)
        .status()
        .unwrap();
    assert!(st.success(), "gcc {source} failed");
    exe
}

/// Line numbers of the source's `SITE:<name>` markers.
fn site_lines(source: &str) -> Vec<(String, u32)> {
    let text = std::fs::read_to_string(root().join("runtime/tests").join(source)).unwrap();
    text.lines()
        .enumerate()
        .filter_map(|(i, l)| {
            let at = l.find("SITE:")?;
            let name: String = l[at + 5..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .collect();
            Some((name, i as u32 + 1))
        })
        .collect()
}

/// The source line of return address `pc` in `exe`, through the log's copy of the maps and
/// addr2line (the call is the instruction before the return address).
fn line_of(log: &RuntimeLog, exe: &Path, pc: u64) -> Option<u32> {
    let exe_name = exe.file_name()?.to_string_lossy().into_owned();
    let m = log
        .maps
        .iter()
        .find(|m| m.start <= pc && pc < m.end && m.path.ends_with(&exe_name))?;
    // In a PIE linked by GNU ld the file offset of code equals its link-time address.
    let vaddr = pc - 1 - m.start + m.file_offset;
    let out = Command::new("addr2line")
        .arg("-e")
        .arg(exe)
        .arg(format!("{vaddr:#x}"))
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.trim()
        .rsplit(':')
        .next()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn parts_of(log: &RuntimeLog) -> RuntimeParts {
    log.to_sidecar(u64::MAX - 1)
}

#[test]
fn an_unmodified_program_keeps_its_output_and_every_process_logs_its_allocation_sites() {
    let Some(dir) = setup("heap") else { return };
    let exe = compile(&dir, "heap_sites.c", &["-lpthread"]);
    let plain = Command::new(&exe).current_dir(&dir).output().unwrap();
    let base = dir.join("rec");
    let traced = Command::new(&exe)
        .current_dir(&dir)
        .env("LD_PRELOAD", dir.join("lib/libspelunk.so"))
        .env("SPELUNK_ENABLE", "1")
        .env("SPELUNK_OUTPUT", &base)
        .output()
        .unwrap();
    // The program's behaviour is untouched.
    assert_eq!(plain.status.code(), Some(3));
    assert_eq!(traced.status.code(), Some(3));
    assert_eq!(
        String::from_utf8_lossy(&traced.stdout),
        String::from_utf8_lossy(&plain.stdout)
    );
    assert_eq!(traced.stderr, plain.stderr);
    assert!(String::from_utf8_lossy(&plain.stdout).contains("reused 1"));

    let logs = program_fork_and_exec_logs(&base);
    let main_pid = traced_pid(&logs);
    let main = logs.iter().find(|l| l.pid == main_pid).unwrap();
    assert!(main.ended_cleanly);
    assert_eq!((main.dropped_events, main.damaged_lines), (0, 0));
    let sites = site_lines("heap_sites.c");
    let site = |name: &str| {
        sites
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, l)| *l)
            .unwrap()
    };

    let p = parts_of(main);
    let n = 1u64 << 16;
    let find = |size: u64, kind: &str| {
        p.allocations
            .iter()
            .filter(|a| a.size == size && a.kind == kind && a.pid == main_pid)
            .collect::<Vec<_>>()
    };
    // The three arrays, at their malloc/calloc lines.
    for (size, kind, name) in [
        (n * 8, "malloc", "hot"),
        (2 * n * 8, "calloc", "warm"),
        (4 * n * 8, "malloc", "cold"),
    ] {
        let a = find(size, kind);
        assert_eq!(a.len(), 1, "{name}: {a:?}");
        assert_eq!(
            line_of(main, &exe, a[0].stack[0]),
            Some(site(name)),
            "{name}"
        );
        assert!(a[0].until_ns < u64::MAX, "{name} was freed");
    }
    // Freed, then the same address handed out again: two blocks, lifetimes apart.
    let reuse = find(60000, "malloc");
    assert_eq!(reuse.len(), 2);
    assert_eq!(reuse[0].address, reuse[1].address);
    assert!(reuse[0].until_ns <= reuse[1].from_ns);
    assert_eq!(line_of(main, &exe, reuse[0].stack[0]), Some(site("first")));
    assert_eq!(line_of(main, &exe, reuse[1].stack[0]), Some(site("reuse")));
    // Two threads, each its own tid, at the worker's line.
    let threads: Vec<_> = p
        .allocations
        .iter()
        .filter(|a| a.size == 8192 || a.size == 16384)
        .collect();
    assert_eq!(threads.len(), 2);
    assert!(threads.iter().all(|a| a.tid != main_pid));
    assert_ne!(threads[0].tid, threads[1].tid);
    for a in &threads {
        assert_eq!(line_of(main, &exe, a.stack[0]), Some(site("thread")));
    }
    // Phases and the named object.
    let phases: Vec<_> = p
        .phases
        .iter()
        .map(|x| (x.name.as_str(), x.depth, x.tid))
        .collect();
    assert_eq!(
        phases,
        vec![("setup", 1, main_pid), ("compute", 1, main_pid)]
    );
    let hot = &find(n * 8, "malloc")[0];
    assert_eq!(p.objects.len(), 1);
    assert_eq!(
        (p.objects[0].name.as_str(), p.objects[0].address),
        ("hot_array", hot.address)
    );
    assert_eq!(p.objects[0].size, n * 8);

    // The forked child: its own log, its allocation, and no trailer (it ended with _exit).
    let forked: Vec<_> = logs.iter().filter(|l| l.ppid == main_pid).collect();
    let fork_child = forked
        .iter()
        .find(|l| parts_of(l).allocations.iter().any(|a| a.size == 5 * 4096))
        .expect("fork child's log");
    assert!(!fork_child.ended_cleanly);
    let a = &parts_of(fork_child).allocations[0];
    assert_eq!(line_of(fork_child, &exe, a.stack[0]), Some(site("fork")));
    // The exec'd image: same pid as its pre-exec log, the next file number, its allocation.
    let exec_img = forked
        .iter()
        .find(|l| parts_of(l).allocations.iter().any(|a| a.size == 3 * n * 8))
        .expect("exec'd image's log");
    assert!(exec_img.ended_cleanly);
    assert!(exec_img.path.to_string_lossy().ends_with(".1"));
    let a = parts_of(exec_img)
        .allocations
        .into_iter()
        .find(|a| a.size == 3 * n * 8)
        .unwrap();
    assert_eq!(line_of(exec_img, &exe, a.stack[0]), Some(site("exec")));
}

/// The logs of a program that forks once and execs once: the program, its forked child, the
/// exec child before and after exec.
fn program_fork_and_exec_logs(base: &Path) -> Vec<RuntimeLog> {
    let logs: Vec<RuntimeLog> = RuntimeLog::find(base)
        .unwrap()
        .iter()
        .map(|p| RuntimeLog::read(p).unwrap())
        .collect();
    assert_eq!(
        logs.len(),
        4,
        "{:?}",
        logs.iter().map(|l| &l.path).collect::<Vec<_>>()
    );
    logs
}

/// The pid whose parent is not among the logs.
fn traced_pid(logs: &[RuntimeLog]) -> u32 {
    let pids: Vec<u32> = logs.iter().map(|l| l.pid).collect();
    logs.iter()
        .find(|l| !pids.contains(&l.ppid))
        .map(|l| l.pid)
        .unwrap()
}

#[test]
fn a_program_written_against_nmos_api_builds_unchanged_and_gives_phases_and_objects() {
    let Some(dir) = setup("nmo") else { return };
    let lib = dir.join("lib");
    let exe = compile(&dir, "nmo_api.c", &["-L", lib.to_str().unwrap(), "-lnmo"]);
    // NMO's variables only (its USAGE), with NMO's meanings.
    let run = |env: &[(&str, &str)]| {
        let mut c = Command::new(&exe);
        c.current_dir(&dir)
            .env("LD_LIBRARY_PATH", &lib)
            .env("NMO_NAME", dir.join("nmo"))
            .envs(env.iter().copied());
        c.output().unwrap()
    };
    let off = run(&[]);
    assert!(off.status.success());
    assert!(
        RuntimeLog::find(&dir.join("nmo")).unwrap().is_empty(),
        "disabled: no log"
    );
    // NMO_TARGET names another program: this one is not profiled.
    let other = run(&[("NMO_ENABLE", "1"), ("NMO_TARGET", "not_this_one")]);
    assert_eq!(other.stdout, off.stdout);
    assert!(
        RuntimeLog::find(&dir.join("nmo")).unwrap().is_empty(),
        "another target: no log"
    );
    let on = run(&[
        ("NMO_ENABLE", "1"),
        ("NMO_TARGET", "nmo_api"),
        ("NMO_PIDNAME", "1"),
        ("NMO_MODE", "perp"),
        ("NMO_PERIOD", "10000"),
        // NMO rounds a buffer size down to a power of two, and takes 0 as 1 MiB.
        ("NMO_BUFSIZE", "5"),
        ("NMO_AUXBUFSIZE", "0"),
    ]);
    assert_eq!(on.status.code(), Some(0));
    assert_eq!(on.stdout, off.stdout);
    // sum of 0..65535
    assert_eq!(String::from_utf8_lossy(&on.stdout).trim(), "2147450880");
    let logs = RuntimeLog::find(&dir.join("nmo")).unwrap();
    assert_eq!(logs.len(), 1);
    let log = RuntimeLog::read(&logs[0]).unwrap();
    // The SPE settings are kept in the header for a recorder that samples.
    let setting = |k: &str| log.settings.get(k).map(String::as_str);
    assert_eq!(setting("spe_mode"), Some("perp"));
    assert_eq!(setting("spe_period"), Some("2710")); // 10000
    assert_eq!(setting("spe_ring_mib"), Some("4"));
    assert_eq!(setting("spe_aux_mib"), Some("1"));
    assert_eq!(log.notes.len(), 1, "{:?}", log.notes);
    assert!(
        log.notes[0].starts_with("NMO_AUXBUFSIZE "),
        "{:?}",
        log.notes
    );
    let p = parts_of(&log);
    let phases: Vec<_> = p
        .phases
        .iter()
        .map(|x| (x.name.as_str(), x.depth))
        .collect();
    assert_eq!(phases, vec![("my_kernel", 1)]);
    let vertices = p
        .objects
        .iter()
        .find(|o| o.name == "vertices")
        .expect("vertices");
    assert_eq!(vertices.size, (1 << 16) * 8);
    let block = p
        .allocations
        .iter()
        .find(|a| a.size == (1 << 16) * 8)
        .expect("malloc");
    assert_eq!(vertices.address, block.address);
    let heap = p
        .objects
        .iter()
        .find(|o| o.name == "heap")
        .expect("[heap] tag");
    assert_eq!(heap.kind, "mapping");
    let heap_map = log
        .maps
        .iter()
        .find(|m| m.path == "[heap]")
        .expect("[heap] in maps");
    assert_eq!(heap.address, heap_map.start);
}

/// Figures of runtime/tests/capacity.c (its #defines): touched memory each image holds.
const HEAP_BYTES: u64 = 16 << 20;
const ANON_BYTES: u64 = 32 << 20;
const CHILD_BYTES: u64 = 8 << 20;

/// The rise of a class over a log's samples: its largest value minus its first.
fn rise(log: &RuntimeLog, class: MappingClass) -> u64 {
    let bytes: Vec<u64> = log
        .capacity
        .iter()
        .map(|s| s.all_nodes().bytes(class))
        .collect();
    let first = bytes.first().copied().unwrap_or(0);
    bytes
        .iter()
        .max()
        .copied()
        .unwrap_or(0)
        .saturating_sub(first)
}

/// Runs capacity.c with `env`, checks its output and exit status against a plain run, and
/// checks each image's resident memory rises by what it holds; the logs then merge into a
/// capacity timeline.
fn capacity_run(name: &str, env: &[(&str, &str)]) {
    let Some(dir) = setup(name) else { return };
    let exe = compile(&dir, "capacity.c", &["-lpthread"]);
    let plain = Command::new(&exe).current_dir(&dir).output().unwrap();
    let base = dir.join("rec");
    let mut c = Command::new(&exe);
    c.current_dir(&dir)
        .env("LD_PRELOAD", dir.join("lib/libspelunk.so"))
        .envs(env.iter().copied());
    for (k, _) in env {
        assert!(!k.starts_with("SPELUNK_OUTPUT") && !k.starts_with("NMO_NAME"));
    }
    let traced = if env.iter().any(|(k, _)| k.starts_with("NMO_")) {
        c.env("NMO_NAME", &base).output().unwrap()
    } else {
        c.env("SPELUNK_OUTPUT", &base).output().unwrap()
    };
    assert_eq!(plain.status.code(), Some(5));
    assert_eq!(traced.status.code(), Some(5));
    assert_eq!(traced.stdout, plain.stdout);
    assert_eq!(traced.stderr, plain.stderr);
    assert!(String::from_utf8_lossy(&plain.stdout).contains("exec child held 8 MiB"));

    let logs = program_fork_and_exec_logs(&base);
    for l in &logs {
        assert!(
            !l.capacity.is_empty(),
            "{}: no capacity sample",
            l.path.display()
        );
        assert_eq!(l.damaged_lines, 0, "{}", l.path.display());
        assert!(l.notes.is_empty(), "{:?}", l.notes);
    }
    let main_pid = traced_pid(&logs);
    let main = logs.iter().find(|l| l.pid == main_pid).unwrap();
    assert!(main.ended_cleanly);
    assert!(
        rise(main, MappingClass::Heap) >= HEAP_BYTES,
        "{:?}",
        main.capacity
    );
    assert!(
        rise(main, MappingClass::Anon) >= ANON_BYTES,
        "{:?}",
        main.capacity
    );
    let children: Vec<&RuntimeLog> = logs.iter().filter(|l| l.ppid == main_pid).collect();
    let exec_img = children
        .iter()
        .find(|l| l.path.to_string_lossy().ends_with(".1"))
        .expect("exec'd image's log");
    let fork_child = children
        .iter()
        .find(|l| l.pid != exec_img.pid)
        .expect("fork child's log");
    assert!(fork_child.ended_cleanly);
    assert!(rise(fork_child, MappingClass::Heap) >= CHILD_BYTES);
    assert!(exec_img.ended_cleanly);
    assert!(rise(exec_img, MappingClass::Heap) >= CHILD_BYTES);

    // Merged: one timeline, summed over the processes alive at each time.
    let mut sc = spelunk_perf::sidecar::Sidecar::new("timelines");
    let m = spelunk_record::runtime_log::merge_logs(&base, 0, u64::MAX - 1, &mut sc);
    assert_eq!(m.logs, 4);
    let cap = sc.capacity.expect("a capacity timeline");
    assert_eq!(m.capacity_samples, cap.samples.len());
    assert_eq!(cap.source, "numa_maps");
    assert!(cap.peak_per_class().heap_bytes >= HEAP_BYTES);
    assert!(cap.peak_per_class().anon_bytes >= ANON_BYTES);
    // The program was alive while its children sampled.
    assert!(cap.samples.iter().any(|s| s.processes >= 2));
}

#[test]
fn capacity_of_a_threaded_program_that_forks_and_execs_rises_by_what_each_image_holds() {
    capacity_run(
        "capacity",
        &[
            ("SPELUNK_ENABLE", "1"),
            ("SPELUNK_TRACK_RSS", "1"),
            ("SPELUNK_RSS_INTERVAL_MS", "20"),
        ],
    );
}

#[test]
fn capacity_through_nmos_variables_alone() {
    // NMO's meaning: defined is on, whatever the value; its one-second interval.
    capacity_run("capacity-nmo", &[("NMO_ENABLE", ""), ("NMO_TRACK_RSS", "")]);
}
