//! Writes a synthetic Arm SPE recording (perf.data) for benchmarks and demos.
//!
//! spelunk-synth OUT [--cpus N] [--records-per-cpu N | --records N | --bytes SIZE]
//!               [--layout n1|compact] [--chunk BYTES] [--seed S] [--no-context]
//!               [--threads N] [--mappings N] [--kernel-symbols N]
//!               [--phases N] [--objects N] [--counter-snapshots N]
//!
//! The content is generated (spelunk_spe::synth), not measured; the file says so in its
//! CPUDESC header ("synthetic Neoverse N1 recording"). `--records N` is the total over the
//! CPUs. `--kernel-symbols N` also writes `OUT.kallsyms` (for `spelunk report --kallsyms`);
//! `--phases`, `--objects` and `--counter-snapshots` write the sidecar `OUT.spelunk.json`
//! (scale benchmarks: scripts/bench-scale.sh).

use spelunk_spe::RecordLayout;
use spelunk_testkit::SynthRecording;
use std::process::ExitCode;

fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mult) = match s.chars().last()? {
        'k' | 'K' => (&s[..s.len() - 1], 1u64 << 10),
        'm' | 'M' => (&s[..s.len() - 1], 1 << 20),
        'g' | 'G' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<u64>().ok().map(|n| n * mult)
}

/// A count option's value.
fn count<T: std::str::FromStr>(v: &str, name: &str) -> Result<T, String>
where
    T::Err: std::fmt::Display,
{
    v.parse().map_err(|e| format!("{name}: {e}"))
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let mut out = None;
    let mut spec = SynthRecording::default();
    let mut bytes = None;
    let mut total_records = None;
    let usage = "usage: spelunk-synth OUT [--cpus N] [--records-per-cpu N | --records N | --bytes SIZE] [--layout n1|compact] [--chunk BYTES] [--seed S] [--no-context] [--threads N] [--mappings N] [--kernel-symbols N] [--phases N] [--objects N] [--counter-snapshots N]";
    while let Some(a) = args.next() {
        let mut val = |name: &str| args.next().ok_or_else(|| format!("{name} needs a value"));
        let r: Result<(), String> = (|| {
            match a.as_str() {
                "--cpus" => {
                    spec.cpus = val("--cpus")?.parse().map_err(|e| format!("--cpus: {e}"))?
                }
                "--records-per-cpu" => {
                    spec.records_per_cpu = val("--records-per-cpu")?
                        .parse()
                        .map_err(|e| format!("--records-per-cpu: {e}"))?
                }
                "--records" => {
                    total_records = Some(
                        val("--records")?
                            .parse::<u64>()
                            .map_err(|e| format!("--records: {e}"))?,
                    )
                }
                "--threads" => spec.threads = count(&val("--threads")?, "--threads")?,
                "--mappings" => spec.mappings = count(&val("--mappings")?, "--mappings")?,
                "--kernel-symbols" => {
                    spec.kernel_symbols = count(&val("--kernel-symbols")?, "--kernel-symbols")?
                }
                "--phases" => spec.phases = count(&val("--phases")?, "--phases")?,
                "--objects" => spec.objects = count(&val("--objects")?, "--objects")?,
                "--counter-snapshots" => {
                    spec.counter_snapshots =
                        count(&val("--counter-snapshots")?, "--counter-snapshots")?
                }
                "--bytes" => {
                    bytes = Some(parse_size(&val("--bytes")?).ok_or("--bytes: expected e.g. 1G")?)
                }
                "--chunk" => {
                    spec.chunk_bytes =
                        parse_size(&val("--chunk")?).ok_or("--chunk: expected e.g. 256K")? as usize
                }
                "--seed" => {
                    spec.seed = val("--seed")?.parse().map_err(|e| format!("--seed: {e}"))?
                }
                "--layout" => {
                    spec.layout = match val("--layout")?.as_str() {
                        "n1" => RecordLayout::N1Padded64,
                        "compact" => RecordLayout::Compact,
                        other => return Err(format!("--layout: unknown '{other}' (n1, compact)")),
                    }
                }
                "--no-context" => spec.context_packets = false,
                "-h" | "--help" => return Err(usage.into()),
                other if !other.starts_with('-') && out.is_none() => out = Some(other.to_string()),
                other => return Err(format!("unknown argument '{other}'\n{usage}")),
            }
            Ok(())
        })();
        if let Err(e) = r {
            eprintln!("spelunk-synth: {e}");
            return ExitCode::from(2);
        }
    }
    let Some(out) = out else {
        eprintln!("spelunk-synth: {usage}");
        return ExitCode::from(2);
    };
    if let Some(b) = bytes {
        // N1 records are 64 bytes; compact ones average ~40.
        let per = if spec.layout == RecordLayout::N1Padded64 {
            64
        } else {
            40
        };
        spec.records_per_cpu = (b / per / u64::from(spec.cpus.max(1))).max(1);
    }
    if let Some(n) = total_records {
        spec.records_per_cpu = n.div_ceil(u64::from(spec.cpus.max(1))).max(1);
    }
    if spec.kernel_symbols > 0 {
        let k = format!("{out}.kallsyms");
        if let Err(e) = std::fs::write(&k, spec.kallsyms()) {
            eprintln!("spelunk-synth: {k}: {e}");
            return ExitCode::FAILURE;
        }
    }
    match spec.write(std::path::Path::new(&out)) {
        Ok(s) => {
            println!(
                "wrote {} (synthetic): {} CPUs x {} records, {} AUX bytes in {} chunks",
                out, spec.cpus, spec.records_per_cpu, s.aux_bytes, s.aux_chunks
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("spelunk-synth: {e}");
            ExitCode::FAILURE
        }
    }
}
