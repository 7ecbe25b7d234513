#!/usr/bin/env python3
"""Write generic-armv8.json and generic-armv9.json, spelunk's fallback catalogs for cores that
have no Arm telemetry specification.

They use only architected common events (Arm ARM DDI 0487, "Common event numbers"; codes as in
Arm's common_armv8.json / common_armv9.json in ARM-software/data), so they count on any PMUv3.
The metric set is the Neoverse N1 one (every N1 metric uses architected events only); Armv9
adds the architected top-down level 1 (STALL_SLOT*, OP_RETIRED, OP_SPEC; Armv8.4 PMU / FEAT_PMUv3p4
topdown events) with the slot width taken from the PMU's caps/slots at run time (`#slots`).
"""
import json, os

here = os.path.dirname(os.path.abspath(__file__))
n1 = json.load(open(os.path.join(here, "telemetry", "neoverse-n1.json")))

CODES = {
    "L1I_CACHE_REFILL": 0x01, "L1I_TLB_REFILL": 0x02, "L1D_CACHE_REFILL": 0x03, "L1D_CACHE": 0x04,
    "L1D_TLB_REFILL": 0x05, "INST_RETIRED": 0x08, "PC_WRITE_RETIRED": 0x0C, "BR_MIS_PRED": 0x10,
    "CPU_CYCLES": 0x11, "BR_PRED": 0x12, "MEM_ACCESS": 0x13, "L1I_CACHE": 0x14, "L2D_CACHE": 0x16,
    "L2D_CACHE_REFILL": 0x17, "INST_SPEC": 0x1B, "BR_RETIRED": 0x21, "BR_MIS_PRED_RETIRED": 0x22,
    "STALL_FRONTEND": 0x23, "STALL_BACKEND": 0x24, "L1D_TLB": 0x25, "L1I_TLB": 0x26,
    "L2D_TLB_REFILL": 0x2D, "L2D_TLB": 0x2F, "DTLB_WALK": 0x34, "ITLB_WALK": 0x35,
    "LL_CACHE_RD": 0x36, "LL_CACHE_MISS_RD": 0x37, "OP_RETIRED": 0x3A, "OP_SPEC": 0x3B,
    "STALL": 0x3C, "STALL_SLOT_BACKEND": 0x3D, "STALL_SLOT_FRONTEND": 0x3E, "STALL_SLOT": 0x3F,
    "LD_SPEC": 0x70, "ST_SPEC": 0x71, "DP_SPEC": 0x73, "ASE_SPEC": 0x74, "VFP_SPEC": 0x75,
    "PC_WRITE_SPEC": 0x76, "CRYPTO_SPEC": 0x77, "BR_IMMED_SPEC": 0x78, "BR_RETURN_SPEC": 0x79,
    "BR_INDIRECT_SPEC": 0x7A,
}
V9_ONLY = {"OP_RETIRED", "OP_SPEC", "STALL", "STALL_SLOT_BACKEND", "STALL_SLOT_FRONTEND", "STALL_SLOT"}

L1 = {
    "frontend_bound": ("Frontend Bound", "STALL_SLOT_FRONTEND / (#slots * CPU_CYCLES) * 100",
                       ["CPU_CYCLES", "STALL_SLOT_FRONTEND"]),
    "backend_bound": ("Backend Bound", "STALL_SLOT_BACKEND / (#slots * CPU_CYCLES) * 100",
                      ["CPU_CYCLES", "STALL_SLOT_BACKEND"]),
    "retiring": ("Retiring", "(1 - STALL_SLOT / (#slots * CPU_CYCLES)) * (OP_RETIRED / OP_SPEC) * 100",
                 ["CPU_CYCLES", "OP_RETIRED", "OP_SPEC", "STALL_SLOT"]),
    "bad_speculation": ("Bad Speculation",
                        "(1 - STALL_SLOT / (#slots * CPU_CYCLES)) * (1 - OP_RETIRED / OP_SPEC) * 100",
                        ["CPU_CYCLES", "OP_RETIRED", "OP_SPEC", "STALL_SLOT"]),
}

def make(v9):
    events = {n: {"code": "0x%04X" % c} for n, c in sorted(CODES.items()) if v9 or n not in V9_ONLY}
    metrics = dict(n1["metrics"])
    groups = dict(n1["groups"]["metrics"])
    tree = json.loads(json.dumps(n1["methodologies"]["topdown_methodology"]["decision_tree"]))
    grouping = json.loads(json.dumps(n1["methodologies"]["topdown_methodology"]["metric_grouping"]))
    if v9:
        for n, (title, formula, evs) in L1.items():
            metrics[n] = {"title": title, "formula": formula, "units": "percent of slots",
                          "events": evs, "sample_events": []}
        groups["Topdown_L1"] = {"title": "Topdown Level 1", "metrics": list(L1)}
        grouping = {"stage_1": ["Topdown_L1"], "stage_2": ["Cycle_Accounting"] + grouping["stage_2"]}
        n1_next = {m["name"]: m["next_items"] for m in tree["metrics"]}
        tree = {"root_nodes": list(L1), "metrics": [
            {"name": "frontend_bound", "group": "Topdown_L1", "next_items": n1_next["frontend_stalled_cycles"], "sample_events": []},
            {"name": "backend_bound", "group": "Topdown_L1", "next_items": n1_next["backend_stalled_cycles"], "sample_events": []},
            {"name": "retiring", "group": "Topdown_L1", "next_items": ["Operation_Mix"], "sample_events": []},
            {"name": "bad_speculation", "group": "Topdown_L1", "next_items": ["Branch_Effectiveness"], "sample_events": []},
        ]}
    name = "Generic Armv9-A" if v9 else "Generic Armv8-A"
    return {
        "$schema": "v1.0.schema.json",
        "document": {"copyright": "spelunk authors", "license": "MIT OR Apache-2.0",
                     "quality": "spelunk fallback: architected events only"},
        "product_configuration": {"product_name": name, "part_num": None, "major_revision": None,
                                  "minor_revision": None, "implementer": None,
                                  "architecture": "armv9.0" if v9 else "armv8.0",
                                  "pmu_architecture": "pmu_v3", "num_slots": 0, "num_bus_slots": 0},
        "events": events, "metrics": metrics, "groups": {"metrics": groups},
        "methodologies": {"topdown_methodology": {"title": "Topdown Methodology",
                                                  "metric_grouping": grouping, "decision_tree": tree}},
    }

for v9, f in ((False, "generic-armv8.json"), (True, "generic-armv9.json")):
    with open(os.path.join(here, f), "w") as fh:
        json.dump(make(v9), fh, indent=1)
        fh.write("\n")
