#!/usr/bin/env bash
# Scale benchmark: spelunk must be near-linear in every input dimension — sample records,
# threads, CPUs, mappings, kernel symbols, and the sidecar's phases, named objects and counter
# snapshots (docs/performance.md, "Scale").
#
# For each dimension and each n in BENCH_SCALE_NS (default "100000 1000000") it generates with
# spelunk-synth a recording with n of that dimension and n sample records (records are what
# makes the others matter: one sample per thread, per CPU, per mapping...; the records row is
# the baseline), the other dimensions small (2 CPUs, one thread per CPU, one text mapping, no
# kernel symbols, no sidecar). It times `spelunk report FILE` and `spelunk report FILE --json`
# on each (and `spelunk c2c`, `spelunk decode` for the records dimension), with wall time and
# peak RSS from GNU time, then prints a table with the ratio of the largest n's wall time to
# the smallest's: near-linear is about the ratio of the n's (10), quadratic is its square.
# CPUs are the exception: n is BENCH_CPU_NS (default "1000 10000"), as each CPU's AUX stream is
# decoded on its own thread and spelunk refuses more than 16384 streams (arm64 Linux has at
# most 4096 CPUs).
#   BENCH_DIMS   dimensions to run (default: all of them)
#   BENCH_DIR    where to put the files (default: a temp dir, removed afterwards); BENCH_KEEP=1
#                keeps them.
# The files are generated; the figures describe the tool's scaling, not any workload.
set -euo pipefail
cd "$(dirname "$0")/.."
ns=(${BENCH_SCALE_NS:-100000 1000000})
dims=(${BENCH_DIMS:-records threads cpus mappings symbols phases objects snapshots})
dir=${BENCH_DIR:-$(mktemp -d)}
mkdir -p "$dir"
[ "${BENCH_KEEP:-0}" = 1 ] || trap 'rm -rf "$dir"' EXIT
[ -x /usr/bin/time ] || { echo "bench-scale: needs GNU time (/usr/bin/time; Debian package 'time')" >&2; exit 1; }

cargo build --release --locked -q -p spelunk -p spelunk-testkit
bin=target/release
echo "== load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

# The spelunk-synth options that make n of a dimension.
synth_args() { # dimension, n
  case $1 in
    records) echo "--records $2" ;;
    threads) echo "--records $2 --threads $2" ;;
    cpus) echo "--records $2 --cpus $2" ;;
    mappings) echo "--records $2 --mappings $2" ;;
    symbols) echo "--records $2 --kernel-symbols $2" ;;
    phases) echo "--records $2 --phases $2" ;;
    objects) echo "--records $2 --objects $2" ;;
    snapshots) echo "--records $2 --counter-snapshots $2" ;;
    *) echo "bench-scale: unknown dimension '$1'" >&2; exit 2 ;;
  esac
}

rows=$dir/rows
: >"$rows"
run() { # dimension, n, command name, command...
  local dim=$1 n=$2 name=$3; shift 3
  local t; t=$(mktemp)
  /usr/bin/time -f "%e %U %S %M" -o "$t" "$@" >/dev/null 2>"$dir/stderr" || { cat "$dir/stderr" >&2; echo "bench-scale: $dim $n $name failed" >&2; exit 1; }
  read -r secs user sys kb <"$t"; rm -f "$t"
  printf "%s\t%s\t%s\t%s\t%s\t%s\n" "$dim" "$n" "$name" "$secs" "$(echo "$user + $sys" | bc -l)" "$((kb / 1024))" >>"$rows"
  printf "  %-10s %8s %-16s %7.2f s wall %7.2f s CPU %6d MB peak RSS\n" "$dim" "$n" "$name" "$secs" "$(echo "$user + $sys" | bc -l)" "$((kb / 1024))"
}

for dim in "${dims[@]}"; do
  dim_ns=("${ns[@]}")
  [ "$dim" = cpus ] && dim_ns=(${BENCH_CPU_NS:-1000 10000})
  for n in "${dim_ns[@]}"; do
    data="$dir/$dim-$n.data"
    # shellcheck disable=SC2046
    "$bin/spelunk-synth" "$data" $(synth_args "$dim" "$n") >/dev/null
    extra=()
    [ "$dim" = symbols ] && extra=(--kallsyms "$data.kallsyms")
    run "$dim" "$n" report "$bin/spelunk" report "$data" "${extra[@]}"
    run "$dim" "$n" "report --json" "$bin/spelunk" report "$data" --json "${extra[@]}"
    if [ "$dim" = records ]; then
      run "$dim" "$n" c2c "$bin/spelunk" c2c "$data"
      run "$dim" "$n" decode "$bin/spelunk" decode "$data" -o "$dir/decoded"
    fi
    rm -f "$data" "$data".* "$dir"/decoded-*
  done
done
echo "== load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

# The table: one row per (dimension, command, n); the ratio is against the dimension's
# smallest n (the first row of each dimension and command).
echo
echo "| dimension | command | n | wall s | CPU s | peak MB | wall ratio to the smaller n |"
echo "|---|---|---|---|---|---|---|"
awk -F'\t' '
  { key = $1 "\t" $3; first = !(key in base); if (first) base[key] = $4
    ratio = (first || base[key] == 0) ? "" : sprintf("%.1f", $4 / base[key])
    printf "| %s | `%s` | %s | %.2f | %.2f | %d | %s |\n", $1, $3, $2, $4, $5, $6, ratio }' "$rows"
