#!/usr/bin/env python3
"""Regenerate crates/pmu/data/telemetry/*.json from Arm's telemetry specifications.

Usage: python3 trim_spec.py SRC_DIR   (SRC_DIR = telemetry-solution's data/pmu/cpu/neoverse)

Keeps only facts (event codes, metric formulas/units/event lists, group membership, the
top-down methodology's stages and decision tree, product configuration, document provenance).
Removes Arm's prose (event/metric/group descriptions and event titles): spelunk prints its own
descriptions (crates/pmu/src/describe.rs).
"""
import json, os, sys

FILES = ["neoverse-n1", "neoverse-n2", "neoverse-n2-r0p3", "neoverse-n3",
         "neoverse-v1", "neoverse-v2", "neoverse-v3"]

def trim(d):
    doc = dict(d["document"])
    doc.pop("description", None)
    out = {
        "$schema": d.get("$schema"),
        "document": doc,
        "product_configuration": d["product_configuration"],
        "events": {n: {"code": e.get("code")} for n, e in d["events"].items()},
        "metrics": {n: {k: m[k] for k in ("title", "formula", "units", "events", "sample_events") if k in m}
                    for n, m in d["metrics"].items()},
        "groups": {"metrics": {n: {"title": g["title"], "metrics": g["metrics"]}
                               for n, g in d["groups"]["metrics"].items()}},
        "methodologies": {"topdown_methodology": {
            "title": d["methodologies"]["topdown_methodology"]["title"],
            "metric_grouping": d["methodologies"]["topdown_methodology"]["metric_grouping"],
            "decision_tree": d["methodologies"]["topdown_methodology"]["decision_tree"]}},
    }
    return out

src = sys.argv[1]
here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "telemetry")
for f in FILES:
    with open(os.path.join(src, f + ".json")) as fh:
        d = json.load(fh)
    with open(os.path.join(here, f + ".json"), "w") as fh:
        json.dump(trim(d), fh, indent=1)
        fh.write("\n")
