//! The collect stage: recording a program's SPE samples and PMU counts into a standard
//! perf.data plus spelunk's sidecar (`FILE.spelunk.json`).
//!
//! Two recorders write the same output:
//! - [`hardware`]: Arm SPE on the machine itself, through `perf_event_open` of an `arm_spe_*`
//!   PMU and its AUX area;
//! - [`emulator`]: the program runs under spelunk's Valgrind tool, which models a Neoverse N1
//!   and samples its operations the way SPE does; [`convert`] turns the tool's trace into what
//!   a hardware recording would have been;
//! - [`timeline`]: resident memory per NUMA node and PMU counters of the process tree over
//!   time, on any machine (`spelunk record --no-spe` records them alone).

pub mod convert;
pub mod emulator;
pub mod hardware;
pub mod runtime_log;
pub mod timeline;

pub use convert::{convert, Conversion, ConvertError};
pub use emulator::{EmulatedRun, EmulatorError, EmulatorInstall, EmulatorOptions};
pub use hardware::{HardwareError, HardwareOptions, HardwareRecording};

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
