#!/usr/bin/env bash
# Slowdown of the emulator against native execution, on the STREAM workload (issue 3: goal
# <= 50x) and on the stride benchmark of [N1 PMU methodology] on its platform's configuration
# (issue 13: goal <= 20x, with `valgrind --tool=none` as the floor). Runs each configuration
# REPS times and reports the best wall-clock time of each.
#
#   scripts/bench-emulator-slowdown.sh [ELEMENTS] [ITERATIONS] [REPS]
#
# Defaults: 2,000,000 elements per array (16 MB each), 5 iterations, 3 repetitions. Needs
# emulator/build.sh and `make -C workloads` to have run. Prints one line per configuration and
# the slowdown = emulated / native.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
n="${1:-2000000}"; iters="${2:-5}"; reps="${3:-3}"
stream="$root/workloads/build/stream"
emu="$root/emulator/spelunk-emu"
[[ -x "$stream" ]] || { echo "build the workloads first: make -C workloads" >&2; exit 1; }
out="$(mktemp -d)"; trap 'rm -rf "$out"' EXIT

best() { # best wall time in seconds of REPS runs of "$@"
  local b=""
  for _ in $(seq "$reps"); do
    local s e t
    s=$(date +%s.%N); "$@" >/dev/null 2>&1; e=$(date +%s.%N)
    t=$(echo "$e - $s" | bc -l)
    if [[ -z "$b" ]] || (( $(echo "$t < $b" | bc -l) )); then b=$t; fi
  done
  echo "$b"
}

native=$(best "$stream" -n "$n" -i "$iters")
nulgrind=$(best valgrind --tool=none -q "$stream" -n "$n" -i "$iters")
emulated=$(best "$emu" --out="$out/t.emutrace" -- "$stream" -n "$n" -i "$iters")
printf 'STREAM -n %s -i %s (best of %s)\n' "$n" "$iters" "$reps"
printf '  native            %8.3f s\n' "$native"
printf '  valgrind none     %8.3f s  (%.1fx)\n' "$nulgrind" "$(echo "$nulgrind / $native" | bc -l)"
printf '  spelunk emulator  %8.3f s  (%.1fx)\n' "$emulated" "$(echo "$emulated / $native" | bc -l)"

stride="$root/workloads/build/stride_benchmark"
strides=$((n * 5))
native=$(best "$stride" "$strides")
nulgrind=$(best valgrind --tool=none -q "$stride" "$strides")
emulated=$(best "$emu" --out="$out/s.emutrace" --page-size=4096 --slc-size=8388608 -- "$stride" "$strides")
printf 'stride_benchmark %s (4 KB pages, 8 MB SLC; best of %s)\n' "$strides" "$reps"
printf '  native            %8.3f s\n' "$native"
printf '  valgrind none     %8.3f s  (%.1fx)\n' "$nulgrind" "$(echo "$nulgrind / $native" | bc -l)"
printf '  spelunk emulator  %8.3f s  (%.1fx)\n' "$emulated" "$(echo "$emulated / $native" | bc -l)"
