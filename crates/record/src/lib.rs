//! The collect stage: recording a program's SPE samples and PMU counts into a standard
//! perf.data plus spelunk's sidecar (`FILE.spelunk.json`).
//!
//! Today the one recorder is the emulator ([`emulator`]): the program runs under spelunk's
//! Valgrind tool, which models a Neoverse N1 and samples its operations the way SPE does;
//! [`convert`] turns the tool's trace into what a hardware recording would have been. A
//! hardware recorder (perf_event_open of `arm_spe_*` with its AUX ring) will sit beside it
//! behind the same output; until then [`hardware_spe_pmus`] tells the CLI what the machine has.

pub mod convert;
pub mod emulator;
pub mod runtime_log;

pub use convert::{convert, Conversion, ConvertError};
pub use emulator::{EmulatedRun, EmulatorError, EmulatorInstall, EmulatorOptions};

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
