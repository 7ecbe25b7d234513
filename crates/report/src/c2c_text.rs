//! `spelunk c2c` in the terminal, in `perf c2c report --stdio`'s three sections ([SPE methodology]
//! §5.2.4–5.2.6) with spelunk's additions: the data object, the threads and a verdict per line.

use spelunk_analysis::c2c::{C2cReport, LineCounts};
use std::fmt::Write as _;

fn pct(x: f64) -> String {
    format!("{:.2}%", 100.0 * x)
}

fn short(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Right-aligned columns under a header; the last `left` columns are left-aligned.
fn table(out: &mut String, header: &[&str], rows: &[Vec<String>], left: usize) {
    let n = header.len();
    let mut w: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate().take(n) {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let line = |cells: Vec<&str>, out: &mut String| {
        let mut s = String::from(" ");
        for (i, c) in cells.iter().enumerate() {
            let pad = w[i].saturating_sub(c.chars().count());
            s.push(' ');
            if i >= n - left {
                s.push_str(c);
                s.push_str(&" ".repeat(pad));
            } else {
                s.push_str(&" ".repeat(pad));
                s.push_str(c);
            }
        }
        let _ = writeln!(out, "{}", s.trim_end());
    };
    line(header.to_vec(), out);
    for r in rows {
        line(r.iter().map(|c| c.as_str()).collect(), out);
    }
}

fn n(x: u64) -> String {
    x.to_string()
}

pub fn render(r: &C2cReport) -> String {
    let mut o = String::new();
    let bar = "=".repeat(60);
    let _ = writeln!(o, "{bar}\n                 c2c details\n{bar}");
    let _ = writeln!(o, "  Recording               : {}", r.file);
    if !r.filter.is_empty() {
        let _ = writeln!(o, "  Filter                  : {}", r.filter.join(", "));
    }
    let _ = writeln!(o, "  Cachelines sort on      : Peer Snoop");
    let _ = writeln!(o, "  Cacheline data grouping : offset,iaddr");
    let _ = writeln!(o, "  Cache line size         : {} bytes", r.line_size);
    let t = &r.totals.counts;
    let _ = writeln!(
        o,
        "\n  Samples decoded / selected        : {} / {}",
        r.samples_decoded, r.samples_selected
    );
    let _ = writeln!(o, "  Load and store records            : {}", t.records);
    let _ = writeln!(
        o,
        "  Loads / stores                    : {} / {}",
        t.loads, t.stores
    );
    let _ = writeln!(
        o,
        "  Peer snoop loads (local / remote) : {} ({} / {})",
        t.peer(),
        t.peer_local,
        t.peer_remote
    );
    let _ = writeln!(
        o,
        "  Cache lines with peer snoops      : {}",
        r.totals.lines_with_peer_snoops
    );
    if let Some(b) = crate::text::losses_block(&r.losses, "", "  ") {
        o.push_str(&b);
    }
    if r.lines.is_empty() {
        let _ = writeln!(
            o,
            "\nNo cache line had a load served by another core's cache (no peer snoops): no sharing between cores was sampled."
        );
        return o;
    }

    let _ = writeln!(o, "\n{bar}\n           Shared Data Cache Line Table\n{bar}");
    let header = [
        "Index",
        "Address",
        "PA cnt",
        "Peer Snoop",
        "LdPeer Total",
        "Local",
        "Remote",
        "Total records",
        "Total loads",
        "Total stores",
        "St L1Hit",
        "St L1Miss",
        "St N/A",
        "FB",
        "L1",
        "L2",
        "LclHit",
        "LclHitm",
        "RmtHit",
        "RmtHitm",
        "Dram Lcl",
        "Dram Rmt",
        "Verdict",
        "Object",
    ];
    let counts = |c: &LineCounts| {
        vec![
            n(c.peer()),
            n(c.peer_local),
            n(c.peer_remote),
            n(c.records),
            n(c.loads),
            n(c.stores),
            n(c.store_l1_hit),
            n(c.store_l1_miss),
            n(c.store_na),
            n(c.load_fb),
            n(c.load_l1),
            n(c.load_l2),
            n(c.load_lcl_hit),
            n(c.load_lcl_hitm),
            n(c.load_rmt_hit),
            n(c.load_rmt_hitm),
            n(c.load_dram_lcl),
            n(c.load_dram_rmt),
        ]
    };
    let rows: Vec<Vec<String>> = r
        .lines
        .iter()
        .map(|line| {
            let mut row = vec![
                line.index.to_string(),
                format!("{:#x}", line.address),
                n(line.pa_count),
                pct(line.peer_snoop_share),
            ];
            row.extend(counts(&line.counts));
            row.push(line.verdict.name().to_string());
            row.push(line.object.clone().unwrap_or_else(|| "-".into()));
            row
        })
        .collect();
    table(&mut o, &header, &rows, 2);

    let _ = writeln!(
        o,
        "\n{bar}\n      Shared Cache Line Distribution Pareto\n{bar}"
    );
    for line in &r.lines {
        let _ = writeln!(
            o,
            "\n  #{} {:#x}{}  peer snoops {} (lcl {}, rmt {}), records {}, loads {}, stores {}",
            line.index,
            line.address,
            line.object
                .as_ref()
                .map(|x| format!(" ({x})"))
                .unwrap_or_default(),
            line.counts.peer(),
            line.counts.peer_local,
            line.counts.peer_remote,
            line.counts.records,
            line.counts.loads,
            line.counts.stores
        );
        let _ = writeln!(
            o,
            "  verdict: {} — {}",
            line.verdict.name(),
            line.verdict_reason
        );
        let header = [
            "Rmt",
            "Lcl",
            "L1 Hit",
            "L1 Miss",
            "N/A",
            "Offset",
            "PA cnt",
            "Code address",
            "rmt peer",
            "lcl peer",
            "load",
            "records",
            "loads",
            "stores",
            "cpu cnt",
            "Symbol",
            "Shared Object",
            "Source:Line",
            "Threads",
        ];
        let mut rows = Vec::new();
        for off in &line.offsets {
            for a in &off.accesses {
                let cyc = |x: Option<f64>| x.map_or("-".into(), |v| format!("{v:.0}"));
                let sym = match (&a.function, a.function_offset) {
                    (Some(f), Some(d)) => format!("{f}+{d:#x}"),
                    (Some(f), None) => f.clone(),
                    _ => "[unknown]".into(),
                };
                let src = match (&a.file, a.line) {
                    (Some(f), Some(l)) => format!("{}:{l}", short(f)),
                    _ => "-".into(),
                };
                rows.push(vec![
                    pct(a.peer_remote_pct),
                    pct(a.peer_local_pct),
                    pct(a.store_l1_hit_pct),
                    pct(a.store_l1_miss_pct),
                    pct(a.store_na_pct),
                    match &off.object {
                        Some(obj) => format!("{:#x} {obj}", off.offset),
                        None => format!("{:#x}", off.offset),
                    },
                    n(off.pa_count),
                    format!("{:#x}", a.pc),
                    cyc(a.mean_cycles_peer_remote),
                    cyc(a.mean_cycles_peer_local),
                    cyc(a.mean_cycles_load),
                    n(a.counts.records),
                    n(a.counts.loads),
                    n(a.counts.stores),
                    n(a.cpu_count),
                    sym,
                    a.dso.as_deref().map(short).unwrap_or("-").to_string(),
                    src,
                    a.threads
                        .iter()
                        .map(|t| t.label())
                        .collect::<Vec<_>>()
                        .join(","),
                ]);
            }
        }
        table(&mut o, &header, &rows, 4);
    }
    o
}
