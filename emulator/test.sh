#!/usr/bin/env bash
# Builds and tests the emulator: the model's unit tests, then the acceptance tests of issue 3
# (crates/emutrace/tests/emulator.rs) on traces the tool writes for the workloads, and the trace
# reader's own tests, `spelunk record --emulate` end to end, and the fidelity page against fresh
# runs (scripts/emulator-fidelity.py --check). Takes about a minute and a half on 2 cores.
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
echo "== annotation header: C, C++, no runtime, a preloaded runtime, the emulator's runtime"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
cc="${CC:-gcc}"; cxx="${CXX:-g++}"
"$cc" -std=c99 -O2 -Wall -Wextra -Werror -I"$root/include" "$root/emulator/tests/annotate_test.c" -o "$tmp/at"
"$cc" -shared -fPIC -O2 -Wall -Wextra -Werror "$root/emulator/tests/fake_runtime.c" -o "$tmp/fake.so"
if command -v "$cxx" >/dev/null; then
  "$cxx" -std=c++11 -O2 -Wall -Wextra -Werror -I"$root/include" "$root/emulator/tests/header_cxx_test.cc" -o "$tmp/cxx"
  "$tmp/cxx"
fi
[[ "$("$tmp/at")" == "runtime loaded: 0" ]] || { echo "FAIL: header without runtime"; exit 1; }
expect=$'object data 8192\ntag static 1\nbegin outer\nbegin inner\nend inner\nend outer\nfree 1\nruntime loaded: 1'
[[ "$(LD_PRELOAD="$tmp/fake.so" "$tmp/at")" == "$expect" ]] || { echo "FAIL: header with a preloaded runtime"; exit 1; }
[[ "$("$root/emulator/spelunk-emu" --out="$tmp/at.emutrace" -- "$tmp/at")" == "runtime loaded: 1" ]] \
  || { echo "FAIL: header under the emulator"; exit 1; }
echo "ok"
echo "== retranslation: descriptors of discarded translations are freed, results unchanged"
"$cc" -O1 -Wall -Wextra -Werror "$root/emulator/tests/retranslate_test.c" -o "$tmp/rt"
native="$("$tmp/rt")"
emulated="$(VALGRIND_LIB="$root/emulator/build/lib" "${VALGRIND:-valgrind}" --tool=spelunk -v --log-file="$tmp/rt.log" \
  --out="$tmp/rt.emutrace" "$tmp/rt")"
[[ "$emulated" == "$native" ]] || { echo "FAIL: retranslation changed the result: $emulated vs $native"; exit 1; }
discarded="$(sed -n 's/.* translations instrumented, \([0-9]*\) discarded.*/\1/p' "$tmp/rt.log")"
[[ -n "$discarded" && "$discarded" -ge 2000 ]] \
  || { echo "FAIL: expected >= 2000 freed descriptors, got '${discarded}'"; cat "$tmp/rt.log"; exit 1; }
echo "ok ($discarded descriptors freed)"
echo "== build the workloads (and the fixes suite: one memory problem each, with its fix)"
make -s -C "$root/workloads"
make -s -C "$root/workloads/fixes"
echo "== trace reader and acceptance tests"
cd "$root"
SPELUNK_REQUIRE_EMULATOR=1 "$cargo" test --release --locked -p spelunk-emutrace -- --test-threads=2
echo "== spelunk record --emulate: conversion against the trace and perf 6.1, the command's contract, issue 4 acceptance on the workloads, topdown --emulate against the trace, C++ names and lines (issue 26), the advisor on the fixes suite (issue 24), spelunk bench's gate (issue 28)"
SPELUNK_REQUIRE_EMULATOR=1 "$cargo" test --release --locked -p spelunk-record -p spelunk --test emulated --test record_cli --test emulated_workloads --test topdown_emulated --test cxx_names_emulated --test advise_suite --test bench_cli
echo "== the fidelity page (docs/methodology/emulator-fidelity.md): acceptance bands and figures against fresh runs"
python3 "$root/scripts/emulator-fidelity.py" --spelunk "${CARGO_TARGET_DIR:-$root/target}/release/spelunk" \
  --check "$root/docs/methodology/emulator-fidelity.md"
