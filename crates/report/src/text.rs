//! The report as terminal tables. Every number comes from the [`Report`] value (the same one
//! `--json` prints); formulas are in docs/report.md.

use crate::text_table::Table;
use crate::text_table::{ns, pct};
use spelunk_analysis::model::{
    GroupStats, Hotspot, LatencySummary, Losses, Report, SamplingQuality,
};
use std::fmt::Write as _;

/// The damage summary every command prints when a recording lost something: one `LOSSES`
/// line with the counts, then each problem (a cut file with its byte offsets, a sidecar not
/// used) on its own line. `label` follows the word (e.g. ` in B`); `None` when nothing was
/// lost.
pub fn losses_block(l: &Losses, label: &str, indent: &str) -> Option<String> {
    if l.is_empty() {
        return None;
    }
    let lost = [
        (l.undecodable_bytes, "undecodable bytes"),
        (l.dropped_records, "dropped records"),
        (l.incomplete_records, "incomplete records"),
        (l.truncated_packets, "truncated packets"),
        (l.aux_truncated, "AUX buffers truncated"),
        (l.aux_partial, "AUX buffers partial"),
        (l.aux_collision, "AUX buffers with collisions"),
        (l.lost_events, "PERF_RECORD_LOST"),
        (l.lost_records, "records reported lost"),
    ];
    let parts: Vec<String> = lost
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, w)| format!("{n} {w}"))
        .collect();
    let mut o = String::new();
    let _ = writeln!(o, "{indent}LOSSES{label}: {}", parts.join(", "));
    for p in &l.problems {
        let _ = writeln!(o, "{indent}  {p}");
    }
    Some(o)
}

/// Which hotspot table to print.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HotspotsBy {
    Function,
    Line,
    Instruction,
    Dso,
}

#[derive(Clone, Copy, Debug)]
pub struct TextOptions {
    pub by: HotspotsBy,
    /// Rows per table.
    pub rows: usize,
}

impl Default for TextOptions {
    fn default() -> Self {
        TextOptions {
            by: HotspotsBy::Function,
            rows: 20,
        }
    }
}

fn lat_mean(l: &Option<LatencySummary>) -> String {
    l.as_ref().map_or("-".into(), |l| format!("{:.1}", l.mean))
}

fn lat_pct(l: &Option<LatencySummary>, f: fn(&LatencySummary) -> u16) -> String {
    l.as_ref().map_or("-".into(), |l| f(l).to_string())
}

fn top_source(g: &GroupStats) -> String {
    let total: u64 = g.sources.iter().map(|s| s.loads).sum();
    match g.sources.first() {
        Some(s) if total > 0 => {
            format!("{} {:.0}%", s.source, 100.0 * s.loads as f64 / total as f64)
        }
        _ => "-".into(),
    }
}

fn short(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The column a `--sort` order adds when the table does not already show its figure.
/// A column: header and the figure it shows.
type Column = (&'static str, fn(&GroupStats) -> u64);

fn sort_column(sort: &str) -> Option<Column> {
    match sort {
        "stores" => Some(("stores", |g| g.stores)),
        "llc-miss" => Some(("LLC miss", |g| g.llc_miss)),
        "tlb-walk" => Some(("TLB walk", |g| g.tlb_walk)),
        "mispredicts" => Some(("mispred", |g| g.mispredicts)),
        "remote" => Some(("remote", |g| g.remote)),
        _ => None,
    }
}

fn hotspot_table(rows: &[Hotspot], n: usize, what: &'static str, sort: &str, out: &mut String) {
    let extra = sort_column(sort);
    let mut cols = vec![
        ("cost", false),
        ("share", false),
        ("samples", false),
        ("loads", false),
        ("ld lat", false),
        ("p50", false),
        ("p99", false),
        ("exec", false),
        ("L1D miss", false),
    ];
    if let Some((name, _)) = extra {
        cols.push((name, false));
    }
    cols.extend([("top source", true), (what, true), ("dso", true)]);
    let mut t = Table::new(&cols);
    let name_column = cols.len() - 2;
    let shorter = shorter_function_names(rows, n, what);
    for (h, short_form) in rows.iter().take(n).zip(shorter) {
        let g = &h.stats;
        let mut row = vec![
            pct(g.cost_share),
            pct(g.share),
            g.samples.to_string(),
            g.loads.to_string(),
            lat_mean(&g.load_latency),
            lat_pct(&g.load_latency, |l| l.p50),
            lat_pct(&g.load_latency, |l| l.p99),
            lat_mean(&g.load_exec_latency),
            g.l1d_miss.to_string(),
        ];
        if let Some((_, f)) = extra {
            row.push(f(g).to_string());
        }
        row.extend([
            top_source(g),
            h.key.clone(),
            h.dso.as_deref().map(short).unwrap_or("-").to_string(),
        ]);
        let mut alternatives = vec![None; row.len()];
        alternatives[name_column] = short_form;
        t.row_with_shorter(row, alternatives);
    }
    t.render(out);
}

/// For a function table, each row's short name (names.rs: no return type, template arguments
/// or parameters), shown when the full name does not fit, when no other row shown has the
/// same short name (overloads keep their full names, cut).
fn shorter_function_names(rows: &[Hotspot], n: usize, what: &str) -> Vec<Option<String>> {
    let shown = &rows[..n.min(rows.len())];
    if what != "function" {
        return vec![None; shown.len()];
    }
    let shorts: Vec<String> = shown
        .iter()
        .map(|h| spelunk_analysis::names::short_name(&h.key))
        .collect();
    let mut count: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for s in &shorts {
        *count.entry(s.as_str()).or_default() += 1;
    }
    shorts
        .iter()
        .zip(shown)
        .map(|(s, h)| (count[s.as_str()] == 1 && *s != h.key).then(|| s.clone()))
        .collect()
}

/// The sampling-quality lines (ratios, [NMO paper eq. 1] accuracy, notes), each starting with
/// `indent`: in the report and in `spelunk record --emulate`'s closing summary.
pub fn sampling_quality_lines(q: &SamplingQuality, indent: &str) -> String {
    let mut o = String::new();
    let ratio = |x: Option<f64>| x.map_or("-".into(), |v| format!("{v:.6}"));
    let _ = writeln!(
        o,
        "{indent}sampling ratios ({} counts): sampling {}, filter {}, collision {}",
        q.counts_from,
        ratio(q.sampling_ratio),
        ratio(q.filter_ratio),
        ratio(q.collision_ratio)
    );
    if let (Some(a), Some(m), Some(e)) = (q.accuracy, q.mem_access, q.estimated_mem_access) {
        let _ = writeln!(
            o,
            "{indent}accuracy ([NMO paper eq. 1]): {} = 1 - |{m} MEM_ACCESS - {} memory samples x {} | / {m} (estimate {e})",
            pct(a),
            q.memory_samples,
            q.interval.unwrap_or(0),
        );
    }
    for n in &q.notes {
        let _ = writeln!(o, "{indent}  note: {n}");
    }
    o
}

pub fn render(r: &Report, opt: &TextOptions) -> String {
    if let Some(t) = r.timelines.as_ref().filter(|t| !t.spe) {
        let mut o = crate::timelines_text::render_only(&r.recording.file, t, opt.rows);
        if let Some(ov) = &r.recording.overhead {
            o.push_str(&crate::overhead_text::lines(ov, "  "));
        }
        if let Some(c) = &r.compute {
            o.push_str(&crate::intensity_text::render(c));
        }
        return o;
    }
    let mut o = String::new();
    let rec = &r.recording;
    let _ = writeln!(o, "spelunk report: {}", rec.file);
    let cpu = match (&rec.cpu_model, &rec.midr) {
        (Some(m), Some(x)) => format!("{m} (MIDR {x})"),
        (None, Some(x)) => format!("unknown CPU (MIDR {x})"),
        _ => "unknown CPU".into(),
    };
    let pages = rec
        .emulated_pages
        .as_ref()
        .map(|p| format!("; {p}"))
        .unwrap_or_default();
    let emulated = match (rec.emulated, &rec.emulated_platform) {
        (true, Some(p)) => format!(
            " [emulated by spelunk, platform {p}: figures come from its model, not hardware{pages}]"
        ),
        (true, None) => {
            format!(" [emulated by spelunk: figures come from its model, not hardware{pages}]")
        }
        (false, _) => String::new(),
    };
    let _ = writeln!(
        o,
        "  cpu: {cpu}{emulated}; duration {}",
        ns(rec.duration_ns)
    );
    let _ = writeln!(
        o,
        "  samples: {} decoded, {} selected",
        rec.samples_decoded, rec.samples_selected
    );
    if !r.filter.is_empty() {
        let _ = writeln!(o, "  filter: {}", r.filter.join(", "));
    }
    if let Some(s) = &rec.sampling {
        let _ = writeln!(
            o,
            "  sampling: requested period {}, interval applied {}{}{}",
            s.requested_period.map_or("-".into(), |p| p.to_string()),
            s.effective_interval
                .map_or("unknown".into(), |p| format!("{p} operations")),
            if s.jitter { " (jitter)" } else { "" },
            s.note.as_ref().map_or(String::new(), |n| format!("; {n}")),
        );
    }
    if let Some(q) = &rec.sampling_quality {
        o.push_str(&sampling_quality_lines(q, "  "));
    }
    if let Some(ov) = &rec.overhead {
        o.push_str(&crate::overhead_text::lines(ov, "  "));
    }
    match losses_block(&rec.losses, "", "  ") {
        Some(b) => o.push_str(&b),
        None => {
            let _ = writeln!(o, "  losses: none");
        }
    }
    if !rec.missing_files.is_empty() {
        let _ = writeln!(
            o,
            "  not found here (no symbols; try --symfs): {}",
            rec.missing_files
                .iter()
                .take(5)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if !rec.mismatched_files.is_empty() {
        let samples: u64 = rec.mismatched_files.iter().map(|f| f.samples).sum();
        let _ = writeln!(
            o,
            "  build-id mismatch, {samples} samples not named: {} (the file here is not the one \
             recorded; rebuilt since recording? use `spelunk archive` at record time, or \
             --symfs DIR)",
            rec.mismatched_files
                .iter()
                .take(5)
                .map(|f| format!("{} ({} samples)", f.path, f.samples))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    for f in rec.unreadable_files.iter().take(5) {
        let _ = writeln!(
            o,
            "  not readable here (no symbols): {}: {}",
            f.path, f.reason
        );
    }
    let t = &r.totals;
    let _ = writeln!(
        o,
        "  operations: {} loads, {} stores, {} branches ({} mispredicted), {} other",
        t.loads, t.stores, t.branches, t.mispredicts, t.other
    );
    if let Some(a) = &r.advice {
        o.push_str(&crate::advise_text::top_lines(a, 3));
    }

    let (rows, what, title) = match opt.by {
        HotspotsBy::Function => (&r.hotspots.functions, "function", "Hotspots by function"),
        HotspotsBy::Line => (&r.hotspots.lines, "source line", "Hotspots by source line"),
        HotspotsBy::Instruction => (
            &r.hotspots.instructions,
            "instruction",
            "Hotspots by instruction",
        ),
        HotspotsBy::Dso => (&r.hotspots.dsos, "dso", "Hotspots by DSO"),
    };
    let sorted = if r.hotspot_sort == "cost" {
        String::new()
    } else {
        format!(", sorted by {}", r.hotspot_sort)
    };
    let _ = writeln!(
        o,
        "\n{title}{sorted} (cost: share of the estimated cycles, docs/report.md; load latency in cycles; exec = total - issue - translation)"
    );
    hotspot_table(rows, opt.rows, what, r.hotspot_sort, &mut o);

    if !r.data_sources.is_empty() {
        let _ = writeln!(o, "\nLoads by data source (cycles: mean / p50 / p99)");
        let mut tb = Table::new(&[
            ("source", true),
            ("loads", false),
            ("share", false),
            ("total", false),
            ("issue", false),
            ("translation", false),
            ("execution", false),
        ]);
        let cell = |l: &Option<LatencySummary>| {
            l.as_ref().map_or("-".into(), |l| {
                format!("{:.1} / {} / {}", l.mean, l.p50, l.p99)
            })
        };
        for d in &r.data_sources {
            tb.row(vec![
                d.source.clone(),
                d.loads.to_string(),
                pct(d.share),
                cell(&d.total),
                cell(&d.issue),
                cell(&d.translation),
                cell(&d.execution),
            ]);
        }
        tb.render(&mut o);
    }

    if !r.objects.is_empty() {
        let _ = writeln!(o, "\nData objects");
        let mut tb = Table::new(&[
            ("share", false),
            ("samples", false),
            ("loads", false),
            ("stores", false),
            ("ld lat", false),
            ("top source", true),
            ("object", true),
            ("kind", true),
            ("size", false),
        ]);
        for ob in r.objects.iter().take(opt.rows) {
            let g = &ob.stats;
            tb.row(vec![
                pct(g.share),
                g.samples.to_string(),
                g.loads.to_string(),
                g.stores.to_string(),
                lat_mean(&g.load_latency),
                top_source(g),
                ob.name.clone(),
                ob.kind.clone(),
                ob.size.to_string(),
            ]);
        }
        tb.render(&mut o);
    }

    if !r.allocation_sites.is_empty() {
        let _ = writeln!(
            o,
            "\nData objects by allocation site (heap blocks logged at allocation; a sample counts \
             for the block live at its address and time)"
        );
        let mut tb = Table::new(&[
            ("share", false),
            ("samples", false),
            ("loads", false),
            ("stores", false),
            ("ld lat", false),
            ("top source", true),
            ("blocks", false),
            ("bytes", false),
            ("lifetime", false),
            ("allocation site", true),
        ]);
        for s in r.allocation_sites.iter().take(opt.rows) {
            let g = &s.stats;
            tb.row(vec![
                pct(g.share),
                g.samples.to_string(),
                g.loads.to_string(),
                g.stores.to_string(),
                lat_mean(&g.load_latency),
                top_source(g),
                s.blocks.to_string(),
                s.bytes.to_string(),
                s.mean_lifetime_ns
                    .map(|ns| format!("{:.3} ms", ns as f64 / 1e6))
                    .unwrap_or_else(|| "-".into()),
                s.site.clone(),
            ]);
        }
        tb.render(&mut o);
    }

    if !r.phases.is_empty() {
        let _ = writeln!(
            o,
            "\nPhases (samples taken while the phase was open on their thread)"
        );
        let mut tb = Table::new(&[
            ("share", false),
            ("samples", false),
            ("loads", false),
            ("stores", false),
            ("ld lat", false),
            ("L1D miss", false),
            ("top source", true),
            ("instances", false),
            ("threads", false),
            ("time", false),
            ("phase", true),
        ]);
        for ph in r.phases.iter().take(opt.rows) {
            let g = &ph.stats;
            tb.row(vec![
                pct(g.share),
                g.samples.to_string(),
                g.loads.to_string(),
                g.stores.to_string(),
                lat_mean(&g.load_latency),
                g.l1d_miss.to_string(),
                top_source(g),
                ph.instances.to_string(),
                ph.threads.to_string(),
                ns(ph.duration_ns),
                ph.name.clone(),
            ]);
        }
        tb.render(&mut o);
    }

    if r.threads.len() > 1 {
        let _ = writeln!(o, "\nThreads");
        let mut tb = Table::new(&[
            ("share", false),
            ("samples", false),
            ("pid", false),
            ("tid", false),
            ("name", true),
        ]);
        for th in r.threads.iter().take(opt.rows) {
            tb.row(vec![
                pct(th.share),
                th.samples.to_string(),
                th.pid.map_or("-".into(), |p| p.to_string()),
                th.tid.map_or("-".into(), |p| p.to_string()),
                th.name.clone().unwrap_or_default(),
            ]);
        }
        tb.render(&mut o);
    }
    if let Some(c) = &r.compute {
        o.push_str(&crate::intensity_text::render(c));
    }
    if let Some(f) = &r.footprint {
        crate::footprint_text::render_footprint(f, &mut o);
    }
    if !r.object_timelines.is_empty() {
        let v = &r.object_timelines[..r.object_timelines.len().min(opt.rows)];
        crate::footprint_text::render_object_timelines(v, r.timeline.population, &mut o);
    }
    if let Some(t) = &r.timelines {
        o.push_str(&crate::timelines_text::render(t, opt.rows));
    }
    o
}
