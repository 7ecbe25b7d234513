//! Annotating a function of a recording (`spelunk annotate`): the selected samples per PC,
//! the function's instances among them, and the annotation of the busiest
//! ([`spelunk_analysis::annotate`]).

use crate::recording::{Recording, RecordingError};
use spelunk_analysis::agg::Agg;
use spelunk_analysis::annotate::{annotate, AnnotateInput, AnnotateReport, PieceInput};
use spelunk_analysis::names::{base_name, is_part, FunctionQuery, NameMatch};
use spelunk_analysis::profile::Filter;
use spelunk_analysis::select::Selector;
use spelunk_analysis::symbolize::CodeSymbolizer;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// Why a function could not be annotated.
#[derive(Debug, thiserror::Error)]
pub enum AnnotateError {
    #[error(transparent)]
    Recording(#[from] RecordingError),
    /// No selected sample symbolizes to the function (or its binary is not here).
    #[error(
        "{path}: no selected samples in a function named '{name}'{}{} (see `spelunk report {path}` for the sampled functions){damage}",
        not_found(missing),
        not_readable(unreadable)
    )]
    NoSamplesInFunction {
        path: String,
        name: String,
        /// Binaries the symbolizer could not find here.
        missing: Vec<String>,
        /// Binaries found here that could not be read, with the reason.
        unreadable: Vec<(String, String)>,
        damage: String,
    },
    /// The name given is the short name of several functions with samples (overloads, or
    /// namesakes in other scopes).
    #[error(
        "{path}: '{name}' names {} functions with samples: {}; give the full name (as `spelunk report` shows it) to choose one",
        candidates.len(),
        candidates.iter().map(|(n, s)| format!("'{n}' ({s} samples)")).collect::<Vec<_>>().join(", ")
    )]
    Ambiguous {
        path: String,
        name: String,
        /// The full names with their samples, busiest first.
        candidates: Vec<(String, u64)>,
    },
    /// The function's binary could not be disassembled or its symbols read.
    #[error("{path}: annotating '{name}': {detail}")]
    Annotate {
        path: String,
        name: String,
        detail: String,
    },
}

/// Samples per offset from a function's start.
type PerOffset = HashMap<u64, Agg>;
/// A piece of a function: its start file offset, name and samples.
type Piece = (u64, Arc<str>, PerOffset);

fn not_readable(unreadable: &[(String, String)]) -> String {
    if unreadable.is_empty() {
        String::new()
    } else {
        let each: Vec<String> = unreadable
            .iter()
            .map(|(path, why)| format!("{path} ({why})"))
            .collect();
        format!("; binaries not readable here: {}", each.join(", "))
    }
}

fn not_found(missing: &[String]) -> String {
    if missing.is_empty() {
        String::new()
    } else {
        format!("; binaries not found here: {}", missing.join(", "))
    }
}

impl Recording {
    /// The annotation of the function `name` over the samples `filter` selects: its busiest
    /// instance (binary and start), with a note naming the other instances that have samples.
    /// The losses are the recording's.
    pub fn annotate(
        &self,
        name: &str,
        filter: Filter,
        symbolizer: &mut CodeSymbolizer,
    ) -> Result<AnnotateReport, AnnotateError> {
        let described = filter.describe();
        let mut sel = Selector::new(&self.interp, filter);
        let mut per_pc: HashMap<(Option<u32>, u64), Agg> = HashMap::new();
        let stats = self.while_loading_symbols(symbolizer, || {
            self.decode(|s| {
                let Some(x) = sel.select(s) else { return };
                if let Some(pc) = x.pc {
                    per_pc
                        .entry((s.pid, pc))
                        .or_default()
                        .add(&s.record, x.kind, x.source);
                }
            })
        })?;
        let path = self.path().to_string();
        if sel.selected == 0 {
            return Err(RecordingError::NoSamplesMatched {
                path,
                filter: Vec::new(),
                decoded: sel.decoded,
                damage: self.damage_note(),
            }
            .into());
        }

        // Symbolize the sampled PCs (one batch) and keep the function's.
        let keys: Vec<(Option<u32>, u64)> = per_pc.keys().copied().collect();
        let mut requests = Vec::new();
        let mut of_request = Vec::new();
        for k in &keys {
            if let Some(m) = self.ctx.spaces.lookup(k.0, k.1, None) {
                requests.push((m.clone(), k.1));
                of_request.push(*k);
            }
        }
        let locations = symbolizer.symbolize(&requests);
        type Instance = (Arc<str>, u64);
        // The sampled functions the name names ([`FunctionQuery`]: full, short or mangled),
        // as (dso, function start file offset) → (function, offset → samples).
        let query = FunctionQuery::new(name);
        let mut instances: HashMap<Instance, (Arc<str>, NameMatch, PerOffset)> = HashMap::new();
        for (k, loc) in of_request.iter().zip(&locations) {
            let Some(function) = &loc.function else {
                continue;
            };
            let Some(how) = query.matches(function) else {
                continue;
            };
            let (Some(off), Some(foff)) = (loc.function_offset, loc.file_offset) else {
                continue;
            };
            let Some(agg) = per_pc.get(k) else { continue };
            instances
                .entry((loc.dso.clone(), foff.saturating_sub(off)))
                .or_insert_with(|| (function.clone(), how, HashMap::new()))
                .2
                .entry(off)
                .or_default()
                .merge(agg);
        }
        // A name that is some function's full name means that function, not others whose
        // short form it also is (`f` is the C function f, not also `ns::f(int)`).
        if instances.values().any(|i| i.1 == NameMatch::Full) {
            instances.retain(|_, i| i.1 == NameMatch::Full);
        }
        let samples_of = |m: &HashMap<u64, Agg>| m.values().map(|a| a.samples).sum::<u64>();
        // One function with its parts (`f.cold`, `f.part.0`) per (dso, name without the
        // clone suffix); several names are overloads (or namesakes in other scopes).
        let mut functions: BTreeMap<(Arc<str>, String), Vec<Piece>> = BTreeMap::new();
        for ((dso, start), (function, _, per_offset)) in instances {
            functions
                .entry((dso, base_name(&function).to_string()))
                .or_default()
                .push((start, function, per_offset));
        }
        let total = |pieces: &[Piece]| pieces.iter().map(|p| samples_of(&p.2)).sum::<u64>();
        let mut names: BTreeMap<&str, u64> = BTreeMap::new();
        for ((_, n), pieces) in &functions {
            *names.entry(n).or_default() += total(pieces);
        }
        if names.len() > 1 {
            let mut each: Vec<(&str, u64)> = names.into_iter().collect();
            each.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
            return Err(AnnotateError::Ambiguous {
                path,
                name: name.to_string(),
                candidates: each
                    .into_iter()
                    .map(|(n, samples)| (n.to_string(), samples))
                    .collect(),
            });
        }
        let mut ranked: Vec<_> = functions.into_iter().collect();
        ranked.sort_by(|a, b| total(&b.1).cmp(&total(&a.1)).then(a.0.cmp(&b.0)));
        let mut ranked = ranked.into_iter();
        let Some(((dso, _), mut pieces)) = ranked.next() else {
            return Err(AnnotateError::NoSamplesInFunction {
                path,
                name: name.to_string(),
                missing: symbolizer.missing_files().map(str::to_string).collect(),
                unreadable: symbolizer
                    .unreadable_files()
                    .map(|(p, why)| (p.to_string(), why.to_string()))
                    .chain(symbolizer.mismatched_files().map(|p| {
                        (
                            p.to_string(),
                            "build-id mismatch: rebuilt since recording? use `spelunk archive` \
                             at record time, or --symfs DIR"
                                .to_string(),
                        )
                    }))
                    .collect(),
                damage: self.damage_note(),
            });
        };
        let others: Vec<String> = ranked
            .map(|((d, _), pieces)| format!("{d} ({} samples)", total(&pieces)))
            .collect();
        // The function's body first (the piece that is not a clone, else the busiest), then
        // its parts, busiest first.
        pieces.sort_by(|a, b| {
            is_part(&a.1)
                .cmp(&is_part(&b.1))
                .then(samples_of(&b.2).cmp(&samples_of(&a.2)))
                .then(a.0.cmp(&b.0))
        });
        let mut pieces = pieces.into_iter();
        let Some((start_off, function, per_offset)) = pieces.next() else {
            return Err(AnnotateError::Annotate {
                path,
                name: name.to_string(),
                detail: "no piece of the function has samples".into(),
            });
        };
        let parts: Vec<PieceInput> = pieces
            .map(|(start_file_offset, function, per_offset)| PieceInput {
                function: function.to_string(),
                start_file_offset,
                per_offset,
            })
            .collect();
        let local = symbolizer.local_path(&dso);
        let mut report = annotate(
            AnnotateInput {
                file: path.clone(),
                function: &function,
                dso: dso.clone(),
                local_path: &local,
                start_file_offset: start_off,
                per_offset,
                selected: sel.selected,
                filter: described,
                parts,
            },
            symbolizer,
        )
        .map_err(|detail| AnnotateError::Annotate {
            path,
            name: name.to_string(),
            detail,
        })?;
        if !others.is_empty() {
            report.notes.push(format!(
                "functions named '{name}' in other files have samples too: {}",
                others.join(", ")
            ));
        }
        report.losses = self.losses(&stats);
        Ok(report)
    }
}
