#!/usr/bin/env bash
# Builds and tests the emulator: the model's unit tests, then the acceptance tests of issue 3
# (crates/emutrace/tests/emulator.rs) on traces the tool writes for the workloads, and the trace
# reader's own tests. Takes about a minute on 2 cores.
#
#   emulator/test.sh            (from anywhere; uses $CARGO, $CARGO_TARGET_DIR if set)
#
# Exit status 0 when everything passed.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cargo="${CARGO:-cargo}"

echo "== build the tool"
"$root/emulator/build.sh"
echo "== model unit tests"
"$root/emulator/build/model_test"
echo "== build the workloads"
make -s -C "$root/workloads"
echo "== trace reader and acceptance tests"
cd "$root"
SPELUNK_REQUIRE_EMULATOR=1 "$cargo" test --release --locked -p spelunk-emutrace -- --test-threads=2
