"""The JSON Schemas in docs/schemas, checked by an independent validator (python-jsonschema)
against files spelunk writes: a sidecar the emulator wrote, and one `spelunk record --no-spe`
writes here (timelines, counters not counted)."""

import json
import os
import subprocess
from pathlib import Path

import jsonschema

ROOT = Path(__file__).resolve().parents[2]
SPELUNK = os.environ.get("SPELUNK_BIN", str(ROOT / "target/release/spelunk"))


def validator(name):
    schema = json.loads((ROOT / "docs/schemas" / f"{name}.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_an_emulator_sidecar_matches_the_schema():
    v = validator("sidecar")
    doc = json.loads((ROOT / "crates/perf/tests/data/sidecar-emulator-v1.json").read_text())
    v.validate(doc)
    bad = dict(doc, phases="not a list")
    assert not v.is_valid(bad)


def test_a_no_spe_sidecar_matches_the_schema(tmp_path):
    out = tmp_path / "ns.data"
    subprocess.run(
        [SPELUNK, "record", "--no-spe", "--no-runtime", "--capacity-interval", "10", "-o", str(out),
         "--", "sh", "-c", "sleep 0.05"],
        check=True, capture_output=True,
    )
    doc = json.loads(Path(str(out) + ".spelunk.json").read_text())
    validator("sidecar").validate(doc)
    assert doc["capacity"]["samples"], "resident memory was sampled"
