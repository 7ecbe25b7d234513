//! `spelunk advise --verify`: the counterfactual check of an emulated recording's findings
//! (docs/advise.md, "Counterfactual check"). The recorded command runs again under the
//! emulator with the recording's own options (the baseline), then once per finding with the
//! finding's cause removed in the model by the emulator's counterfactual options
//! (emulator/README.md, "Counterfactual knobs"), built here from the finding's typed location.
//! The predicted gain range is compared with the re-emulated gain, baseline cycles ÷
//! counterfactual cycles. The runs themselves are the recorder's (the caller passes them in),
//! so this module decides what to run and reads the results, and runs nothing itself.

use crate::recording::Recording;
use spelunk_analysis::model::advise::{
    AddressRange, Advice, CheckVerdict, CounterfactualCheck, Finding, FindingClass, Verification,
};
use spelunk_perf::sidecar::{Sidecar, EMULATOR_OPTIONS_KEY};

/// The counter the gains compare: the emulator's CPU_CYCLES (summed over the cores).
const CYCLES: &str = "CPU_CYCLES";

/// Huge pages when the recording does not say (the 4 KiB granule's 2 MiB blocks).
const DEFAULT_HUGE_PAGE_BYTES: u64 = 2 << 20;

/// Why a recording cannot be verified.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error(
        "--verify re-runs the program under the emulator; {file} was recorded on hardware: \
         record it with --emulate"
    )]
    NotEmulated { file: String },
    #[error(
        "{file}: its sidecar does not keep the emulator's options (recorded by an older \
         spelunk): record it again with spelunk record --emulate"
    )]
    NoOptions { file: String },
    #[error("{file}: the sidecar names no command to run again")]
    NoCommand { file: String },
    #[error("the baseline re-run failed: {0}")]
    Baseline(String),
    #[error("the baseline re-run has no {CYCLES} counter")]
    NoCycles,
}

/// What the counterfactual runs repeat: the command and the emulator's options as recorded.
#[derive(Clone, Debug, PartialEq)]
pub struct VerifyPlan {
    pub command: Vec<String>,
    pub emulator_options: Vec<String>,
    pub recorded_cycles: Option<f64>,
    /// The emulated huge-page size (for rounding a data range out to whole huge pages).
    pub huge_page_bytes: u64,
}

impl Recording {
    /// The plan to re-run this recording, or why it cannot be (a hardware recording, a sidecar
    /// without the emulator's options).
    pub fn verify_plan(&self) -> Result<VerifyPlan, VerifyError> {
        let file = self.path().to_string();
        let sc = match self.ctx.sidecar.as_deref() {
            Some(sc) if sc.source == "emulator" => sc,
            _ => return Err(VerifyError::NotEmulated { file }),
        };
        let emulator_options: Vec<String> = sc
            .config
            .get(EMULATOR_OPTIONS_KEY)
            .and_then(|v| v.as_array())
            .ok_or_else(|| VerifyError::NoOptions { file: file.clone() })?
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect();
        if sc.command.is_empty() {
            return Err(VerifyError::NoCommand { file });
        }
        Ok(VerifyPlan {
            command: sc.command.clone(),
            emulator_options,
            recorded_cycles: cycles_of(sc),
            huge_page_bytes: sc
                .config
                .get("huge_page_bytes")
                .and_then(|v| v.as_u64())
                .filter(|b| b.is_power_of_two())
                .unwrap_or(DEFAULT_HUGE_PAGE_BYTES),
        })
    }
}

fn cycles_of(sc: &Sidecar) -> Option<f64> {
    sc.counters
        .totals
        .get(CYCLES)
        .map(|c| *c as f64)
        .filter(|c| *c > 0.0)
}

/// A finding's counterfactual: what it removes, in words, and the emulator options that do
/// it; or why the class has none.
pub fn counterfactual(f: &Finding, huge_page_bytes: u64) -> Result<(String, Vec<String>), String> {
    let pcs = || -> Result<String, String> {
        if f.location.pcs.is_empty() {
            return Err("the finding names no PC".into());
        }
        // [pc, pc + 1): the knobs compare an op's own address, whatever its length.
        Ok(ranges(f.location.pcs.iter().map(|pc| AddressRange {
            start: *pc,
            end: pc + 1,
        })))
    };
    let data = || -> Result<AddressRange, String> {
        f.location
            .data_range
            .filter(|r| r.end > r.start)
            .ok_or_else(|| "the finding names no data address range".into())
    };
    let n = f.location.pcs.len();
    match f.class {
        FindingClass::Prefetch | FindingClass::Traversal | FindingClass::Layout => Ok((
            format!(
                "the loads of its {n} PC(s) served at the L1D latency (the bound of any \
                 prefetch, loop-order or layout fix)"
            ),
            vec![format!("--l1-pcs={}", pcs()?)],
        )),
        FindingClass::Bandwidth => Ok((
            "memory without a bandwidth limit (no queueing for DRAM channels; the latency \
             stays): what moving fewer bytes can at most recover"
                .into(),
            vec!["--dram-channels=0".into()],
        )),
        FindingClass::Tlb => {
            let r = data()?;
            let mask = huge_page_bytes - 1;
            let whole = AddressRange {
                start: r.start & !mask,
                end: r.end.saturating_add(mask) & !mask,
            };
            Ok((
                format!(
                    "its data ({} bytes) on {} KiB pages",
                    r.end - r.start,
                    huge_page_bytes >> 10
                ),
                vec![format!("--huge-range={}", ranges([whole]))],
            ))
        }
        FindingClass::FalseSharing | FindingClass::TrueSharing => Ok((
            "its line(s) private to each core: no ownership transfers (padding, or a copy per \
             thread)"
                .into(),
            vec![format!("--no-transfer-range={}", ranges([data()?]))],
        )),
        FindingClass::StoreForwarding => Ok((
            "the loads of its PC(s) take the store's value at the L1D latency, without \
             waiting for it (the value kept in a register)"
                .into(),
            vec![format!("--forward-pcs={}", pcs()?)],
        )),
        FindingClass::SplitLine => Ok((
            "the accesses of its PC(s) made without crossing a line (aligned data)".into(),
            vec![format!("--no-split-pcs={}", pcs()?)],
        )),
        FindingClass::RemoteMemory => {
            Err("not available: the emulator models no NUMA nodes (emulator/MODEL.md)".into())
        }
        FindingClass::BranchMispredict
        | FindingClass::HeapChurn
        | FindingClass::FrontEnd
        | FindingClass::Core => Err(format!(
            "not available: the emulator has no counterfactual for {}",
            f.class
        )),
    }
}

/// Hexadecimal `START-END` ranges, comma-separated (the knobs' syntax).
fn ranges(rs: impl IntoIterator<Item = AddressRange>) -> String {
    rs.into_iter()
        .map(|r| format!("{:#x}-{:#x}", r.start, r.end))
        .collect::<Vec<_>>()
        .join(",")
}

/// The re-emulated speedup against the finding's range.
pub fn verdict(f: &Finding, speedup: f64) -> CheckVerdict {
    if speedup < f.gain.low_speedup {
        CheckVerdict::Below
    } else if speedup > f.gain.upper_speedup {
        CheckVerdict::Above
    } else {
        CheckVerdict::Within
    }
}

/// Runs the baseline and the first `max_findings` findings' counterfactuals, in order, one at
/// a time. `run` runs the recorded command with the recording's options plus the given knobs
/// and returns the run's sidecar; `say` gets a progress line per run.
pub fn verify(
    advice: &Advice,
    plan: &VerifyPlan,
    max_findings: usize,
    run: &mut dyn FnMut(&[String]) -> Result<Sidecar, String>,
    say: &mut dyn FnMut(&str),
) -> Result<Verification, VerifyError> {
    let findings = &advice.findings[..advice.findings.len().min(max_findings)];
    let plans: Vec<_> = findings
        .iter()
        .map(|f| counterfactual(f, plan.huge_page_bytes))
        .collect();
    let runs = 1 + plans.iter().filter(|p| p.is_ok()).count();
    say(&format!(
        "run 1/{runs}: the baseline, {} with the recording's own emulator options",
        plan.command.join(" ")
    ));
    let base = run(&[]).map_err(VerifyError::Baseline)?;
    let baseline_cycles = cycles_of(&base).ok_or(VerifyError::NoCycles)?;
    let mut checks = Vec::new();
    let mut k = 1;
    for (i, (f, p)) in findings.iter().zip(plans).enumerate() {
        let mut check = CounterfactualCheck {
            finding: i,
            class: f.class,
            counterfactual: String::new(),
            knobs: Vec::new(),
            predicted_low: f.gain.low_speedup,
            predicted_likely: f.gain.likely_speedup,
            predicted_upper: f.gain.upper_speedup,
            cycles: None,
            reemulated_speedup: None,
            verdict: CheckVerdict::NotRun,
            note: None,
        };
        match p {
            Err(why) => check.note = Some(why),
            Ok((what, knobs)) => {
                k += 1;
                say(&format!(
                    "run {k}/{runs}: finding {} ({}), {what}: {}",
                    i + 1,
                    f.class,
                    knobs.join(" ")
                ));
                check.counterfactual = what;
                match run(&knobs).map(|sc| cycles_of(&sc)) {
                    Ok(Some(c)) => {
                        let s = baseline_cycles / c;
                        check.cycles = Some(c);
                        check.reemulated_speedup = Some(s);
                        check.verdict = verdict(f, s);
                    }
                    Ok(None) => check.note = Some(format!("the run has no {CYCLES} counter")),
                    Err(e) => check.note = Some(format!("the run failed: {e}")),
                }
                check.knobs = knobs;
            }
        }
        checks.push(check);
    }
    Ok(Verification {
        command: plan.command.clone(),
        emulator_options: plan.emulator_options.clone(),
        baseline_cycles,
        recorded_cycles: plan.recorded_cycles,
        checks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use spelunk_analysis::model::advise::{FindingLocation, Gain};

    fn finding(class: FindingClass) -> Finding {
        Finding {
            class,
            rule: String::new(),
            source: String::new(),
            title: String::new(),
            location: FindingLocation {
                pcs: vec![0x401000, 0x401010],
                data_range: Some(AddressRange {
                    start: 0x5000_1000,
                    end: 0x5030_0000,
                }),
                ..FindingLocation::default()
            },
            evidence: Vec::new(),
            fix: Default::default(),
            gain: Gain {
                low_speedup: 1.2,
                likely_speedup: 1.5,
                upper_speedup: 2.0,
                ..Gain::default()
            },
            samples: 100,
        }
    }

    #[test]
    fn each_class_gets_the_knob_that_removes_its_cause() {
        let knobs = |c| counterfactual(&finding(c), 2 << 20).map(|x| x.1);
        assert_eq!(
            knobs(FindingClass::Prefetch),
            Ok(vec!["--l1-pcs=0x401000-0x401001,0x401010-0x401011".into()])
        );
        // rounded out to whole 2 MiB pages
        assert_eq!(
            knobs(FindingClass::Tlb),
            Ok(vec!["--huge-range=0x50000000-0x50400000".into()])
        );
        assert_eq!(
            knobs(FindingClass::FalseSharing),
            Ok(vec!["--no-transfer-range=0x50001000-0x50300000".into()])
        );
        assert_eq!(
            knobs(FindingClass::StoreForwarding),
            Ok(vec![
                "--forward-pcs=0x401000-0x401001,0x401010-0x401011".into()
            ])
        );
        assert_eq!(
            knobs(FindingClass::SplitLine),
            Ok(vec![
                "--no-split-pcs=0x401000-0x401001,0x401010-0x401011".into()
            ])
        );
        assert_eq!(
            knobs(FindingClass::Bandwidth),
            Ok(vec!["--dram-channels=0".into()])
        );
        assert!(knobs(FindingClass::RemoteMemory).is_err());
        assert!(knobs(FindingClass::BranchMispredict).is_err());
    }

    #[test]
    fn the_verdict_places_the_speedup_against_the_range() {
        let f = finding(FindingClass::Prefetch);
        assert_eq!(verdict(&f, 1.1), CheckVerdict::Below);
        assert_eq!(verdict(&f, 1.2), CheckVerdict::Within);
        assert_eq!(verdict(&f, 2.0), CheckVerdict::Within);
        assert_eq!(verdict(&f, 2.1), CheckVerdict::Above);
    }

    #[test]
    fn the_gain_is_baseline_over_counterfactual_cycles() {
        let advice = Advice {
            findings: vec![
                finding(FindingClass::Prefetch),
                finding(FindingClass::BranchMispredict),
            ],
            ..Advice::default()
        };
        let plan = VerifyPlan {
            command: vec!["./app".into()],
            emulator_options: vec!["--period=1024".into()],
            recorded_cycles: Some(1000.0),
            huge_page_bytes: 2 << 20,
        };
        let mut asked = Vec::new();
        let mut run = |knobs: &[String]| {
            asked.push(knobs.to_vec());
            let mut sc = Sidecar::new("emulator");
            let cycles = if knobs.is_empty() { 3000 } else { 2000 };
            sc.counters.totals.insert(CYCLES.into(), cycles);
            Ok(sc)
        };
        let mut lines = Vec::new();
        let v = verify(&advice, &plan, 3, &mut run, &mut |l| {
            lines.push(l.to_string())
        })
        .unwrap();
        assert_eq!(v.baseline_cycles, 3000.0);
        assert_eq!(v.checks.len(), 2);
        assert_eq!(v.checks[0].reemulated_speedup, Some(1.5));
        assert_eq!(v.checks[0].verdict, CheckVerdict::Within);
        assert_eq!(v.checks[1].verdict, CheckVerdict::NotRun);
        assert!(v.checks[1].note.is_some());
        // the baseline and one counterfactual: a progress line each
        assert_eq!(asked.len(), 2);
        assert_eq!(lines.len(), 2);
    }
}
