//! `spelunk bench`: a memory-behaviour gate for CI — run benchmarks under the emulator, save a
//! baseline, compare with it (exit 3 on a regression, each explained). Wiring only: the flow is
//! spelunk_engine::bench, the comparison spelunk_analysis::bench, the outputs
//! spelunk_report::bench_text.

use anyhow::Context;
use clap::Args;
use spelunk_analysis::bench::{compare, Baseline, BenchStatus, CompareOptions};
use spelunk_engine::bench::{self as flow, BenchConfig, BenchSpec};
use spelunk_report::bench_text;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Exit status on a regression (0: within thresholds; 2: an error or a refused environment).
const EXIT_REGRESSION: u8 = 3;
const EXIT_ERROR: u8 = 2;

/// Gate memory behaviour in CI: run benchmarks under the emulator and compare with a baseline.
///
/// Each benchmark runs under spelunk's emulator as `spelunk record --emulate` would (a private
/// directory, removed afterwards): its exact counter totals — cycles, instructions, IPC,
/// L1D/L2/LLC refills, DRAM bytes, TLB walks, branch mispredicts, back-end stall share — and its
/// SPE samples attributed per function, source line and data object. --save writes them as a
/// baseline (JSON, schema spelunk-bench/1); --compare runs again and compares metric by metric:
/// a change past both a threshold in percent and an absolute floor is a regression (exit 3) or
/// an improvement (listed). Every regression is explained by the functions, lines and objects
/// whose samples moved most and the shift of their loads' data sources. A changed environment
/// (spelunk version, emulated core or platform, emulator options, interval, C library) is
/// refused (exit 2) unless --allow-env-change. The benchmarks are the command after `--`, or
/// every [[benchmark]] of spelunk-bench.toml (current directory, or --config FILE), or, for
/// --compare, the baseline's own commands. docs/bench.md has the metrics, thresholds and rules.
#[derive(Args, Debug)]
#[command(after_long_help = "\
Examples:
  spelunk bench --save base.json -- ./build/parse input.txt
  spelunk bench --compare base.json -- ./build/parse input.txt      # exit 3 on a regression
  spelunk bench --compare base.json --github --junit junit.xml       # spelunk-bench.toml's benchmarks
  spelunk bench --compare base.json --markdown \"$GITHUB_STEP_SUMMARY\"
  spelunk bench --compare base.json --accept parse                   # an intended change

Exit status: 0 within thresholds (or accepted), 3 on a regression, 2 on an error or a refused
environment change.")]
#[command(group(clap::ArgGroup::new("mode").required(true).args(["save", "compare"])))]
pub struct BenchArgs {
    /// Run the benchmarks and write their baseline to FILE
    #[arg(long, value_name = "FILE")]
    pub save: Option<PathBuf>,

    /// Run the benchmarks and compare them with the baseline FILE
    #[arg(long, value_name = "FILE")]
    pub compare: Option<PathBuf>,

    /// The benchmarks' configuration [default: spelunk-bench.toml in the current directory]
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// With --compare: rewrite the baseline with every new run (an intended change)
    #[arg(long, requires = "compare")]
    pub update: bool,

    /// With --compare: rewrite the baseline with this benchmark's new run (repeatable)
    #[arg(long, value_name = "NAME", requires = "compare")]
    pub accept: Vec<String>,

    /// Compare even though the environment changed (spelunk version, emulated core or
    /// platform, emulator options, sampling interval, C library)
    #[arg(long)]
    pub allow_env_change: bool,

    /// Print the comparison as JSON (schema spelunk-bench-compare/1) instead of the table
    #[arg(long, requires = "compare")]
    pub json: bool,

    /// Also write JUnit XML: one test case per benchmark × metric
    #[arg(long, value_name = "FILE", requires = "compare")]
    pub junit: Option<PathBuf>,

    /// Also print GitHub Actions annotations (::error at each regression's source line,
    /// relative to the current directory, the repository root)
    #[arg(long, requires = "compare")]
    pub github: bool,

    /// Also write a Markdown summary (for $GITHUB_STEP_SUMMARY or a PR comment), silent about
    /// unchanged benchmarks
    #[arg(long, value_name = "FILE", requires = "compare")]
    pub markdown: Option<PathBuf>,

    /// Functions listed per regression
    #[arg(long, default_value_t = 3, value_name = "N", value_parser = crate::common::values::rows)]
    pub causes: usize,

    /// The benchmark's name, for a command after `--` [default: the program's file name, or
    /// with --compare the baseline's only benchmark]
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,

    /// For a command after `--`: the emulated platform preset (as record --platform)
    #[arg(long, value_name = "NAME")]
    pub platform: Option<String>,

    /// For a command after `--`: the emulated core (as record --cpu-model)
    #[arg(long = "cpu-model", value_name = "NAME")]
    pub cpu_model: Option<String>,

    /// For a command after `--`: the SPE sampling interval in operations
    #[arg(short = 'c', long = "period", value_name = "OPS", value_parser = crate::common::values::record_period)]
    pub period: Option<u64>,

    /// For a command after `--`: a further emulator option (repeatable)
    #[arg(long = "emulator-opt", value_name = "OPT", allow_hyphen_values = true)]
    pub emulator_opts: Vec<String>,

    /// The program and its arguments (after --)
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// The benchmarks to run and their thresholds.
fn benchmarks(
    args: &BenchArgs,
    baseline: Option<&Baseline>,
) -> anyhow::Result<(Vec<BenchSpec>, BenchConfig)> {
    let config_path = args.config.clone().or_else(|| {
        if args.command.is_empty() {
            flow::find_config()
        } else {
            None
        }
    });
    let config = match &config_path {
        Some(p) => BenchConfig::read(p)?,
        None => BenchConfig::default(),
    };
    if !args.command.is_empty() {
        let mut spec = BenchSpec::from_command(args.command.clone());
        let only = baseline.filter(|b| b.benchmarks.len() == 1);
        if let Some(n) = args.name.clone() {
            spec.name = n;
        } else if let Some(b) = only {
            spec.name = b.benchmarks[0].name.clone();
        }
        spec.platform = args.platform.clone();
        spec.cpu_model = args.cpu_model.clone();
        spec.emulator_opts = args.emulator_opts.clone();
        if let Some(p) = args.period {
            spec.period_ops = p;
        }
        return Ok((vec![spec], config));
    }
    if config_path.is_some() {
        let specs = config.benchmarks.clone();
        return Ok((specs, config));
    }
    match baseline {
        Some(b) => Ok((b.benchmarks.iter().map(rerun).collect(), config)),
        None => anyhow::bail!(
            "nothing to run: give the command after `--`, or write a {} (or --config FILE)",
            flow::CONFIG_FILE
        ),
    }
}

/// A baseline's benchmark run again as it was (its command, in the current directory).
fn rerun(b: &spelunk_analysis::bench::BenchmarkRun) -> BenchSpec {
    BenchSpec {
        name: b.name.clone(),
        platform: b.environment.emulator_platform.clone(),
        cpu_model: Some(b.environment.emulator_core.clone()),
        emulator_opts: b.environment.emulator_options.clone(),
        period_ops: b.environment.period_ops,
        ..BenchSpec::from_command(b.command.clone())
    }
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

fn run_all(specs: &[BenchSpec]) -> anyhow::Result<Vec<spelunk_analysis::bench::BenchmarkRun>> {
    let mut say = |l: &str| eprintln!("spelunk bench: {l}");
    let mut runs = Vec::new();
    for s in specs {
        runs.push(flow::run_benchmark(s, &mut say)?);
    }
    Ok(runs)
}

fn bench(args: &BenchArgs) -> anyhow::Result<u8> {
    if let Some(path) = &args.save {
        let (specs, _) = benchmarks(args, None)?;
        let runs = run_all(&specs)?;
        flow::write_baseline(path, &Baseline::new(runs.clone()))?;
        print!("{}", bench_text::saved(path, &runs));
        return Ok(0);
    }
    let Some(path) = &args.compare else {
        anyhow::bail!("give --save FILE or --compare FILE");
    };
    let mut baseline = flow::read_baseline(path)?;
    let (specs, config) = benchmarks(args, Some(&baseline))?;
    let runs = run_all(&specs)?;
    let mut thresholds = config.thresholds();
    let global = spelunk_analysis::bench::Thresholds::default().with(&config.thresholds);
    for s in &specs {
        thresholds
            .entry(s.name.clone())
            .or_insert_with(|| global.with(&s.thresholds));
    }
    let opts = CompareOptions {
        allow_env_change: args.allow_env_change,
        thresholds,
        causes: args.causes,
    };
    let mut c = compare(&baseline, &path.display().to_string(), &runs, &opts);
    for a in &args.accept {
        if !c.benchmarks.iter().any(|b| &b.name == a) {
            anyhow::bail!("--accept {a}: no benchmark of that name was run");
        }
    }
    let accepted: Vec<String> = c
        .benchmarks
        .iter()
        .filter(|b| b.status != BenchStatus::Refused && b.status != BenchStatus::Missing)
        .filter(|b| args.update || args.accept.contains(&b.name))
        .map(|b| b.name.clone())
        .collect();
    if !accepted.is_empty() {
        baseline.accept(&runs, Some(&accepted));
        flow::write_baseline(path, &baseline)?;
        for b in c.benchmarks.iter_mut() {
            b.accepted = accepted.contains(&b.name);
        }
        eprintln!(
            "spelunk bench: rewrote {} with the new runs of {}",
            path.display(),
            accepted.join(", ")
        );
    }
    let root = std::env::current_dir().context("the current directory")?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&c).context("serialising the comparison")?
        );
    } else {
        print!("{}", bench_text::render(&c, &root));
    }
    if args.github {
        print!("{}", bench_text::github(&c, &root));
    }
    if let Some(p) = &args.junit {
        write(p, &bench_text::junit(&c))?;
    }
    if let Some(p) = &args.markdown {
        write(p, &bench_text::markdown(&c))?;
    }
    Ok(if c.refused() {
        EXIT_ERROR
    } else if c.regressed() {
        EXIT_REGRESSION
    } else {
        0
    })
}

pub fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    match bench(&args) {
        Ok(code) => Ok(ExitCode::from(code)),
        Err(e) => {
            eprintln!(
                "spelunk bench: error: {}",
                spelunk_engine::recording::error_line(e.chain())
            );
            Ok(ExitCode::from(EXIT_ERROR))
        }
    }
}
