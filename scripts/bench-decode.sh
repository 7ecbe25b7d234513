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
# For each run it prints wall time, CPU time (user + sys), throughput, peak RSS (GNU time), the
# 1-minute load average before the run and how much of the input was in the page cache; then the
# best wall and best CPU of the runs (BENCH_RUNS, default 3; perf script runs BENCH_PERF_RUNS
# times, default 1: it takes ~30 s per GB). The machine should be idle: on a shared machine the
# CPU times are the figures to compare, and the load average says how much the wall times suffer.
#   BENCH_DIR   where to put the files (default: a temp dir, removed afterwards)
#   BENCH_KEEP=1 keeps them.
#   BENCH_FILE=path  time an existing recording instead of generating one.
set -euo pipefail
cd "$(dirname "$0")/.."
size=${BENCH_SIZE:-1G}
cpus=${BENCH_CPUS:-4}
runs=${BENCH_RUNS:-3}
perf_runs=${BENCH_PERF_RUNS:-1}
dir=${BENCH_DIR:-$(mktemp -d)}
mkdir -p "$dir"
[ "${BENCH_KEEP:-0}" = 1 ] || trap 'rm -rf "$dir"' EXIT
command -v perf >/dev/null || { echo "bench-decode: needs perf (scripts/ensure-deps.sh)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "bench-decode: needs GNU time (/usr/bin/time; Debian package 'time')" >&2; exit 1; }

cargo build --release --locked -q -p spelunk -p spelunk-testkit
bin=${CARGO_TARGET_DIR:-target}/release
if [ -n "${BENCH_FILE:-}" ]; then
  data=$BENCH_FILE
else
  data="$dir/bench.data"
  echo "== generating $size synthetic SPE recording ($cpus CPUs, N1 layout) in $dir"
  "$bin/spelunk-synth" "$data" --cpus "$cpus" --bytes "$size" --chunk 256K
fi
bytes=$(stat -c %s "$data")
sync

cached() { # percentage of the input in the page cache (fincore, util-linux), or "?"
  command -v fincore >/dev/null || { echo "?"; return; }
  local pages
  pages=$(fincore -nb -o PAGES "$data" 2>/dev/null | tr -d ' ') || { echo "?"; return; }
  echo $((pages * 4096 * 100 / bytes))
}

run() { # name, runs, command...
  local name=$1 n=$2; shift 2
  local best_wall="" best_cpu="" i t
  for ((i = 1; i <= n; i++)); do
    # Warm the page cache so every tool reads from memory (some VMs drop it within seconds:
    # the cached column says how much was still there).
    cat "$data" >/dev/null
    local load cache
    load=$(cut -d' ' -f1 /proc/loadavg)
    cache=$(cached)
    t=$(mktemp)
    /usr/bin/time -f "%e %U %S %M" -o "$t" "$@" >/dev/null 2>"$dir/stderr" || { cat "$dir/stderr" >&2; echo "$name failed" >&2; exit 1; }
    local secs user sys kb cpu
    read -r secs user sys kb <"$t"; rm -f "$t"
    cpu=$(echo "$user + $sys" | bc -l)
    printf "%-24s run %d: %7.2f s wall %7.2f s CPU (%5.2f user + %5.2f sys) %8.1f MB/s %7.1f MB RSS  load %5s  cached %s%%\n" \
      "$name" "$i" "$secs" "$cpu" "$user" "$sys" "$(echo "$bytes / 1048576 / $secs" | bc -l)" "$(echo "$kb / 1024" | bc -l)" "$load" "$cache"
    if [ -z "$best_wall" ] || (( $(echo "$secs < $best_wall" | bc -l) )); then best_wall=$secs; fi
    if [ -z "$best_cpu" ] || (( $(echo "$cpu < $best_cpu" | bc -l) )); then best_cpu=$cpu; fi
  done
  printf "%-24s best:  %7.2f s wall %7.2f s CPU\n" "$name" "$best_wall" "$best_cpu"
  eval "W_${name//[^a-zA-Z0-9]/_}=$best_wall; C_${name//[^a-zA-Z0-9]/_}=$best_cpu"
}

echo "== input: $(echo "$bytes / 1048576" | bc) MiB on $(nproc) CPUs"
run "spelunk_decode_parquet" "$runs" "$bin/spelunk" decode "$data" -o "$dir/out" -q --no-progress
run "spelunk_decode_csv" "$runs" "$bin/spelunk" decode "$data" -o "$dir/out" -f csv -q --no-progress
rm -f "$dir"/out-*
run "perf_script_default" "$perf_runs" perf script -i "$data"
run "perf_script_itrace_i1i" "$perf_runs" perf script -i "$data" --itrace=i1i -F cpu,tid,time,ip,addr
echo "== ratios (perf script / spelunk decode to Parquet; best runs)"
printf "perf script (default)     wall %6.1fx   CPU %6.1fx\n" \
  "$(echo "$W_perf_script_default / $W_spelunk_decode_parquet" | bc -l)" \
  "$(echo "$C_perf_script_default / $C_spelunk_decode_parquet" | bc -l)"
printf "perf script --itrace=i1i  wall %6.1fx   CPU %6.1fx\n" \
  "$(echo "$W_perf_script_itrace_i1i / $W_spelunk_decode_parquet" | bc -l)" \
  "$(echo "$C_perf_script_itrace_i1i / $C_spelunk_decode_parquet" | bc -l)"
echo "== packet decoder micro-benchmark: cargo bench -p spelunk-spe --bench decode"
