#!/usr/bin/env python3
"""Host-side check of `spelunk record --no-spe -- /phases` in the arm64 VM (no SPE): the
sidecar's counter timeline comes from the real armv8_pmuv3 driver, its capacity timeline from
/proc/PID/numa_maps, and the runtime's phases join them on the same clock.

Independent facts used: under `-icount shift=0` one instruction retires per cycle, so
INST_RETIRED equals CPU_CYCLES (the VM recipe measured them within 0.01 %); QEMU's PMU lists
only cpu_cycles, inst_retired, stall_backend and stall_frontend in sysfs events/, so the other
default events must be "not counted", never 0; tests/vm/phases.c mallocs an 8 MiB table and
writes all of it, so the process's anonymous memory must reach 8 MiB.

Usage: check_nospe.py SIDECAR_JSON
"""
import json
import sys


def main():
    sc = json.load(open(sys.argv[1]))
    fails = 0

    def check(cond, what):
        nonlocal fails
        print(("ok " if cond else "FAIL ") + what)
        fails += 0 if cond else 1

    c = sc.get("counters", {})
    names = [e[1] for e in c.get("events", [])]
    totals = c.get("totals", {})
    check({"CPU_CYCLES", "INST_RETIRED"} <= set(names), f"counted: {names}")
    cyc, ins = totals.get("CPU_CYCLES", 0), totals.get("INST_RETIRED", 0)
    check(cyc > 10_000_000 and abs(ins - cyc) <= 0.001 * cyc,
          f"INST_RETIRED {ins} = CPU_CYCLES {cyc} under -icount (IPC 1)")
    not_counted = {n["name"] for n in c.get("not_counted", [])}
    want_missing = {"MEM_ACCESS", "L1D_CACHE_REFILL", "L2D_CACHE_REFILL", "LL_CACHE_MISS_RD", "BUS_ACCESS"}
    check(want_missing <= not_counted, f"events QEMU lacks are not counted: {sorted(not_counted)}")
    check(not (want_missing & set(names)), "and never recorded as counts")
    periodic = [s for s in c.get("timeline", []) if s.get("reason") == "periodic"]
    check(len(periodic) >= 3, f"{len(periodic)} periodic counter snapshots")
    cap = sc.get("capacity") or {}
    samples = cap.get("samples", [])
    check(cap.get("source") == "numa_maps" and len(samples) >= 3,
          f"{len(samples)} capacity samples from {cap.get('source')}")
    peak = max((sum(n["heap_bytes"] + n["anon_bytes"] for n in s["nodes"]) for s in samples), default=0)
    check(peak >= 8 << 20, f"heap + anon peak {peak / 2**20:.1f} MiB >= the 8 MiB table")
    phases = {p["name"] for p in sc.get("phases", [])}
    check(phases == {"fill", "sum"} and sc.get("config", {}).get("phases_clock") == sc.get("config", {}).get("timeline_clock"),
          f"the runtime's phases {sorted(phases)} on the timelines' clock")
    t0 = min((s["time_ns"] for s in samples), default=0)
    t1 = max((s["time_ns"] for s in samples), default=0)
    inside = all(t0 - 200_000_000 <= p["start_ns"] <= t1 + 200_000_000 for p in sc.get("phases", []))
    check(inside, "the phases fall within the timelines' span")
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
