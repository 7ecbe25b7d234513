//! NMO's memory-region views as terminal tables: the cumulative access distribution over the
//! footprint ([`Footprint`]) and the address-over-time summary per data object
//! ([`ObjectTimeline`]; the points themselves are in the JSON and the HTML plots). Every
//! number comes from the report value `--json` prints; formulas are in docs/report.md.

use crate::text_table::{ns, pct, Table};
use spelunk_analysis::footprint::Footprint;
use spelunk_analysis::object_timelines::ObjectTimeline;
use std::fmt::Write as _;

/// Bytes in binary units, one decimal (B below 1 KiB).
fn bytes(b: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if b < 1024 {
        return format!("{b} B");
    }
    let mut v = b as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

/// The footprint holding 50/80/90/99 % of the sampled accesses.
pub fn render_footprint(f: &Footprint, out: &mut String) {
    let _ = writeln!(
        out,
        "\nAccess distribution over the footprint ({} pages per process, hottest first: {} sampled \
         accesses in {} pages = {})",
        bytes(f.region_bytes),
        f.accesses,
        f.regions,
        bytes(f.footprint_bytes)
    );
    let mut tb = Table::new(&[
        ("accesses", false),
        ("pages", false),
        ("footprint", false),
        ("of footprint", false),
    ]);
    for k in &f.key_points {
        tb.row(vec![
            format!("{}%", k.access_percent),
            k.regions.to_string(),
            bytes(k.bytes),
            pct(k.footprint_fraction),
        ]);
    }
    tb.render(out);
    let _ = writeln!(
        out,
        "  hottest page: {} of the accesses; the full curve is in --json (footprint.curve) and --html",
        pct(f.hottest_region_fraction)
    );
}

/// One line per object: the span its timeline points cover in time and in offset.
pub fn render_object_timelines(v: &[ObjectTimeline], population: u64, out: &mut String) {
    let _ = writeln!(
        out,
        "\nAddress over time per data object (the timeline's uniform sample of {population} \
         accesses, as offsets into each object; points in --json and --html)"
    );
    let mut tb = Table::new(&[
        ("samples", false),
        ("points", false),
        ("first", false),
        ("last", false),
        ("offsets", false),
        ("size", false),
        ("object", true),
    ]);
    let or_dash = |x: Option<String>| x.unwrap_or_else(|| "-".into());
    for o in v {
        let offsets = match (o.min_offset_bytes, o.max_offset_bytes) {
            (Some(a), Some(b)) => Some(format!("{a:#x}..{b:#x}")),
            _ => None,
        };
        tb.row(vec![
            o.samples.to_string(),
            o.points.len().to_string(),
            or_dash(o.first_t_ns.map(ns)),
            or_dash(o.last_t_ns.map(ns)),
            or_dash(offsets),
            o.size_bytes.to_string(),
            o.name.clone(),
        ]);
    }
    tb.render(out);
}

#[cfg(test)]
mod tests {
    use super::bytes;

    #[test]
    fn bytes_in_binary_units() {
        assert_eq!(bytes(1000), "1000 B");
        assert_eq!(bytes(4096), "4.0 KiB");
        assert_eq!(bytes(3 << 20), "3.0 MiB");
        assert_eq!(bytes(5 << 30), "5.0 GiB");
    }
}
