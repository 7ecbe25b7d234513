#!/usr/bin/env bash
# The hardware recorder's cost, measured where a real kernel runs it: Debian's arm64 kernel under
# QEMU (scripts/arm64-vm.sh) with the test-only SPE stub writing 64-byte records into the AUX
# buffer at 8, 32 and 127 records per 200 µs (2.6, 10 and 41 MB/s). For each rate: the
# recorder's own CPU time (getrusage, all its threads) per MB of AUX data, and /workload's run
# time alone and under `spelunk record` (wall, from busybox `time`).
#
# Times are guest times under `-icount shift=0`: one nanosecond per emulated instruction, so the
# figures count the instructions of the kernel's syscall/AUX path and of spelunk's reader, not
# the cycles of a real Neoverse core (whose caches, branch predictor and SPE hardware the VM does
# not have). They compare rates and catch regressions; they are not a hardware measurement.
set -euo pipefail
cd "$(dirname "$0")/.."
SPELUNK_VM_APPEND="spelunk.bench=1" scripts/arm64-vm.sh >/dev/null || true
tr -d '\r' < target/vm/console.log | grep -E '^(bench|FAIL)' || {
  echo "bench-recorder: no figures (see target/vm/console.log)" >&2; exit 1; }
