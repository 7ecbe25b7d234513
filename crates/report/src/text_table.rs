//! Plain text tables, as every terminal report prints them.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The widest a table line may be, in characters; 0 for no limit. Set once by the front end
/// from the terminal's width ([`set_table_width`]).
static TABLE_WIDTH: AtomicUsize = AtomicUsize::new(0);

/// Cuts the text columns of terminal tables so their lines fit in `width` characters (a
/// terminal's width); `None` prints names in full (`--wide`, or output that is not a terminal).
/// JSON and the other formats always carry the full names.
pub fn set_table_width(width: Option<usize>) {
    TABLE_WIDTH.store(width.unwrap_or(0), Ordering::Relaxed);
}

/// Narrowest a cut column gets (characters).
const MIN_CUT_WIDTH: usize = 24;

/// `s` cut to `width` characters, ending in `...` when cut.
fn cut(s: &str, width: usize) -> std::borrow::Cow<'_, str> {
    if s.chars().count() <= width {
        return s.into();
    }
    let keep: String = s.chars().take(width.saturating_sub(3)).collect();
    format!("{keep}...").into()
}

/// A plain text table with right-aligned numeric columns.
pub(crate) struct Table {
    header: Vec<String>,
    /// Columns aligned left (text); the others are aligned right.
    left: Vec<bool>,
    rows: Vec<Vec<String>>,
    /// Per row, a shorter form of some cells, shown instead of cutting the cell when the
    /// column is narrowed to fit the width (a C++ name without its parameters).
    shorter: Vec<Vec<Option<String>>>,
}

impl Table {
    pub(crate) fn new(cols: &[(&str, bool)]) -> Table {
        Table {
            header: cols.iter().map(|c| c.0.to_string()).collect(),
            left: cols.iter().map(|c| c.1).collect(),
            rows: Vec::new(),
            shorter: Vec::new(),
        }
    }
    /// A table of right-aligned (numeric) columns.
    pub(crate) fn numeric(header: Vec<String>) -> Table {
        Table {
            left: vec![false; header.len()],
            header,
            rows: Vec::new(),
            shorter: Vec::new(),
        }
    }
    pub(crate) fn row(&mut self, r: Vec<String>) {
        self.rows.push(r);
        self.shorter.push(Vec::new());
    }
    /// A row with shorter forms of some of its cells, for when they must be cut.
    pub(crate) fn row_with_shorter(&mut self, r: Vec<String>, shorter: Vec<Option<String>>) {
        self.rows.push(r);
        self.shorter.push(shorter);
    }
    pub(crate) fn render(&self, out: &mut String) {
        let mut w: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate() {
                if let Some(x) = w.get_mut(i) {
                    *x = (*x).max(c.chars().count());
                }
            }
        }
        // Over the width: narrow the widest text column, step by step, down to
        // MIN_CUT_WIDTH (or its header).
        let limit = TABLE_WIDTH.load(Ordering::Relaxed);
        if limit > 0 {
            let total = |w: &[usize]| 2 + w.iter().sum::<usize>() + 2 * w.len().saturating_sub(1);
            while total(&w) > limit {
                let floor = |i: usize| MIN_CUT_WIDTH.max(self.header[i].chars().count());
                let Some(i) = (0..w.len())
                    .filter(|&i| self.left[i] && w[i] > floor(i))
                    .max_by_key(|&i| w[i])
                else {
                    break;
                };
                w[i] = w[i].saturating_sub(total(&w) - limit).max(floor(i));
            }
        }
        let no_shorter: Vec<Option<String>> = Vec::new();
        let line = |cells: Vec<&str>, shorter: &[Option<String>], out: &mut String| {
            let cells: Vec<std::borrow::Cow<'_, str>> = cells
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    if !self.left[i] {
                        return (*c).into();
                    }
                    match shorter.get(i).and_then(|s| s.as_deref()) {
                        Some(s) if c.chars().count() > w[i] => cut(s, w[i]),
                        _ => cut(c, w[i]),
                    }
                })
                .collect();
            let mut s = String::new();
            for (i, c) in cells.iter().enumerate() {
                if i > 0 {
                    s.push_str("  ");
                }
                let pad = w[i].saturating_sub(c.chars().count());
                let last = i + 1 == cells.len();
                if self.left[i] {
                    s.push_str(c);
                    if !last {
                        s.push_str(&" ".repeat(pad));
                    }
                } else {
                    s.push_str(&" ".repeat(pad));
                    s.push_str(c);
                }
            }
            let _ = writeln!(out, "  {}", s.trim_end());
        };
        line(
            self.header.iter().map(|h| h.as_str()).collect(),
            &no_shorter,
            out,
        );
        for (r, shorter) in self.rows.iter().zip(&self.shorter) {
            line(r.iter().map(|c| c.as_str()).collect(), shorter, out);
        }
    }
}

/// A share as a percentage with one decimal.
pub(crate) fn pct(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

/// A duration in the unit that suits it (s, ms, us).
pub(crate) fn ns(t: u64) -> String {
    if t >= 1_000_000_000 {
        format!("{:.3} s", t as f64 / 1e9)
    } else if t >= 1_000_000 {
        format!("{:.3} ms", t as f64 / 1e6)
    } else {
        format!("{:.1} us", t as f64 / 1e3)
    }
}
