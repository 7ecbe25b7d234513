#!/usr/bin/env bash
# Reporting benchmark (issue 4 item 8: "reporting a 1 GB recording takes seconds, not minutes").
#
# Generates a synthetic SPE perf.data (BENCH_SIZE, default 1G; Neoverse N1 64-byte records, a
# realistic load/store/branch mix, BENCH_CPUS CPUs) with spelunk-synth, then times on it:
#   spelunk report FILE                 (terminal tables: the whole analysis)
#   spelunk report FILE --json          (the same, serialised)
#   spelunk report FILE --html OUT      (the same, as the HTML page)
#   perf report -i FILE --stdio         (perf's SPE report of the same file, for comparison;
#                                        skipped with BENCH_PERF=0)
# printing wall time, CPU time and peak RSS (GNU time) for each, and the load average.
# The machine should be idle; the synthetic file is generated, its figures describe the tool's
# speed, not any workload.
#   BENCH_DIR   where to put the files (default: a temp dir, removed afterwards)
#   BENCH_KEEP=1 keeps them.
set -euo pipefail
cd "$(dirname "$0")/.."
size=${BENCH_SIZE:-1G}
cpus=${BENCH_CPUS:-4}
dir=${BENCH_DIR:-$(mktemp -d)}
mkdir -p "$dir"
[ "${BENCH_KEEP:-0}" = 1 ] || trap 'rm -rf "$dir"' EXIT
[ -x /usr/bin/time ] || { echo "bench-report: needs GNU time (/usr/bin/time; Debian package 'time')" >&2; exit 1; }

cargo build --release --locked -q -p spelunk -p spelunk-testkit
bin=target/release
data="$dir/bench.data"
echo "== generating $size synthetic SPE recording ($cpus CPUs, N1 layout) in $dir"
"$bin/spelunk-synth" "$data" --cpus "$cpus" --bytes "$size" --chunk 256K
bytes=$(stat -c %s "$data")
sync
echo "== load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

run() { # name, command...
  local name=$1; shift
  local t; t=$(mktemp)
  /usr/bin/time -f "%e %U %S %M" -o "$t" "$@" >/dev/null 2>"$dir/stderr" || { cat "$dir/stderr" >&2; echo "$name failed" >&2; exit 1; }
  read -r secs user sys kb <"$t"; rm -f "$t"
  printf "%-28s %8.2f s wall %8.2f s CPU %9.1f MB/s %8.1f MB peak RSS\n" "$name" "$secs" \
    "$(echo "$user + $sys" | bc -l)" "$(echo "$bytes / 1048576 / $secs" | bc -l)" "$(echo "$kb / 1024" | bc -l)"
}

run "spelunk report" "$bin/spelunk" report "$data"
run "spelunk report --json" "$bin/spelunk" report "$data" --json
run "spelunk report --html" "$bin/spelunk" report "$data" --html "$dir/report.html"
if [ "${BENCH_PERF:-1}" = 1 ] && command -v perf >/dev/null; then
  run "perf report --stdio" perf report -i "$data" --stdio
fi
echo "== load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
