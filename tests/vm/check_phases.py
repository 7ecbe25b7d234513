#!/usr/bin/env python3
"""Host-side check that the runtime's phases landed on the samples' clock in a `spelunk record`
of tests/vm/phases.c against the SPE stub in the arm64 VM.

The stub writes 8 SPE records every 200 µs of guest time (its defaults, tests/vm/spe-stub), one
record per 25 µs, whatever the program does. The runtime times phases with CLOCK_MONOTONIC;
spelunk record moves them onto perf time. If that worked, each phase holds duration / 25 µs
samples, give or take the ticks at its edges (a tick writes 8 at once) -- a phase misplaced by
even a millisecond would be 40 samples off. Durations come from the sidecar (the runtime's own
clock); sample counts from `spelunk report --json`.

A second recording of the same program with resident memory and counters every 5 ms
(TIMELINES_SIDECAR_JSON) must have its timelines on the same (perf) clock as its phases.

Usage: check_phases.py REPORT_JSON SIDECAR_JSON TIMELINES_SIDECAR_JSON
"""
import json
import sys

NS_PER_SAMPLE = 25_000  # 200 µs / 8 records


def main():
    report = json.load(open(sys.argv[1]))
    sidecar = json.load(open(sys.argv[2]))
    fails = 0

    def check(cond, what):
        nonlocal fails
        print(("ok " if cond else "FAIL ") + what)
        fails += 0 if cond else 1

    spans = {p["name"]: p["end_ns"] - p["start_ns"] for p in sidecar.get("phases", [])}
    check(set(spans) == {"fill", "sum"}, f"the sidecar has the phases fill and sum ({sorted(spans)})")
    check(any(o["name"] == "table" and o["size"] == 8 << 20 for o in sidecar.get("objects", [])),
          "the sidecar has the object table (8 MiB)")
    check(any(a["size"] >= 8 << 20 for a in sidecar.get("allocations", [])),
          "the sidecar has the 8 MiB heap block")
    rows = {r["name"]: r for r in report.get("phases", [])}
    for name, dur in sorted(spans.items()):
        want = dur / NS_PER_SAMPLE
        got = rows.get(name, {}).get("samples", 0)
        # Two partial ticks at the edges (8 each) and 2 % for the timer's rounding.
        check(abs(got - want) <= 16 + 0.02 * want,
              f"phase {name}: {got} samples in {dur / 1e6:.2f} ms, stub rate gives {want:.0f}")
    sidecar = json.load(open(sys.argv[3]))
    # The timelines recorded with the samples are on the samples' clock too: resident memory
    # sampled every 5 ms spans the phases, and the counters count IPC 1 (-icount).
    cfg = sidecar.get("config", {})
    check(cfg.get("timeline_clock") == "perf" and cfg.get("phases_clock") == "perf",
          "timelines and phases are on the perf clock")
    cap = (sidecar.get("capacity") or {}).get("samples", [])
    t0, t1 = min(p["start_ns"] for p in sidecar["phases"]), max(p["end_ns"] for p in sidecar["phases"])
    inside = [s for s in cap if t0 <= s["time_ns"] <= t1]
    check(len(inside) >= 5, f"{len(inside)} resident-memory samples fall inside the phases ({len(cap)} in all)")
    totals = sidecar.get("counters", {}).get("totals", {})
    cyc, ins = totals.get("CPU_CYCLES", 0), totals.get("INST_RETIRED", 0)
    check(cyc > 0 and abs(ins - cyc) <= 0.001 * cyc, f"counters: INST_RETIRED {ins} = CPU_CYCLES {cyc}")
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
