#!/usr/bin/env bash
# make demo: decode SPE recordings with spelunk and show what comes out.
#  1. a real SPE buffer recorded on Arm hardware (tests/data/spe, WindowsPerf), decoded with --raw;
#  2. a synthetic Neoverse N1 recording (generated deterministically by spelunk-synth: 4 CPUs,
#     realistic load/store/branch mix) decoded into Parquet tables, then read back with pandas
#     when it is installed.
# The synthetic recording is generated, not measured: it shows the pipeline, not a workload.
set -euo pipefail
cd "$(dirname "$0")/.."
out=out/demo
mkdir -p "$out"
bin=target/release

echo "== 1. a real SPE record (WindowsPerf buffer from Arm's spe-parser tests), decoded with --raw"
"$bin/spelunk" decode --raw --cpu 0 tests/data/spe/spe-b1-ts1.data -o "$out/windowsperf" -f csv
echo "-- $out/windowsperf-br.csv:"
cat "$out/windowsperf-br.csv"

echo
echo "== 2. a synthetic Neoverse N1 recording (4 CPUs x 200000 records), decoded to Parquet"
"$bin/spelunk-synth" "$out/synthetic.data" --cpus 4 --records-per-cpu 200000 --seed 7
"$bin/spelunk" decode "$out/synthetic.data" -o "$out/synthetic"
if python3 -c 'import pandas, pyarrow' 2>/dev/null; then
  echo "-- load latency by data source (pandas on $out/synthetic-ldst.parquet):"
  python3 - "$out/synthetic-ldst.parquet" <<'PY'
import sys, pandas as pd
ld = pd.read_parquet(sys.argv[1])
ld = ld[ld.op == "LD"]
print(ld.groupby("data_source")[["total_lat", "exec_lat"]].describe(percentiles=[0.5, 0.99]).round(1).to_string())
PY
fi
echo
echo "Next: perf.data from real hardware: perf record -e arm_spe_0// -- ./app && spelunk decode perf.data"
