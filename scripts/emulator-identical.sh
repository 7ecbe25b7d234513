#!/usr/bin/env bash
# Checks that two builds of the emulator produce the same traces: for each workload below, runs
# it under OLD and under NEW and compares the .emutrace files record by record. Used to show
# that a speed-up of the replay/model changes no number the emulator produces.
#
#   scripts/emulator-identical.sh OLD_LIB NEW_LIB
#
# OLD_LIB / NEW_LIB: VALGRIND_LIB directories of the two builds (emulator/build.sh writes one
# to emulator/build/lib; SL_BUILD_DIR=DIR emulator/build.sh builds another into DIR/lib).
# Needs `make -C workloads`, gcc and python3. Exit status 0 when every trace is identical.
#
# What is compared: every record byte for byte, except the process and thread ids (PROCESS,
# THREAD_*, MMAP, SAMPLE, ANNOTATION, COUNTERS, ALLOC, FREE records), which are renumbered in
# order of first appearance because the kernel hands out different ones on every run, and the
# directory of the builds' preload library in its MMAP record. The
# workloads read the clock (STREAM and lat_mem_rd time their kernels, false_sharing its
# threads), and the values they read steer their branches; so that two runs execute the same
# instructions, the programs run with a preloaded clock (built here) that returns a fixed
# sequence of times. Multi-threaded programs may still interleave differently from run to run:
# each workload also runs twice under OLD, and when OLD differs from itself the script prints
# the main counter totals of the three runs for the reader to judge instead of failing.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
[[ $# -eq 2 ]] || { echo "usage: scripts/emulator-identical.sh OLD_LIB NEW_LIB" >&2; exit 2; }
old="$(cd "$1" && pwd)"; new="$(cd "$2" && pwd)"
w="$root/workloads/build"
[[ -x "$w/stream" ]] || { echo "build the workloads first: make -C workloads" >&2; exit 1; }
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT

# A clock that advances 1 µs per call, from the same start in every run.
cat >"$tmp/fixclock.c" <<'EOF'
#include <time.h>
#include <sys/time.h>
static long long fake_ns = 1000000000LL;
int clock_gettime(clockid_t id, struct timespec *ts)
{
   (void)id;
   fake_ns += 1000;
   ts->tv_sec = fake_ns / 1000000000LL;
   ts->tv_nsec = fake_ns % 1000000000LL;
   return 0;
}
int gettimeofday(struct timeval *tv, void *tz)
{
   (void)tz;
   fake_ns += 1000;
   tv->tv_sec = fake_ns / 1000000000LL;
   tv->tv_usec = (fake_ns % 1000000000LL) / 1000;
   return 0;
}
EOF
gcc -shared -fPIC -O2 -o "$tmp/fixclock.so" "$tmp/fixclock.c"

cat >"$tmp/cmp.py" <<'EOF'
import struct, sys

# u32 pid/tid fields by record type (emulator/FORMAT.md)
IDS = {2: [0], 3: [0, 4, 8], 4: [0], 5: [0], 6: [0, 4], 9: [0], 10: [4], 11: [0], 14: [4], 15: [4]}

def records(path):
    b = open(path, "rb").read()
    if b[:8] != b"SPLKEMUT":
        sys.exit(f"{path}: not an emulator trace")
    off = struct.unpack_from("<I", b, 12)[0]
    ids, out = {}, []
    while off + 8 <= len(b):
        ty, _, ln = struct.unpack_from("<HHI", b, off)
        p = bytearray(b[off + 8 : off + 8 + ln])
        for f in IDS.get(ty, []):
            v = struct.unpack_from("<I", p, f)[0]
            struct.pack_into("<I", p, f, ids.setdefault(v, len(ids) + 1) if v else 0)
        if ty == 6 and b"/vgpreload_spelunk-" in p[48:]:
            # the builds' own preload library: the same file name in two directories
            p = p[:48] + p[48:].rsplit(b"/", 1)[1]
        out.append((ty, bytes(p)))
        off += 8 + ln
    return out

def diff(a, b):
    """(records differing, index of the first difference or None)"""
    n = sum(1 for x, y in zip(a, b) if x != y) + abs(len(a) - len(b))
    first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
    if first is None and len(a) != len(b):
        first = min(len(a), len(b))
    return n, first

o1, o2, n1 = (records(p) for p in sys.argv[1:4])
samples = sum(1 for t, _ in n1 if t == 9)
base_n, _ = diff(o1, o2)
n, first = diff(o1, n1)
if n == 0:
    print(f"identical ({len(n1)} records, {samples} samples)")
    sys.exit(0)
def totals(recs):
    """final counter totals over the cores: {name: value}"""
    names, tot = [], {}
    for ty, p in recs:
        if ty == 8:
            q = 4
            for _ in range(struct.unpack_from("<I", p, 0)[0]):
                ln = struct.unpack_from("<H", p, q + 4)[0]
                names.append(p[q + 6 : q + 6 + ln].decode())
                q += 6 + ln
        elif ty == 11 and p[6] == 3:
            vals = struct.unpack_from("<%dQ" % struct.unpack_from("<I", p, 24)[0], p, 32)
            for k, v in zip(names, vals):
                tot[k] = tot.get(k, 0) + v
    return tot

if base_n:
    # not reproducible from run to run: show the totals of the three runs side by side
    t = [totals(r) for r in (o1, o2, n1)]
    keys = ("CPU_CYCLES", "INST_SPEC", "L1D_CACHE_REFILL", "TRUTH_COHERENCE_INVALIDATIONS")
    print("not reproducible (OLD differs from itself in %d records); OLD, OLD, NEW: %s"
          % (base_n, "; ".join(f"{k} {t[0].get(k)} {t[1].get(k)} {t[2].get(k)}" for k in keys)))
    sys.exit(0)
print(f"DIFFERENT: {n} of {len(n1)} records, the first is record {first} (type {o1[first][0] if first < len(o1) else '-'})")
sys.exit(1)
EOF

# The library paths reach the program's environment (and so its stack addresses): give both
# builds paths of the same length.
ln -s "$old" "$tmp/lib-o"; ln -s "$new" "$tmp/lib-n"
old="$tmp/lib-o"; new="$tmp/lib-n"

run() { # lib out program args...
  local lib="$1" out="$2"; shift 2
  SPELUNK_VALGRIND_LIB="$lib" LD_PRELOAD="$tmp/fixclock.so" \
    "$root/emulator/spelunk-emu" --out="$out" "${opts[@]}" -- "$@" >/dev/null 2>&1
}

status=0
check() { # name, then the program and its arguments (emulator options in $opts)
  local name="$1"; shift
  run "$old" "$tmp/old1.emutrace" "$@"
  run "$old" "$tmp/old2.emutrace" "$@"
  run "$new" "$tmp/new.emutrace" "$@"
  printf '%-40s ' "$name"
  python3 "$tmp/cmp.py" "$tmp/old1.emutrace" "$tmp/old2.emutrace" "$tmp/new.emutrace" || status=1
}

opts=()
check "stream -n 200000 -i 2" "$w/stream" -n 200000 -i 2
check "stride_benchmark 300000" "$w/stride_benchmark" 300000
check "stride_benchmark 300000 40" "$w/stride_benchmark" 300000 40
check "lat_mem_rd -n 100000 64k 4m" "$w/lat_mem_rd" -n 100000 64k 4m
check "array2d 512" "$w/array2d" 512
check "array2d 512 --by-row" "$w/array2d" 512 --by-row
check "heap_objects 8" "$w/heap_objects" 8
check "prefetch_forms" "$w/prefetch_forms"
check "false_sharing 2 20000" "$w/false_sharing" 2 20000
opts=(--page-size=4096 --slc-size=8388608)
check "stride_benchmark 300000 (4 KB, 8 MB SLC)" "$w/stride_benchmark" 300000
check "stride_benchmark 300000 40 (4 KB, 8 MB)" "$w/stride_benchmark" 300000 40
check "lat_mem_rd -t (4 KB, 8 MB SLC)" "$w/lat_mem_rd" -t -n 100000 16m
opts=(--period=256 --jitter=yes)
check "stream (period 256, jitter)" "$w/stream" -n 100000 -i 2
check "stride_benchmark 100000 (period 256, jitter)" "$w/stride_benchmark" 100000
exit $status
