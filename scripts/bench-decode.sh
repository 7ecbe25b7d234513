#!/usr/bin/env bash
# End-to-end decode benchmark (issue 2 goals: decode-to-Parquet >= 10x faster than `perf script`,
# peak memory < 300 MB for a 1 GB input).
#
# Generates a synthetic SPE perf.data (BENCH_SIZE, default 1G; Neoverse N1 64-byte records, a
# realistic load/store/branch mix, BENCH_CPUS CPUs) with spelunk-synth, then times on that file:
#   spelunk decode FILE          (Parquet tables; the whole pipeline)
#   spelunk decode FILE -f csv
#   perf script -i FILE          (perf's default SPE output, what users run)
#   perf script -i FILE --itrace=i1i -F cpu,tid,time,ip,addr   (one line per record, perf's fastest)
# and prints wall time, throughput and peak RSS (GNU time) for each. The machine should be idle.
#   BENCH_DIR   where to put the files (default: a temp dir, removed afterwards)
#   BENCH_KEEP=1 keeps them.
set -euo pipefail
cd "$(dirname "$0")/.."
size=${BENCH_SIZE:-1G}
cpus=${BENCH_CPUS:-4}
dir=${BENCH_DIR:-$(mktemp -d)}
mkdir -p "$dir"
[ "${BENCH_KEEP:-0}" = 1 ] || trap 'rm -rf "$dir"' EXIT
command -v perf >/dev/null || { echo "bench-decode: needs perf (scripts/ensure-deps.sh)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "bench-decode: needs GNU time (/usr/bin/time; Debian package 'time')" >&2; exit 1; }

cargo build --release --locked -q -p spelunk -p spelunk-testkit
bin=target/release
data="$dir/bench.data"
echo "== generating $size synthetic SPE recording ($cpus CPUs, N1 layout) in $dir"
"$bin/spelunk-synth" "$data" --cpus "$cpus" --bytes "$size" --chunk 256K
bytes=$(stat -c %s "$data")
sync

run() { # name, command...
  local name=$1; shift
  local t; t=$(mktemp)
  /usr/bin/time -f "%e %M" -o "$t" "$@" >/dev/null 2>"$dir/stderr" || { cat "$dir/stderr" >&2; echo "$name failed" >&2; exit 1; }
  read -r secs kb <"$t"; rm -f "$t"
  printf "%-34s %8.2f s %9.1f MB/s %8.1f MB peak RSS\n" "$name" "$secs" \
    "$(echo "$bytes / 1048576 / $secs" | bc -l)" "$(echo "$kb / 1024" | bc -l)"
  eval "T_${name//[^a-zA-Z0-9]/_}=$secs"
}

echo "== input: $(echo "$bytes / 1048576" | bc) MiB"
# Warm the page cache so every tool reads from memory.
cat "$data" >/dev/null
run "spelunk_decode_parquet" "$bin/spelunk" decode "$data" -o "$dir/out" -q --no-progress
run "spelunk_decode_csv" "$bin/spelunk" decode "$data" -o "$dir/out" -f csv -q --no-progress
rm -f "$dir"/out-*
run "perf_script_default" perf script -i "$data"
run "perf_script_itrace_i1i" perf script -i "$data" --itrace=i1i -F cpu,tid,time,ip,addr
echo "== ratios (perf time / spelunk parquet time)"
printf "perf script (default)          %6.1fx\n" "$(echo "$T_perf_script_default / $T_spelunk_decode_parquet" | bc -l)"
printf "perf script --itrace=i1i       %6.1fx\n" "$(echo "$T_perf_script_itrace_i1i / $T_spelunk_decode_parquet" | bc -l)"
echo "== packet decoder micro-benchmark: cargo bench -p spelunk-spe --bench decode"
