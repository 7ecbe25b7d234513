//! Sample selection shared by the analyses that stream samples themselves (annotate,
//! estimates, c2c): classify each decoded sample (operation kind, a load's data source, PC)
//! and apply the user's [`Filter`] exactly as `spelunk report` does.

use crate::agg::OpKind;
use crate::profile::Filter;
use spelunk_spe::{DataSource, Interpretation, SpeSample};

/// A selected sample's classification.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Selected {
    pub kind: OpKind,
    /// Loads only: where the data came from, by the CPU's data-source table.
    pub source: Option<DataSource>,
    pub pc: Option<u64>,
}

/// Classifies samples and applies a filter; counts what it saw.
pub struct Selector<'a> {
    interp: &'a Interpretation,
    pub filter: Filter,
    first_time_ns: Option<u64>,
    /// Samples offered / selected.
    pub decoded: u64,
    pub selected: u64,
}

impl<'a> Selector<'a> {
    pub fn new(interp: &'a Interpretation, filter: Filter) -> Self {
        Selector {
            interp,
            filter,
            first_time_ns: None,
            decoded: 0,
            selected: 0,
        }
    }

    /// The data source of a load sample.
    pub fn load_source(interp: &Interpretation, s: &SpeSample) -> Option<DataSource> {
        interp
            .for_cpu(s.cpu)
            .data_source
            .resolve(s.record.data_source, s.record.events)
            .map(|(d, _)| d)
    }

    /// Classifies `s` and returns it if the filter selects it (samples arrive in time order).
    pub fn select(&mut self, s: &SpeSample) -> Option<Selected> {
        self.decoded += 1;
        if let Some(t) = s.time_ns {
            self.first_time_ns.get_or_insert(t);
        }
        let kind = OpKind::of(&s.record);
        let source = match kind {
            OpKind::Load => Self::load_source(self.interp, s),
            _ => None,
        };
        let pc = s.record.pc.map(|p| p.va());
        if !self.filter.accepts(s, kind, source, pc, self.first_time_ns) {
            return None;
        }
        self.selected += 1;
        Some(Selected { kind, source, pc })
    }
}
