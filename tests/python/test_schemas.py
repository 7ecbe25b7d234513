"""The JSON Schemas in docs/schemas, checked by an independent validator (python-jsonschema)
against what spelunk writes: a sidecar the emulator wrote, one `spelunk record --no-spe` writes
here (timelines, counters not counted), the `--json` output of report, c2c, diff and estimate
on a synthetic recording with a sidecar (phases, objects), of topdown on the methodology's
`perf stat` files and of check on the machine fixtures, and a `spelunk bench` baseline and
comparison of the walk workload under the emulator (skipped when it is not built)."""

import json
import os
import subprocess
from pathlib import Path

import jsonschema

ROOT = Path(__file__).resolve().parents[2]
SPELUNK = os.environ.get("SPELUNK_BIN", str(ROOT / "target/release/spelunk"))
SYNTH = os.environ.get("SPELUNK_SYNTH_BIN", str(ROOT / "target/release/spelunk-synth"))


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


def spelunk_json(*args):
    done = subprocess.run([SPELUNK, *map(str, args), "--json"], check=True, capture_output=True)
    return json.loads(done.stdout)


def synthetic(path, records, seed):
    """spelunk-synth's recording with a sidecar naming a phase and an object, so that the
    optional parts of the reports are present."""
    subprocess.run([SYNTH, str(path), "--cpus", "2", "--records-per-cpu", str(records),
                    "--seed", str(seed)], check=True, capture_output=True)
    sidecar = dict(
        schema="spelunk-sidecar/1", source="runtime",
        phases=[dict(name="run", pid=4242, tid=4242, depth=1, start_ns=1_000_000_000,
                     end_ns=1_000_500_000)],
        objects=[dict(name="buffer", pid=4242, address=0xFFFF_8000_0000, size=0x800_0000,
                      from_ns=0, until_ns=2**64 - 1, kind="annotated")],
    )
    Path(str(path) + ".spelunk.json").write_text(json.dumps(sidecar))
    return path


def test_every_json_report_matches_its_schema(tmp_path):
    a = synthetic(tmp_path / "a.data", 1500, 1)
    b = synthetic(tmp_path / "b.data", 1000, 2)
    outputs = {
        "report": [spelunk_json("report", a), spelunk_json("report", a, "--c2c")],
        "c2c": [spelunk_json("c2c", a)],
        "diff": [spelunk_json("diff", a, b)],
        "estimate": [spelunk_json("estimate", "latency", a),
                     spelunk_json("estimate", "bandwidth", a, "--bytes-per-op", "8")],
        "advise": [spelunk_json("advise", a)],
    }
    for name, docs in outputs.items():
        v = validator(name)
        for doc in docs:
            errors = sorted(v.iter_errors(doc), key=lambda e: list(e.path))
            assert not errors, f"{name}: " + "; ".join(
                f"{list(e.path)}: {e.message}" for e in errors[:5])
        # The schema is not vacuous: a wrong type in a required field fails it.
        assert not v.is_valid(dict(docs[0], schema=7)), name
    assert outputs["report"][1]["c2c"] is not None
    # The report carries the advisor's output, the same schema as `spelunk advise --json`.
    advice = validator("advise")
    assert advice.is_valid(outputs["report"][0]["advice"])


def test_topdown_and_check_json_match_their_schemas():
    data = ROOT / "crates/pmu/tests/data"
    v = validator("topdown")
    for csv in sorted((data / "perf-stat").glob("*.csv")):
        doc = spelunk_json("topdown", "--import", csv, "--cpu-model", "neoverse-n1")
        errors = list(v.iter_errors(doc))
        assert not errors, f"{csv.name}: {errors[0].message} at {list(errors[0].path)}"
    v = validator("check")
    machines = sorted(p for p in (data / "machines").iterdir() if p.is_dir())
    assert machines
    for m in machines:
        done = subprocess.run([SPELUNK, "check", "--sysroot", str(m), "--json"], capture_output=True)
        assert done.returncode in (0, 1), done.stderr  # 1: this machine cannot record
        errors = list(v.iter_errors(json.loads(done.stdout)))
        assert not errors, f"{m.name}: {errors[0].message} at {list(errors[0].path)}"


def test_the_annotate_schema_is_well_formed():
    # Annotating needs the recorded binary; test_python_api and the CLI tests cover the output.
    validator("annotate")


def test_a_bench_baseline_and_comparison_match_their_schemas(tmp_path):
    # Needs the emulator and the walk workload (emulator/build.sh, make -C workloads).
    import platform

    import pytest

    arch = "arm64" if platform.machine() in ("aarch64", "arm64") else "amd64"
    program = ROOT / "workloads/build/bench_walk"
    if not (ROOT / f"emulator/build/lib/spelunk-{arch}-linux").exists() or not program.exists():
        pytest.skip("emulator or workloads/build/bench_walk not built")
    base = tmp_path / "base.json"
    subprocess.run([SPELUNK, "bench", "--save", str(base), "--", str(program), "65536"],
                   check=True, capture_output=True)
    errors = list(validator("bench").iter_errors(json.loads(base.read_text())))
    assert not errors, f"{errors[0].message} at {list(errors[0].path)}"
    done = subprocess.run([SPELUNK, "bench", "--compare", str(base), "--json", "--", str(program), "65536"],
                          capture_output=True)
    assert done.returncode == 0, done.stderr
    errors = list(validator("bench-compare").iter_errors(json.loads(done.stdout)))
    assert not errors, f"{errors[0].message} at {list(errors[0].path)}"
