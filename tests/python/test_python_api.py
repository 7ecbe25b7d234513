"""The Python package `spelunk` (installed by `python3 -m pip install .`, see `make python`)
against the `spelunk` command on the same recording: `samples()` against `spelunk decode`'s
Parquet tables (read by pyarrow) and the report's counts, `report()` and `c2c()` against
`spelunk report/c2c --json`, and errors against the command's messages."""

import json
import os
import subprocess
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import spelunk

ROOT = Path(__file__).resolve().parents[2]
SPELUNK = os.environ.get("SPELUNK_BIN", str(ROOT / "target/release/spelunk"))
SYNTH = os.environ.get("SPELUNK_SYNTH_BIN", str(ROOT / "target/release/spelunk-synth"))

# The synthetic recording's process, threads and data addresses (crates/testkit).
PID, TIDS = 4242, (4242, 4243)
T0, MID, T1 = 1_000_000_000, 1_000_200_000, 1_000_500_000
BUFFER, TABLE = 0xFFFF_8000_0000, 0xFFFF_8800_0000


def run(*args):
    return subprocess.run([str(a) for a in args], check=True, capture_output=True, text=True)


def cli_error(*args):
    """The message `spelunk ARGS` fails with, without its `spelunk: error: ` prefix."""
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    assert done.returncode != 0, done
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith("spelunk: error: "), done.stderr
    return line[len("spelunk: error: ") :]


def cli_json(*args):
    return json.loads(run(SPELUNK, *args).stdout)


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    """spelunk-synth's 2 CPUs x 1000 records, with a sidecar naming two phases per thread
    (the inner one nested in the second half) and two objects (one live for half the run),
    so that every attribution column has values."""
    d = tmp_path_factory.mktemp("api")
    path = d / "perf.data"
    run(SYNTH, path, "--cpus", "2", "--records-per-cpu", "1000")
    phases = []
    for tid in TIDS:
        phases.append(dict(name="run", pid=PID, tid=tid, depth=1, start_ns=T0, end_ns=T1))
        phases.append(dict(name="second-half", pid=PID, tid=tid, depth=2, start_ns=MID, end_ns=T1))
    objects = [
        dict(name="buffer", pid=PID, address=BUFFER, size=0x800_0000, from_ns=0,
             until_ns=2**64 - 1, kind="annotated"),
        dict(name="table", pid=PID, address=TABLE, size=0x400_0000, from_ns=T0,
             until_ns=MID, kind="annotated"),
    ]
    sidecar = dict(schema="spelunk-sidecar/1", source="runtime", phases=phases, objects=objects)
    (d / "perf.data.spelunk.json").write_text(json.dumps(sidecar))
    return path


@pytest.fixture(scope="module")
def samples(recording):
    return spelunk.open(recording).samples()


def test_installed_package_is_this_tree():
    cargo = (ROOT / "Cargo.toml").read_text()
    version = next(l.split('"')[1] for l in cargo.splitlines() if l.startswith("version = "))
    assert spelunk.__version__ == version
    # The installed copy, not the source directory.
    assert "site-packages" in spelunk.__file__ or "dist-packages" in spelunk.__file__


def test_samples_equal_the_decode_tables(recording, samples, tmp_path):
    run(SPELUNK, "decode", recording, "-o", tmp_path / "dec", "-q")
    tables = {t: pq.read_table(tmp_path / f"dec-{t}.parquet") for t in ("ldst", "br", "other")}
    assert samples.num_rows == sum(t.num_rows for t in tables.values()) == 2000

    op = samples.column("op")
    is_ldst = pc.is_in(op, value_set=pa.array(["LD", "ST"]))
    is_br = pc.equal(op, "B")
    rows = {
        "ldst": samples.filter(is_ldst),
        "br": samples.filter(is_br),
        "other": samples.filter(pc.invert(pc.or_(is_ldst, is_br))),
    }
    compared = set()
    for name, dec in tables.items():
        assert rows[name].num_rows == dec.num_rows > 0, name
        for col in dec.column_names:
            if col not in samples.column_names:
                continue  # the decode's operation details (atomic, subclass, sve_*, ...)
            assert samples.schema.field(col).type == dec.schema.field(col).type, (name, col)
            assert rows[name].column(col).to_pylist() == dec.column(col).to_pylist(), (name, col)
            compared.add(col)
    assert compared >= {
        "time_ns", "cpu", "pid", "tid", "op", "pc", "el", "event", "event_bits", "issue_lat",
        "total_lat", "xlat_lat", "exec_lat", "vaddr", "paddr", "data_source", "data_source_raw",
        "br_tgt", "context", "ts",
    }
    # One table in time order, as the decode merges the CPUs.
    assert pc.all(pc.greater_equal(samples["time_ns"][1:], samples["time_ns"][:-1])).as_py()


def test_attribution_columns_give_the_report_counts(recording, samples):
    rep = cli_json("report", recording, "--json", "--limit", "100000")
    df = samples.to_pandas()

    functions = Counter(zip(df.dso.dropna(), df.function.dropna()))
    assert functions == {(h["dso"], h["function"]): h["samples"] for h in rep["hotspots"]["functions"]}
    assert Counter(df.dso.dropna()) == {h["dso"]: h["samples"] for h in rep["hotspots"]["dsos"]}

    objects = Counter(zip(df.object.dropna(), df.object_start.dropna().astype(int)))
    assert objects == {(o["name"], o["start"]): o["samples"] for o in rep["objects"]}
    assert {o["name"] for o in rep["objects"]} >= {"buffer", "table"}
    assert (df.object_kind.dropna() != "").all() and df.allocation_site.isna().all()

    phases = Counter(p for ps in df.phases for p in ps)
    assert phases == {p["name"]: p["samples"] for p in rep["phases"]}
    assert set(df.phase.dropna()) == {"run", "second-half"}
    assert (df.phase == "second-half").sum() == phases["second-half"] < phases["run"]

    loads = df[df.op == "LD"]
    assert Counter(loads.data_source.dropna()) == {s["source"]: s["loads"] for s in rep["data_sources"]}
    threads = Counter(zip(df.pid, df.tid))
    assert threads == {(t["pid"], t["tid"]): t["samples"] for t in rep["threads"]}
    names = {t["tid"]: t["name"] for t in rep["threads"]}
    assert all(df.thread[i] == names[df.tid[i]] for i in range(len(df)))
    assert Counter(df.cpu) == {c["cpu"]: c["samples"] for c in rep["cpus"]}


@pytest.mark.parametrize(
    "kwargs,args",
    [
        ({}, []),
        ({"limit": 5, "sort": "latency"}, ["--limit", "5", "--sort", "latency"]),
        ({"c2c": True, "line_size": 128}, ["--c2c", "--line-size", "128"]),
    ],
)
def test_report_is_the_cli_json(recording, kwargs, args):
    report = spelunk.open(str(recording)).report(**kwargs)
    assert report.json == cli_json("report", str(recording), "--json", *args)


def test_report_tables_are_its_rows(recording):
    report = spelunk.open(str(recording)).report(limit=3)
    tables = report.tables()
    assert set(tables) == set(spelunk.Report.TABLES)
    j = report.json
    assert list(tables["functions"].key) == [h["key"] for h in j["hotspots"]["functions"]]
    assert len(tables["lines"]) == len(j["hotspots"]["lines"]) <= 3
    ds = tables["data_sources"]
    assert list(ds.source) == [d["source"] for d in j["data_sources"]]
    assert list(ds["total.p99"]) == [d["total"]["p99"] for d in j["data_sources"]]
    assert list(tables["phases"].samples) == [p["samples"] for p in j["phases"]]
    assert list(tables["threads"].tid) == [t["tid"] for t in j["threads"]]
    assert tables["losses"].loc[0, "undecodable_bytes"] == j["recording"]["losses"]["undecodable_bytes"]
    assert len(tables["timeline"]) == len(j["timeline"]["points"])
    assert report.totals["samples"] == 2000


def test_topdown_without_counts_raises_the_clis_message(recording):
    # the fixture's sidecar has phases and objects but no PMU counts
    with pytest.raises(spelunk.SpelunkError) as e:
        spelunk.open(recording).topdown()
    # the same message as `spelunk topdown --import` (which adds "--import: " before it)
    assert str(e.value) in cli_error(SPELUNK, "topdown", "--import", recording, "--json")


def test_c2c_is_the_cli_json(recording):
    c2c = spelunk.open(recording).c2c(limit=5)
    assert c2c.json == cli_json("c2c", recording, "--json", "--limit", "5")
    assert len(c2c.lines) == len(c2c.json["lines"])


def test_advice_and_findings_are_the_cli_json(recording):
    rec = spelunk.open(str(recording))
    advice = rec.advice()
    assert advice == cli_json("advise", str(recording), "--json")
    assert advice["schema"] == "spelunk-advise/1.1"
    assert rec.findings() == advice["findings"]
    # Every class of the vocabulary is raised or ruled out (docs/advise.md).
    classes = {f["class"] for f in advice["findings"]} | {r["class"] for r in advice["ruled_out"]}
    assert len(classes) == 14


def test_errors_carry_the_cli_messages(recording, tmp_path):
    missing = tmp_path / "missing.data"
    with pytest.raises(spelunk.RecordingNotFoundError) as e:
        spelunk.open(missing)
    assert isinstance(e.value, FileNotFoundError)
    assert str(e.value) == cli_error(SPELUNK, "c2c", missing)

    text = tmp_path / "notes.txt"
    text.write_text("not a recording\n")
    with pytest.raises(spelunk.SpelunkError) as e:
        spelunk.open(text)
    assert str(e.value) == cli_error(SPELUNK, "c2c", text)
    assert "not a perf.data file" in str(e.value)

    empty = tmp_path / "empty.data"
    run(SYNTH, empty, "--cpus", "2", "--records-per-cpu", "0")
    with pytest.raises(spelunk.SpelunkError) as e:
        spelunk.open(empty)
    assert str(e.value) == cli_error(SPELUNK, "decode", empty, "-o", tmp_path / "empty")
    assert "no SPE data" in str(e.value)

    rec = spelunk.open(recording)
    with pytest.raises(ValueError, match="unknown order 'fastest'; known: cost, samples, loads"):
        rec.report(sort="fastest")
    with pytest.raises(ValueError, match="--line-size 48: expected a power of two"):
        rec.c2c(line_size=48)


def test_a_damaged_sidecar_is_an_error_unless_ignored(tmp_path):
    """As the command: a sidecar cut short is never dropped silently; ignoring it on request
    analyses the recording without it and lists that in the losses."""
    path = tmp_path / "perf.data"
    run(SYNTH, path, "--cpus", "1", "--records-per-cpu", "100")
    (tmp_path / "perf.data.spelunk.json").write_text('{"schema": "spelunk-sidecar/1", "pha')
    with pytest.raises(spelunk.SpelunkError) as e:
        spelunk.open(path)
    cli = cli_error(SPELUNK, "report", path)
    # The command adds how to go on without it (--ignore-sidecar).
    assert cli.startswith(str(e.value)), (cli, str(e.value))
    assert "spelunk.json" in str(e.value)
    report = spelunk.open(path, ignore_sidecar=True).report()
    assert report.json == cli_json("report", path, "--json", "--ignore-sidecar")
    assert any("sidecar not used" in p for p in report.json["recording"]["losses"]["problems"])


def test_samples_to_pandas_keeps_types_and_nulls(recording, samples):
    df = samples.to_pandas()
    assert len(df) == samples.num_rows
    stores = df[df.op == "ST"]
    assert stores.data_source.isna().all() and stores.vaddr.notna().all()
    branches = df[df.op == "B"]
    assert branches.vaddr.isna().all() and branches.br_tgt.notna().all()
    assert samples.schema.field("phases").type == pa.list_(pa.string())
    assert samples.schema.field("vaddr").type == pa.uint64()
    # Small batches give the same table.
    assert spelunk.open(recording).samples(batch_rows=333).equals(samples)


def emulator_built():
    arch = "arm64" if os.uname().machine == "aarch64" else "amd64"
    ok = (ROOT / f"emulator/build/lib/spelunk-{arch}-linux").exists() and (
        ROOT / "workloads/build/stream"
    ).exists()
    if not ok and os.environ.get("SPELUNK_REQUIRE_EMULATOR"):
        pytest.fail("emulator or workloads not built: run emulator/test.sh")
    return ok


def test_record_runs_the_recorder_and_opens_its_output(tmp_path):
    if not emulator_built():
        pytest.skip("emulator not built (emulator/build.sh, make -C workloads)")
    out = tmp_path / "stream.data"
    stream = ROOT / "workloads/build/stream"
    rec = spelunk.record([str(stream), "-n", "20000", "-i", "1", "-t", "1"], out, spelunk=SPELUNK)
    assert rec.path == str(out)
    report = rec.report()
    assert report.recording["emulated"]
    assert rec.samples().num_rows == report.recording["samples_decoded"] > 0
    assert report.json == cli_json("report", out, "--json")
    # the top-down figures of the emulator's counts are `spelunk topdown --import`'s
    assert rec.topdown() == cli_json("topdown", "--import", out, "--json")
    assert rec.topdown(per_phase=True) == cli_json(
        "topdown", "--import", out, "--per-phase", "--json"
    )


def test_record_failure_raises_the_recorders_message(tmp_path):
    # An output in a directory that does not exist: refused before anything runs.
    out = tmp_path / "no-such-dir" / "x.data"
    with pytest.raises(spelunk.SpelunkError) as e:
        spelunk.record(["true"], out, spelunk=SPELUNK)
    assert str(e.value) == cli_error(SPELUNK, "record", "--emulate", "-o", out, "--", "true")
