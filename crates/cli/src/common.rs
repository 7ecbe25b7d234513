//! Options and setup shared by the subcommands that read SPE recordings.

use clap::Args;
use spelunk_engine::recording::{Recording, RecordingError};
use spelunk_perf::sidecar::SidecarUse;
use spelunk_spe::Midr;
use std::path::Path;

/// How to interpret the recording's CPUs (data-source tables), overriding its MIDR.
#[derive(Args, Debug, Clone, Default)]
pub struct CpuArgs {
    /// Interpret data sources for this CPU model (e.g. neoverse-n1) instead of the recording's MIDR
    #[arg(long, value_name = "NAME", conflicts_with = "midr")]
    pub cpu_model: Option<String>,

    /// Interpret data sources for this MIDR_EL1 value (e.g. 0x413fd0c1)
    #[arg(long, value_name = "HEX")]
    pub midr: Option<String>,
}

impl CpuArgs {
    /// The MIDR the user asked for, if any.
    pub fn midr_override(&self) -> Result<Option<Midr>, RecordingError> {
        spelunk_engine::select::midr_override(self.cpu_model.as_deref(), self.midr.as_deref())
    }

    /// Opens the SPE recording `path`, interpreted as these options say, with its sidecar as
    /// `sidecar` says: an unreadable sidecar is an error that says how to go on without it;
    /// `--ignore-sidecar` leaves it out with a warning on standard error (and a problem in the
    /// losses).
    pub fn open(&self, path: &Path, sidecar: &SidecarArgs) -> anyhow::Result<Recording> {
        let how = if sidecar.ignore_sidecar {
            SidecarUse::Ignore
        } else {
            SidecarUse::Read
        };
        let rec = Recording::open(path, self.midr_override()?, how).map_err(|e| match e {
            RecordingError::Sidecar(e) => anyhow::anyhow!(
                "{e}; repair or move it, or pass --ignore-sidecar to analyse {} without it",
                path.display()
            ),
            e => e.into(),
        })?;
        if sidecar.ignore_sidecar {
            for p in &rec.ctx.problems {
                eprintln!("spelunk: warning: {p}");
            }
        }
        Ok(rec)
    }
}

/// Refuses, before any work, an output that would overwrite an input (docs/files.md): the
/// recording, its sidecar, an imported file, the program being recorded; and an output path
/// that holds something spelunk does not replace (a device, FIFO, socket or directory).
pub fn guard_outputs<'p>(
    inputs: &[&std::path::Path],
    outputs: impl IntoIterator<Item = &'p std::path::Path>,
) -> anyhow::Result<()> {
    let mut guard = spelunk_fsio::OutputGuard::new();
    guard.inputs(inputs.iter().copied());
    for o in outputs {
        guard.check(o)?;
        // A device, FIFO, socket or directory there is refused now, not after the work.
        spelunk_fsio::output_target(o)?;
    }
    Ok(())
}

/// A recording and the sidecar next to it: the inputs of every command that reads one.
pub fn recording_inputs(file: &std::path::Path) -> [std::path::PathBuf; 2] {
    [
        file.to_path_buf(),
        spelunk_perf::sidecar::Sidecar::path_for(file),
    ]
}

/// Whether to read the recording's sidecar (`FILE.spelunk.json`).
#[derive(Args, Debug, Clone, Default)]
pub struct SidecarArgs {
    /// Analyse the recording without its sidecar (FILE.spelunk.json): no phases, named objects,
    /// heap blocks or PMU counts, and a warning that says so. Without it, a sidecar that
    /// cannot be read (cut, not JSON, another schema, not a regular file) is an error
    #[arg(long)]
    pub ignore_sidecar: bool,
}

/// Numeric options, validated one way (issue 14): a value outside its range — 0 where 0
/// means nothing, negative, a fraction for a count, NaN, infinite, too large — is refused
/// before any work, by clap, with the accepted range:
/// `invalid value '0' for '--limit <N>': expected a whole number from 1 to 1000000000`.
/// Each option names its parser here with `value_parser` (and `allow_negative_numbers`, so
/// that `-1` reaches the parser instead of being taken for a flag).
pub mod values {
    /// Rows a table can be asked for (`--limit`).
    pub const MAX_ROWS: u64 = 1_000_000_000;

    pub use spelunk_engine::select::parse_u64;

    /// A whole number in `[min, max]`, decimal or 0x-hex (`_` allowed).
    fn whole(s: &str, min: u64, max: u64) -> Result<u64, String> {
        parse_u64(s)
            .filter(|v| (min..=max).contains(v))
            .ok_or_else(|| format!("expected a whole number from {min} to {max}"))
    }

    /// A power of two in `[min, max]`.
    fn power_of_two(s: &str, min: u64, max: u64) -> Result<u64, String> {
        parse_u64(s)
            .filter(|v| v.is_power_of_two() && (min..=max).contains(v))
            .ok_or_else(|| format!("expected a power of two from {min} to {max}"))
    }

    /// A finite number above 0 and at most `max`.
    fn positive(s: &str, max: f64) -> Result<f64, String> {
        s.trim()
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v > 0.0 && *v <= max)
            .ok_or_else(|| format!("expected a number above 0 and at most {max}"))
    }

    /// `--limit`: rows per table.
    pub fn rows(s: &str) -> Result<usize, String> {
        whole(s, 1, MAX_ROWS).map(|v| v as usize)
    }
    /// `--line-size`: a cache line, in bytes.
    pub fn line_size(s: &str) -> Result<u64, String> {
        power_of_two(s, 8, 65536)
    }
    /// `--pid`, `--tid`, `--cpus` filters and `decode --raw-cpu`: ids as recordings hold them.
    pub fn id(s: &str) -> Result<u32, String> {
        whole(s, 0, u64::from(u32::MAX)).map(|v| v as u32)
    }
    /// `-p PID` of a process to attach to.
    pub fn process(s: &str) -> Result<i32, String> {
        whole(s, 1, i32::MAX as u64).map(|v| v as i32)
    }
    /// `estimate --bytes-per-op`.
    pub fn bytes_per_op(s: &str) -> Result<u64, String> {
        whole(s, 1, 65536)
    }
    /// `estimate --interval`: operations between samples (PMSIRR_EL1.INTERVAL is 24 bits of
    /// 256 operations, plus jitter).
    pub fn sampling_interval(s: &str) -> Result<u64, String> {
        whole(s, 1, 1 << 32)
    }
    /// `estimate --ernd`: the CPU's caps/ernd.
    pub fn ernd(s: &str) -> Result<u8, String> {
        whole(s, 0, 1).map(|v| v as u8)
    }
    /// `estimate --timer-hz`.
    pub fn frequency_hz(s: &str) -> Result<f64, String> {
        positive(s, 1e12)
    }
    /// `estimate --cpu-ghz`.
    pub fn clock_ghz(s: &str) -> Result<f64, String> {
        positive(s, 100.0)
    }
    /// `record --period`: SPE intervals are multiples of 256 up to PMSIRR_EL1.INTERVAL's
    /// largest, 0xffffff00.
    pub fn record_period(s: &str) -> Result<u64, String> {
        whole(s, 256, 0xffff_ff00).map_err(|e| {
            format!("{e} (SPE intervals are multiples of 256 operations; the smallest Neoverse N1 allows is 1024)")
        })
    }
    /// `record --min-latency`: PMSLATFR_EL1.MINLAT is 12 bits.
    pub fn min_latency(s: &str) -> Result<u32, String> {
        whole(s, 0, 4095).map(|v| v as u32)
    }
    /// `record --aux-pages`: the kernel wants a power of two.
    pub fn aux_pages(s: &str) -> Result<usize, String> {
        power_of_two(s, 2, 1 << 20).map(|v| v as usize)
    }
    /// `record --capacity-interval`: milliseconds, at most a day.
    pub fn interval_ms_whole(s: &str) -> Result<u64, String> {
        whole(s, 1, 86_400_000)
    }
    /// `topdown -I`: milliseconds (fractions allowed), at most a day.
    pub fn interval_ms(s: &str) -> Result<f64, String> {
        positive(s, 86_400_000.0)
    }
    /// `topdown --duration`: seconds, at most a year.
    pub fn duration_s(s: &str) -> Result<f64, String> {
        positive(s, 31_536_000.0)
    }
    /// `topdown --slots`, `--counters`.
    pub fn small_count(s: &str) -> Result<u32, String> {
        whole(s, 1, 64).map(|v| v as u32)
    }
}

/// The width text tables are cut to: $COLUMNS when set, else the width of the terminal
/// standard output is (none when it is not a terminal: a file or a pipe gets full names).
pub fn terminal_width() -> Option<usize> {
    if let Some(c) = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|c| *c > 0)
    {
        return Some(c);
    }
    let mut size = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes a winsize into `size`, which lives for the call; on a
    // descriptor that is not a terminal it fails and writes nothing.
    let r = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size) };
    (r == 0 && size.ws_col > 0).then_some(usize::from(size.ws_col))
}
