//! The report as one self-contained HTML page (`spelunk report --html FILE`), or the c2c
//! report alone (`spelunk c2c --html FILE`).
//!
//! The page renders the same [`Report`] value as the terminal tables and `--json`: the value is
//! embedded as JSON (schema `spelunk-report/1`) in a `<script type="application/json">`
//! element, and the page's own script formats its numbers into tables and charts. Everything the
//! page needs (our CSS and JS, the vendored uPlot chart library) is inlined, and a
//! Content-Security-Policy forbids any fetch, so the file opens offline and makes no network
//! requests. Optional top-down results (`spelunk topdown --json`, schema `spelunk-topdown/1`)
//! are embedded the same way and shown in their own section. The c2c report (`--c2c`) is part of
//! the report value (`report.c2c`); a c2c-only page embeds it as `c2c` with no report.
//!
//! Escaping: text that goes into markup is HTML-escaped ([`html_text`]); the JSON has `<`, `>`,
//! `&`, U+2028 and U+2029 written as `\uXXXX` escapes ([`json_for_script`]), so no string in the
//! data (a symbol named `</script>`, a comment opener `<!--`) can end the script element.

use serde::Serialize;
use spelunk_analysis::c2c::{C2cReport, C2C_SCHEMA};
use spelunk_analysis::model::advise::{Advice, ADVISE_SCHEMA};
use spelunk_analysis::model::{Report, SCHEMA};
use std::path::Path;

const TEMPLATE: &str = include_str!("../assets/report.html");
const STYLE: &str = include_str!("../assets/report.css");
const SCRIPT: &str = include_str!("../assets/report.js");
const UPLOT_JS: &str = include_str!("../assets/vendor/uplot/uPlot.iife.min.js");
const UPLOT_CSS: &str = include_str!("../assets/vendor/uplot/uPlot.min.css");

/// Schema of the top-down results the page accepts (crates/pmu, docs/topdown.md).
pub const TOPDOWN_SCHEMA: &str = "spelunk-topdown/1";

#[derive(Debug, thiserror::Error)]
pub enum HtmlError {
    #[error("serialising the report: {0}")]
    Serialize(#[from] serde_json::Error),
    #[error("{origin}: not top-down results: {why}")]
    Topdown { origin: String, why: String },
    /// Reading an input or writing the page; `what` names the file.
    #[error("{what}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

/// Largest top-down JSON read whole (far above any real one).
const MAX_TOPDOWN_BYTES: u64 = 256 << 20;

/// Top-down results as `spelunk topdown --json` wrote them, checked for their schema.
///
/// Kept as JSON rather than typed: the page renders a `--topdown FILE`'s figures as they are.
/// A report computed here (from a recording's sidecar) becomes the same value with
/// [`Topdown::from_report`], without a round trip through JSON text.
#[derive(Clone, Debug, PartialEq)]
pub struct Topdown(serde_json::Value);

impl Topdown {
    /// Parses `text` (the contents of `origin`, for messages).
    pub fn from_json(text: &str, origin: &str) -> Result<Topdown, HtmlError> {
        let bad = |why: String| HtmlError::Topdown {
            origin: origin.to_string(),
            why,
        };
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| bad(format!("invalid JSON ({e})")))?;
        match value.get("schema").and_then(|s| s.as_str()) {
            Some(TOPDOWN_SCHEMA) => {}
            Some(other) => {
                return Err(bad(format!(
                    "schema is '{other}', expected '{TOPDOWN_SCHEMA}' (the output of `spelunk topdown --json`)"
                )))
            }
            None => {
                return Err(bad(format!(
                    "no schema field; expected '{TOPDOWN_SCHEMA}' (the output of `spelunk topdown --json`)"
                )))
            }
        }
        if !value.get("scopes").is_some_and(|s| s.is_array()) {
            return Err(bad("no 'scopes' list".into()));
        }
        Ok(Topdown(value))
    }

    /// A top-down report computed by spelunk-pmu, as the page embeds it.
    /// Reads the output of `spelunk topdown --json` from `path` (`spelunk report --topdown`).
    pub fn read(path: &Path) -> Result<Topdown, HtmlError> {
        let text =
            spelunk_fsio::read_to_string_bounded(path, MAX_TOPDOWN_BYTES).map_err(|source| {
                HtmlError::Io {
                    what: format!("reading top-down results {}", path.display()),
                    source,
                }
            })?;
        Topdown::from_json(&text, &path.display().to_string())
    }

    pub fn from_report(report: &spelunk_pmu::report::Report) -> Result<Topdown, HtmlError> {
        Ok(Topdown(serde_json::to_value(report)?))
    }

    pub fn value(&self) -> &serde_json::Value {
        &self.0
    }
}

/// What the page embeds: the report exactly as `--json` serializes it (or, on a c2c-only page,
/// no report and the c2c report as `spelunk c2c --json` serializes it), and the top-down
/// results when given.
#[derive(Serialize)]
struct PageData<'a> {
    report: Option<&'a Report>,
    #[serde(skip_serializing_if = "Option::is_none")]
    c2c: Option<&'a C2cReport>,
    /// `spelunk advise --html`: the findings alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    advice: Option<&'a Advice>,
    topdown: Option<&'a serde_json::Value>,
}

/// Escapes text for HTML element content and attribute values.
pub fn html_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Makes JSON text safe inside a `<script>` element: `<`, `>` and `&` (which JSON has only
/// inside strings) and the line separators U+2028/U+2029 become `\uXXXX` escapes, so the text
/// still parses to the same value and contains no `</script`, `<!--` or `-->`.
pub fn json_for_script(json: &str) -> String {
    let mut out = String::with_capacity(json.len() + json.len() / 16);
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// Replaces each `{{name}}` of `template` by its value, in one pass: values are never scanned
/// for placeholders, so data that looks like one stays as it is.
fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let extra: usize = values.iter().map(|(_, v)| v.len()).sum();
    let mut out = String::with_capacity(template.len() + extra);
    let mut rest = template;
    while let Some(i) = rest.find("{{") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        match after.find("}}").and_then(|j| {
            values
                .iter()
                .find(|(k, _)| *k == &after[..j])
                .map(|v| (j, v))
        }) {
            Some((j, (_, v))) => {
                out.push_str(v);
                rest = &after[j + 2..];
            }
            None => {
                out.push_str("{{");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Renders the whole page.
pub fn render_html(report: &Report, topdown: Option<&Topdown>) -> Result<String, HtmlError> {
    let data = PageData {
        report: Some(report),
        c2c: None,
        advice: None,
        topdown: topdown.map(Topdown::value),
    };
    page("spelunk report", SCHEMA, &report.recording.file, &data)
}

/// Renders a page with the c2c section only (`spelunk c2c --html`).
pub fn render_c2c_html(c2c: &C2cReport) -> Result<String, HtmlError> {
    let data = PageData {
        report: None,
        c2c: Some(c2c),
        advice: None,
        topdown: None,
    };
    page("spelunk c2c", C2C_SCHEMA, &c2c.file, &data)
}

/// Renders a page with the findings only (`spelunk advise --html`).
pub fn render_advice_html(advice: &Advice) -> Result<String, HtmlError> {
    let data = PageData {
        report: None,
        c2c: None,
        advice: Some(advice),
        topdown: None,
    };
    page("spelunk advise", ADVISE_SCHEMA, &advice.file, &data)
}

/// Renders and writes the findings' page (`spelunk advise --html FILE`).
pub fn write_advice_page(advice: &Advice, out: &Path) -> Result<(), HtmlError> {
    write_page(out, &render_advice_html(advice)?)
}

fn page(kind: &str, schema: &str, file: &str, data: &PageData) -> Result<String, HtmlError> {
    let data = json_for_script(&serde_json::to_string(data)?);
    let title = html_text(file);
    let generator = concat!("spelunk ", env!("CARGO_PKG_VERSION"));
    Ok(fill(
        TEMPLATE,
        &[
            ("kind", kind),
            ("schema", schema),
            ("title", &title),
            ("generator", generator),
            ("uplot_css", UPLOT_CSS),
            ("style", STYLE),
            ("data", &data),
            ("uplot_js", UPLOT_JS),
            ("script", SCRIPT),
        ],
    ))
}

/// Writes a rendered page to `out` (atomically: a reader never sees half a page).
pub fn write_page(out: &Path, page: &str) -> Result<(), HtmlError> {
    spelunk_fsio::write_atomic(out, page.as_bytes()).map_err(|source| HtmlError::Io {
        what: format!("writing {}", out.display()),
        source,
    })
}

/// Renders the report's page (with top-down results, when given), writes it to `out`, and says
/// what it holds: "N samples", or "timelines only" for a recording without SPE samples.
pub fn write_report_page(
    report: &Report,
    topdown: Option<&Topdown>,
    out: &Path,
) -> Result<String, HtmlError> {
    write_page(out, &render_html(report, topdown)?)?;
    Ok(match &report.timelines {
        Some(t) if !t.spe => "timelines only".to_string(),
        _ => format!("{} samples", report.recording.samples_selected),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use spelunk_analysis::model::{GroupStats, Hotspot, ObjectRow, ThreadRow};

    const HOSTILE: &str = "f</script><script>alert(1)</script><!--x-->\u{2028}&amp;\"'";

    fn hostile_report() -> Report {
        let hot = Hotspot {
            key: HOSTILE.to_string(),
            dso: Some("/lib/<!--lib-->.so".into()),
            function: Some(HOSTILE.to_string()),
            file: None,
            line: None,
            address: None,
            function_offset: None,
            stats: GroupStats {
                samples: 3,
                share: 1.0,
                ..Default::default()
            },
        };
        let mut r = Report {
            schema: spelunk_analysis::model::SCHEMA,
            ..Default::default()
        };
        r.recording.file = "/tmp/<b>x</b>\".data".into();
        r.hotspots.functions.push(hot);
        r.objects.push(ObjectRow {
            name: "</SCRIPT ><!--".into(),
            kind: "global".into(),
            dso: None,
            start: u64::MAX,
            size: 8,
            stats: GroupStats::default(),
        });
        r.threads.push(ThreadRow {
            pid: Some(1),
            tid: Some(1),
            name: Some("{{data}}".into()),
            samples: 3,
            share: 1.0,
        });
        r
    }

    /// The text of the element that starts with `open`, up to the next `</script`.
    fn element<'a>(page: &'a str, open: &str) -> &'a str {
        let start = page
            .find(open)
            .map(|i| i + open.len())
            .unwrap_or(page.len());
        let end = page[start..]
            .find("</script")
            .map(|i| start + i)
            .unwrap_or(page.len());
        &page[start..end]
    }

    #[test]
    fn json_for_script_escapes_markup_and_still_parses_to_the_same_value() {
        let v = serde_json::json!({ "name": HOSTILE, "n": [1, 2.5, null] });
        let text = json_for_script(&serde_json::to_string(&v).unwrap());
        for bad in ["<", ">", "&", "\u{2028}", "\u{2029}"] {
            assert!(!text.contains(bad), "{bad:?} left in {text}");
        }
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, v);
    }

    #[test]
    fn html_text_escapes_the_five_characters() {
        assert_eq!(
            html_text(r#"<a href="x">&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;"
        );
    }

    #[test]
    fn data_with_script_end_tags_and_comment_openers_stays_inside_its_element() {
        let r = hostile_report();
        let page = render_html(&r, None).unwrap();
        // Our three script elements close, nothing else does; no comment is opened anywhere.
        assert_eq!(page.to_ascii_lowercase().matches("</script").count(), 3);
        assert!(!page.contains("<!--"));
        assert!(!page.contains("alert(1)</script>"));
        // The title is escaped text.
        assert!(
            page.contains("<title>spelunk report: /tmp/&lt;b&gt;x&lt;/b&gt;&quot;.data</title>")
        );
        // The embedded JSON is exactly the report as --json serializes it.
        let data = element(
            &page,
            r#"<script type="application/json" id="spelunk-data">"#,
        );
        let back: serde_json::Value = serde_json::from_str(data).unwrap();
        assert_eq!(back["report"], serde_json::to_value(&r).unwrap());
        assert_eq!(back["topdown"], serde_json::Value::Null);
        // A value that looks like a placeholder is not substituted.
        assert_eq!(back["report"]["threads"][0]["name"], "{{data}}");
    }

    #[test]
    fn assets_cannot_end_their_elements_and_name_no_remote_resource() {
        for (name, text) in [
            ("report.js", SCRIPT),
            ("report.css", STYLE),
            ("uPlot.iife.min.js", UPLOT_JS),
            ("uPlot.min.css", UPLOT_CSS),
        ] {
            let lower = text.to_ascii_lowercase();
            for bad in ["</script", "</style", "<!--", "@import", "url("] {
                assert!(!lower.contains(bad), "{name} contains {bad}");
            }
        }
        let lower = TEMPLATE.to_ascii_lowercase();
        for bad in ["src=", "href=", "@import", "url("] {
            assert!(!lower.contains(bad), "report.html contains {bad}");
        }
        assert!(lower.contains("default-src 'none'"));
    }

    #[test]
    fn topdown_results_are_checked_and_embedded() {
        let td = Topdown::from_json(
            r#"{"schema":"spelunk-topdown/1","source":{"kind":"import","detail":"x"},"scopes":[],"notes":["</script>"]}"#,
            "td.json",
        )
        .unwrap();
        let page = render_html(&hostile_report(), Some(&td)).unwrap();
        let data = element(
            &page,
            r#"<script type="application/json" id="spelunk-data">"#,
        );
        let back: serde_json::Value = serde_json::from_str(data).unwrap();
        assert_eq!(back["topdown"]["notes"][0], "</script>");

        let err = |t: &str| Topdown::from_json(t, "td.json").unwrap_err().to_string();
        assert!(err("not json").contains("td.json: not top-down results: invalid JSON"));
        assert!(err(r#"{"schema":"spelunk-report/1"}"#).contains("schema is 'spelunk-report/1'"));
        assert!(err("{}").contains("no schema field"));
        assert!(err(r#"{"schema":"spelunk-topdown/1"}"#).contains("no 'scopes' list"));
    }

    fn hostile_c2c() -> C2cReport {
        use spelunk_analysis::c2c::*;
        let thread = ThreadRef {
            pid: Some(1),
            tid: Some(2),
            cpu: None,
            name: Some(HOSTILE.into()),
        };
        let access = C2cAccess {
            pc: 0x4000,
            function: Some(HOSTILE.into()),
            function_offset: Some(4),
            dso: Some("/x/<!--.so".into()),
            file: Some("</script>.c".into()),
            line: Some(3),
            peer_remote_pct: 0.0,
            peer_local_pct: 1.0,
            store_l1_hit_pct: 0.0,
            store_l1_miss_pct: 0.0,
            store_na_pct: 0.0,
            mean_cycles_peer_remote: None,
            mean_cycles_peer_local: Some(120.0),
            mean_cycles_load: Some(120.0),
            cpu_count: 1,
            threads: vec![thread.clone()],
            counts: LineCounts::default(),
        };
        C2cReport {
            schema: C2C_SCHEMA,
            file: "/tmp/<b>c2c</b>.data".into(),
            line_size: 64,
            samples_decoded: 1,
            samples_selected: 1,
            filter: vec![],
            totals: C2cTotals::default(),
            lines: vec![C2cLine {
                index: 0,
                pid: Some(1),
                address: 0x1000,
                object: Some("</SCRIPT ><!--".into()),
                pa_count: 1,
                cpu_count: 1,
                peer_snoop_share: 1.0,
                verdict: Verdict::FalseSharing,
                verdict_reason: HOSTILE.into(),
                counts: LineCounts::default(),
                offsets: vec![C2cOffset {
                    offset: 0x20,
                    address: 0x1020,
                    object: Some("{{data}}".into()),
                    pa_count: 1,
                    threads: vec![ThreadAccesses {
                        thread,
                        loads: 1,
                        stores: 0,
                    }],
                    counts: LineCounts::default(),
                    accesses: vec![access],
                }],
            }],
            losses: Default::default(),
        }
    }

    #[test]
    fn c2c_tables_with_hostile_names_stay_inside_their_element() {
        // In the report (`--c2c`): part of the report value, exactly as --json prints it.
        let mut r = hostile_report();
        r.c2c = Some(hostile_c2c());
        let page = render_html(&r, None).unwrap();
        assert_eq!(page.to_ascii_lowercase().matches("</script").count(), 3);
        assert!(!page.contains("<!--"));
        let data = element(
            &page,
            r#"<script type="application/json" id="spelunk-data">"#,
        );
        let back: serde_json::Value = serde_json::from_str(data).unwrap();
        assert_eq!(back["report"], serde_json::to_value(&r).unwrap());
        assert_eq!(back["report"]["c2c"]["schema"], "spelunk-c2c/1");
        assert!(back.get("c2c").is_none());

        // Alone (`spelunk c2c --html`): no report, the c2c report as `spelunk c2c --json`.
        let c = hostile_c2c();
        let page = render_c2c_html(&c).unwrap();
        assert_eq!(page.to_ascii_lowercase().matches("</script").count(), 3);
        assert!(!page.contains("<!--"));
        assert!(page.contains("<title>spelunk c2c: /tmp/&lt;b&gt;c2c&lt;/b&gt;.data</title>"));
        assert!(page.contains("(schema spelunk-c2c/1)"));
        let data = element(
            &page,
            r#"<script type="application/json" id="spelunk-data">"#,
        );
        let back: serde_json::Value = serde_json::from_str(data).unwrap();
        assert_eq!(back["report"], serde_json::Value::Null);
        assert_eq!(back["c2c"], serde_json::to_value(&c).unwrap());
        assert_eq!(back["c2c"]["lines"][0]["offsets"][0]["object"], "{{data}}");
    }

    #[test]
    fn fill_leaves_unknown_and_unclosed_placeholders() {
        assert_eq!(
            fill("a{{x}}b{{y}}c{{", &[("x", "{{y}}")]),
            "a{{y}}b{{y}}c{{"
        );
    }
}
