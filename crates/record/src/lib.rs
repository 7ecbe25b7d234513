//! The collect stage: recording a program's SPE samples and PMU counts into a standard
//! perf.data plus spelunk's sidecar (`FILE.spelunk.json`).
//!
//! Two recorders write the same output:
//! - [`hardware`]: Arm SPE on the machine itself, through `perf_event_open` of an `arm_spe_*`
//!   PMU and its AUX area;
//! - [`emulator`]: the program runs under spelunk's Valgrind tool, which models a Neoverse N1
//!   and samples its operations the way SPE does; [`convert`] turns the tool's trace into what
//!   a hardware recording would have been, and [`session`] runs the two as one flow;
//! - [`timeline`]: resident memory per NUMA node and PMU counters of the process tree over
//!   time, on any machine (`spelunk record --no-spe` records them alone).
//!
//! [`unsupported`] reads the program before an emulated run for what Valgrind cannot run
//! (another architecture, SVE/SME, AVX-512).
//!
//! [`flow`] is `spelunk record` from its options to the typed recording (which recorder, the
//! checks before the program runs, `--overhead`'s interleaved runs) and `spelunk topdown
//! --emulate`'s, so that front ends only parse flags and render.

pub mod buildids;
pub mod convert;
pub mod emulator;
pub mod flow;
pub mod hardware;
pub mod interrupt;
pub mod overhead;
pub mod runtime_log;
pub mod session;
pub mod timeline;
pub mod unsupported;

pub use convert::{convert, Conversion, ConvertError};
pub use emulator::{EmulatedRun, EmulatorError, EmulatorInstall, EmulatorOptions};
pub use hardware::{HardwareError, HardwareOptions, HardwareRecording};
pub use session::{EmulatedRecording, Output, ProgramExit, SessionError};

/// The SPE PMUs the kernel exposes (`/sys/bus/event_source/devices/arm_spe_*`), by name.
pub fn hardware_spe_pmus() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir("/sys/bus/event_source/devices")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("arm_spe"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Where an installed or source-tree spelunk keeps a file it needs next to itself:
/// `<source tree>/source_rel` for a binary built in a source tree (target/{release,debug}/ or
/// target/<triple>/release/), then `<bin>/../lib/spelunk/installed_rel` (`make install`).
pub(crate) fn beside_binary(source_rel: &str, installed_rel: &str) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(exe) = std::env::current_exe() {
        let exe = exe.canonicalize().unwrap_or(exe);
        if let Some(bin) = exe.parent() {
            for up in [2usize, 3] {
                let mut root = bin.to_path_buf();
                for _ in 0..up {
                    root.pop();
                }
                out.push(root.join(source_rel));
            }
            out.push(bin.join("../lib/spelunk").join(installed_rel));
        }
    }
    out
}
