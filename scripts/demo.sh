#!/usr/bin/env bash
# make demo: record a real program under spelunk's emulated SPE and analyse it.
#  1. build the emulator (Valgrind tool modelling a Neoverse N1) and the workloads;
#  2. record the annotated STREAM benchmark (2 threads; phases copy/scale/add/triad; arrays
#     a, b, c registered with include/spelunk.h) into a standard perf.data plus the sidecar;
#  3. decode it to Parquet (the spe-parser-compatible tables) and print the decode summary;
#  4. print the report (hotspots, data sources, objects, phases, sampling accuracy), the triad
#     phase alone, and write the HTML report;
#  5. decode a real SPE buffer recorded on Arm hardware (tests/data/spe, WindowsPerf).
# Emulated samples come from a model, not from hardware: the report says "(emulated by spelunk)"
# in the CPU description and every figure is what the model produced.
set -euo pipefail
cd "$(dirname "$0")/.."
out=out/demo
mkdir -p "$out"
bin=target/release

echo "== 1. building the emulator and the workloads"
emulator/build.sh >"$out/emulator-build.log" 2>&1 || { cat "$out/emulator-build.log" >&2; exit 1; }
make -s -C workloads

echo
echo "== 2. spelunk record --emulate -- stream (2 threads, 400000 doubles per array, 3 iterations)"
"$bin/spelunk" record --emulate --jitter -o "$out/stream.data" -- \
  workloads/build/stream -n 400000 -i 3 -t 2

echo
echo "== 3. spelunk decode: Parquet tables (pandas/pyarrow/DuckDB read them)"
"$bin/spelunk" decode "$out/stream.data" -o "$out/stream"

echo
echo "== 4. spelunk report"
"$bin/spelunk" report "$out/stream.data" --limit 8
echo
echo "-- the triad phase only, by source line:"
"$bin/spelunk" report "$out/stream.data" --phase triad --by line --limit 5 | sed -n '/^Hotspots/,/^$/p'
"$bin/spelunk" report "$out/stream.data" --html "$out/stream.html"

echo
echo "== 5. a real SPE record from Arm hardware (WindowsPerf buffer, Arm spe-parser's tests), --raw"
"$bin/spelunk" decode --raw --raw-cpu 0 tests/data/spe/spe-b1-ts1.data -o "$out/windowsperf" -f csv
cat "$out/windowsperf-br.csv"

echo
echo "Open $out/stream.html in a browser. On Arm metal with SPE:"
echo "  perf record -e arm_spe_0/ts_enable=1,pa_enable=1/ -d -- ./app && spelunk report perf.data"
