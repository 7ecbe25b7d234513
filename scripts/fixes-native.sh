#!/usr/bin/env bash
# Runs the fixes suite (workloads/fixes) natively: each program and its fixed variant N times,
# alternating, and prints the median wall time of the whole process and the median kernel time
# the program prints ("kernel_ms": its measured loop, without set-up), with the gain
# (problem / fix) for both.
#
#   scripts/fixes-native.sh [-n RUNS] [PROGRAM...]      (default 5 runs, every program)
#
# Programs take their default sizes; set FIXES_ARGS_<name>="..." to pass arguments (e.g.
# FIXES_ARGS_tlb="3000000 64"). The machine's load matters: the medians are only as quiet as
# the machine is.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="$root/workloads/fixes"
runs=5
if [[ "${1:-}" == "-n" ]]; then runs="$2"; shift 2; fi
make -s -C "$dir" >/dev/null
progs=("$@")
if [[ ${#progs[@]} -eq 0 ]]; then read -r -a progs <<<"$(make -s -C "$dir" list)"; fi

median() { sort -g | awk '{v[NR]=$1} END {if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }

# one run: prints "wall_ms kernel_ms"
run_once() {
  local bin="$1"; shift
  local t0 t1 err
  t0=$(date +%s%N)
  err=$("$bin" "$@" 2>&1 >/dev/null)
  t1=$(date +%s%N)
  local k
  k=$(sed -n 's/.*kernel_ms \([0-9.]*\).*/\1/p' <<<"$err" | head -1)
  echo "$(( (t1 - t0) / 1000 ))e-3 ${k:-nan}"
}

printf '%-24s %10s %10s %7s %10s %10s %7s\n' program wall_ms fix_wall gain kernel_ms fix_kern gain
for p in "${progs[@]}"; do
  var="FIXES_ARGS_$p"
  read -r -a args <<<"${!var:-}"
  pw=(); pk=(); fw=(); fk=()
  for ((i = 0; i < runs; i++)); do
    read -r w k < <(run_once "$dir/build/$p" "${args[@]}"); pw+=("$w"); pk+=("$k")
    read -r w k < <(run_once "$dir/build/${p}_fixed" "${args[@]}"); fw+=("$w"); fk+=("$k")
  done
  mpw=$(printf '%s\n' "${pw[@]}" | median); mfw=$(printf '%s\n' "${fw[@]}" | median)
  mpk=$(printf '%s\n' "${pk[@]}" | median); mfk=$(printf '%s\n' "${fk[@]}" | median)
  awk -v p="$p" -v a="$mpw" -v b="$mfw" -v c="$mpk" -v d="$mfk" 'BEGIN {
    printf "%-24s %10.1f %10.1f %6.2fx %10.1f %10.1f %6.2fx\n", p, a, b, a / b, c, d, c / d }'
done
