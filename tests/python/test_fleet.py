"""Fleet analysis (`spelunk fleet report`, `spelunk.fleet` on DuckDB, `spelunk.spark` on Spark)
over a dataset of several recordings exported with `spelunk export --dataset`, against each
recording's own `spelunk report --json`: counts summed over the recordings, latency summaries
(exact nearest-rank percentiles) on a one-recording selection, and Spark's tables equal to
DuckDB's. The recordings are emulated ones (heap_objects, array2d under `spelunk record
--emulate`) when the emulator and workloads are built (`make emulator`), else synthetic ones
(spelunk-synth)."""

import json
import os
import platform
import shutil
import subprocess
import time
from collections import defaultdict
from pathlib import Path

import jsonschema
import pandas as pd
import pytest

from spelunk import fleet

ROOT = Path(__file__).resolve().parents[2]
SPELUNK = os.environ.get("SPELUNK_BIN", str(ROOT / "target/release/spelunk"))
SYNTH = os.environ.get("SPELUNK_SYNTH_BIN", str(ROOT / "target/release/spelunk-synth"))
EMU_LIB = ROOT / "emulator/build/lib"
WORKLOADS = ROOT / "workloads/build"
ARCH = "arm64" if platform.machine() in ("aarch64", "arm64") else "amd64"
# Every row of every report table (the report's own limit is 20).
ALL = "1000000"


def run(*args, env=None):
    return subprocess.run([str(a) for a in args], check=True, capture_output=True, text=True, env=env)


def emulated():
    return (EMU_LIB / f"spelunk-{ARCH}-linux").exists() and all(
        (WORKLOADS / p).exists() for p in ("heap_objects", "array2d")
    )


@pytest.fixture(scope="module")
def recordings(tmp_path_factory):
    """(host, run) -> perf.data: three recordings on two hosts; two of one program (so its
    functions and allocation sites add up across hosts), one of another."""
    d = tmp_path_factory.mktemp("fleet-recordings")
    out = {}
    if emulated():
        env = dict(os.environ, SPELUNK_EMULATOR_LIB=str(EMU_LIB))
        plan = [
            (("h1", "r1"), ["heap_objects"]),
            (("h1", "r2"), ["array2d", "4096"]),
            (("h2", "r1"), ["heap_objects"]),
        ]
        for (host, run_name), prog in plan:
            path = d / f"{host}-{run_name}.data"
            run(SPELUNK, "record", "--emulate", "--no-jitter", "-o", path, "--", WORKLOADS / prog[0], *prog[1:], env=env)
            out[(host, run_name)] = path
    else:
        print("fleet tests: emulator not built; synthetic recordings (spelunk-synth)")
        for i, key in enumerate([("h1", "r1"), ("h1", "r2"), ("h2", "r1")]):
            path = d / f"{key[0]}-{key[1]}.data"
            run(SYNTH, path, "--cpus", "2", "--records-per-cpu", str(1500 + 500 * i), "--seed", str(i + 1),
                "--mappings", "3", "--objects", "4")
            out[key] = path
    return out


@pytest.fixture(scope="module")
def dataset(recordings, tmp_path_factory):
    ds = tmp_path_factory.mktemp("fleet") / "dataset"
    for (host, run_name), path in recordings.items():
        run(SPELUNK, "export", path, "--dataset", ds, "--host", host, "--run", run_name, "-q")
    return ds


@pytest.fixture(scope="module")
def reports(recordings):
    return {k: json.loads(run(SPELUNK, "report", p, "--json", "--limit", ALL).stdout) for k, p in recordings.items()}


@pytest.fixture(scope="module")
def duck(dataset):
    return fleet.report(dataset)


def summed(reports, rows, key, figures=("samples", "loads", "stores")):
    """Each group's figures summed over the recordings' report rows."""
    out = defaultdict(lambda: defaultdict(int))
    for r in reports.values():
        for row in rows(r):
            for f in figures:
                out[key(row)][f] += row[f]
    return {k: dict(v) for k, v in out.items() if v[figures[0]] > 0}


def table(df, keys, figures=("samples", "loads", "stores")):
    return {tuple(row[k] for k in keys): {f: int(row[f]) for f in figures} for _, row in df.iterrows()}


def test_functions_are_the_sum_of_each_recordings_hotspots(reports, duck):
    want = summed(reports, lambda r: r["hotspots"]["functions"], lambda h: (h["dso"], h["function"]))
    assert table(duck["functions"], ["dso", "function"]) == want
    # the same program on two hosts is one row per function, not one per host
    assert len(duck["functions"]) < sum(len(r["hotspots"]["functions"]) for r in reports.values())
    total = sum(r["totals"]["samples"] for r in reports.values())
    assert (duck["functions"].share * total).round().astype(int).tolist() == duck["functions"].samples.tolist()


def test_data_sources_are_the_sum_of_each_recordings_loads_by_source(reports, duck):
    want = summed(reports, lambda r: r["data_sources"], lambda d: (d["source"],), figures=("loads",))
    assert table(duck["data_sources"], ["data_source"], figures=("loads",)) == want
    assert duck["data_sources"].share.sum() == pytest.approx(1.0)


def test_objects_are_the_sum_of_each_recordings_objects(reports, duck):
    # the report has a row per object instance (start address); the fleet one per name and kind
    want = summed(reports, lambda r: r["objects"], lambda o: (o["name"], o["kind"]))
    assert want, "the recordings have data objects"
    assert table(duck["objects"], ["object", "object_kind"]) == want


def test_allocation_sites_are_the_sum_of_each_recordings_sites(reports, duck):
    want = summed(reports, lambda r: r.get("allocation_sites", []), lambda s: (s["site"],))
    if emulated():
        assert want, "heap_objects' sites"
    assert table(duck["allocation_sites"], ["allocation_site"]) == want


def test_samples_by_host_and_run_are_each_recordings_totals(reports, duck):
    got = table(duck["by_host_run"], ["host", "run"])
    assert got == {k: {f: r["totals"][f] for f in ("samples", "loads", "stores")} for k, r in reports.items()}


def latency(summary):
    if summary is None:
        return None
    return (summary["count"], summary["mean"], summary["p50"], summary["p90"], summary["p99"])


def fleet_latency(row):
    cols = ["latency_loads", "load_latency_mean_cycles"] + [f"load_latency_p{p}_cycles" for p in (50, 90, 99)]
    if pd.isna(row["latency_loads"]):
        return None
    return (int(row[cols[0]]), float(row[cols[1]])) + tuple(int(row[c]) for c in cols[2:])


def test_one_recordings_latency_summaries_are_the_reports(dataset, reports):
    """On a selection of one partition the exact mean and nearest-rank percentiles of load
    latency equal `spelunk report`'s, per function, data source and object."""
    key = ("h2", "r1")
    rep = reports[key]
    got = fleet.report(dataset, hosts=[key[0]], runs=[key[1]])
    funcs = {(r.dso, r.function): r for _, r in got["functions"].iterrows()}
    assert len(funcs) == len(rep["hotspots"]["functions"])
    for h in rep["hotspots"]["functions"]:
        row = funcs[(h["dso"], h["function"])]
        assert fleet_latency(row) == latency(h["load_latency"]), h["key"]
        assert row.share == h["share"]
    sources = {r.data_source: r for _, r in got["data_sources"].iterrows()}
    for d in rep["data_sources"]:
        assert fleet_latency(sources[d["source"]]) == latency(d["total"]), d["source"]
        assert sources[d["source"]].share == d["share"]
    # objects whose name and kind are one report row (not several instances merged)
    names = defaultdict(list)
    for o in rep["objects"]:
        names[(o["name"], o["kind"])].append(o)
    objs = {(r.object, r.object_kind): r for _, r in got["objects"].iterrows()}
    checked = 0
    for k, rows in names.items():
        if len(rows) == 1 and rows[0]["samples"] > 0:
            assert fleet_latency(objs[k]) == latency(rows[0]["load_latency"]), k
            checked += rows[0]["load_latency"] is not None
    assert checked > 0


def test_command_prints_the_apis_tables(dataset, duck):
    doc = json.loads(run(SPELUNK, "fleet", "report", dataset, "--json", "--limit", "0").stdout)
    assert doc["schema"] == "spelunk-fleet/1" and doc["engine"] == "duckdb"
    schema = json.loads((ROOT / "docs/schemas/fleet.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(doc)
    assert doc["tables"] == fleet.to_json(duck, "duckdb")["tables"]
    limited = json.loads(
        run(SPELUNK, "fleet", "report", dataset, "--json", "--limit", "2", "--memory-limit", "64MB", "--threads", "1").stdout
    )
    assert limited["tables"]["functions"] == doc["tables"]["functions"][:2]
    text = run(SPELUNK, "fleet", "report", dataset, "--host", "h1").stdout
    assert "Hot functions" in text and "h2" not in text.split("Samples by host and run")[1]


def test_command_names_what_is_missing_or_wrong(dataset, tmp_path):
    # an interpreter without site-packages: neither spelunk nor duckdb is importable
    bare = tmp_path / "python-bare"
    bare.write_text(f"#!/bin/sh\nexec {shutil.which('python3')} -I -S \"$@\"\n")
    bare.chmod(0o755)
    env = dict(os.environ, SPELUNK_PYTHON=str(bare))
    done = subprocess.run([SPELUNK, "fleet", "report", str(dataset)], capture_output=True, text=True, env=env)
    assert done.returncode == 3
    assert "Traceback" not in done.stderr
    assert "'spelunk'" in done.stderr and "pip install ." in done.stderr, done.stderr
    done = subprocess.run([SPELUNK, "fleet", "report", str(dataset / "missing")], capture_output=True, text=True)
    assert done.returncode == 1 and "no such directory" in done.stderr and "Traceback" not in done.stderr
    done = subprocess.run([SPELUNK, "fleet", "report", str(dataset), "--memory-limit", "lots"],
                          capture_output=True, text=True)
    assert done.returncode == 1 and "DuckDB" in done.stderr and "Traceback" not in done.stderr, done.stderr


def spark_available():
    """None when pyspark and java are here, else why not."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return "pyspark is not installed (scripts/ensure-deps.sh spark)"
    if not shutil.which("java") and not os.environ.get("JAVA_HOME"):
        return "no java (Debian: openjdk-17-jre-headless)"
    return None


@pytest.fixture(scope="module")
def spark_session():
    why = spark_available()
    if why:
        if os.environ.get("SPELUNK_REQUIRE_SPARK"):
            pytest.fail(f"SPELUNK_REQUIRE_SPARK is set but {why}")
        pytest.skip(f"Spark tests skipped: {why}")
    from spelunk import spark

    t0 = time.monotonic()
    s = spark.session("local[2]", shuffle_partitions=2)
    yield s
    s.stop()
    print(f"spark: session and tables in {time.monotonic() - t0:.1f} s")


def test_spark_tables_equal_duckdbs(dataset, duck, spark_session):
    from spelunk import spark

    on_spark = spark.report(dataset, spark_session)
    assert list(on_spark) == list(duck)
    for name in duck:
        pd.testing.assert_frame_equal(on_spark[name], duck[name], check_exact=True, obj=name)
    # a selection too (one host, its partitions' values decoded the same way)
    sel = spark.report(dataset, spark_session, hosts=["h1"], limit=3)
    want = fleet.report(dataset, hosts=["h1"], limit=3)
    for name in want:
        pd.testing.assert_frame_equal(sel[name], want[name], check_exact=True, obj=name)
