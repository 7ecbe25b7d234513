//! `spelunk completions SHELL` and `spelunk man DIR`: shell completion scripts (clap_complete)
//! and man pages (clap_mangen), generated from the same argument definitions the binary parses.

use clap::{Args, CommandFactory};
use std::path::PathBuf;
use std::process::ExitCode;

/// Print a shell completion script for spelunk
#[derive(Args, Debug)]
#[command(after_long_help = "\
Examples:
  spelunk completions bash > /etc/bash_completion.d/spelunk
  spelunk completions zsh > \"${fpath[1]}/_spelunk\"
  spelunk completions fish > ~/.config/fish/completions/spelunk.fish")]
pub struct CompletionsArgs {
    /// The shell
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// Write man pages for spelunk and each subcommand (spelunk.1, spelunk-report.1, ...)
#[derive(Args, Debug)]
pub struct ManArgs {
    /// Directory to write the pages into (created if missing)
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

pub fn completions(args: CompletionsArgs) -> anyhow::Result<ExitCode> {
    let mut cmd = crate::Cli::command();
    clap_complete::generate(args.shell, &mut cmd, "spelunk", &mut std::io::stdout());
    Ok(ExitCode::SUCCESS)
}

pub fn man(args: ManArgs) -> anyhow::Result<ExitCode> {
    use anyhow::Context;
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("creating {}", args.dir.display()))?;
    let cmd = crate::Cli::command();
    let mut written = 0;
    let mut pages = vec![(String::from("spelunk"), cmd.clone())];
    for sub in cmd.get_subcommands() {
        pages.push((format!("spelunk-{}", sub.get_name()), sub.clone()));
    }
    for (name, page) in pages {
        let mut out = Vec::new();
        clap_mangen::Man::new(
            page.display_name(name.clone())
                .bin_name(name.replace("-", " ")),
        )
        .title(name.clone())
        .render(&mut out)?;
        let path = args.dir.join(format!("{name}.1"));
        spelunk_fsio::write_atomic(&path, &out)
            .with_context(|| format!("writing {}", path.display()))?;
        written += 1;
    }
    eprintln!(
        "spelunk man: wrote {written} pages to {}",
        args.dir.display()
    );
    Ok(ExitCode::SUCCESS)
}
