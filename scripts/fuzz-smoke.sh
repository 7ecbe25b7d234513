#!/usr/bin/env bash
# Short fuzz run of every cargo-fuzz target (CI smoke test; long runs are done by hand:
#   cd fuzz && cargo +nightly fuzz run <target> -- -max_total_time=3600).
# Seconds per target: FUZZ_SECONDS (default 30). Fails, showing the crash, if a target fails.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-deps.sh fuzz
secs=${FUZZ_SECONDS:-30}
cd fuzz
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for t in $(cargo +nightly fuzz list); do
  echo "== fuzz $t for ${secs}s"
  corpora=("corpus/$t")
  mkdir -p "corpus/$t"
  [ -d "seeds/$t" ] && corpora+=("seeds/$t")   # committed seed inputs (small valid recordings)
  if ! cargo +nightly fuzz run "$t" "${corpora[@]}" -- -max_total_time="$secs" -max_len=65536 -print_final_stats=1 >"$log" 2>&1; then
    tail -n 60 "$log"
    echo "fuzz target $t FAILED (reproducer in fuzz/artifacts/$t/)" >&2
    exit 1
  fi
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$log" || tail -n 3 "$log"
done
