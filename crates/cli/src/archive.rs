//! `spelunk archive`: the recording and the files its samples are named from, in one tar
//! file. Wiring only: the archive is spelunk-engine's `archive`, the text spelunk-report's
//! `archive_text`.

use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

/// Pack a recording, its sidecar and the mapped files (by build-id) into one tar file, so its
/// report can be made on another machine, or after the program was rebuilt, with the same
/// names.
///
/// Each mapped file the recording lists a build-id for is stored as `.build-id/xx/yyyy…`
/// (perf's build-id cache layout) and under its recorded path; a file no longer here with
/// that build-id is left out and listed. Read it with `tar xf FILE.tar -C DIR` and
/// `spelunk report DIR/FILE --symfs DIR`.
#[derive(Args, Debug)]
#[command(after_long_help = "\
Examples:
  spelunk archive run.data                 # writes run.data.tar
  mkdir elsewhere && tar xf run.data.tar -C elsewhere
  spelunk report elsewhere/run.data --symfs elsewhere")]
pub struct ArchiveArgs {
    /// The recording (perf.data written by spelunk record or perf record)
    pub file: PathBuf,

    /// Where to write the archive [default: FILE.tar]
    #[arg(short, long, value_name = "OUT")]
    pub output: Option<PathBuf>,
}

pub fn run(args: ArchiveArgs) -> anyhow::Result<ExitCode> {
    let output = args
        .output
        .clone()
        .unwrap_or_else(|| spelunk_engine::archive::default_output(&args.file));
    let summary = spelunk_engine::archive::archive(&args.file, &output)?;
    print!("{}", spelunk_report::archive_text::render(&summary));
    Ok(ExitCode::SUCCESS)
}
