//! `spelunk bench`'s flow: read the benchmarks (`spelunk-bench.toml` or one command), run each
//! under the emulator exactly as `spelunk record --emulate` does (into a private directory),
//! turn the recording into a [`BenchmarkRun`] (the emulator's counter totals and the samples
//! attributed per function, line and object), and read, compare and write baselines. The
//! model and the comparison are spelunk_analysis::bench; docs/bench.md describes the whole.

use crate::recording::{Recording, RecordingError};
use spelunk_analysis::bench::{
    metric_values, Baseline, BenchmarkRun, Environment, Metric, ThresholdOverride, Thresholds,
    BENCH_SCHEMA,
};
use spelunk_analysis::profile::Filter;
use spelunk_perf::sidecar::SidecarUse;
use spelunk_record::emulator::{check_extra_options, EmulatedMachine};
use spelunk_record::session::{EmulatedRecording, Output};
use spelunk_record::{unsupported, EmulatorInstall, EmulatorOptions};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The configuration file looked for in the current directory.
pub const CONFIG_FILE: &str = "spelunk-bench.toml";

/// The SPE sampling interval of a benchmark run unless configured (operations; as `spelunk
/// record`'s default).
pub const DEFAULT_PERIOD_OPS: u64 = 1024;

/// Errors of `spelunk bench`; the messages are the ones printed.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("{path}: {message}")]
    Config { path: String, message: String },
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not a spelunk bench baseline ({message})")]
    Baseline { path: String, message: String },
    #[error("benchmark {name}: {message}")]
    Run { name: String, message: String },
    #[error("benchmark {name}: {source}")]
    Recording {
        name: String,
        #[source]
        source: Box<RecordingError>,
    },
}

/// One benchmark to run.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchSpec {
    pub name: String,
    /// The program and its arguments.
    pub command: Vec<String>,
    /// The program's working directory (spelunk's when None).
    pub cwd: Option<PathBuf>,
    pub platform: Option<String>,
    pub cpu_model: Option<String>,
    pub emulator_opts: Vec<String>,
    pub period_ops: u64,
    /// This benchmark's thresholds, over the configuration's.
    pub thresholds: BTreeMap<Metric, ThresholdOverride>,
}

impl BenchSpec {
    /// A benchmark from the command line: named after the program's file name.
    pub fn from_command(command: Vec<String>) -> BenchSpec {
        let name = command
            .first()
            .map(|p| spelunk_analysis::symbolize::short_name(p).to_string())
            .unwrap_or_default();
        BenchSpec {
            name,
            command,
            cwd: None,
            platform: None,
            cpu_model: None,
            emulator_opts: Vec::new(),
            period_ops: DEFAULT_PERIOD_OPS,
            thresholds: BTreeMap::new(),
        }
    }
}

/// A `spelunk-bench.toml`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BenchConfig {
    /// Thresholds for every benchmark, over the defaults.
    pub thresholds: BTreeMap<Metric, ThresholdOverride>,
    pub benchmarks: Vec<BenchSpec>,
}

impl BenchConfig {
    /// Each benchmark's thresholds: the defaults, the file's, the benchmark's.
    pub fn thresholds(&self) -> BTreeMap<String, Thresholds> {
        let global = Thresholds::default().with(&self.thresholds);
        self.benchmarks
            .iter()
            .map(|b| (b.name.clone(), global.with(&b.thresholds)))
            .collect()
    }

    /// Reads `path`; relative `cwd`s are taken from the file's directory.
    pub fn read(path: &Path) -> Result<BenchConfig, BenchError> {
        let text = std::fs::read_to_string(path).map_err(|source| BenchError::Io {
            path: path.display().to_string(),
            source,
        })?;
        let dir = path.parent().unwrap_or(Path::new(""));
        BenchConfig::parse(&text, dir).map_err(|message| BenchError::Config {
            path: path.display().to_string(),
            message,
        })
    }

    /// Parses a configuration (docs/bench.md, "Configuration").
    pub fn parse(text: &str, dir: &Path) -> Result<BenchConfig, String> {
        let doc: toml_edit::DocumentMut = text.parse().map_err(|e| format!("{e}"))?;
        let mut config = BenchConfig::default();
        for (key, item) in doc.iter() {
            match key {
                "thresholds" => config.thresholds = thresholds(item, "thresholds")?,
                "benchmark" => {
                    let list = item.as_array_of_tables().ok_or(
                        "`benchmark` must be an array of tables: write each as [[benchmark]]",
                    )?;
                    for (i, t) in list.iter().enumerate() {
                        config.benchmarks.push(benchmark(t, i, dir)?);
                    }
                }
                other => {
                    return Err(format!(
                        "unknown key `{other}` (expected [thresholds] or [[benchmark]])"
                    ))
                }
            }
        }
        if config.benchmarks.is_empty() {
            return Err("no [[benchmark]] in the file".into());
        }
        let mut names: Vec<&str> = config.benchmarks.iter().map(|b| b.name.as_str()).collect();
        names.sort();
        if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
            return Err(format!("two benchmarks are named {}", w[0]));
        }
        Ok(config)
    }
}

fn string(item: &toml_edit::Item, at: &str) -> Result<String, String> {
    item.as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("{at}: expected a string"))
}

fn strings(item: &toml_edit::Item, at: &str) -> Result<Vec<String>, String> {
    let a = item
        .as_array()
        .ok_or_else(|| format!("{at}: expected an array of strings"))?;
    a.iter()
        .map(|v| {
            v.as_str()
                .map(str::to_string)
                .ok_or_else(|| format!("{at}: expected an array of strings"))
        })
        .collect()
}

fn number(v: &toml_edit::Item, at: &str) -> Result<f64, String> {
    v.as_float()
        .or_else(|| v.as_integer().map(|i| i as f64))
        .filter(|x| x.is_finite() && *x >= 0.0)
        .ok_or_else(|| format!("{at}: expected a number ≥ 0"))
}

/// `{ metric = { pct = P, floor = F }, ... }`.
fn thresholds(
    item: &toml_edit::Item,
    at: &str,
) -> Result<BTreeMap<Metric, ThresholdOverride>, String> {
    let t = item
        .as_table_like()
        .ok_or_else(|| format!("{at}: expected a table of metrics"))?;
    let mut out = BTreeMap::new();
    for (name, v) in t.iter() {
        let at = format!("{at}.{name}");
        let metric = Metric::from_name(name).ok_or_else(|| {
            format!(
                "{at}: no such metric; use one of: {}",
                spelunk_analysis::bench::METRICS
                    .iter()
                    .map(|m| m.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })?;
        let fields = v
            .as_table_like()
            .ok_or_else(|| format!("{at}: expected {{ pct = P, floor = F }}"))?;
        let mut o = ThresholdOverride::default();
        for (k, x) in fields.iter() {
            match k {
                "pct" => o.pct = Some(number(x, &format!("{at}.pct"))?),
                "floor" => o.floor = Some(number(x, &format!("{at}.floor"))?),
                _ => return Err(format!("{at}.{k}: expected pct or floor")),
            }
        }
        out.insert(metric, o);
    }
    Ok(out)
}

fn benchmark(t: &toml_edit::Table, i: usize, dir: &Path) -> Result<BenchSpec, String> {
    let at = format!("benchmark {}", i + 1);
    let mut name = None;
    let mut command = None;
    let mut args = Vec::new();
    let mut spec = BenchSpec::from_command(Vec::new());
    let mut cwd = None;
    for (k, v) in t.iter() {
        let here = format!("{at}.{k}");
        match k {
            "name" => name = Some(string(v, &here)?),
            "command" => command = Some(string(v, &here)?),
            "args" => args = strings(v, &here)?,
            "cwd" => cwd = Some(string(v, &here)?),
            "platform" => spec.platform = Some(string(v, &here)?),
            "cpu_model" => spec.cpu_model = Some(string(v, &here)?),
            "emulator_opts" => spec.emulator_opts = strings(v, &here)?,
            "period" => {
                spec.period_ops = v
                    .as_integer()
                    .and_then(|p| u64::try_from(p).ok())
                    .ok_or_else(|| format!("{here}: expected a whole number of operations"))?
            }
            "thresholds" => spec.thresholds = thresholds(v, &here)?,
            _ => {
                return Err(format!(
                    "{here}: unknown key (expected name, command, args, cwd, platform, \
                     cpu_model, emulator_opts, period, thresholds)"
                ))
            }
        }
    }
    let command = command.ok_or_else(|| format!("{at}: no command"))?;
    spec.name = name.ok_or_else(|| format!("{at}: no name"))?;
    spec.command = std::iter::once(command).chain(args).collect();
    spec.cwd = Some(dir.join(cwd.unwrap_or_default()));
    Ok(spec)
}

/// The configuration in the current directory, when there is one.
pub fn find_config() -> Option<PathBuf> {
    let p = PathBuf::from(CONFIG_FILE);
    p.is_file().then_some(p)
}

/// Reads a baseline file.
pub fn read_baseline(path: &Path) -> Result<Baseline, BenchError> {
    let text = std::fs::read_to_string(path).map_err(|source| BenchError::Io {
        path: path.display().to_string(),
        source,
    })?;
    let b: Baseline = serde_json::from_str(&text).map_err(|e| BenchError::Baseline {
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    if b.schema != BENCH_SCHEMA {
        return Err(BenchError::Baseline {
            path: path.display().to_string(),
            message: format!("schema {}, expected {BENCH_SCHEMA}", b.schema),
        });
    }
    Ok(b)
}

/// Writes a baseline file (pretty JSON, so that a review shows what changed).
pub fn write_baseline(path: &Path, b: &Baseline) -> Result<(), BenchError> {
    let io = |source| BenchError::Io {
        path: path.display().to_string(),
        source,
    };
    let text = serde_json::to_string_pretty(b).map_err(|e| io(std::io::Error::other(e)))?;
    std::fs::write(path, text + "\n").map_err(io)
}

/// The program `spec` runs, as a path from spelunk's directory: a relative path with a
/// directory part is the benchmark's `cwd`'s.
fn program(spec: &BenchSpec) -> Option<PathBuf> {
    let argv0 = spec.command.first()?;
    let p = Path::new(argv0);
    match &spec.cwd {
        Some(dir) if p.is_relative() && p.components().count() > 1 => Some(dir.join(p)),
        _ => spelunk_record::flow::program_path(p.as_os_str()),
    }
}

/// The program's GNU build-id (.note.gnu.build-id), hex: the recorders' reader.
fn build_id(path: &Path) -> Option<String> {
    spelunk_perf::buildid::read_build_id(path)
        .ok()
        .flatten()
        .map(|id| id.hex())
}

/// The C library's version spelunk runs with (the emulated program's, on the same machine).
fn libc_version() -> Option<String> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: gnu_get_libc_version returns a static NUL-terminated string.
        let v = unsafe { std::ffi::CStr::from_ptr(libc::gnu_get_libc_version()) };
        Some(format!("glibc {}", v.to_string_lossy()))
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        None
    }
}

/// Runs `spec` under the emulator and returns its run. `say` gets the progress lines.
pub fn run_benchmark(
    spec: &BenchSpec,
    say: &mut dyn FnMut(&str),
) -> Result<BenchmarkRun, BenchError> {
    let fail = |message: String| BenchError::Run {
        name: spec.name.clone(),
        message,
    };
    if spec.command.is_empty() {
        return Err(fail("no command to run".into()));
    }
    check_extra_options(&spec.emulator_opts).map_err(|e| fail(e.to_string()))?;
    let machine = EmulatedMachine::new(spec.platform.as_deref(), spec.cpu_model.as_deref())
        .map_err(|e| fail(e.to_string()))?;
    let prog = program(spec);
    let check_path: OsString = prog
        .clone()
        .map_or_else(|| OsString::from(&spec.command[0]), PathBuf::into_os_string);
    let check =
        unsupported::before_emulated_run(&check_path, "spelunk bench", false, say).map_err(fail)?;
    let mut install = EmulatorInstall::locate().map_err(|e| fail(e.to_string()))?;
    if spec.cwd.is_some() {
        // The program runs elsewhere: the tool's directory must not depend on where.
        install.lib_dir = std::path::absolute(&install.lib_dir).unwrap_or(install.lib_dir);
    }
    let options = EmulatorOptions {
        period_ops: spec.period_ops,
        machine: machine.clone(),
        extra: spec.emulator_opts.clone(),
        cwd: spec.cwd.clone(),
        stdout_to_stderr: true,
        ..EmulatorOptions::default()
    };
    say(&format!(
        "{}: running {} under {}",
        spec.name,
        spec.command.join(" "),
        machine.describe()
    ));
    let command: Vec<OsString> = spec.command.iter().map(OsString::from).collect();
    let cmdline = vec!["spelunk".to_string(), "bench".to_string()];
    let mut valgrind_lines = Vec::new();
    let rec = EmulatedRecording::run(
        &install,
        &options,
        Output::Scratch,
        &command,
        &cmdline,
        |l| {
            say(&format!("valgrind: {l}"));
            valgrind_lines.push(l.to_owned());
        },
    )
    .map_err(|e| {
        fail(crate::recording::error_line(crate::recording::error_chain(
            &e,
        )))
    })?;
    unsupported::after_emulated_run(rec.exit, &valgrind_lines, &check, say);
    if !rec.exit.success() {
        // The counts of a run that failed are not the benchmark's: an error, not a baseline.
        return Err(fail(format!(
            "{} exited with {}",
            spec.command[0], rec.exit
        )));
    }
    for w in &rec.conversion.warnings {
        say(&format!("warning: {w}"));
    }
    let recording = |source| BenchError::Recording {
        name: spec.name.clone(),
        source: Box::new(source),
    };
    let r =
        Recording::open(&rec.conversion.perf_data, None, SidecarUse::Read).map_err(recording)?;
    let mut symbolizer = r.symbolizer(None, None);
    let report = r
        .every_row_report(Filter::default(), None, &mut symbolizer, false)
        .map_err(recording)?;
    let empty = BTreeMap::new();
    let sidecar = r.ctx.sidecar.as_deref();
    let counters = sidecar.map_or(&empty, |s| &s.counters.totals);
    let truth = sidecar
        .and_then(|s| s.truth.as_ref())
        .map_or(&empty, |t| &t.totals);
    let environment = Environment {
        spelunk_version: env!("CARGO_PKG_VERSION").to_string(),
        emulator_core: machine.core().to_string(),
        emulator_platform: machine.platform.clone(),
        emulator_options: spec.emulator_opts.clone(),
        period_ops: spec.period_ops,
        libc_version: libc_version(),
        host_arch: std::env::consts::ARCH.to_string(),
        program_build_id: prog.as_deref().and_then(build_id),
    };
    Ok(BenchmarkRun::from_report(
        spec.name.clone(),
        spec.command.clone(),
        environment,
        rec.exit.code(),
        &report,
        metric_values(counters, truth),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_configuration_gives_benchmarks_and_their_thresholds() {
        let text = r#"
[thresholds]
cycles = { pct = 3 }

[[benchmark]]
name = "stride"
command = "build/stride"
args = ["1000", "64"]
cwd = "work"
platform = "graviton2"
period = 2048
[benchmark.thresholds]
l1d_refills = { pct = 10, floor = 50 }

[[benchmark]]
name = "plain"
command = "true"
"#;
        let c = BenchConfig::parse(text, Path::new("repo")).unwrap();
        assert_eq!(c.benchmarks.len(), 2);
        let s = &c.benchmarks[0];
        assert_eq!(s.command, ["build/stride", "1000", "64"]);
        assert_eq!(s.cwd.as_deref(), Some(Path::new("repo/work")));
        assert_eq!(s.platform.as_deref(), Some("graviton2"));
        assert_eq!(s.period_ops, 2048);
        assert_eq!(c.benchmarks[1].period_ops, DEFAULT_PERIOD_OPS);
        assert_eq!(c.benchmarks[1].cwd.as_deref(), Some(Path::new("repo/")));
        let t = c.thresholds();
        let stride = &t["stride"].0;
        assert_eq!(stride[&Metric::Cycles].pct, 3.0);
        assert_eq!(
            stride[&Metric::Cycles].floor,
            Metric::Cycles.default_threshold().floor
        );
        assert_eq!(stride[&Metric::L1dRefills].pct, 10.0);
        assert_eq!(stride[&Metric::L1dRefills].floor, 50.0);
        assert_eq!(t["plain"].0[&Metric::L1dRefills].pct, 5.0);
    }

    #[test]
    fn configuration_mistakes_are_named() {
        let e = |t: &str| BenchConfig::parse(t, Path::new("")).unwrap_err();
        assert!(e("").contains("no [[benchmark]]"));
        assert!(e("[[benchmark]]\nname = \"a\"\n").contains("no command"));
        assert!(
            e("[[benchmark]]\nname = \"a\"\ncommand = \"x\"\ncolour = 1\n")
                .contains("benchmark 1.colour: unknown key")
        );
        assert!(e("[thresholds]\nl4_refills = { pct = 1 }\n").contains("no such metric"));
        assert!(
            e("[[benchmark]]\nname = \"a\"\ncommand = \"x\"\n[[benchmark]]\nname = \"a\"\ncommand = \"y\"\n")
                .contains("two benchmarks are named a")
        );
    }
}
