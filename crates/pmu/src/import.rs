//! Import of `perf stat -x SEP` output (CSV mode; `-x,` or `-x;`).
//!
//! Each line (perf's documented CSV layout, tools/perf/Documentation/perf-stat.txt) is:
//! `[time,] [aggregation-id,] [aggregated-cpus,] value, unit, event, run-time, percent
//! [, variance] [, metric-value, metric-unit]`, where the value may be `<not counted>` or
//! `<not supported>`, the time is present with `-I`, the aggregation id with `-A` (`CPU3`),
//! `--per-core` (`S0-D0-C1`), `--per-socket` (`S0`) etc. The value is already scaled by perf when
//! the event was multiplexed; `percent` is time_running / time_enabled * 100.
//!
//! Event names are resolved against the catalog: names (`L1D_CACHE`, `l1d_cache`), raw codes
//! (`r3`, `r0003`), PMU syntax (`armv8_pmuv3_0/l1d_cache/`, `armv8_pmuv3_0/event=0x3/`),
//! modifiers (`:u`) stripped, and perf's generic names on arm64 (`instructions`, `cycles`, ...).

use crate::catalog::Catalog;
use crate::counts::{CountStatus, EventCount, Imported, ImportedScope, Measurement};
use crate::error::PmuError;
use std::collections::{BTreeMap, HashMap};

/// perf's generic hardware/cache event names and the Armv8 common event each maps to in the
/// arm64 PMUv3 driver's default tables (fact from Linux `arch/arm64/kernel/perf_event.c`,
/// `armv8_pmuv3_perf_map` / `armv8_pmuv3_perf_cache_map`; some cores override a few).
const PERF_GENERIC: &[(&str, &str)] = &[
    ("cycles", "CPU_CYCLES"),
    ("cpu-cycles", "CPU_CYCLES"),
    ("instructions", "INST_RETIRED"),
    ("branches", "PC_WRITE_RETIRED"),
    ("branch-instructions", "PC_WRITE_RETIRED"),
    ("branch-misses", "BR_MIS_PRED"),
    ("cache-references", "L1D_CACHE"),
    ("cache-misses", "L1D_CACHE_REFILL"),
    ("bus-cycles", "BUS_CYCLES"),
    ("stalled-cycles-frontend", "STALL_FRONTEND"),
    ("stalled-cycles-backend", "STALL_BACKEND"),
    ("l1-dcache-loads", "L1D_CACHE"),
    ("l1-dcache-load-misses", "L1D_CACHE_REFILL"),
    ("l1-icache-loads", "L1I_CACHE"),
    ("l1-icache-load-misses", "L1I_CACHE_REFILL"),
    ("dtlb-loads", "L1D_TLB"),
    ("dtlb-load-misses", "L1D_TLB_REFILL"),
    ("itlb-loads", "L1I_TLB"),
    ("itlb-load-misses", "L1I_TLB_REFILL"),
];

#[derive(Clone, Debug, PartialEq)]
struct Row {
    time_s: Option<f64>,
    scope: Option<String>,
    count: EventCount,
    event: String,
}

/// Parses `perf stat -x` output. `path` is used in error messages only.
pub fn parse_perf_stat(text: &str, path: &str, catalog: &Catalog) -> Result<Imported, PmuError> {
    let sep = detect_separator(text);
    let mut notes = Vec::new();
    let mut rows = Vec::new();
    let mut unknown: BTreeMap<String, usize> = BTreeMap::new();
    let mut mapped: BTreeMap<String, String> = BTreeMap::new();
    for (i, raw_line) in text.lines().enumerate() {
        let line_no = i + 1;
        let line = raw_line.trim_end_matches('\r');
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.split(sep).map(str::trim).collect();
        let Some(v) =
            (0..fields.len()).find(|&v| is_value_like(fields[v]) && is_event(fields.get(v + 2)))
        else {
            // Lines that are not counter lines (e.g. a program's own output) are skipped.
            notes.push(format!(
                "{path}:{line_no}: not a perf stat counter line, skipped"
            ));
            continue;
        };
        let prefix = &fields[..v];
        let mut time_s = None;
        let mut scope = None;
        for (k, f) in prefix.iter().enumerate() {
            if k == 0 && f.contains('.') && f.parse::<f64>().is_ok() {
                time_s = f.parse().ok();
            } else if scope.is_none() && !f.is_empty() && f.parse::<f64>().is_err() {
                scope = Some(f.to_string());
            }
        }
        let event_field = fields[v + 2];
        let err = |message: String| PmuError::Import {
            path: path.to_string(),
            line: line_no,
            message,
        };
        if let Some(what) = x86_event(event_field) {
            return Err(err(format!(
                "{event_field} is {what}: these counts were taken on an x86 machine, not an \
                 Arm core, and Arm top-down metrics cannot be computed from them (count with \
                 perf stat on the Arm machine)"
            )));
        }
        let value_field = fields[v];
        let percent_field = fields.get(v + 4).copied().unwrap_or("");
        if let Some(f) = [value_field, percent_field]
            .into_iter()
            .find(|f| in_other_locale(f, sep))
        {
            return Err(err(format!(
                "{:?} is a number in another locale's format (digits grouped with '.' or a \
                 decimal comma): perf stat wrote the numbers of the locale it ran in; run it \
                 with LC_ALL=C, e.g. `LC_ALL=C perf stat -x, ...`",
                shorten(f)
            )));
        }
        let Some((name, how)) = resolve_event(event_field, catalog) else {
            *unknown.entry(event_field.to_string()).or_insert(0) += 1;
            continue;
        };
        if let Some(how) = how {
            mapped.insert(event_field.to_string(), format!("{name} ({how})"));
        }
        let percent = percent_field.parse::<f64>().ok();
        if let Some(p) = percent.filter(|p| !(0.0..=100.0).contains(p)) {
            return Err(err(format!(
                "the running percentage of {event_field} is {p}, not between 0 and 100 (perf \
                 writes time running / time enabled x 100)"
            )));
        }
        let fraction = percent.map(|p| p / 100.0);
        let count = if value_field.starts_with("<not supported") {
            EventCount::missing(CountStatus::NotSupported)
        } else if value_field.starts_with("<not counted") {
            EventCount::missing(CountStatus::NotCounted)
        } else {
            let value: f64 = value_field.parse().map_err(|_| {
                err(format!(
                    "counter value {:?} is not a number",
                    shorten(value_field)
                ))
            })?;
            if !value.is_finite() {
                return Err(err(format!(
                    "counter value {:?} of {event_field} is not a finite number",
                    shorten(value_field)
                )));
            }
            if value < 0.0 {
                return Err(PmuError::Import {
                    path: path.to_string(),
                    line: line_no,
                    message: format!("negative count {value_field}"),
                });
            }
            EventCount::counted(value, fraction)
        };
        rows.push(Row {
            time_s,
            scope,
            count,
            event: name,
        });
    }
    if rows.is_empty() {
        return Err(PmuError::Import {
            path: path.to_string(),
            line: text.lines().count(),
            message: format!(
                "no counter lines found (expected `perf stat -x{sep}` output{})",
                if unknown.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; events not in the {} catalog: {}",
                        catalog.id,
                        unknown.keys().cloned().collect::<Vec<_>>().join(", ")
                    )
                }
            ),
        });
    }
    for (from, to) in &mapped {
        notes.push(format!("{from} read as {to}"));
    }
    for (name, n) in &unknown {
        notes.push(format!(
            "{name}: not an event of the {} catalog, ignored ({n} line{})",
            catalog.id,
            if *n == 1 { "" } else { "s" }
        ));
    }
    let scopes = assemble(rows, &mut notes);
    Ok(Imported {
        separator: sep,
        format: format!("perf stat -x{sep}"),
        scopes,
        phases: Vec::new(),
        notes,
    })
}

fn assemble(rows: Vec<Row>, notes: &mut Vec<String>) -> Vec<ImportedScope> {
    let mut scopes: Vec<ImportedScope> = Vec::new();
    // Indexes, so that the cost is linear in the lines whatever the scopes and intervals.
    let mut scope_index: HashMap<Option<String>, usize> = HashMap::new();
    let mut interval_index: HashMap<(usize, u64), usize> = HashMap::new();
    let mut dup_noted = false;
    for r in rows {
        let idx = *scope_index.entry(r.scope.clone()).or_insert_with(|| {
            scopes.push(ImportedScope {
                id: r.scope.clone(),
                ..Default::default()
            });
            scopes.len() - 1
        });
        let s = &mut scopes[idx];
        let target = match r.time_s {
            Some(t) => {
                let pos = *interval_index.entry((idx, t.to_bits())).or_insert_with(|| {
                    s.intervals.push((t, Measurement::single(BTreeMap::new())));
                    s.intervals.len() - 1
                });
                &mut s.intervals[pos].1
            }
            None => {
                if s.total.groups.is_empty() {
                    s.total = Measurement::single(BTreeMap::new());
                }
                &mut s.total
            }
        };
        let g = &mut target.groups[0];
        if g.contains_key(&r.event) {
            if !dup_noted {
                notes.push(format!(
                    "{} appears more than once in one scope and interval; the first is used",
                    r.event
                ));
                dup_noted = true;
            }
            continue;
        }
        g.insert(r.event, r.count);
    }
    for s in &mut scopes {
        if !s.intervals.is_empty() {
            s.intervals.sort_by(|a, b| a.0.total_cmp(&b.0));
            let mut total = Measurement::single(BTreeMap::new());
            for (_, m) in &s.intervals {
                total = total.add(m);
            }
            s.total = total;
        }
    }
    scopes
}

fn detect_separator(text: &str) -> char {
    let (mut commas, mut semis) = (0usize, 0usize);
    for l in text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .take(50)
    {
        commas += l.matches(',').count();
        semis += l.matches(';').count();
    }
    if semis > commas {
        ';'
    } else {
        ','
    }
}

/// A counter value as perf writes it, in the C locale or another (digits with '.' and ','),
/// so that a line in another locale is recognised as a counter line and refused with the
/// reason instead of skipped.
fn is_value_like(f: &str) -> bool {
    f.starts_with("<not ")
        || (!f.is_empty() && f.parse::<f64>().is_ok())
        || (f.starts_with(|c: char| c.is_ascii_digit())
            && f.chars()
                .all(|c| c.is_ascii_digit() || c == '.' || c == ','))
}

/// A number written by perf in a locale other than C: digits grouped with '.'
/// (`1.234.567`) or a decimal comma (`100,00`, with `-x;`).
fn in_other_locale(f: &str, sep: char) -> bool {
    let digits = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    let decimal_comma = sep != ','
        && f.split_once(',')
            .is_some_and(|(a, b)| digits(a.replace('.', "").as_str()) && digits(b));
    let grouped = f.matches('.').count() > 1 && f.split('.').all(digits);
    decimal_comma || grouped
}

/// What makes `event` an x86 event, if it is one: PMU syntax with a core PMU only x86
/// machines have (`cpu_core/cycles/`, `cpu_atom/...`, `cpu/...`), or an Intel-style name
/// with a dot (`mem_load_retired.l3_miss`; Arm event names have none).
fn x86_event(event: &str) -> Option<String> {
    if let Some((pmu, rest)) = event.split_once('/') {
        if rest.contains('/') && matches!(pmu, "cpu" | "cpu_core" | "cpu_atom") {
            return Some(format!(
                "an event of the {pmu} PMU, which only x86 machines have"
            ));
        }
        return None;
    }
    let name = event.split(':').next().unwrap_or(event);
    (name.contains('.') && name.parse::<f64>().is_err())
        .then(|| "an x86 (Intel-style) event name".to_string())
}

/// A field for a message: at most 40 characters.
fn shorten(f: &str) -> String {
    if f.len() <= 40 {
        f.to_string()
    } else {
        let cut = (0..=40).rev().find(|&i| f.is_char_boundary(i)).unwrap_or(0);
        format!("{}... ({} characters)", &f[..cut], f.len())
    }
}

fn is_event(f: Option<&&str>) -> bool {
    matches!(f, Some(s) if !s.is_empty() && !s.starts_with('<') && s.parse::<f64>().is_err())
}

/// Resolves a perf event string to a catalog event name. The second value says how, when the
/// name was not the catalog's own.
pub fn resolve_event(field: &str, catalog: &Catalog) -> Option<(String, Option<String>)> {
    let mut s = field.trim();
    // PMU syntax: pmu/terms/modifiers
    let mut inner = s;
    if let Some(start) = s.find('/') {
        if let Some(end) = s[start + 1..].find('/') {
            inner = &s[start + 1..start + 1 + end];
        }
    }
    if inner != s {
        s = inner;
        for term in s.split(',') {
            if let Some(code) = term.trim().strip_prefix("event=") {
                let c = parse_code(code)?;
                return catalog
                    .event_name(c)
                    .map(|n| (n.to_string(), Some(format!("event code {code}"))));
            }
        }
    } else if let Some(pos) = s.rfind(':') {
        s = &s[..pos];
    }
    let upper = s.to_ascii_uppercase();
    if catalog.events.contains_key(&upper) {
        return Some((upper, None));
    }
    if let Some(hex) = s.strip_prefix('r').or_else(|| s.strip_prefix("raw 0x")) {
        if !hex.is_empty() && hex.chars().all(|c| c.is_ascii_hexdigit()) {
            let c = u16::from_str_radix(hex, 16).ok()?;
            return catalog
                .event_name(c)
                .map(|n| (n.to_string(), Some(format!("raw code 0x{c:x}"))));
        }
    }
    let lower = s.to_ascii_lowercase();
    PERF_GENERIC
        .iter()
        .find(|(g, _)| *g == lower)
        .filter(|(_, ev)| catalog.events.contains_key(*ev))
        .map(|(g, ev)| {
            (
                ev.to_string(),
                Some(format!("perf's generic `{g}` on arm64")),
            )
        })
}

fn parse_code(s: &str) -> Option<u16> {
    let s = s.trim();
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u16::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Largest `perf stat` output read whole (far above any real one).
const MAX_PERF_STAT_BYTES: u64 = 256 << 20;

/// What a file given to `spelunk topdown --import` holds.
pub enum ImportInput {
    /// `perf stat -x SEP` text, for [`parse_perf_stat`].
    PerfStat(String),
    /// A spelunk sidecar, and the path it was read from (next to a perf.data, or given itself).
    Sidecar(Box<spelunk_perf::sidecar::Sidecar>, std::path::PathBuf),
}

impl ImportInput {
    /// Reads a sidecar (JSON), a perf.data (its sidecar next to it) or `perf stat -x` text,
    /// telling them apart by their first bytes.
    pub fn read(file: &std::path::Path) -> Result<ImportInput, PmuError> {
        use spelunk_perf::sidecar::Sidecar;
        use std::io::Read;
        let io = |source| PmuError::Io {
            path: file.to_path_buf(),
            source,
        };
        spelunk_fsio::regular_file(file).map_err(io)?;
        let mut magic = [0u8; 8];
        let mut f = std::fs::File::open(file).map_err(io)?;
        if f.read_exact(&mut magic).is_ok() && &magic == b"PERFILE2" {
            let side = Sidecar::path_for(file);
            if !side.exists() {
                return Err(PmuError::NotImportable {
                    path: file.to_path_buf(),
                    message: format!(
                        "a perf.data without a spelunk sidecar ({} does not exist): spelunk \
                         topdown reads counts from the sidecar `spelunk record --emulate` \
                         writes, or from `perf stat -x,` output",
                        side.display()
                    ),
                });
            }
            let sc = Sidecar::read(&side)?;
            return Ok(ImportInput::Sidecar(Box::new(sc), side));
        }
        let bytes = spelunk_fsio::read_bounded(file, MAX_PERF_STAT_BYTES).map_err(io)?;
        if bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{') {
            let sc = Sidecar::read(file)?;
            return Ok(ImportInput::Sidecar(Box::new(sc), file.to_path_buf()));
        }
        let text = String::from_utf8(bytes).map_err(|e| PmuError::NotImportable {
            path: file.to_path_buf(),
            message: format!(
                "neither a spelunk sidecar, a perf.data nor `perf stat -x` text (not UTF-8 at \
                 byte {})",
                e.utf8_error().valid_up_to()
            ),
        })?;
        Ok(ImportInput::PerfStat(text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::builtin;

    #[test]
    fn event_names() {
        let c = builtin("neoverse-n1").unwrap();
        let r = |s: &str| resolve_event(s, &c).map(|x| x.0);
        assert_eq!(r("r11").as_deref(), Some("CPU_CYCLES"));
        assert_eq!(r("r0011").as_deref(), Some("CPU_CYCLES"));
        assert_eq!(r("r1").as_deref(), Some("L1I_CACHE_REFILL"));
        assert_eq!(r("l1d_cache").as_deref(), Some("L1D_CACHE"));
        assert_eq!(r("L1D_CACHE:u").as_deref(), Some("L1D_CACHE"));
        assert_eq!(
            r("armv8_pmuv3_0/l2d_cache_refill/").as_deref(),
            Some("L2D_CACHE_REFILL")
        );
        assert_eq!(
            r("armv8_pmuv3_0/event=0x24/").as_deref(),
            Some("STALL_BACKEND")
        );
        assert_eq!(r("instructions").as_deref(), Some("INST_RETIRED"));
        assert_eq!(r("cycles:u").as_deref(), Some("CPU_CYCLES"));
        assert_eq!(r("page-faults"), None);
        assert_eq!(r("r9999"), None);
    }

    #[test]
    fn layouts() {
        let c = builtin("neoverse-n1").unwrap();
        // aggregate, per-CPU (-A), per-core, interval; not counted/supported; semicolons.
        let text = "\
# started on Mon
100,,r8,1000,100.00,,
<not counted>,,r23,0,0.00,,
<not supported>,,r24,0,100.00,,
CPU0;50;;r8;1000;100.00;;
CPU1;60;;r8;1000;50.00;;
";
        let imp = parse_perf_stat(text, "t", &c).unwrap();
        assert_eq!(imp.separator, ',');
        let agg = &imp.scopes[0];
        assert_eq!(agg.id, None);
        let ev = agg.total.events();
        assert_eq!(ev["INST_RETIRED"].value, Some(100.0));
        assert_eq!(ev["STALL_FRONTEND"].status, CountStatus::NotCounted);
        assert_eq!(ev["STALL_BACKEND"].status, CountStatus::NotSupported);

        let semi = "CPU0;50;;r8;1000;100.00;;\nCPU1;60;;r8;1000;50.00;;\n";
        let imp = parse_perf_stat(semi, "t", &c).unwrap();
        assert_eq!(imp.separator, ';');
        assert_eq!(imp.scopes.len(), 2);
        assert_eq!(imp.scopes[1].id.as_deref(), Some("CPU1"));
        assert_eq!(
            imp.scopes[1].total.events()["INST_RETIRED"].running_fraction,
            Some(0.5)
        );

        let per_core = "S0-D0-C0,2,300,,r11,1000,100.00,,\n";
        let imp = parse_perf_stat(per_core, "t", &c).unwrap();
        assert_eq!(imp.scopes[0].id.as_deref(), Some("S0-D0-C0"));
        assert_eq!(
            imp.scopes[0].total.events()["CPU_CYCLES"].value,
            Some(300.0)
        );

        let interval =
            "1.000100,10,,r8,1,100.00,,\n2.000200,20,,r8,1,100.00,,\n1.000100,5,,r11,1,100.00,,\n";
        let imp = parse_perf_stat(interval, "t", &c).unwrap();
        let s = &imp.scopes[0];
        assert_eq!(s.intervals.len(), 2);
        assert_eq!(s.total.events()["INST_RETIRED"].value, Some(30.0));
        assert_eq!(s.intervals[0].1.groups[0]["CPU_CYCLES"].value, Some(5.0));

        let err = parse_perf_stat("hello\n", "f.csv", &c).unwrap_err();
        assert!(err.to_string().contains("f.csv"), "{err}");
    }

    /// Input that would give wrong numbers is refused at its line, with the reason.
    #[test]
    fn refusals_name_the_line_and_the_reason() {
        let c = builtin("neoverse-n1").unwrap();
        let err = |text: &str| parse_perf_stat(text, "c.csv", &c).unwrap_err().to_string();
        let e = err("100;;r8;1000;100.00;;\n1.234.567;;CPU_CYCLES;1000;100.00;;\n");
        assert!(e.starts_with("c.csv:2: ") && e.contains("locale"), "{e}");
        // Semicolons with decimal commas: the percentage gives the locale away.
        let e = err("617.283;;INST_RETIRED;1000;100,00;;\n");
        assert!(
            e.starts_with("c.csv:1: ") && e.contains("\"100,00\""),
            "{e}"
        );
        let e = err("1000,,cpu_core/cycles/,1000,100.00,,\n");
        assert!(e.contains("cpu_core PMU") && e.contains("x86"), "{e}");
        let e = err("1000,,mem_load_retired.l3_miss,1000,100.00,,\n");
        assert!(e.contains("x86"), "{e}");
        for v in ["nan", "inf", "1e400", &"9".repeat(400)] {
            let e = err(&format!("{v},,r8,1000,100.00,,\n"));
            assert!(
                e.starts_with("c.csv:1: ") && e.contains("not a finite number"),
                "{e}"
            );
        }
        let e = err("100,,r8,1000,nan,,\n");
        assert!(e.contains("running percentage"), "{e}");
        let e = err("100,,r8,1000,100.5,,\n");
        assert!(e.contains("not between 0 and 100"), "{e}");
        // Still read: armv8 PMU syntax, and perf's generic names.
        let ok = parse_perf_stat("5,,armv8_pmuv3_0/cycles/,1000,100.00,,\n", "c.csv", &c).unwrap();
        assert_eq!(ok.scopes[0].total.events()["CPU_CYCLES"].value, Some(5.0));
    }

    /// Scopes and intervals are found through indexes: 20 000 of each assemble into exactly
    /// those scopes and intervals, with each value where it was written.
    #[test]
    fn many_scopes_and_intervals() {
        let c = builtin("neoverse-n1").unwrap();
        let text: String = (0..20_000)
            .map(|i| format!("CPU{i},{i},,r8,1000,100.00,,\n"))
            .collect();
        let imp = parse_perf_stat(&text, "t", &c).unwrap();
        assert_eq!(imp.scopes.len(), 20_000);
        assert_eq!(
            imp.scopes[12_345].total.events()["INST_RETIRED"].value,
            Some(12_345.0)
        );
        let text: String = (0..20_000)
            .map(|i| format!("{i}.5,{i},,r8,1000,100.00,,\n"))
            .collect();
        let imp = parse_perf_stat(&text, "t", &c).unwrap();
        let s = &imp.scopes[0];
        assert_eq!(s.intervals.len(), 20_000);
        assert_eq!(s.intervals[777].0, 777.5);
        // The total is the sum 0 + 1 + ... + 19 999.
        assert_eq!(
            s.total.events()["INST_RETIRED"].value,
            Some((19_999.0 * 20_000.0) / 2.0)
        );
    }
}
