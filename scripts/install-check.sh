#!/usr/bin/env bash
# make test's install check: `make install PREFIX=<temporary dir>` as the README says, then the
# installed binary, run from outside the source tree with the tree out of reach, records under
# the emulator (finding its Valgrind tool next to itself), preloads its runtime, and reports.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
[ -x workloads/build/stream ] || make -s -C workloads
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
make -s install PREFIX="$tmp/prefix" >/dev/null
work="$tmp/work"
mkdir -p "$work"
cd "$work"
# No path into the source tree: PATH without it, no SPELUNK_* overrides.
env -i PATH=/usr/bin:/bin HOME="$work" "$tmp/prefix/bin/spelunk" --version
env -i PATH=/usr/bin:/bin HOME="$work" "$tmp/prefix/bin/spelunk" record --emulate -o run.data \
  -- "$root/workloads/build/stream" -n 20000 -i 1 -t 1 >/dev/null 2>run.err \
  || { cat run.err; echo "install-check: spelunk record --emulate failed" >&2; exit 1; }
env -i PATH=/usr/bin:/bin HOME="$work" "$tmp/prefix/bin/spelunk" report run.data > report.txt
grep -q "samples: [1-9][0-9]* decoded" report.txt \
  || { cat report.txt; echo "install-check: no samples in the report" >&2; exit 1; }
# The runtime, installed next to the binary, is what spelunk finds (--no-spe preloads it).
cc -O1 -I"$tmp/prefix/include" -o phases "$root/tests/vm/phases.c"
env -i PATH=/usr/bin:/bin HOME="$work" "$tmp/prefix/bin/spelunk" record --no-spe -o ns.data \
  -- ./phases > ns.out 2> ns.err
grep -q "phases: runtime loaded" ns.out \
  && grep -q "the runtime logged 2 phase(s)" ns.err \
  || { cat ns.out ns.err; echo "install-check: the installed runtime was not used" >&2; exit 1; }
[ -f "$tmp/prefix/share/man/man1/spelunk.1" ] || { echo "install-check: no man page" >&2; exit 1; }
echo "install-check: the installed spelunk works outside the source tree (--emulate, runtime, man)"
