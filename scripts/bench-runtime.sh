#!/usr/bin/env bash
# Costs of spelunk's LD_PRELOAD runtime (runtime/, libspelunk.so), per call, on this machine:
# one CLOCK_MONOTONIC read (the floor of a timestamped call, measured in the same runs, so a
# loaded machine shows in it), an annotation pair (spelunk_phase_begin + _end), malloc/free of 64 B (below the 4 KiB
# logging threshold: pass-through) and of 64 KiB (logged with its call stack), each without
# the runtime, with it loaded but disabled, and enabled. Then the slowdown of an
# allocation-heavy real program (Debian's sort on 200k lines, BENCH_LINES) with the runtime,
# and with its capacity sampler too (SPELUNK_TRACK_RSS, every 10 ms).
#   scripts/bench-runtime.sh [CALLS]          (default 2000000)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
calls="${1:-2000000}"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
"$root/runtime/build.sh" >/dev/null
lib="$root/runtime/build/libspelunk.so"
gcc -O2 -I"$root/include" "$root/runtime/bench/bench_rt.c" -o "$tmp/bench"
best() { # best of 3 runs, per line
  for _ in 1 2 3; do "$@"; done | sort -k1,1 -k2,2n | awk '$1 != last { print; last = $1 }'
}
echo "== ns per call (best of 3, $calls calls)"
echo "-- no runtime";          best "$tmp/bench" "$calls"
echo "-- runtime, disabled";   best env LD_PRELOAD="$lib" "$tmp/bench" "$calls"
echo "-- runtime, enabled";    best env LD_PRELOAD="$lib" SPELUNK_ENABLE=1 SPELUNK_OUTPUT="$tmp/b" "$tmp/bench" "$calls"
rm -f "$tmp"/b.rt.*
lines="${BENCH_LINES:-200000}"
awk -v n="$lines" 'BEGIN { srand(1); for (i = 0; i < n; i++) printf "%08d %s\n", int(rand() * 1e8), "x" }' > "$tmp/in"
t() { local s e; s=$(date +%s.%N); "$@" > /dev/null; e=$(date +%s.%N); echo "$e - $s" | bc; }
echo "== sort -S 64M of $lines lines (allocation-heavy), seconds, best of 3"
plain=$(for _ in 1 2 3; do t sort -S 64M "$tmp/in"; done | sort -n | head -1)
traced=$(for _ in 1 2 3; do t env LD_PRELOAD="$lib" SPELUNK_ENABLE=1 SPELUNK_OUTPUT="$tmp/s" sort -S 64M "$tmp/in"; done | sort -n | head -1)
rss=$(for _ in 1 2 3; do t env LD_PRELOAD="$lib" SPELUNK_ENABLE=1 SPELUNK_TRACK_RSS=1 SPELUNK_RSS_INTERVAL_MS=10 SPELUNK_OUTPUT="$tmp/r" sort -S 64M "$tmp/in"; done | sort -n | head -1)
echo "plain $plain"
echo "runtime $traced"
echo "slowdown $(echo "scale=3; $traced / $plain" | bc)"
echo "runtime+rss $rss"
echo "slowdown+rss $(echo "scale=3; $rss / $plain" | bc)"
