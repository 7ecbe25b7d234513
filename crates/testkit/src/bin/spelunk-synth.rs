//! Writes a synthetic Arm SPE recording (perf.data) for benchmarks and demos.
//!
//! spelunk-synth OUT [--cpus N] [--records-per-cpu N | --bytes SIZE] [--layout n1|compact]
//!               [--chunk BYTES] [--seed S] [--no-context]
//!
//! The content is generated (spelunk_spe::synth), not measured; the file says so in its
//! CPUDESC header ("synthetic Neoverse N1 recording").

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

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let mut out = None;
    let mut spec = SynthRecording::default();
    let mut bytes = None;
    let usage = "usage: spelunk-synth OUT [--cpus N] [--records-per-cpu N | --bytes SIZE] [--layout n1|compact] [--chunk BYTES] [--seed S] [--no-context]";
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
