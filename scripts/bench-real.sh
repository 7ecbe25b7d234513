#!/usr/bin/env bash
# Speed on real programs' recordings (issue 15): records real programs under the emulator, then
# times spelunk's commands against their Linux perf counterparts on the same files, in the same
# run:
#   spelunk report FILE        vs  perf report -i FILE --stdio --sort sym
#   spelunk decode FILE        vs  perf script -i FILE -F ip,addr,weight,data_src
#   spelunk c2c FILE           vs  perf c2c report -i FILE --stdio
#   spelunk diff A B           vs  perf diff A B (no rows for SPE: then perf report of A and B)
#   spelunk annotate SYM FILE  vs  perf annotate -i FILE --stdio -s SYM (--objdump=objdump)
# printing wall time, CPU time and peak RSS (GNU time) of each and the ratios.
# Programs: Debian's gzip -6 (and -1, for diff) compressing BENCH_TEXT_MB of text (the repo's
# docs, repeated), sqlite3 building, indexing and querying an in-memory table of BENCH_SQL_ROWS
# rows, the stride benchmark (dependent loads), false_sharing (threads).
#   BENCH_DIR     where the recordings go (default: a temp dir, removed afterwards; BENCH_KEEP=1)
#   BENCH_TEXT_MB text size for gzip (default 8)
#   BENCH_SQL_ROWS rows for sqlite3 (default 100000)
#   BENCH_REUSE=1 with BENCH_DIR: time the recordings already there instead of recording again
#   BENCH_RUNS    runs of each command, the fastest kept (default 3)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
dir=${BENCH_DIR:-$(mktemp -d)}
mkdir -p "$dir"
[ "${BENCH_KEEP:-0}" = 1 ] || trap 'rm -rf "$dir"' EXIT
[ -x /usr/bin/time ] || { echo "bench-real: needs GNU time (/usr/bin/time; Debian package 'time')" >&2; exit 1; }
command -v perf >/dev/null || { echo "bench-real: needs Linux perf (scripts/ensure-deps.sh)" >&2; exit 1; }
command -v sqlite3 >/dev/null || { echo "bench-real: needs sqlite3 (Debian/Ubuntu: apt-get install sqlite3; Fedora/Amazon Linux: dnf install sqlite)" >&2; exit 1; }

cargo build --release --locked -q -p spelunk
[ -x emulator/build/lib/spelunk-amd64-linux ] || [ -x emulator/build/lib/spelunk-arm64-linux ] || emulator/build.sh >/dev/null
make -s -C workloads >/dev/null
spelunk=$root/target/release/spelunk
export SPELUNK_EMULATOR_LIB=$root/emulator/build/lib

mb=${BENCH_TEXT_MB:-8}
text="$dir/in.txt"
while [ "$(stat -c %s "$text" 2>/dev/null || echo 0)" -lt $((mb << 20)) ]; do cat docs/*.md >>"$text"; done
truncate -s $((mb << 20)) "$text"

record() { # name, command...
  local name=$1; shift
  if [ "${BENCH_REUSE:-0}" = 1 ] && [ -s "$dir/$name.data" ]; then
    echo "== reusing $dir/$name.data"; return 0
  fi
  echo "== recording $name: $*"
  "$spelunk" record --emulate -o "$dir/$name.data" -- "$@" >/dev/null 2>"$dir/$name.record.log" \
    || { cat "$dir/$name.record.log" >&2; exit 1; }
  printf "   %s: %s MB\n" "$name.data" "$(( $(stat -c %s "$dir/$name.data") >> 20 ))"
}
rows=${BENCH_SQL_ROWS:-100000}
sql="$dir/bench.sql"
cat >"$sql" <<SQL
CREATE TABLE t(id INTEGER PRIMARY KEY, k INTEGER, v TEXT);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $rows)
  INSERT INTO t SELECT i, (i * 2654435761) % 1000003, hex(randomblob(16)) FROM n;
CREATE INDEX tk ON t(k);
SELECT count(*), sum(length(v)) FROM t WHERE k BETWEEN 1000 AND 500000;
SELECT k % 97 AS g, count(*), max(v) FROM t GROUP BY g ORDER BY 2 DESC LIMIT 3;
SELECT count(*) FROM t a JOIN t b ON a.k = b.id WHERE a.id % 7 = 0;
SQL
record gzip6 gzip -6 -c "$text"
record gzip1 gzip -1 -c "$text"
record sqlite sqlite3 :memory: ".read $sql"
record stride workloads/build/stride_benchmark
record threads workloads/build/false_sharing

echo "== load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
declare -A wall cpu rss
run() { # key, command... : the best (least wall time) of BENCH_RUNS runs
  local key=$1; shift
  local t; t=$(mktemp)
  local best="" i
  for i in $(seq "${BENCH_RUNS:-3}"); do
    if ! /usr/bin/time -f "%e %U %S %M" -o "$t" "$@" >/dev/null 2>"$dir/stderr"; then
      echo "   $key: failed: $(head -c 300 "$dir/stderr")"
      rm -f "$t"; return 0
    fi
    read -r secs user sys kb <"$t"
    if [ -z "$best" ] || [ "$(echo "$secs < ${wall[$key]}" | bc -l)" = 1 ]; then
      best=1
      wall[$key]=$secs
      cpu[$key]=$(echo "$user + $sys" | bc -l)
      rss[$key]=$kb
    fi
  done
  rm -f "$t"
  printf "   %-40s %7.2f s wall %7.2f s CPU %8.1f MB peak RSS\n" "$key" "${wall[$key]}" "${cpu[$key]}" "$(echo "${rss[$key]} / 1024" | bc -l)"
}
ratio() { # spelunk key, perf key
  [ -n "${wall[$2]:-}" ] && [ -n "${wall[$1]:-}" ] || return 0
  printf "   => %s: %.1fx wall, %.1fx CPU\n" "$1" "$(echo "${wall[$2]} / ${wall[$1]}" | bc -l)" \
    "$(echo "${cpu[$2]} / (${cpu[$1]} + 0.001)" | bc -l)"
}
hottest() { # the most sampled function with a name (stripped binaries have none) of a recording
  "$spelunk" report "$1" --json --limit 50 | python3 -c '
import json, sys
fs = json.load(sys.stdin)["hotspots"]["functions"]
print(next((f["function"] for f in fs if not f["function"].startswith("[")), fs[0]["function"]))'
}

for name in gzip6 sqlite stride threads; do
  f="$dir/$name.data"
  echo "== $name ($(( $(stat -c %s "$f") >> 20 )) MB)"
  run "spelunk report $name" "$spelunk" report "$f"
  run "perf report $name" perf report -i "$f" --stdio --sort sym
  ratio "spelunk report $name" "perf report $name"
  run "spelunk decode $name" "$spelunk" decode "$f" -o "$dir/$name" -q
  run "perf script $name" perf script -i "$f" -F ip,addr,weight,data_src
  ratio "spelunk decode $name" "perf script $name"
  run "spelunk c2c $name" "$spelunk" c2c "$f"
  run "perf c2c $name" perf c2c report -i "$f" --stdio
  ratio "spelunk c2c $name" "perf c2c $name"
  sym=$(hottest "$f")
  run "spelunk annotate $name" "$spelunk" annotate "$sym" "$f"
  run "perf annotate $name" perf annotate -i "$f" --stdio --objdump=objdump -s "$sym"
  ratio "spelunk annotate $name" "perf annotate $name"
done
echo "== gzip -6 against gzip -1"
run "spelunk diff" "$spelunk" diff "$dir/gzip1.data" "$dir/gzip6.data"
run "perf diff" perf diff "$dir/gzip1.data" "$dir/gzip6.data"
if perf diff "$dir/gzip1.data" "$dir/gzip6.data" 2>/dev/null | grep -q '^ *[0-9]'; then
  ratio "spelunk diff" "perf diff"
else
  echo "   => perf diff printed no rows (it does not synthesize samples from SPE): compared with"
  echo "      perf report of each recording, what perf diff would have to read"
  run "perf report of both" sh -c "perf report -i '$dir/gzip1.data' --stdio --sort sym >/dev/null && perf report -i '$dir/gzip6.data' --stdio --sort sym"
  ratio "spelunk diff" "perf report of both"
fi
echo "== load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
