#!/usr/bin/env bash
# Records the fixes suite (workloads/fixes) under the emulator: for each program and its fixed
# variant, `spelunk record --emulate`, `spelunk report --json` and `spelunk decode -f csv`, into
# OUTDIR (NAME.data, NAME.data.spelunk.json, NAME.json, NAME-ldst.csv, NAME-br.csv,
# NAME-other.csv; NAME_fixed.* for the fix). Then scripts/fixes-evidence.py OUTDIR reads them.
#
#   scripts/fixes-record.sh OUTDIR [PROGRAM...]       (default: every program)
#
# SPELUNK (default: target/release/spelunk of this tree) is the spelunk binary;
# SPELUNK_EMULATOR_LIB defaults to this tree's emulator/build/lib (run emulator/build.sh first).
# FIXES_EMU_OPTS adds spelunk record options (e.g. "--emulator-opt=--page-size=4096"),
# FIXES_SUFFIX a suffix to the output names (e.g. "_4k"), and FIXES_ARGS_<name>="..." arguments
# for one program (both variants; e.g. FIXES_ARGS_heap_churn=2000), as scripts/fixes-native.sh.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="$root/workloads/fixes"
out="${1:?usage: scripts/fixes-record.sh OUTDIR [PROGRAM...]}"; shift
spelunk="${SPELUNK:-$root/target/release/spelunk}"
export SPELUNK_EMULATOR_LIB="${SPELUNK_EMULATOR_LIB:-$root/emulator/build/lib}"
read -r -a emu_opts <<<"${FIXES_EMU_OPTS:-}"
suffix="${FIXES_SUFFIX:-}"
mkdir -p "$out"
make -s -C "$dir" >/dev/null
progs=("$@")
if [[ ${#progs[@]} -eq 0 ]]; then read -r -a progs <<<"$(make -s -C "$dir" list)"; fi
for p in "${progs[@]}"; do
  var="FIXES_ARGS_$p"
  read -r -a args <<<"${!var:-}"
  for v in "$p" "${p}_fixed"; do
    name="$v$suffix"
    t0=$(date +%s%N)
    "$spelunk" record --emulate "${emu_opts[@]}" -o "$out/$name.data" -- "$dir/build/$v" "${args[@]}" \
      >"$out/$name.record.log" 2>&1
    t1=$(date +%s%N)
    "$spelunk" report "$out/$name.data" --json --limit 500 >"$out/$name.json"
    "$spelunk" decode "$out/$name.data" -f csv -o "$out/$name" -q >/dev/null
    echo "$name: recorded in $(( (t1 - t0) / 1000000 )) ms"
  done
done
