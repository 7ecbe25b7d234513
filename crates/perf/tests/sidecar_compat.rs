//! Sidecars written before the timelines existed (an emulator's, with every field it writes)
//! read and write back byte for byte: the fields `spelunk record --no-spe` added
//! (`capacity`, `counters.not_counted`, the snapshots' enabled/running times) are left out of
//! a file that does not have them.

use spelunk_perf::sidecar::Sidecar;
use std::path::Path;

#[test]
fn an_emulator_sidecar_is_unchanged_byte_for_byte() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/sidecar-emulator-v1.json");
    let before = std::fs::read(&path).unwrap();
    let sc = Sidecar::read(&path).unwrap();
    assert!(sc.capacity.is_none() && sc.counters.not_counted.is_empty());
    assert!(sc.counters.timeline[0].time_enabled_ns.is_empty());
    let after = serde_json::to_vec_pretty(&sc).unwrap();
    assert_eq!(
        String::from_utf8(after).unwrap(),
        String::from_utf8(before).unwrap()
    );
}
