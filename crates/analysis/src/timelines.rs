//! The timelines of a sidecar (`spelunk record --no-spe`: resident memory and PMU counters of
//! the process tree over time) as the report's typed series ([`Timelines`]): times relative to
//! the command's start, resident bytes per class and node, counts per interval scaled for
//! multiplexing, and the rates derived from them with their formulas (docs/report.md,
//! "Timelines").

use crate::model::{
    CapacityPoint, CapacitySeries, ClassBytes, CounterColumn, CounterInterval, CounterSeries,
    DerivedRate, PhaseSpan, RecordingInfo, Report, Timelines, SCHEMA,
};
use spelunk_perf::sidecar::{CapacityTimeline, Counters, NodeResident, Sidecar};

/// The sidecar's timelines, or None when it has none (only sidecars written by the timeline
/// recorder do: `config.timeline_clock` or a `capacity` section). `spe`: the recording has
/// SPE samples too.
pub fn from_sidecar(sc: &Sidecar, spe: bool) -> Option<Timelines> {
    let clock = sc.config.get("timeline_clock").and_then(|v| v.as_str());
    if clock.is_none() && sc.capacity.is_none() {
        return None;
    }
    let config_u64 = |k: &str| sc.config.get(k).and_then(|v| v.as_u64());
    let config_str = |k: &str| {
        sc.config
            .get(k)
            .and_then(|v| v.as_str())
            .map(str::to_string)
    };
    let first_time = sc
        .capacity
        .iter()
        .flat_map(|c| c.samples.iter().map(|s| s.time_ns))
        .chain(sc.counters.timeline.iter().map(|s| s.time_ns))
        .min();
    let origin_ns = config_u64("timeline_start_ns").or(first_time).unwrap_or(0);
    let clock = clock.unwrap_or("unknown").to_string();
    let counters = clock_is_timelines(sc).then(|| {
        counter_series(
            &sc.counters,
            origin_ns,
            config_u64("cache_line_bytes"),
            config_str("counters_pmu"),
            config_str("counters_scope"),
            config_str("counters_grouping"),
        )
    });
    // Phases are drawn on the timelines only when the sidecar says they share its clock.
    let phases = if config_str("phases_clock").as_deref() == Some(clock.as_str()) {
        sc.phases
            .iter()
            .map(|p| PhaseSpan {
                name: p.name.clone(),
                tid: p.tid,
                depth: p.depth,
                start_ns: p.start_ns.saturating_sub(origin_ns),
                end_ns: p.end_ns.saturating_sub(origin_ns),
            })
            .collect()
    } else {
        Vec::new()
    };
    Some(Timelines {
        clock,
        origin_ns,
        spe,
        command: sc.command.clone(),
        exit_status: sc.exit_status,
        capacity: sc.capacity.as_ref().map(|c| capacity_series(c, origin_ns)),
        counters,
        phases,
    })
}

/// The report of a recording that is its timelines alone (`spelunk record --no-spe`: a sidecar
/// and no perf.data): no samples, the timelines, `file` named as the recording. None when the
/// sidecar has no timelines.
pub fn timelines_report(sc: &Sidecar, file: &str) -> Option<Report> {
    let t = from_sidecar(sc, false)?;
    let last = |ns: Option<u64>| ns.unwrap_or(0);
    let duration_ns = last(
        t.capacity
            .as_ref()
            .and_then(|c| c.points.last())
            .map(|p| p.t_ns),
    )
    .max(last(
        t.counters
            .as_ref()
            .and_then(|c| c.intervals.last())
            .map(|i| i.end_ns),
    ));
    Some(Report {
        schema: SCHEMA,
        recording: RecordingInfo {
            file: file.to_string(),
            duration_ns,
            overhead: sc.overhead.clone(),
            ..Default::default()
        },
        hotspot_sort: "samples",
        timelines: Some(t),
        compute: spelunk_pmu::intensity::from_sidecar(sc),
        ..Default::default()
    })
}

/// The sidecar's counters are the timeline recorder's (not the emulator's per-core ones).
fn clock_is_timelines(sc: &Sidecar) -> bool {
    sc.config.contains_key("timeline_clock")
}

fn class_bytes(n: &NodeResident) -> ClassBytes {
    ClassBytes {
        heap_bytes: n.heap_bytes,
        anon_bytes: n.anon_bytes,
        file_bytes: n.file_bytes,
        stack_bytes: n.stack_bytes,
        total_bytes: n.total_bytes(),
    }
}

fn capacity_series(c: &CapacityTimeline, origin_ns: u64) -> CapacitySeries {
    let mut nodes: Vec<Option<u32>> = c
        .samples
        .iter()
        .flat_map(|s| s.nodes.iter().map(|n| n.node))
        .collect();
    nodes.sort_unstable();
    nodes.dedup();
    let points: Vec<CapacityPoint> = c
        .samples
        .iter()
        .map(|s| CapacityPoint {
            t_ns: s.time_ns.saturating_sub(origin_ns),
            processes: s.processes,
            all_nodes: class_bytes(&s.all_nodes()),
            nodes: nodes
                .iter()
                .map(|id| {
                    s.nodes
                        .iter()
                        .find(|n| n.node == *id)
                        .map(class_bytes)
                        .unwrap_or_default()
                })
                .collect(),
        })
        .collect();
    let peak_sample = c.peak_sample();
    let mut peak = class_bytes(&c.peak_per_class());
    peak.total_bytes = peak_sample.map_or(0, |s| s.all_nodes().total_bytes());
    CapacitySeries {
        source: c.source.clone(),
        interval_ns: c.interval_ns,
        nodes,
        points,
        peak,
        peak_t_ns: peak_sample.map(|s| s.time_ns.saturating_sub(origin_ns)),
        notes: c.notes.clone(),
    }
}

/// A rate from the counts of its events in one interval and the interval's length in seconds.
type RateFn = Box<dyn Fn(&[f64], f64) -> Option<f64>>;

/// A derived rate: its description and how to compute it from one interval's scaled counts.
struct Rule {
    rate: DerivedRate,
    /// Indices of the events it needs, and the function of their counts and the interval (s).
    inputs: Vec<usize>,
    f: RateFn,
}

fn rules(c: &Counters, line_bytes: Option<u64>, notes: &mut Vec<String>) -> Vec<Rule> {
    let col = |name: &str| c.events.iter().position(|(_, n)| n == name);
    let mut out = Vec::new();
    let per_line =
        |event: &str, name: &str, what: &str, out: &mut Vec<Rule>, notes: &mut Vec<String>| {
            let Some(i) = col(event) else { return };
            let Some(line) = line_bytes else {
                notes.push(format!(
                    "{name}: the cache line size is unknown (no config.cache_line_bytes), so \
                 {event} is not turned into bytes"
                ));
                return;
            };
            out.push(Rule {
                rate: DerivedRate {
                    name: name.into(),
                    unit: "bytes/s".into(),
                    formula: format!("Δ{event} × {line} B / Δt"),
                    source: format!(
                        "{event} ({what}; [Arm ARM] common event, [N1 PMU methodology]) times the \
                     cache line size from sysfs (coherency_line_size): one line per refill"
                    ),
                    events: vec![event.into()],
                },
                inputs: vec![i],
                f: Box::new(move |v, dt| (dt > 0.0).then(|| v[0] * line as f64 / dt)),
            });
        };
    per_line(
        "LL_CACHE_MISS_RD",
        "llc_read_miss_bytes_per_s",
        "reads that missed the last-level cache: from DRAM or another chip",
        &mut out,
        notes,
    );
    per_line(
        "L2D_CACHE_REFILL",
        "l2_refill_bytes_per_s",
        "lines brought into the L2 from beyond it",
        &mut out,
        notes,
    );
    if let Some(i) = col("BUS_ACCESS") {
        out.push(Rule {
            rate: DerivedRate {
                name: "bus_access_beats_per_s".into(),
                unit: "beats/s".into(),
                formula: "ΔBUS_ACCESS / Δt".into(),
                source: "BUS_ACCESS (0x19: data beats between the core and the interconnect, \
                         [Arm ARM] common event); bytes per beat are implementation defined, so \
                         the rate is not given in bytes"
                    .into(),
                events: vec!["BUS_ACCESS".into()],
            },
            inputs: vec![i],
            f: Box::new(|v, dt| (dt > 0.0).then(|| v[0] / dt)),
        });
    }
    if let (Some(i), Some(c)) = (col("INST_RETIRED"), col("CPU_CYCLES")) {
        out.push(Rule {
            rate: DerivedRate {
                name: "ipc".into(),
                unit: "instructions/cycle".into(),
                formula: "ΔINST_RETIRED / ΔCPU_CYCLES".into(),
                source: "INST_RETIRED (0x08) and CPU_CYCLES (0x11), [Arm ARM] common events".into(),
                events: vec!["INST_RETIRED".into(), "CPU_CYCLES".into()],
            },
            inputs: vec![i, c],
            f: Box::new(|v, _| (v[1] > 0.0).then(|| v[0] / v[1])),
        });
    }
    out
}

fn counter_series(
    c: &Counters,
    origin_ns: u64,
    line_bytes: Option<u64>,
    pmu: Option<String>,
    scope: Option<String>,
    grouping: Option<String>,
) -> CounterSeries {
    let width = c.events.len();
    let mut notes = Vec::new();
    let rules = rules(c, line_bytes, &mut notes);
    let mut snaps: Vec<_> = c
        .timeline
        .iter()
        .filter(|s| s.values.len() == width)
        .collect();
    if snaps.len() != c.timeline.len() {
        notes.push(format!(
            "{} snapshot(s) without one value per event were left out",
            c.timeline.len() - snaps.len()
        ));
    }
    snaps.sort_by_key(|s| s.time_ns);
    let times = |s: &Vec<u64>, i: usize| s.get(i).copied();
    let mut intervals = Vec::new();
    // The counters start at zero at the command's exec, the origin.
    let (mut t0, mut v0, mut en0, mut run0) = (
        origin_ns,
        vec![0u64; width],
        vec![0u64; width],
        vec![0u64; width],
    );
    for s in &snaps {
        let mut scaled = vec![false; width];
        let counts: Vec<Option<f64>> = (0..width)
            .map(|i| {
                let dv = s.values[i].saturating_sub(v0[i]) as f64;
                match (times(&s.time_enabled_ns, i), times(&s.time_running_ns, i)) {
                    (Some(en), Some(run)) => {
                        let (den, drun) = (en.saturating_sub(en0[i]), run.saturating_sub(run0[i]));
                        if drun == den {
                            Some(dv)
                        } else if drun == 0 {
                            None
                        } else {
                            scaled[i] = true;
                            Some(dv * den as f64 / drun as f64)
                        }
                    }
                    // No times (an emulated counter): it counted all the time.
                    _ => Some(dv),
                }
            })
            .collect();
        let dt_s = s.time_ns.saturating_sub(t0) as f64 / 1e9;
        let rates = rules
            .iter()
            .map(|r| {
                let v: Option<Vec<f64>> = r.inputs.iter().map(|&i| counts[i]).collect();
                v.and_then(|v| (r.f)(&v, dt_s))
            })
            .collect();
        intervals.push(CounterInterval {
            start_ns: t0.saturating_sub(origin_ns),
            end_ns: s.time_ns.saturating_sub(origin_ns),
            counts,
            scaled,
            rates,
        });
        t0 = s.time_ns;
        v0.clone_from(&s.values);
        if s.time_enabled_ns.len() == width && s.time_running_ns.len() == width {
            en0.clone_from(&s.time_enabled_ns);
            run0.clone_from(&s.time_running_ns);
        }
    }
    let fin = snaps
        .iter()
        .rev()
        .find(|s| s.reason == "final")
        .or(snaps.last());
    let events = c
        .events
        .iter()
        .enumerate()
        .map(|(i, (code, name))| CounterColumn {
            code: *code,
            name: name.clone(),
            total: fin.map_or(0, |s| s.values[i]),
            running_fraction: fin.and_then(|s| {
                let en = times(&s.time_enabled_ns, i)?;
                let run = times(&s.time_running_ns, i)?;
                (en > 0).then(|| run as f64 / en as f64)
            }),
        })
        .collect();
    CounterSeries {
        pmu,
        scope,
        grouping,
        events,
        not_counted: c.not_counted.clone(),
        derived: rules.into_iter().map(|r| r.rate).collect(),
        intervals,
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use spelunk_perf::sidecar::{CapacitySample, CounterSnapshot, NotCounted};

    fn sidecar() -> Sidecar {
        let mut sc = Sidecar::new("timelines");
        sc.config
            .insert("timeline_clock".into(), "CLOCK_MONOTONIC".into());
        sc.config
            .insert("timeline_start_ns".into(), 1_000_000_000u64.into());
        sc.config.insert("cache_line_bytes".into(), 64u64.into());
        sc.capacity = Some(CapacityTimeline {
            source: "numa_maps".into(),
            interval_ns: 100_000_000,
            samples: vec![
                CapacitySample {
                    time_ns: 1_100_000_000,
                    processes: 1,
                    nodes: vec![NodeResident {
                        node: Some(0),
                        heap_bytes: 4096,
                        file_bytes: 8192,
                        ..Default::default()
                    }],
                },
                CapacitySample {
                    time_ns: 1_200_000_000,
                    processes: 2,
                    nodes: vec![
                        NodeResident {
                            node: Some(0),
                            heap_bytes: 1 << 20,
                            ..Default::default()
                        },
                        NodeResident {
                            node: Some(1),
                            anon_bytes: 3 << 20,
                            stack_bytes: 4096,
                            ..Default::default()
                        },
                    ],
                },
            ],
            notes: vec![],
        });
        sc.counters.events = vec![
            (0x11, "CPU_CYCLES".into()),
            (0x08, "INST_RETIRED".into()),
            (0x37, "LL_CACHE_MISS_RD".into()),
        ];
        sc.counters.not_counted = vec![NotCounted {
            code: 0x19,
            name: "BUS_ACCESS".into(),
            reason: "not in events/".into(),
        }];
        let snap = |t: u64, reason: &str, v: [u64; 3], en: u64, run: [u64; 3]| CounterSnapshot {
            time_ns: t,
            reason: reason.into(),
            values: v.to_vec(),
            time_enabled_ns: vec![en; 3],
            time_running_ns: run.to_vec(),
            ..Default::default()
        };
        sc.counters.timeline = vec![
            // 0.1 s in: everything ran all the time.
            snap(
                1_100_000_000,
                "periodic",
                [200, 100, 1_000],
                100,
                [100, 100, 100],
            ),
            // Next 0.1 s: LL_CACHE_MISS_RD ran half of its 100 more enabled ns.
            snap(
                1_200_000_000,
                "final",
                [600, 400, 1_500],
                200,
                [200, 200, 150],
            ),
        ];
        sc
    }

    #[test]
    fn capacity_points_nodes_and_peaks() {
        let t = from_sidecar(&sidecar(), false).unwrap();
        assert_eq!(
            (t.clock.as_str(), t.origin_ns, t.spe),
            ("CLOCK_MONOTONIC", 1_000_000_000, false)
        );
        let c = t.capacity.unwrap();
        assert_eq!(c.nodes, vec![Some(0), Some(1)]);
        assert_eq!(c.points[0].t_ns, 100_000_000);
        assert_eq!(c.points[0].all_nodes.total_bytes, 4096 + 8192);
        assert_eq!(
            c.points[0].nodes[1],
            ClassBytes::default(),
            "node 1 had nothing yet"
        );
        let p1 = &c.points[1];
        assert_eq!(p1.all_nodes.total_bytes, (1 << 20) + (3 << 20) + 4096);
        assert_eq!(p1.nodes[1].anon_bytes, 3 << 20);
        // Per-class peaks come from different samples: file from the first, heap the second.
        assert_eq!(c.peak.file_bytes, 8192);
        assert_eq!(c.peak.heap_bytes, 1 << 20);
        assert_eq!(c.peak.total_bytes, (4 << 20) + 4096);
        assert_eq!(c.peak_t_ns, Some(200_000_000));
    }

    #[test]
    fn counter_intervals_scale_multiplexed_counts_and_derive_rates() {
        let t = from_sidecar(&sidecar(), false).unwrap();
        let c = t.counters.unwrap();
        assert_eq!(c.intervals.len(), 2);
        let first = &c.intervals[0];
        assert_eq!((first.start_ns, first.end_ns), (0, 100_000_000));
        assert_eq!(first.counts, vec![Some(200.0), Some(100.0), Some(1000.0)]);
        assert_eq!(first.scaled, vec![false; 3]);
        let names: Vec<&str> = c.derived.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["llc_read_miss_bytes_per_s", "ipc"]);
        // 1000 misses x 64 B in 0.1 s = 640 000 B/s; IPC 100/200.
        assert_eq!(first.rates, vec![Some(640_000.0), Some(0.5)]);
        let second = &c.intervals[1];
        // 500 misses counted in 50 of 100 enabled ns: 1000 estimated.
        assert_eq!(second.counts[2], Some(1000.0));
        assert_eq!(second.scaled, vec![false, false, true]);
        assert_eq!(second.rates, vec![Some(640_000.0), Some(300.0 / 400.0)]);
        assert_eq!(c.events[2].total, 1_500);
        assert_eq!(c.events[2].running_fraction, Some(0.75));
        assert_eq!(c.events[0].running_fraction, Some(1.0));
        assert_eq!(c.not_counted[0].name, "BUS_ACCESS");
        assert!(c.derived[0].formula.contains("64 B"));
    }

    #[test]
    fn sidecars_without_timelines_have_none() {
        let mut sc = Sidecar::new("emulator");
        sc.counters.events = vec![(0x11, "CPU_CYCLES".into())];
        assert_eq!(from_sidecar(&sc, true), None);
    }

    #[test]
    fn phases_only_on_the_same_clock() {
        let mut sc = sidecar();
        sc.phases.push(spelunk_perf::sidecar::Phase {
            name: "init".into(),
            pid: Some(1),
            tid: 1,
            depth: 1,
            start_ns: 1_050_000_000,
            end_ns: 1_150_000_000,
        });
        assert!(from_sidecar(&sc, false).unwrap().phases.is_empty());
        sc.config
            .insert("phases_clock".into(), "CLOCK_MONOTONIC".into());
        let p = &from_sidecar(&sc, false).unwrap().phases[0];
        assert_eq!((p.start_ns, p.end_ns), (50_000_000, 150_000_000));
    }
}
