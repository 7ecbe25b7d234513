#!/usr/bin/env bash
# Fleet analysis at scale (issue 11 item 5): time and peak memory of the fleet report on DuckDB
# and on Spark local over datasets made from BENCH_SIZES of perf.data.
#
# For each size S in BENCH_SIZES (default "1G 5G 20G"), builds a dataset from S / BENCH_RECORDING
# synthetic SPE recordings (spelunk-synth, Neoverse N1 64-byte records, BENCH_CPUS CPUs, 64
# annotated data objects, a different seed each) spread over BENCH_HOSTS hosts, one partition
# (host, run) per recording; each perf.data is deleted right after its export. Then times, over
# the whole dataset:
#   spelunk fleet report DIR --limit 0 --json         (DuckDB, memory limit BENCH_DUCK_MEMORY)
#   python3 -m spelunk.spark DIR --master local[2] --limit 0 --json
#                                                      (Spark local, driver memory BENCH_SPARK_MEMORY)
# best of BENCH_REPEAT runs (default 2; 1 for sizes of BENCH_SINGLE_FROM and more, default 20G),
# then deletes the dataset and prints one table row per size.
#
# CPU time and peak RSS are of the whole process tree: pyspark starts the JVM as a process the
# Python interpreter never waits for, so GNU time's figures would leave the JVM out. The
# measuring wrapper below makes itself the children's subreaper, reaps every process of the
# tree (wait4: exact user+sys CPU, and each process's own peak RSS) and polls /proc every
# 0.1 s for the tree's summed RSS (its peak, shared pages counted once per process).
#   BENCH_BIN   directory of spelunk and spelunk-synth (default: target/release; built when
#               it is the default and they are missing)
#   BENCH_DIR   where to put the files (default: a temp dir, removed afterwards)
#   BENCH_SPARK=0 skips Spark; BENCH_DUCK=0 skips DuckDB.
set -euo pipefail
cd "$(dirname "$0")/.."
sizes=${BENCH_SIZES:-1G 5G 20G}
rec_size=${BENCH_RECORDING:-1G}
cpus=${BENCH_CPUS:-4}
hosts=${BENCH_HOSTS:-4}
repeat=${BENCH_REPEAT:-2}
single_from=${BENCH_SINGLE_FROM:-20G}
duck_mem=${BENCH_DUCK_MEMORY:-2GB}
spark_mem=${BENCH_SPARK_MEMORY:-1g}
bin=${BENCH_BIN:-target/release}
dir=${BENCH_DIR:-$(mktemp -d)}
mkdir -p "$dir"
[ -n "${BENCH_DIR:-}" ] || trap 'rm -rf "$dir"' EXIT

if [ -z "${BENCH_BIN:-}" ] && ! [ -x "$bin/spelunk" -a -x "$bin/spelunk-synth" ]; then
  cargo build --release --locked -q -p spelunk -p spelunk-testkit
fi
for b in spelunk spelunk-synth; do
  [ -x "$bin/$b" ] || { echo "bench-fleet: no $bin/$b: build it (cargo build --release -p spelunk -p spelunk-testkit) or set BENCH_BIN" >&2; exit 1; }
done
python3 -c 'import spelunk.fleet, duckdb' 2>/dev/null || { echo "bench-fleet: needs the spelunk Python package and duckdb (make python)" >&2; exit 1; }
if [ "${BENCH_SPARK:-1}" = 1 ]; then
  python3 -c 'import pyspark' 2>/dev/null || { echo "bench-fleet: needs pyspark and Java 17 (scripts/ensure-deps.sh spark), or BENCH_SPARK=0" >&2; exit 1; }
fi
bytes_of() { numfmt --from=iec "$1"; }

# measure OUT CMD...: runs CMD, writes "wall_s cpu_s tree_peak_rss_kb max_process_rss_kb xmx" to OUT.
measure_py="$dir/measure.py"
cat >"$measure_py" <<'EOF'
import ctypes, os, subprocess, sys, time
out, cmd = sys.argv[1], sys.argv[2:]
PR_SET_CHILD_SUBREAPER = 36
ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
me = os.getpid()
start = time.monotonic()
child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
peak_kb, xmx, status, cpu_s, max_rss_kb, end = 0, "-", None, 0.0, 0, None

def tree():
    parent = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open(f"/proc/{p}/stat") as f:
                    parent[int(p)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                pass
    mine, grown = {me}, True
    while grown:
        grown = False
        for p, pp in parent.items():
            if pp in mine and p not in mine:
                mine.add(p)
                grown = True
    mine.discard(me)
    return mine

while True:
    total = 0
    for p in tree():
        try:
            with open(f"/proc/{p}/status") as f:
                total += next((int(l.split()[1]) for l in f if l.startswith("VmRSS:")), 0)
            if xmx == "-":
                # The driver JVM's heap bound (not the 128 MB one of spark-submit's launcher).
                with open(f"/proc/{p}/cmdline", "rb") as f:
                    argv = f.read().split(b"\0")
                if b"org.apache.spark.deploy.SparkSubmit" in argv and b"org.apache.spark.launcher.Main" not in argv:
                    xmx = next((a.decode() for a in argv if a.startswith(b"-Xmx")), "-")
        except OSError:
            pass
    peak_kb = max(peak_kb, total)
    # Reap whatever ended: the command, and orphans (the JVM) re-parented to us.
    while True:
        try:
            pid, st, ru = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            pid = -1
            break
        if pid == 0:
            break
        cpu_s += ru.ru_utime + ru.ru_stime
        max_rss_kb = max(max_rss_kb, ru.ru_maxrss)
        if pid == child.pid:
            status, end = os.waitstatus_to_exitcode(st), time.monotonic()
    if pid == -1:
        break
    time.sleep(0.1)
with open(out, "w") as f:
    f.write(f"{end - start:.2f} {cpu_s:.2f} {peak_kb} {max_rss_kb} {xmx}\n")
sys.exit(status)
EOF

best() { # name, command... -> sets wall cpu tree_kb proc_kb xmx (the run of least wall time)
  local name=$1; shift
  local n=$repeat i t
  [ "$(bytes_of "$size")" -lt "$(bytes_of "$single_from")" ] || n=1
  runs=$n
  wall=
  for ((i = 1; i <= n; i++)); do
    t=$(mktemp)
    python3 "$measure_py" "$t" "$@" 2>"$dir/stderr" || { cat "$dir/stderr" >&2; echo "bench-fleet: $name failed on $size" >&2; exit 1; }
    read -r w c tk pk x <"$t"; rm -f "$t"
    echo "   $name run $i: $w s wall, $c s CPU, $((tk / 1024)) MB tree peak RSS, $((pk / 1024)) MB largest process ${x/-/}" >&2
    if [ -z "$wall" ] || [ "$(echo "$w < $wall" | bc -l)" = 1 ]; then
      wall=$w cpu=$c tree_kb=$tk proc_kb=$pk xmx=$x
    fi
  done
}

rows=()
for size in $sizes; do
  n=$(( ($(bytes_of "$size") + $(bytes_of "$rec_size") - 1) / $(bytes_of "$rec_size") ))
  ds="$dir/fleet-$size"
  rm -rf "$ds"
  echo "== $size: $n recordings of $rec_size over $hosts hosts into $ds (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  export_s=0 data_bytes=0
  for ((r = 0; r < n; r++)); do
    data="$dir/rec-$r.data"
    "$bin/spelunk-synth" "$data" --cpus "$cpus" --bytes "$rec_size" --chunk 256K --objects 64 --seed $((r + 1)) >/dev/null
    data_bytes=$((data_bytes + $(stat -c %s "$data")))
    t=$(mktemp)
    /usr/bin/time -f "%e" -o "$t" "$bin/spelunk" export "$data" --dataset "$ds" \
      --host "h$((r % hosts))" --run "r$(printf %03d "$r")" >/dev/null 2>"$dir/stderr" \
      || { cat "$dir/stderr" >&2; echo "bench-fleet: export failed" >&2; exit 1; }
    export_s=$(echo "$export_s + $(cat "$t")" | bc -l); rm -f "$t"
    rm -f "$data" "$data.spelunk.json"
  done
  samples=$(python3 -c 'import glob,json,sys; print(sum(json.load(open(p))["samples"] for p in glob.glob(sys.argv[1] + "/host=*/run=*/_run.json")))' "$ds")
  ds_bytes=$(du -sb "$ds" | cut -f1)
  echo "   exported $samples samples ($data_bytes bytes of perf.data) in $export_s s; dataset $ds_bytes bytes" >&2
  duck="-" spark="-"
  if [ "${BENCH_DUCK:-1}" = 1 ]; then
    best "DuckDB" "$bin/spelunk" fleet report "$ds" --limit 0 --json --memory-limit "$duck_mem"
    duck=$(printf "%7.1f s %7.1f s %6d MB" "$wall" "$cpu" $((tree_kb / 1024)))
  fi
  if [ "${BENCH_SPARK:-1}" = 1 ]; then
    PYSPARK_SUBMIT_ARGS="--driver-memory $spark_mem pyspark-shell" \
      best "Spark" python3 -m spelunk.spark "$ds" --master 'local[2]' --limit 0 --json
    spark=$(printf "%7.1f s %7.1f s %6d MB (%s)" "$wall" "$cpu" $((tree_kb / 1024)) "$xmx")
  fi
  rm -rf "$ds"
  rows+=("$(printf "%-6s %12d %10d %12d %8.1f s  %s  %s  %s" "$size" "$data_bytes" "$samples" "$ds_bytes" "$export_s" "$duck" "$spark" "$runs")")
  printf '%s\n' "${rows[-1]}" >&2
done
echo "== load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
printf "%-6s %12s %10s %12s %10s  %-33s  %-47s  %s\n" size perf.data_B samples dataset_B export "DuckDB wall / CPU / peak RSS" "Spark local[2] wall / CPU / peak RSS (heap)" "runs (best of)"
printf '%s\n' "${rows[@]}"
