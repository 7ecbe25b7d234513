//! PMU top-down methodology for Arm Neoverse: event catalogs per CPU ([`catalog`]), metric
//! expressions ([`expr`]), counter scheduling ([`schedule`]), metric evaluation with the decision
//! tree and sanity checks ([`compute`]), CPU detection from sysfs ([`detect`]), import of
//! `perf stat -x` output ([`import`]) and of spelunk sidecars ([`sidecar`]), live counting
//! ([`live`]) and the typed top-down report ([`report`]; spelunk-report renders it).
//! [`flow`] is `spelunk topdown` from its options to that report (catalog choice, import,
//! the live run's options).
//!
//! Nothing here makes a syscall itself: [`live`] counts through the `PerfSys` interface of
//! `spelunk_perf::counting`, and everything else works on [`counts::Measurement`]s however they
//! were obtained, so all of it is tested on any machine (live counting against a simulated PMU).

pub mod catalog;
pub mod check;
pub mod compute;
pub mod counts;
pub mod describe;
pub mod detect;
pub mod error;
pub mod expr;
pub mod flow;
pub mod import;
pub mod intensity;
pub mod live;
pub mod report;
pub mod schedule;
pub mod schemas;
pub mod sidecar;

pub use catalog::{Catalog, Metric, MetricGroup, Stage};
pub use compute::{
    evaluate, Evaluation, MetricResult, Selection, StageFilter, Warning, WarningKind,
};
pub use counts::{CountStatus, EventCount, Measurement, RawReading};
pub use error::{ExprError, PmuError};
pub use expr::{Constant, Expr, Unavailable};
pub use schedule::{schedule, Budget, Schedule};
