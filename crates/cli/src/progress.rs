//! Progress bars on stderr for long work; silent when stderr is not a terminal or when disabled.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;

/// Inputs smaller than this finish too fast for a bar to be useful.
const MIN_BYTES_FOR_BAR: u64 = 64 << 20;

pub struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    /// A byte-count bar over `total` bytes, shown only on a terminal for large inputs.
    pub fn bytes(total: u64, what: &str, disabled: bool) -> Self {
        if disabled || total < MIN_BYTES_FOR_BAR || !std::io::stderr().is_terminal() {
            return Progress { bar: None };
        }
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template(
            "{msg} [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(what.to_string());
        Progress { bar: Some(bar) }
    }

    /// A counter of items (no total known), shown only on a terminal.
    pub fn count(what: &str, unit: &str, disabled: bool) -> Self {
        if disabled || !std::io::stderr().is_terminal() {
            return Progress { bar: None };
        }
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        if let Ok(style) =
            ProgressStyle::with_template(&format!("{{msg}} {{human_pos}} {unit} {{per_sec}}"))
        {
            bar.set_style(style);
        }
        bar.set_message(what.to_string());
        Progress { bar: Some(bar) }
    }

    pub fn set(&self, pos: u64) {
        if let Some(b) = &self.bar {
            b.set_position(pos);
        }
    }

    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
