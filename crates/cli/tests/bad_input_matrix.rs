//! Bad input, generated: every command × every class of bad input (issue 14, docs/files.md
//! "Bad input"), each cell the real `spelunk` binary in a scratch directory of its own, under a
//! time limit and an address-space limit.
//!
//! A cell passes when spelunk did not panic, did not hang, did not run out of memory, left every
//! input byte for byte as it was, and either refused with a message of the right class (it names
//! the file, the byte offset or the cause) or succeeded with the damage reported (the `LOSSES`
//! block in text, a `losses` object with something in it in JSON and HTML).
//!
//! A new command joins by adding a [`Row`] to [`rows`]: what it reads in place of `{in}`, what
//! it writes in place of `{out}`, how it shows damage. The input classes come from what the row
//! reads ([`cases`]).

use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::hash::Hasher;
use std::io::Write as _;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A cell that runs longer is killed and fails (it hangs, or costs grow out of bounds).
const TIME_LIMIT: Duration = Duration::from_secs(20);
/// Address space each run may use: an input must never make spelunk allocate without bound.
const MEMORY_LIMIT_BYTES: u64 = 2 << 30;

/// What a command reads in place of `{in}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reads {
    /// An SPE recording (perf.data) and the sidecar next to it.
    Recording,
    /// A sidecar read alone (`spelunk report FILE.spelunk.json`, a `--no-spe` recording).
    Sidecar,
    /// `topdown --import`: `perf stat -x` text, a sidecar, or a perf.data with its sidecar.
    Import,
    /// `check --sysroot`: a copy of a machine's /sys and /proc.
    Sysroot,
    /// `record`: the program to run. Only the output side is exercised (nothing is run).
    Program,
}

/// Where a successful run shows the damage it met.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shows {
    /// A `LOSSES` block on standard output.
    Text,
    /// A `losses` object on standard output with a count or a problem in it.
    Json,
    /// The HTML page `{out}`: its embedded report has such a `losses` object.
    Html,
    /// The top-down report written to `{out}` has a Notes section.
    TopdownNotes,
    /// Nothing: the command has no damage to show (check, record's refusals).
    Nothing,
}

/// What a command writes in place of `{out}`.
#[derive(Clone, Copy, Debug)]
enum Writes {
    None,
    /// A file.
    File(&'static str),
    /// A prefix of table files; the suffix names the first table (decode).
    Prefix(&'static str, &'static str),
}

/// One command of the matrix.
struct Row {
    name: &'static str,
    /// The arguments; `{in}` is the input, `{good}` a good recording, `{out}` the output.
    argv: &'static [&'static str],
    reads: Reads,
    writes: Writes,
    shows: Shows,
    /// Exit statuses that are a normal result (check exits 1 when the machine cannot record).
    ok_codes: &'static [i32],
    /// A refusal that is this command's normal result on a good synthetic recording (annotate:
    /// the synthetic binary has no symbols), so it counts as success.
    normal_refusal: Option<&'static str>,
    /// Whether it reads the recording's sidecar (decode does not: it writes SPE records only).
    reads_sidecar: bool,
}

impl Row {
    fn without_sidecar(self) -> Row {
        Row {
            reads_sidecar: false,
            ..self
        }
    }
}

fn rows() -> Vec<Row> {
    let row = |name, argv, reads, writes, shows| Row {
        name,
        argv,
        reads,
        writes,
        shows,
        ok_codes: &[0],
        normal_refusal: None,
        reads_sidecar: true,
    };
    vec![
        row(
            "decode",
            &[
                "decode",
                "{in}",
                "-o",
                "{out}",
                "-f",
                "csv",
                "--no-progress",
            ],
            Reads::Recording,
            Writes::Prefix("tables", "-ldst.csv"),
            Shows::Text,
        )
        .without_sidecar(),
        row(
            "report",
            &["report", "{in}"],
            Reads::Recording,
            Writes::None,
            Shows::Text,
        ),
        row(
            "report-json",
            &["report", "{in}", "--json"],
            Reads::Recording,
            Writes::None,
            Shows::Json,
        ),
        row(
            "report-html",
            &["report", "{in}", "--html", "{out}"],
            Reads::Recording,
            Writes::File("page.html"),
            Shows::Html,
        ),
        row(
            "report-sidecar",
            &["report", "{in}", "--json"],
            Reads::Sidecar,
            Writes::None,
            Shows::Json,
        ),
        Row {
            normal_refusal: Some("no selected samples in a function named"),
            ..row(
                "annotate",
                &["annotate", "main", "{in}"],
                Reads::Recording,
                Writes::None,
                Shows::Text,
            )
        },
        row(
            "c2c",
            &["c2c", "{in}"],
            Reads::Recording,
            Writes::None,
            Shows::Text,
        ),
        row(
            "c2c-html",
            &["c2c", "{in}", "--html", "{out}"],
            Reads::Recording,
            Writes::File("c2c.html"),
            Shows::Html,
        ),
        row(
            "diff",
            &["diff", "{good}", "{in}"],
            Reads::Recording,
            Writes::None,
            Shows::Text,
        ),
        row(
            "diff-json",
            &["diff", "{good}", "{in}", "--json"],
            Reads::Recording,
            Writes::None,
            Shows::Json,
        ),
        row(
            "estimate",
            &["estimate", "latency", "{in}"],
            Reads::Recording,
            Writes::None,
            Shows::Text,
        ),
        row(
            "topdown",
            &[
                "topdown",
                "--import",
                "{in}",
                "--cpu-model",
                "neoverse-n1",
                "-o",
                "{out}",
            ],
            Reads::Import,
            Writes::File("topdown.txt"),
            Shows::TopdownNotes,
        ),
        Row {
            ok_codes: &[0, 1],
            ..row(
                "check",
                &["check", "--sysroot", "{in}"],
                Reads::Sysroot,
                Writes::None,
                Shows::Nothing,
            )
        },
        row(
            "record-emulate",
            &["record", "--emulate", "-o", "{out}", "--", "{in}"],
            Reads::Program,
            Writes::File("out.data"),
            Shows::Nothing,
        ),
        row(
            "record-no-spe",
            &["record", "--no-spe", "-o", "{out}", "--", "{in}"],
            Reads::Program,
            Writes::File("out.data"),
            Shows::Nothing,
        ),
    ]
}

/// What a cell must do.
#[derive(Clone, Debug)]
enum Expect {
    /// Exit non-zero with a message holding one of these (case-insensitive) and, when
    /// `names` is set, that text too (the file the message is about).
    Refuse {
        any_of: Vec<&'static str>,
        names: Option<String>,
    },
    /// [`Expect::Refuse`], or succeed with the damage shown.
    RefuseOrDamage {
        any_of: Vec<&'static str>,
        names: Option<String>,
    },
    /// Succeed (a good input, however unusual).
    Succeed,
    /// Succeed with the damage shown (a sidecar ignored on request).
    Damage,
    /// Anything but a panic, hang or abort; a failure is a one-line `spelunk: error:`.
    Clean,
}

fn refuse(any_of: &[&'static str], names: Option<&str>) -> Expect {
    Expect::Refuse {
        any_of: any_of.to_vec(),
        names: names.map(str::to_string),
    }
}

fn refuse_or_damage(any_of: &[&'static str], names: Option<&str>) -> Expect {
    Expect::RefuseOrDamage {
        any_of: any_of.to_vec(),
        names: names.map(str::to_string),
    }
}

/// A cell's input, made in its directory.
struct Setup {
    /// Replaces `{in}`.
    input: String,
    /// Replaces `{out}` (default: the row's output name).
    out: Option<String>,
    /// Arguments added at the end (before `--` for record).
    extra: Vec<&'static str>,
    expect: Expect,
}

type Make = Box<dyn Fn(&Path) -> Setup + Send + Sync>;
/// Makes one file (a hostile sidecar) at the given path.
type MakeFile = Arc<dyn Fn(&Path) + Send + Sync>;
/// (class, path under the sysroot, what to put there).
type Hostile = (&'static str, &'static str, fn(&Path));

/// One input class for one kind of input.
struct Case {
    class: String,
    make: Make,
}

/// Made once, shared by the cells.
struct Fixtures {
    good: Vec<u8>,
    /// Offsets of the good recording's records (from the data section's start), and the data
    /// section's end.
    boundaries: Vec<u64>,
    data_end: u64,
    /// The first PERF_RECORD_AUXTRACE's offset.
    auxtrace: u64,
    /// A large ELF: a copy of the spelunk binary (hashed at the end: no cell may change it).
    elf: PathBuf,
    /// A valid sidecar with many phases and objects.
    big_sidecar: Arc<Vec<u8>>,
    /// A small valid sidecar (phases, objects, counters).
    small_sidecar: Value,
}

fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}

/// The records of a perf.data, walked by their 8-byte headers (an AUXTRACE record is followed
/// by its payload).
fn record_offsets(b: &[u8]) -> (Vec<u64>, u64, u64) {
    let (start, size) = (u64_at(b, 40), u64_at(b, 48));
    let end = start + size;
    let mut off = start;
    let mut out = Vec::new();
    let mut auxtrace = 0;
    while off + 8 <= end {
        out.push(off);
        let o = off as usize;
        let ty = u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        let mut len = u64::from(u16::from_le_bytes(b[o + 6..o + 8].try_into().unwrap()));
        if ty == 71 {
            if auxtrace == 0 {
                auxtrace = off;
            }
            len += u64_at(b, o + 8);
        }
        assert!(len >= 8, "record at {off} of size {len}");
        off += len;
    }
    assert_eq!(off, end, "records fill the data section");
    (out, end, auxtrace)
}

/// A seeded xorshift stream (the cells are the same on every run).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

fn phases_and_objects(n: usize) -> Value {
    let phases: Vec<Value> = (0..n)
        .map(|i| {
            serde_json::json!({"name": format!("p{}", i % 50), "pid": 4242, "tid": 4242,
                "depth": 1, "start_ns": 1000 + i as u64 * 10, "end_ns": 1005 + i as u64 * 10})
        })
        .collect();
    let objects: Vec<Value> = (0..n)
        .map(|i| {
            serde_json::json!({"name": format!("o{i}"), "pid": 4242,
                "address": 0x10_0000_0000u64 + i as u64 * 4096, "size": 4096,
                "from_ns": 0, "until_ns": u64::MAX, "kind": "object"})
        })
        .collect();
    serde_json::json!({"schema": "spelunk-sidecar/1", "source": "runtime",
        "phases": phases, "objects": objects})
}

fn fixtures(root: &Path) -> Fixtures {
    let good_path = root.join("good.data");
    spelunk_testkit::SynthRecording {
        cpus: 1,
        records_per_cpu: 200,
        chunk_bytes: 2048,
        ..Default::default()
    }
    .write(&good_path)
    .unwrap();
    let good = std::fs::read(&good_path).unwrap();
    let (boundaries, data_end, auxtrace) = record_offsets(&good);
    let elf = root.join("elf-copy");
    std::fs::copy(env!("CARGO_BIN_EXE_spelunk"), &elf).unwrap();
    let mut small = phases_and_objects(3);
    small["counters"] = serde_json::json!({
        "events": [[17, "CPU_CYCLES"], [8, "INST_RETIRED"]],
        "timeline": [{"tid": 0, "cpu": 0, "time_ns": 2000, "reason": "final", "values": [1000, 500]}],
        "totals": {"CPU_CYCLES": 1000, "INST_RETIRED": 500}
    });
    Fixtures {
        good,
        boundaries,
        data_end,
        auxtrace,
        elf,
        big_sidecar: Arc::new(
            serde_json::to_vec(&phases_and_objects(BIG_SIDECAR_ENTRIES)).unwrap(),
        ),
        small_sidecar: small,
    }
}

/// Phases and objects in the big sidecar: enough that a cost quadratic in them shows as a
/// timeout, few enough for a debug build.
const BIG_SIDECAR_ENTRIES: usize = 100_000;

fn mkfifo(p: &Path) {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(
        unsafe { libc::mkfifo(c.as_ptr(), 0o644) },
        0,
        "mkfifo {p:?}"
    );
}

fn write(p: &Path, bytes: impl AsRef<[u8]>) {
    std::fs::write(p, bytes).unwrap();
}

/// The classes every kind of file input has: empty, a directory, missing, a FIFO, a device
/// that never ends, random bytes, an ELF, a text file. `name` is the input's file name.
fn file_classes(fx: &Arc<Fixtures>, reads: Reads, name: &'static str) -> Vec<Case> {
    let not_ours: &'static [&'static str] = match reads {
        Reads::Recording => &["not a perf.data"],
        Reads::Sidecar => &["not a spelunk sidecar"],
        Reads::Import => &[
            "neither a spelunk sidecar",
            "no counter lines",
            "not a spelunk sidecar",
        ],
        Reads::Sysroot => &["not a directory"],
        Reads::Program => &[],
    };
    let mut v: Vec<Case> = Vec::new();
    let mut add = |class: &str, make: Make| {
        v.push(Case {
            class: class.to_string(),
            make,
        })
    };
    let plain = |input: &str, expect: Expect| Setup {
        input: input.to_string(),
        out: None,
        extra: vec![],
        expect,
    };
    add(
        "empty",
        Box::new(move |d| {
            write(&d.join(name), b"");
            let e = match reads {
                Reads::Sysroot => refuse(&["not a directory"], Some(name)),
                Reads::Import => refuse(&["empty", "no counter lines"], Some(name)),
                _ => refuse(&["empty"], Some(name)),
            };
            plain(name, e)
        }),
    );
    add(
        "directory",
        Box::new(move |d| {
            std::fs::create_dir(d.join(name)).unwrap();
            let e = match reads {
                // An empty sysroot is a machine with nothing: check says what it lacks.
                Reads::Sysroot => Expect::Succeed,
                _ => refuse(&["directory"], Some(name)),
            };
            plain(name, e)
        }),
    );
    add(
        "missing",
        Box::new(move |_| {
            plain(
                name,
                refuse(&["no such file", "not a directory"], Some(name)),
            )
        }),
    );
    add(
        "fifo",
        Box::new(move |d| {
            mkfifo(&d.join(name));
            let e = match reads {
                Reads::Sysroot => refuse(&["not a directory"], Some(name)),
                _ => refuse(&["fifo"], Some(name)),
            };
            plain(name, e)
        }),
    );
    add(
        "dev-zero",
        Box::new(move |d| {
            std::os::unix::fs::symlink("/dev/zero", d.join(name)).unwrap();
            let e = match reads {
                Reads::Sysroot => refuse(&["not a directory"], Some(name)),
                _ => refuse(&["character device"], Some(name)),
            };
            plain(name, e)
        }),
    );
    let fx2 = fx.clone();
    add(
        "random",
        Box::new(move |d| {
            let _ = &fx2;
            write(&d.join(name), Rng(0x5eed).bytes(64 << 10));
            plain(name, refuse(not_ours, Some(name)))
        }),
    );
    let fx2 = fx.clone();
    add(
        "elf",
        Box::new(move |d| {
            std::os::unix::fs::symlink(&fx2.elf, d.join(name)).unwrap();
            plain(name, refuse(not_ours, Some(name)))
        }),
    );
    add(
        "text",
        Box::new(move |d| {
            write(
                &d.join(name),
                "This is a text file.\nIt is not a recording, a sidecar or perf stat output.\n",
            );
            let e = match reads {
                Reads::Import => refuse(&["no counter lines"], Some(name)),
                _ => refuse(not_ours, Some(name)),
            };
            plain(name, e)
        }),
    );
    v
}

/// A good recording cut, flipped or with absurd sizes; a good recording with a broken or
/// hostile sidecar.
fn recording_classes(fx: &Arc<Fixtures>, reads: Reads, reads_sidecar: bool) -> Vec<Case> {
    let mut v: Vec<Case> = Vec::new();
    // Cut at every record boundary, in the file header and attrs, at a few offsets inside
    // records and payloads, at the end of the data section and inside the feature sections.
    let mut cuts: Vec<u64> = vec![8, 60, 104, 200];
    cuts.extend(fx.boundaries.iter().copied());
    cuts.extend(
        fx.boundaries
            .windows(2)
            .step_by(3)
            .map(|w| (w[0] + w[1]) / 2 + 3),
    );
    cuts.push(fx.data_end);
    cuts.push(fx.data_end + 20);
    cuts.push(fx.good.len() as u64 - 10);
    cuts.sort_unstable();
    cuts.dedup();
    for cut in cuts {
        let fx = fx.clone();
        v.push(Case {
            class: format!("cut@{cut}"),
            make: Box::new(move |d| {
                write(&d.join("r.data"), &fx.good[..cut as usize]);
                let expect = match reads {
                    // topdown reads the counts in the sidecar, which this recording has none of.
                    Reads::Import => refuse(&["sidecar", "cut", "truncated"], Some("r.data")),
                    _ => refuse_or_damage(&["cut", "truncated"], Some("r.data")),
                };
                Setup {
                    input: "r.data".into(),
                    out: None,
                    extra: vec![],
                    expect,
                }
            }),
        });
    }
    for (seed, flips) in [(1u64, 1usize), (2, 1), (3, 4), (4, 16), (5, 64), (6, 256)] {
        let fx = fx.clone();
        v.push(Case {
            class: format!("flip{flips}#{seed}"),
            make: Box::new(move |d| {
                let mut b = fx.good.clone();
                let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
                for _ in 0..flips {
                    let i = (rng.next() % b.len() as u64) as usize;
                    b[i] ^= 1 << (rng.next() % 8);
                }
                write(&d.join("r.data"), b);
                Setup {
                    input: "r.data".into(),
                    out: None,
                    extra: vec![],
                    expect: Expect::Clean,
                }
            }),
        });
    }
    // Absurd size fields: (name, byte offset, width, value).
    let first_record = fx.boundaries[0] as usize;
    let aux = fx.auxtrace as usize;
    let data_end = fx.data_end as usize;
    let absurd: Vec<(&str, usize, usize, u64)> = vec![
        ("data-size", 48, 8, 1 << 62),
        ("data-size-max", 48, 8, u64::MAX),
        ("data-offset", 40, 8, 1 << 60),
        ("attr-size", 16, 8, 1 << 40),
        ("attrs-size", 32, 8, 1 << 50),
        ("header-size", 8, 8, 1 << 40),
        ("record-size-0", first_record + 6, 2, 0),
        ("record-size-4", first_record + 6, 2, 4),
        ("record-size-max", first_record + 6, 2, 0xffff),
        ("auxtrace-size", aux + 8, 8, 1 << 62),
        ("auxtrace-size-odd", aux + 8, 8, 0x7fff_ffff_ffff_fff9),
        ("feature-size", data_end + 8, 8, 1 << 60),
        ("feature-offset", data_end, 8, u64::MAX - 4),
    ];
    for (name, off, width, value) in absurd {
        let fx = fx.clone();
        v.push(Case {
            class: format!("absurd-{name}"),
            make: Box::new(move |d| {
                let mut b = fx.good.clone();
                b[off..off + width].copy_from_slice(&value.to_le_bytes()[..width]);
                write(&d.join("r.data"), b);
                let expect = match reads {
                    Reads::Import => Expect::Clean,
                    _ => refuse_or_damage(
                        &[
                            "cut",
                            "truncated",
                            "malformed",
                            "outside",
                            "beyond",
                            "larger than",
                        ],
                        Some("r.data"),
                    ),
                };
                Setup {
                    input: "r.data".into(),
                    out: None,
                    extra: vec![],
                    expect,
                }
            }),
        });
    }
    v.extend(sidecar_classes(fx, reads, reads_sidecar));
    v
}

/// Broken and hostile sidecars. For [`Reads::Sidecar`] the sidecar is the input; otherwise it
/// sits next to a good recording, `r.data.spelunk.json`.
fn sidecar_classes(fx: &Arc<Fixtures>, reads: Reads, reads_sidecar: bool) -> Vec<Case> {
    let alone = reads == Reads::Sidecar;
    let (input, sidecar) = if alone {
        ("r.spelunk.json", "r.spelunk.json")
    } else {
        ("r.data", "r.data.spelunk.json")
    };
    let mut small = fx.small_sidecar.clone();
    // Timelines, so that a sidecar alone (`spelunk record --no-spe`) has something to report.
    small["config"] = serde_json::json!({"timeline_clock": "CLOCK_MONOTONIC"});
    let samples: Vec<Value> = [1000u64, 2000, 3000]
        .iter()
        .map(|t| {
            serde_json::json!({"time_ns": t, "processes": 1, "nodes": [{"node": null,
                "heap_bytes": t * 4, "anon_bytes": 0, "file_bytes": 4096, "stack_bytes": 8192}]})
        })
        .collect();
    small["capacity"] =
        serde_json::json!({"source": "smaps", "interval_ns": 1000, "samples": samples});
    let with = move |f: &dyn Fn(&mut Value)| {
        let mut v = small.clone();
        f(&mut v);
        serde_json::to_vec_pretty(&v).unwrap()
    };
    let good_text = with(&|_| {});
    let kinds: Vec<(&str, MakeFile, Expect)> = vec![
        (
            "cut",
            Arc::new({
                let t = good_text.clone();
                move |p: &Path| write(p, &t[..t.len() / 2])
            }),
            refuse(&["cut off"], Some(sidecar)),
        ),
        (
            "schema",
            Arc::new({
                let t = with(&|v| v["schema"] = "spelunk-sidecar/99".into());
                move |p: &Path| write(p, &t)
            }),
            refuse(&["schema"], Some(sidecar)),
        ),
        (
            "not-json",
            Arc::new(|p: &Path| write(p, Rng(7).bytes(4096))),
            refuse(&["sidecar"], Some(sidecar)),
        ),
        (
            "negative-time",
            Arc::new({
                let t = with(&|v| v["phases"][0]["start_ns"] = (-5).into());
                move |p: &Path| write(p, &t)
            }),
            refuse(&["sidecar"], Some(sidecar)),
        ),
        (
            "reversed-phase",
            Arc::new({
                let t = with(&|v| {
                    v["phases"][1]["start_ns"] = 9000.into();
                    v["phases"][1]["end_ns"] = 10.into();
                });
                move |p: &Path| write(p, &t)
            }),
            refuse_or_damage(&["dropped"], Some(sidecar)),
        ),
        (
            "reversed-object",
            Arc::new({
                let t = with(&|v| {
                    v["objects"][0]["from_ns"] = 9000.into();
                    v["objects"][0]["until_ns"] = 10.into();
                });
                move |p: &Path| write(p, &t)
            }),
            refuse_or_damage(&["dropped"], Some(sidecar)),
        ),
        (
            "object-wraps",
            Arc::new({
                let t = with(&|v| {
                    v["objects"][0]["address"] = (u64::MAX - 10).into();
                    v["objects"][0]["size"] = 4096.into();
                });
                move |p: &Path| write(p, &t)
            }),
            refuse_or_damage(&["dropped"], Some(sidecar)),
        ),
        (
            "counter-columns",
            Arc::new({
                let t = with(&|v| {
                    v["counters"]["timeline"][0]["values"] = serde_json::json!([1, 2, 3, 4, 5])
                });
                move |p: &Path| write(p, &t)
            }),
            refuse_or_damage(&["dropped"], Some(sidecar)),
        ),
        (
            "capacity-backwards",
            Arc::new({
                let t = with(&|v| {
                    if let Some(samples) = v["capacity"]["samples"].as_array_mut() {
                        samples.reverse();
                    }
                });
                move |p: &Path| write(p, &t)
            }),
            Expect::Clean,
        ),
        (
            "counters-backwards",
            Arc::new({
                let t = with(&|v| {
                    v["counters"]["timeline"] = serde_json::json!([
                        {"tid": 1, "cpu": 0, "time_ns": 3000, "reason": "periodic", "values": [900, 400]},
                        {"tid": 1, "cpu": 0, "time_ns": 1000, "reason": "periodic", "values": [50, 10]},
                        {"tid": 0, "cpu": 0, "time_ns": 2000, "reason": "final", "values": [5, u64::MAX]}
                    ]);
                });
                move |p: &Path| write(p, &t)
            }),
            Expect::Clean,
        ),
        (
            "directory",
            Arc::new(|p: &Path| std::fs::create_dir(p).unwrap()),
            refuse(&["directory"], Some(sidecar)),
        ),
        (
            "fifo",
            Arc::new(|p: &Path| mkfifo(p)),
            refuse(&["fifo"], Some(sidecar)),
        ),
        (
            "dev-zero",
            Arc::new(|p: &Path| std::os::unix::fs::symlink("/dev/zero", p).unwrap()),
            refuse(&["character device"], Some(sidecar)),
        ),
        (
            "huge",
            Arc::new({
                let big = fx.big_sidecar.clone();
                move |p: &Path| write(p, &**big)
            }),
            Expect::Succeed,
        ),
    ];
    let mut v = Vec::new();
    for (kind, make_sidecar, expect) in kinds {
        for ignore in [false, true] {
            // --ignore-sidecar is for a recording's sidecar; once is enough (the cut one).
            if ignore && (alone || kind != "cut" || reads == Reads::Import || !reads_sidecar) {
                continue;
            }
            let fx = fx.clone();
            let make_sidecar = make_sidecar.clone();
            let expect = match (&expect, reads, ignore) {
                // decode does not read the sidecar: whatever it is, the tables are written.
                _ if !reads_sidecar => Expect::Succeed,
                (_, _, true) => Expect::Damage,
                // topdown needs counts: the big sidecar has none, a refusal says so.
                (Expect::Succeed, Reads::Import, _) => {
                    refuse(&["counter", "counts"], Some(sidecar))
                }
                // A sidecar alone must have timelines: these have none.
                (Expect::Succeed, Reads::Sidecar, _) => refuse(&["timelines"], Some(sidecar)),
                (e, _, _) => e.clone(),
            };
            v.push(Case {
                class: format!("sidecar-{kind}{}", if ignore { "+ignore" } else { "" }),
                make: Box::new(move |d| {
                    if !alone {
                        write(&d.join(input), &fx.good);
                    }
                    make_sidecar(&d.join(sidecar));
                    Setup {
                        input: input.into(),
                        out: None,
                        extra: if ignore {
                            vec!["--ignore-sidecar"]
                        } else {
                            vec![]
                        },
                        expect: expect.clone(),
                    }
                }),
            });
        }
    }
    v
}

/// Malformed `perf stat -x` files.
fn perf_stat_classes() -> Vec<Case> {
    let texts: Vec<(&str, String, Expect)> = vec![
        (
            "comments-only",
            "# started on Mon Jan  1 00:00:00 2024\n\n".into(),
            refuse(&["no counter lines"], Some("counts.csv")),
        ),
        (
            "locale-de",
            "1.234.567;;CPU_CYCLES;100,00;;\n617.283;;INST_RETIRED;100,00;;\n".into(),
            refuse(&["locale"], Some("counts.csv")),
        ),
        (
            "locale-decimal-comma",
            "1234567,5;;CPU_CYCLES;100,00;;\n617283,25;;INST_RETIRED;100,00;;\n".into(),
            refuse(&["locale"], Some("counts.csv")),
        ),
        (
            "duplicates",
            "1000000,,CPU_CYCLES,100.00,,\n500000,,INST_RETIRED,100.00,,\n\
             700000,,INST_RETIRED,100.00,,\n"
                .into(),
            refuse_or_damage(&["more than once"], Some("counts.csv")),
        ),
        (
            "x86",
            "1000000,,cpu_core/cycles/,100.00,,\n500000,,cpu_core/instructions/,100.00,,\n\
             1200,,cpu_core/topdown-retiring/,100.00,,\n"
                .into(),
            refuse(&["x86"], Some("counts.csv")),
        ),
        (
            "x86-plain",
            "1000000,,cycles:u,100.00,,\n500000,,instructions:u,100.00,,\n\
             40000,,mem_load_retired.l3_miss,100.00,,\n"
                .into(),
            refuse_or_damage(&["x86", "ignored"], Some("counts.csv")),
        ),
        (
            "nan",
            "nan,,CPU_CYCLES,100.00,,\n500000,,INST_RETIRED,100.00,,\n".into(),
            refuse(&["not a number", "finite"], Some("counts.csv")),
        ),
        (
            "inf",
            "inf,,CPU_CYCLES,100.00,,\n500000,,INST_RETIRED,100.00,,\n".into(),
            refuse(&["not a number", "finite"], Some("counts.csv")),
        ),
        (
            "huge",
            "1e400,,CPU_CYCLES,100.00,,\n500000,,INST_RETIRED,100.00,,\n".into(),
            refuse(&["not a number", "finite", "too large"], Some("counts.csv")),
        ),
        (
            "negative",
            "-5,,CPU_CYCLES,100.00,,\n500000,,INST_RETIRED,100.00,,\n".into(),
            refuse(&["negative"], Some("counts.csv")),
        ),
        (
            "percent-nan",
            "1000000,,CPU_CYCLES,1000,nan,,\n500000,,INST_RETIRED,1000,-5,,\n".into(),
            refuse_or_damage(&["percent", "running"], Some("counts.csv")),
        ),
        (
            "intervals-reversed",
            "2.000,1000000,,CPU_CYCLES,100.00,,\n2.000,500000,,INST_RETIRED,100.00,,\n\
             1.000,1000000,,CPU_CYCLES,100.00,,\n1.000,500000,,INST_RETIRED,100.00,,\n"
                .into(),
            Expect::Succeed,
        ),
        (
            "long-line",
            format!("{},,CPU_CYCLES,100.00,,\n", "9".repeat(4 << 20)),
            refuse(&["not a number", "finite", "too large"], Some("counts.csv")),
        ),
        (
            // Every interval's metrics are computed (about 1 ms each in a debug build).
            "many-intervals",
            (0..4_000)
                .map(|i| {
                    format!(
                        "{i}.000,1000,,CPU_CYCLES,100.00,,\n{i}.000,500,,INST_RETIRED,100.00,,\n"
                    )
                })
                .collect(),
            Expect::Succeed,
        ),
        (
            // A scope per line: a cost quadratic in the scopes would not end in time.
            "many-scopes",
            (0..100_000)
                .map(|i| format!("CPU{i},1000,,CPU_CYCLES,1000,100.00,,\n"))
                .collect(),
            Expect::Succeed,
        ),
    ];
    texts
        .into_iter()
        .map(|(name, text, expect)| Case {
            class: format!("perf-stat-{name}"),
            make: Box::new(move |d| {
                write(&d.join("counts.csv"), &text);
                Setup {
                    input: "counts.csv".into(),
                    out: None,
                    extra: vec![],
                    expect: expect.clone(),
                }
            }),
        })
        .collect()
}

/// Sysroots with hostile files where check reads: a FIFO for /proc/cpuinfo, /dev/zero for a
/// MIDR, a directory for a PMU's type.
fn sysroot_classes() -> Vec<Case> {
    let hostile: Vec<Hostile> = vec![
        ("cpuinfo-fifo", "proc/cpuinfo", mkfifo),
        (
            "midr-dev-zero",
            "sys/devices/system/cpu/cpu0/regs/identification/midr_el1",
            |p| std::os::unix::fs::symlink("/dev/zero", p).unwrap(),
        ),
        (
            "pmu-type-fifo",
            "sys/bus/event_source/devices/armv8_pmuv3_0/type",
            mkfifo,
        ),
        (
            "pmu-event-dev-zero",
            "sys/bus/event_source/devices/armv8_pmuv3_0/events/cpu_cycles",
            |p| std::os::unix::fs::symlink("/dev/zero", p).unwrap(),
        ),
        (
            "spe-caps-fifo",
            "sys/bus/event_source/devices/arm_spe_0/caps/min_interval",
            mkfifo,
        ),
        ("paranoid-dir", "proc/sys/kernel/perf_event_paranoid", |p| {
            std::fs::create_dir_all(p).unwrap()
        }),
    ];
    hostile
        .into_iter()
        .map(|(name, rel, make)| Case {
            class: format!("sysroot-{name}"),
            make: Box::new(move |d| {
                let root = d.join("root");
                let p = root.join(rel);
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                // A plausible machine around the hostile file.
                let cpu = root.join("sys/devices/system/cpu");
                std::fs::create_dir_all(cpu.join("cpu0")).unwrap();
                let _ = std::fs::write(cpu.join("online"), "0\n");
                let pmu = root.join("sys/bus/event_source/devices/armv8_pmuv3_0");
                std::fs::create_dir_all(&pmu).unwrap();
                let _ = std::fs::write(pmu.join("cpus"), "0\n");
                if !p.exists() && std::fs::symlink_metadata(&p).is_err() {
                    make(&p);
                }
                Setup {
                    input: "root".into(),
                    out: None,
                    extra: vec![],
                    expect: Expect::Succeed,
                }
            }),
        })
        .collect()
}

/// `record`'s output side: an output that is the program, its sidecar or its trace; an output
/// in a directory that does not exist; an output that is a directory. All refused before
/// anything runs.
fn program_classes(row: &str) -> Vec<Case> {
    let emulate = row == "record-emulate";
    let mut v: Vec<Case> = Vec::new();
    let prog = |d: &Path, name: &str| {
        write(&d.join(name), "#!/bin/sh\nexit 0\n");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(d.join(name), std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    let cases: Vec<(&str, &str, &str, Expect)> = vec![
        (
            "output=program",
            "prog",
            "prog",
            refuse(&["refusing to write", "exists"], Some("prog")),
        ),
        (
            "sidecar=program",
            "p.spelunk.json",
            "p",
            refuse(&["refusing to write"], Some("p.spelunk.json")),
        ),
        (
            "trace=program",
            "p.emutrace",
            "p",
            refuse(&["refusing to write"], Some("p.emutrace")),
        ),
        (
            "output-dir-missing",
            "prog",
            "no/such/dir/out.data",
            refuse(&["no such directory"], Some("no/such/dir")),
        ),
        (
            "output-is-directory",
            "prog",
            "outdir",
            refuse(&["directory", "exists"], Some("outdir")),
        ),
    ];
    for (class, program, out, expect) in cases {
        if class == "trace=program" && !emulate {
            continue;
        }
        v.push(Case {
            class: class.to_string(),
            make: Box::new(move |d| {
                prog(d, program);
                if out == "outdir" {
                    std::fs::create_dir(d.join(out)).unwrap();
                }
                Setup {
                    input: format!("./{program}"),
                    out: Some(out.to_string()),
                    extra: vec![],
                    expect: expect.clone(),
                }
            }),
        });
    }
    v
}

/// Output = input: the row's output path names its input (or the input's sidecar); the input
/// must be refused and stay byte for byte as it was.
fn output_is_input(fx: &Arc<Fixtures>, row: &Row) -> Vec<Case> {
    let mut v: Vec<Case> = Vec::new();
    let (input, make_good): (&str, fn(&Path, &Fixtures, &str)) = match row.reads {
        Reads::Recording | Reads::Import => ("r.data", |d, fx, name| {
            write(&d.join(name), &fx.good);
            write(
                &d.join(format!("{name}.spelunk.json")),
                serde_json::to_vec(&fx.small_sidecar).unwrap(),
            );
        }),
        Reads::Sidecar => ("r.spelunk.json", |d, fx, name| {
            write(
                &d.join(name),
                serde_json::to_vec(&fx.small_sidecar).unwrap(),
            )
        }),
        _ => return v,
    };
    let targets: Vec<(&str, String, String)> = match row.writes {
        Writes::None => return v,
        // decode's tables are PREFIX-ldst.csv ...: an input of that name, and PREFIX.
        Writes::Prefix(_, suffix) => vec![("output=input", format!("t{suffix}"), "t".to_string())],
        Writes::File(_) => {
            let mut t = vec![("output=input", input.to_string(), input.to_string())];
            if row.reads != Reads::Sidecar {
                t.push((
                    "output=sidecar",
                    input.to_string(),
                    format!("{input}.spelunk.json"),
                ));
            }
            t.push(("output=./input", input.to_string(), format!("./{input}")));
            t
        }
    };
    for (class, input, out) in targets {
        let fx = fx.clone();
        v.push(Case {
            class: class.to_string(),
            make: Box::new(move |d| {
                make_good(d, &fx, &input);
                Setup {
                    input: input.clone(),
                    out: Some(out.clone()),
                    extra: vec![],
                    expect: refuse(&["refusing to write"], Some(&input)),
                }
            }),
        });
    }
    v
}

fn cases(fx: &Arc<Fixtures>, row: &Row) -> Vec<Case> {
    let mut v = match row.reads {
        Reads::Recording => {
            let mut v = file_classes(fx, row.reads, "x.data");
            v.extend(recording_classes(fx, row.reads, row.reads_sidecar));
            v
        }
        Reads::Sidecar => {
            let mut v = file_classes(fx, row.reads, "x.spelunk.json");
            v.extend(sidecar_classes(fx, row.reads, true));
            v
        }
        Reads::Import => {
            let mut v = file_classes(fx, row.reads, "counts.csv");
            v.extend(perf_stat_classes());
            v.extend(recording_classes(fx, row.reads, true));
            v
        }
        Reads::Sysroot => {
            let mut v = file_classes(fx, row.reads, "sysroot");
            v.extend(sysroot_classes());
            v
        }
        Reads::Program => program_classes(row.name),
    };
    v.extend(output_is_input(fx, row));
    v.extend(output_classes(fx, row));
    v
}

/// What can sit at an output path besides a regular file (docs/files.md "Only regular files
/// are written"): `/dev/null`, a FIFO, a directory, a link to nothing, a link to a FIFO — each
/// refused before anything is written, naming what is there — and a link to a regular file,
/// written at its target (outside the cell directory, so the cell's own files, the link
/// included, must stay as they were).
fn output_classes(fx: &Arc<Fixtures>, row: &Row) -> Vec<Case> {
    let Writes::File(name) = row.writes else {
        return Vec::new();
    };
    let mut v: Vec<Case> = Vec::new();
    let make_input = move |d: &Path, fx: &Fixtures, reads: Reads| -> String {
        match reads {
            Reads::Program => {
                write(&d.join("prog"), "#!/bin/sh\nexit 0\n");
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(d.join("prog"), std::fs::Permissions::from_mode(0o755))
                    .unwrap();
                "./prog".into()
            }
            _ => {
                write(&d.join("r.data"), &fx.good);
                write(
                    &d.join("r.data.spelunk.json"),
                    serde_json::to_vec(&fx.small_sidecar).unwrap(),
                );
                "r.data".into()
            }
        }
    };
    type Place = fn(&Path, &str) -> String;
    let classes: Vec<(&str, Place, &[&'static str])> = vec![
        (
            "out=/dev/null",
            |_, _| "/dev/null".into(),
            &["a character device"],
        ),
        (
            "out=fifo",
            |d, name| {
                mkfifo(&d.join(name));
                name.into()
            },
            &["a fifo"],
        ),
        (
            "out=dir",
            |d, name| {
                std::fs::create_dir(d.join(name)).unwrap();
                name.into()
            },
            &["a directory"],
        ),
        (
            "out=link-to-nothing",
            |d, name| {
                std::os::unix::fs::symlink("nothing-here", d.join(name)).unwrap();
                name.into()
            },
            &["a symbolic link to nothing"],
        ),
        (
            "out=link-to-fifo",
            |d, name| {
                mkfifo(&d.join("fifo"));
                std::os::unix::fs::symlink("fifo", d.join(name)).unwrap();
                name.into()
            },
            &["a symbolic link to a fifo"],
        ),
    ];
    for (class, place, words) in classes {
        let fx = fx.clone();
        let reads = row.reads;
        v.push(Case {
            class: class.to_string(),
            make: Box::new(move |d| {
                let input = make_input(d, &fx, reads);
                let out = place(d, name);
                Setup {
                    input,
                    out: Some(out.clone()),
                    extra: vec![],
                    expect: refuse(words, Some(&out)),
                }
            }),
        });
    }
    if row.reads == Reads::Recording {
        let fx = fx.clone();
        v.push(Case {
            class: "out=link-to-file".to_string(),
            make: Box::new(move |d| {
                let input = make_input(d, &fx, Reads::Recording);
                let target = d.with_extension("target");
                write(&target, "the previous page\n");
                std::os::unix::fs::symlink(&target, d.join(name)).unwrap();
                Setup {
                    input,
                    out: Some(name.to_string()),
                    extra: vec![],
                    expect: Expect::Succeed,
                }
            }),
        });
    }
    v
}

/// A file's identity and content, to see that a run left it alone.
#[derive(Debug, PartialEq, Eq)]
enum Fingerprint {
    File { len: u64, hash: u64 },
    Other { kind: String },
}

fn fingerprint(p: &Path) -> Option<Fingerprint> {
    let m = std::fs::symlink_metadata(p).ok()?;
    let t = m.file_type();
    if t.is_file() {
        let bytes = std::fs::read(p).ok()?;
        let mut h = std::collections::hash_map::DefaultHasher::new();
        h.write(&bytes);
        Some(Fingerprint::File {
            len: m.len(),
            hash: h.finish(),
        })
    } else {
        // FIFOs and devices are never read by the test (that would block or never end).
        let kind = if t.is_symlink() {
            format!("symlink to {:?}", std::fs::read_link(p).ok())
        } else if t.is_fifo() {
            "fifo".into()
        } else if t.is_dir() {
            "dir".into()
        } else {
            format!("mode {:o}", m.mode())
        };
        Some(Fingerprint::Other { kind })
    }
}

/// Every entry under `dir` (not following symlinks).
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Fingerprint> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if let Some(f) = fingerprint(&p) {
                if matches!(&f, Fingerprint::Other { kind } if kind == "dir") {
                    stack.push(p.clone());
                }
                out.insert(p, f);
            }
        }
    }
    out
}

/// What a run did.
struct Run {
    code: Option<i32>,
    signal: Option<i32>,
    timed_out: bool,
    elapsed: Duration,
    stdout: String,
    stderr: String,
}

fn run_limited(dir: &Path, log: &Path, args: &[String], envs: &[(&str, &Path)]) -> Run {
    let out_path = log.with_extension("out");
    let err_path = log.with_extension("err");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_spelunk"));
    cmd.current_dir(dir)
        .args(args)
        .env("NO_COLOR", "1")
        .envs(envs.iter().copied())
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap());
    // SAFETY: only async-signal-safe calls (setrlimit) between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let limit = |resource, bytes: u64| {
                let r = libc::rlimit {
                    rlim_cur: bytes,
                    rlim_max: bytes,
                };
                if libc::setrlimit(resource, &r) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            };
            limit(libc::RLIMIT_AS, MEMORY_LIMIT_BYTES)?;
            limit(libc::RLIMIT_CORE, 0)
        });
    }
    let started = Instant::now();
    let mut child = cmd.spawn().unwrap();
    let mut timed_out = false;
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if started.elapsed() > TIME_LIMIT {
            timed_out = true;
            let _ = child.kill();
            break child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    use std::os::unix::process::ExitStatusExt;
    Run {
        code: status.code(),
        signal: status.signal(),
        timed_out,
        elapsed: started.elapsed(),
        stdout: String::from_utf8_lossy(&std::fs::read(&out_path).unwrap_or_default()).into(),
        stderr: String::from_utf8_lossy(&std::fs::read(&err_path).unwrap_or_default()).into(),
    }
}

/// Whether an object has a `losses` member with a count or a problem in it, anywhere.
fn json_has_losses(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.iter().any(|(k, x)| {
            (k == "losses"
                && x.as_object().is_some_and(|l| {
                    l.values().any(|y| {
                        y.as_u64().is_some_and(|n| n > 0)
                            || y.as_array().is_some_and(|a| !a.is_empty())
                    })
                }))
                || json_has_losses(x)
        }),
        Value::Array(a) => a.iter().any(json_has_losses),
        _ => false,
    }
}

/// The report embedded in an HTML page.
fn html_report(page: &str) -> Option<Value> {
    let start = page.find("id=\"spelunk-data\"")?;
    let body = &page[start..];
    let open = body.find('>')? + 1;
    let close = body.find("</script>")?;
    serde_json::from_str(&body[open..close]).ok()
}

fn damage_shown(row: &Row, dir: &Path, out: &str, run: &Run) -> bool {
    match row.shows {
        Shows::Text => run.stdout.contains("LOSSES"),
        Shows::Json => serde_json::from_str(&run.stdout)
            .map(|v: Value| json_has_losses(&v))
            .unwrap_or(false),
        Shows::Html => std::fs::read_to_string(dir.join(out))
            .ok()
            .and_then(|p| html_report(&p))
            .is_some_and(|v| json_has_losses(&v)),
        Shows::TopdownNotes => std::fs::read_to_string(dir.join(out))
            .map(|t| t.contains("\nNotes\n"))
            .unwrap_or(false),
        Shows::Nothing => false,
    }
}

/// The verdict on one cell: `Ok(short)` or `Err(why)`.
fn judge(
    row: &Row,
    setup: &Setup,
    dir: &Path,
    out: &str,
    run: &Run,
) -> Result<&'static str, String> {
    if run.timed_out {
        return Err(format!("hung: killed after {} s", TIME_LIMIT.as_secs()));
    }
    if run.code == Some(101) || run.stderr.contains("panicked") {
        return Err(format!("panicked: {}", first_lines(&run.stderr)));
    }
    if let Some(s) = run.signal {
        return Err(format!(
            "killed by signal {s} (an abort is an allocation past the {} GiB limit): {}",
            MEMORY_LIMIT_BYTES >> 30,
            first_lines(&run.stderr)
        ));
    }
    let code = run.code.unwrap_or(-1);
    let err = run.stderr.to_lowercase();
    // check's "cannot record here" is exit 1 without an error line.
    let ok = (row.ok_codes.contains(&code) && (code == 0 || !err.contains("error:")))
        || row.normal_refusal.is_some_and(|r| {
            code != 0 && run.stderr.contains(r) && !run.stderr.contains("damaged")
        });
    let clean_failure =
        || err.contains("error:") && !err.contains("\n\n\n") && run.stderr.lines().count() <= 40;
    let refused = |any_of: &[&str], names: &Option<String>| {
        code != 0
            && clean_failure()
            && any_of.iter().any(|k| err.contains(&k.to_lowercase()))
            && names
                .as_ref()
                .is_none_or(|n| run.stderr.contains(n.as_str()))
    };
    match &setup.expect {
        Expect::Refuse { any_of, names } => {
            if refused(any_of, names) {
                Ok("refused")
            } else {
                Err(format!(
                    "expected a refusal mentioning one of {any_of:?}{}; got exit {code}: {}",
                    names
                        .as_ref()
                        .map(|n| format!(" and {n}"))
                        .unwrap_or_default(),
                    first_lines(&run.stderr)
                ))
            }
        }
        Expect::RefuseOrDamage { any_of, names } => {
            if refused(any_of, names) {
                Ok("refused")
            } else if code == 0 && damage_shown(row, dir, out, run) {
                Ok("damage")
            } else if row.normal_refusal.is_some() && code != 0 && refused(any_of, &None) {
                Ok("refused")
            } else {
                Err(format!(
                    "expected a refusal mentioning one of {any_of:?}{} or the damage shown \
                     ({:?}); got exit {code}: {}",
                    names
                        .as_ref()
                        .map(|n| format!(" and {n}"))
                        .unwrap_or_default(),
                    row.shows,
                    first_lines(&run.stderr)
                ))
            }
        }
        Expect::Succeed => {
            if ok {
                Ok("ok")
            } else {
                Err(format!(
                    "expected success; got exit {code}: {}",
                    first_lines(&run.stderr)
                ))
            }
        }
        Expect::Damage => {
            let shown = (code == 0 && damage_shown(row, dir, out, run))
                || (ok && row.normal_refusal.is_some());
            if shown && err.contains("warning") {
                Ok("damage")
            } else {
                Err(format!(
                    "expected success with a warning and the damage shown ({:?}); got exit \
                     {code}: {}",
                    row.shows,
                    first_lines(&run.stderr)
                ))
            }
        }
        Expect::Clean => {
            if ok || clean_failure() {
                Ok("clean")
            } else {
                Err(format!(
                    "an unclean failure, exit {code}: {}",
                    first_lines(&run.stderr)
                ))
            }
        }
    }
}

fn first_lines(s: &str) -> String {
    let t: String = s.lines().take(3).collect::<Vec<_>>().join(" | ");
    if t.len() > 400 {
        let cut = (0..=400)
            .rev()
            .find(|&i| t.is_char_boundary(i))
            .unwrap_or(0);
        format!("{}…", &t[..cut])
    } else {
        t
    }
}

struct Cell {
    row: usize,
    class: String,
    verdict: Result<&'static str, String>,
    elapsed: Duration,
}

fn matrix_root() -> PathBuf {
    let root = std::env::temp_dir().join(format!("spelunk-bad-input-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join("logs")).unwrap();
    root
}

fn run_cell(root: &Path, fx: &Fixtures, rows: &[Row], index: usize, r: usize, case: &Case) -> Cell {
    let row = &rows[r];
    let name = format!(
        "{index:04}-{}-{}",
        row.name,
        case.class.replace(['/', '@', '#', '+', '='], "_")
    );
    let dir = root.join(&name);
    std::fs::create_dir_all(&dir).unwrap();
    let setup = (case.make)(&dir);
    let good = dir.join("good.data");
    if row.argv.contains(&"{good}") && !good.exists() {
        write(&good, &fx.good);
    }
    let out = setup.out.clone().unwrap_or_else(|| match row.writes {
        Writes::File(f) => f.to_string(),
        Writes::Prefix(p, _) => p.to_string(),
        Writes::None => String::new(),
    });
    let mut args: Vec<String> = Vec::new();
    for a in row.argv {
        if *a == "--" {
            args.extend(setup.extra.iter().map(|s| s.to_string()));
        }
        args.push(
            a.replace("{in}", &setup.input)
                .replace("{good}", "good.data")
                .replace("{out}", &out),
        );
    }
    if !row.argv.contains(&"--") {
        args.extend(setup.extra.iter().map(|s| s.to_string()));
    }
    let before = snapshot(&dir);
    let elf_before = std::fs::metadata(&fx.elf).map(|m| (m.len(), m.mtime_nsec(), m.mtime()));
    let run = run_limited(&dir, &root.join("logs").join(&name), &args, &[]);
    let mut verdict = judge(row, &setup, &dir, &out, &run);
    let after = snapshot(&dir);
    let changed: Vec<String> = before
        .iter()
        .filter(|(p, f)| after.get(*p) != Some(*f))
        .map(|(p, _)| p.strip_prefix(&dir).unwrap_or(p).display().to_string())
        .collect();
    let elf_after = std::fs::metadata(&fx.elf).map(|m| (m.len(), m.mtime_nsec(), m.mtime()));
    if !changed.is_empty() || elf_before.ok() != elf_after.ok() {
        verdict = Err(format!("changed its inputs: {changed:?}"));
    }
    if verdict.is_ok() {
        let _ = std::fs::remove_dir_all(&dir);
    } else if let Err(e) = &mut verdict {
        *e = format!("{e}\n      spelunk {}", args.join(" "));
    }
    Cell {
        row: r,
        class: case.class.clone(),
        verdict,
        elapsed: run.elapsed,
    }
}

/// The whole matrix, as a table: one line per input class, one column per command.
fn table(rows: &[Row], cells: &[Cell]) -> String {
    let mut classes: Vec<&str> = Vec::new();
    for c in cells {
        if !classes.contains(&c.class.as_str()) {
            classes.push(&c.class);
        }
    }
    let w = classes.iter().map(|c| c.len()).max().unwrap_or(5);
    let mut t = String::new();
    let _ = write!(t, "{:w$}", "class");
    for r in rows {
        let _ = write!(t, " {:>8}", &r.name[..r.name.len().min(8)]);
    }
    t.push('\n');
    for class in classes {
        let _ = write!(t, "{class:w$}");
        for (ri, _) in rows.iter().enumerate() {
            let mark = match cells.iter().find(|c| c.row == ri && c.class == class) {
                None => "",
                Some(c) => match &c.verdict {
                    Ok(v) => v,
                    Err(_) => "FAIL",
                },
            };
            let _ = write!(t, " {mark:>8}");
        }
        t.push('\n');
    }
    t
}

#[test]
fn every_command_survives_every_class_of_bad_input() {
    let root = matrix_root();
    let fx = Arc::new(fixtures(&root));
    let elf_hash = fingerprint(&fx.elf);
    let rows = rows();
    let mut work: Vec<(usize, Case)> = Vec::new();
    for (r, row) in rows.iter().enumerate() {
        for case in cases(&fx, row) {
            work.push((r, case));
        }
    }
    let total = work.len();
    let started = Instant::now();
    let queue = Arc::new(Mutex::new(work.into_iter().enumerate().collect::<Vec<_>>()));
    let cells = Arc::new(Mutex::new(Vec::new()));
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(2, 4);
    std::thread::scope(|s| {
        for _ in 0..threads {
            let (queue, cells, rows, fx, root) = (&queue, &cells, &rows, &fx, &root);
            s.spawn(move || loop {
                let Some((i, (r, case))) = queue.lock().unwrap().pop() else {
                    break;
                };
                let cell = run_cell(root, fx, rows, i, r, &case);
                cells.lock().unwrap().push((i, cell));
            });
        }
    });
    let mut cells: Vec<(usize, Cell)> = std::mem::take(&mut *cells.lock().unwrap());
    cells.sort_by_key(|(i, _)| *i);
    let cells: Vec<Cell> = cells.into_iter().map(|(_, c)| c).collect();
    assert_eq!(cells.len(), total);
    assert_eq!(fingerprint(&fx.elf), elf_hash, "the ELF input was changed");
    let failures: Vec<&Cell> = cells.iter().filter(|c| c.verdict.is_err()).collect();
    let slowest = cells.iter().max_by_key(|c| c.elapsed).unwrap();
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(
        stderr,
        "bad-input matrix: {} commands x {} cells in {:.1} s (slowest {} / {}: {:.1} s)",
        rows.len(),
        total,
        started.elapsed().as_secs_f64(),
        rows[slowest.row].name,
        slowest.class,
        slowest.elapsed.as_secs_f64()
    );
    if !failures.is_empty() {
        let mut msg = table(&rows, &cells);
        let _ = writeln!(msg, "\n{} of {total} cells failed:", failures.len());
        for f in &failures {
            if let Err(e) = &f.verdict {
                let _ = writeln!(msg, "  {} / {}: {e}", rows[f.row].name, f.class);
            }
        }
        let _ = writeln!(
            msg,
            "(cell directories of the failures kept under {})",
            root.display()
        );
        panic!("{msg}");
    }
    let _ = std::fs::remove_dir_all(&root);
}

/// A cell of the recording-policy tests: spelunk run in `dir` under the matrix's limits.
fn policy_run(dir: &Path, name: &str, args: &[&str], lib: Option<&Path>) -> Run {
    let logs = dir.join("..").join(format!("{name}.log"));
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let envs: Vec<(&str, &Path)> = lib
        .map(|l| ("SPELUNK_EMULATOR_LIB", l))
        .into_iter()
        .collect();
    run_limited(dir, &logs, &args, &envs)
}

fn policy_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("spelunk-policy-{}", std::process::id()));
    let d = d.join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// An existing recording pair `NAME` + `NAME.spelunk.json` with recognisable bytes.
fn previous_pair(dir: &Path, name: &str) -> (Fingerprint, Fingerprint) {
    write(&dir.join(name), format!("the previous {name}\n"));
    write(
        &dir.join(format!("{name}.spelunk.json")),
        format!("{{\"previous\": \"{name}\"}}\n"),
    );
    (
        fingerprint(&dir.join(name)).unwrap(),
        fingerprint(&dir.join(format!("{name}.spelunk.json"))).unwrap(),
    )
}

fn exec_script(p: &Path, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    write(p, format!("#!/bin/sh\n{body}\n"));
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The emulator's VALGRIND_LIB directory, when built (else the emulated cells are skipped).
fn emulator_lib() -> Option<PathBuf> {
    let arch = if cfg!(target_arch = "aarch64") {
        "arm64"
    } else {
        "amd64"
    };
    let lib = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../emulator/build/lib");
    if lib.join(format!("spelunk-{arch}-linux")).exists() {
        return Some(lib);
    }
    if std::env::var_os("SPELUNK_REQUIRE_EMULATOR").is_some() {
        panic!("emulator not built: run emulator/build.sh");
    }
    eprintln!("skipped the emulated cells: emulator not built (run emulator/build.sh)");
    None
}

/// Existing recordings under every recording command that can run here: a run that succeeds
/// keeps the previous pair as `FILE.old` byte for byte and says so once; a run whose program
/// fails (exit 3) leaves the previous pair untouched and keeps its own as `FILE.partial`; an
/// unrelated `FILE.emutrace` / `FILE.valgrind.log` survives a run without `--keep-trace`.
#[test]
fn recordings_keep_the_previous_pair_and_failed_runs_touch_nothing() {
    let emulated = emulator_lib();
    let mut commands: Vec<(&str, Vec<&str>)> = vec![
        ("no-spe", vec!["record", "--no-spe"]),
        (
            "no-spe-overhead",
            vec!["record", "--no-spe", "--overhead", "--runs", "1"],
        ),
    ];
    if emulated.is_some() {
        commands.push(("emulate", vec!["record", "--emulate"]));
        commands.push((
            "emulate-overhead",
            vec!["record", "--emulate", "--overhead", "--runs", "1"],
        ));
        commands.push(("topdown", vec!["topdown", "--emulate", "--record"]));
    }
    let mut failures = Vec::new();
    for (name, head) in &commands {
        for (outcome, body, want_code) in [("ok", "exit 0", 0), ("fails", "exit 3", 3)] {
            let dir = policy_dir(&format!("{name}-{outcome}"));
            exec_script(&dir.join("prog"), body);
            let (data, side) = previous_pair(&dir, "r.data");
            write(&dir.join("r.data.emutrace"), "an unrelated trace\n");
            write(&dir.join("r.data.valgrind.log"), "an unrelated log\n");
            let unrelated = [
                fingerprint(&dir.join("r.data.emutrace")),
                fingerprint(&dir.join("r.data.valgrind.log")),
            ];
            let mut args = head.clone();
            if *name == "topdown" {
                args.extend(["r.data", "--", "./prog"]);
            } else {
                args.extend(["-o", "r.data", "--", "./prog"]);
            }
            let run = policy_run(
                &dir,
                &format!("{name}-{outcome}"),
                &args,
                emulated.as_deref(),
            );
            let cell = format!("{name} / {outcome}: spelunk {}", args.join(" "));
            let mut problems = Vec::new();
            if run.code != Some(want_code) {
                problems.push(format!("exit {:?}, want {want_code}", run.code));
            }
            let unrelated_after = [
                fingerprint(&dir.join("r.data.emutrace")),
                fingerprint(&dir.join("r.data.valgrind.log")),
            ];
            if unrelated_after != unrelated {
                problems.push("an unrelated FILE.emutrace / FILE.valgrind.log changed".into());
            }
            let said = run
                .stderr
                .matches("kept the previous recording as r.data.old")
                .count();
            if outcome == "ok" {
                if fingerprint(&dir.join("r.data.old")).as_ref() != Some(&data)
                    || fingerprint(&dir.join("r.data.spelunk.json.old")).as_ref() != Some(&side)
                {
                    problems.push("the previous pair is not r.data.old, byte for byte".into());
                }
                if said != 1 {
                    problems.push(format!("said {said} time(s) that r.data.old was kept"));
                }
                if !dir.join("r.data.spelunk.json").is_file() {
                    problems.push("no new sidecar".into());
                }
            } else {
                if fingerprint(&dir.join("r.data")).as_ref() != Some(&data)
                    || fingerprint(&dir.join("r.data.spelunk.json")).as_ref() != Some(&side)
                {
                    problems.push("a failed run changed the previous pair".into());
                }
                if dir.join("r.data.old").exists() {
                    problems.push("a failed run made r.data.old".into());
                }
                if !run.stderr.contains("left as it was") || !run.stderr.contains("r.data.partial")
                {
                    problems.push("the failed run's note is missing".into());
                }
            }
            let stray = hidden_files(&dir);
            if !stray.is_empty() {
                problems.push(format!("temporary files left: {stray:?}"));
            }
            if problems.is_empty() {
                let _ = std::fs::remove_dir_all(&dir);
            } else {
                failures.push(format!(
                    "{cell}: {}\n      {}",
                    problems.join("; "),
                    first_lines(&run.stderr)
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// export writes only inside the dataset it was given: a `host=` partition planted as a link
/// elsewhere is refused with nothing written there, and a FIFO marker is refused, not waited
/// on.
#[test]
fn export_never_leaves_its_dataset_and_never_waits_on_a_marker() {
    let root = policy_dir("export");
    spelunk_testkit::SynthRecording {
        cpus: 1,
        records_per_cpu: 50,
        chunk_bytes: 2048,
        ..Default::default()
    }
    .write(&root.join("r.data"))
    .unwrap();
    // A partition directory that is a link out of the dataset.
    std::fs::create_dir_all(root.join("elsewhere")).unwrap();
    std::fs::create_dir_all(root.join("ds")).unwrap();
    std::os::unix::fs::symlink("../elsewhere", root.join("ds/host=evil")).unwrap();
    let before = snapshot(&root.join("elsewhere"));
    let run = policy_run(
        &root,
        "export-link",
        &[
            "export",
            "r.data",
            "--dataset",
            "ds",
            "--host",
            "evil",
            "--run",
            "1",
            "-q",
        ],
        None,
    );
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(
        run.stderr.contains("symbolic link") && run.stderr.contains("host=evil"),
        "{}",
        run.stderr
    );
    assert_eq!(snapshot(&root.join("elsewhere")), before);
    assert!(snapshot(&root.join("elsewhere")).is_empty());
    // A FIFO marker: refused at once.
    std::fs::create_dir_all(root.join("ds2")).unwrap();
    let marker = std::fs::read_dir(root.join("ds"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .find(|n| !n.to_string_lossy().starts_with("host="))
        .expect("the dataset marker");
    mkfifo(&root.join("ds2").join(&marker));
    let run = policy_run(
        &root,
        "export-fifo",
        &[
            "export",
            "r.data",
            "--dataset",
            "ds2",
            "--host",
            "h",
            "--run",
            "1",
            "-q",
        ],
        None,
    );
    assert!(!run.timed_out, "export waited on a FIFO marker");
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(run.stderr.contains("FIFO"), "{}", run.stderr);
    // A recording cut in the middle exports what it has, its losses in `_run.json`.
    let whole = std::fs::read(root.join("r.data")).unwrap();
    write(&root.join("cut.data"), &whole[..whole.len() * 2 / 3]);
    let run = policy_run(
        &root,
        "export-cut",
        &[
            "export",
            "cut.data",
            "--dataset",
            "ds3",
            "--host",
            "h",
            "--run",
            "cut",
            "-q",
        ],
        None,
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let meta: Value =
        serde_json::from_slice(&std::fs::read(root.join("ds3/host=h/run=cut/_run.json")).unwrap())
            .unwrap();
    let problems = meta["losses"]["problems"].as_array().unwrap();
    assert!(
        problems.iter().any(|p| p.as_str().unwrap().contains("cut")),
        "{meta}"
    );
    // A page written through a link to a regular file lands at the target; the link stays.
    write(&root.join("target.html"), "old page\n");
    std::os::unix::fs::symlink("target.html", root.join("page.html")).unwrap();
    let run = policy_run(
        &root,
        "html-link",
        &["report", "r.data", "--html", "page.html"],
        None,
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(std::fs::symlink_metadata(root.join("page.html"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(std::fs::read_to_string(root.join("target.html"))
        .unwrap()
        .contains("<html"));
    let _ = std::fs::remove_dir_all(&root);
}

/// SIGINT to spelunk while `record --emulate` runs a long loop: the program and Valgrind are
/// stopped (no process left), what was recorded is kept as FILE.partial and said, spelunk
/// exits 130, and no temporary file stays (the private trace, its per-process files, vgdb
/// pipes).
#[test]
fn sigint_mid_record_stops_the_program_and_keeps_the_partial_recording() {
    let Some(lib) = emulator_lib() else {
        return;
    };
    let dir = policy_dir("sigint");
    exec_script(
        &dir.join("loop"),
        "i=0; while [ $i -lt 100000000 ]; do i=$((i+1)); done",
    );
    let vgdb_before = vgdb_pipes();
    let child = Command::new(env!("CARGO_BIN_EXE_spelunk"))
        .current_dir(&dir)
        .env("SPELUNK_EMULATOR_LIB", &lib)
        .args(["record", "--emulate", "-o", "s.data", "--", "./loop"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let spelunk_pid = child.id() as i32;
    // The recording has started when the run's private trace exists.
    let started = Instant::now();
    let recording = || {
        std::fs::read_dir(&dir).unwrap().flatten().any(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.starts_with(".s.data.") && n.ends_with(".emutrace")
        })
    };
    while !recording() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the recording did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    let children = children_of(spelunk_pid);
    assert!(!children.is_empty(), "no child process under spelunk");
    // SAFETY: signalling the process this test started.
    assert_eq!(unsafe { libc::kill(spelunk_pid, libc::SIGINT) }, 0);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(
        err.contains("interrupted by SIGINT")
            && err.contains("kept what was recorded as s.data.partial"),
        "{err}"
    );
    for pid in &children {
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "process {pid} outlived spelunk"
        );
    }
    assert!(dir.join("s.data.partial").is_file(), "{err}");
    assert!(dir.join("s.data.partial.spelunk.json").is_file(), "{err}");
    assert!(!dir.join("s.data").exists());
    let stray = hidden_files(&dir);
    assert!(stray.is_empty(), "temporary files left: {stray:?}");
    assert_eq!(vgdb_pipes(), vgdb_before, "vgdb pipes left in the temp dir");
    let report = Command::new(env!("CARGO_BIN_EXE_spelunk"))
        .current_dir(&dir)
        .args(["report", "s.data.partial"])
        .output()
        .unwrap();
    assert!(
        report.status.success(),
        "the partial recording reads: {}",
        String::from_utf8_lossy(&report.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The hidden files in `dir`: a recording's private names (`.FILE.PID.N.rec...`) and
/// `.part` files, which must not outlive a run.
fn hidden_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect()
}

/// The processes whose parent is `pid` (from /proc).
fn children_of(pid: i32) -> Vec<i32> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        // pid (comm) state ppid ...: the comm may hold spaces, so split after the last ')'.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|s| s.parse::<i32>().ok());
        if ppid == Some(pid) {
            v.push(p);
        }
    }
    v
}

fn vgdb_pipes() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(std::env::temp_dir())
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("vgdb-pipe"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}
