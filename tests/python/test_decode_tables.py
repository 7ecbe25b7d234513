"""spelunk decode's Parquet tables read by pyarrow/pandas (an independent reader): the typed
columns docs/decode.md promises, nulls for absent fields, and the values Arm's spe-parser
printed for the same real SPE buffers (tests/data/spe/*.csv)."""

import csv
import os
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parents[2]
SPELUNK = os.environ.get("SPELUNK_BIN", str(ROOT / "target/release/spelunk"))
SYNTH = os.environ.get("SPELUNK_SYNTH_BIN", str(ROOT / "target/release/spelunk-synth"))
DATA = ROOT / "tests/data/spe"


def run(*args):
    subprocess.run([str(a) for a in args], check=True, capture_output=True)


@pytest.mark.parametrize("name", ["spe-b1-ts0", "spe-b1-ts1"])
def test_real_windowsperf_buffer_matches_spe_parser(tmp_path, name):
    run(SPELUNK, "decode", "--raw", "--raw-cpu", "0", DATA / f"{name}.data", "-o", tmp_path / name, "-q")
    table = pq.read_table(tmp_path / f"{name}-br.parquet")
    assert table.num_rows == 1
    row = table.to_pylist()[0]
    with open(DATA / f"{name}.csv", newline="") as f:
        expected = next(csv.DictReader(f))
    assert row["cpu"] == int(expected["cpu"])
    assert row["op"] == expected["op"]
    assert row["pc"] == int(expected["pc"], 16)
    assert row["el"] == int(expected["el"])
    assert row["condition"] == (expected["condition"] == "true")
    assert row["indirect"] == (expected["indirect"] == "true")
    assert row["event"] == expected["event"]
    assert row["issue_lat"] == int(expected["issue_lat"])
    assert row["total_lat"] == int(expected["total_lat"])
    assert row["br_tgt"] == int(expected["br_tgt"], 16)
    assert row["br_tgt_lvl"] == int(expected["br_tgt_lvl"])
    # spe-parser writes "" / 0 for absent fields; spelunk writes null.
    assert expected["pbt"] == "" and row["pbt"] is None and row["pbt_lvl"] is None
    assert expected["context"] == "" and row["context"] is None
    if expected["ts"] == "0":
        assert row["ts"] is None
    else:
        assert row["ts"] == int(expected["ts"])


LDST_TYPES = {
    "cpu": pa.uint32(), "op": pa.string(), "pc": pa.uint64(), "el": pa.uint8(), "atomic": pa.bool_(),
    "excl": pa.bool_(), "ar": pa.bool_(), "subclass": pa.string(), "event": pa.string(),
    "event_bits": pa.uint64(), "issue_lat": pa.uint16(), "total_lat": pa.uint16(), "exec_lat": pa.uint16(),
    "vaddr": pa.uint64(), "vaddr_tag": pa.uint8(), "xlat_lat": pa.uint16(), "paddr": pa.uint64(),
    "data_source": pa.string(), "data_source_raw": pa.uint64(), "sve_evl": pa.uint16(), "sve_pred": pa.bool_(),
    "sve_sg": pa.bool_(), "context": pa.uint32(), "ts": pa.uint64(), "pid": pa.uint32(), "tid": pa.uint32(),
    "time_ns": pa.uint64(),
}


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    d = tmp_path_factory.mktemp("synth")
    run(SYNTH, d / "perf.data", "--cpus", "2", "--records-per-cpu", "20000")
    run(SPELUNK, "decode", d / "perf.data", "-o", d / "pq", "-q")
    run(SPELUNK, "decode", d / "perf.data", "-o", d / "csv", "-f", "csv", "-q")
    return d


def test_ldst_schema_is_typed_as_documented(synthetic):
    schema = pq.read_schema(synthetic / "pq-ldst.parquet")
    assert schema.names == list(LDST_TYPES)
    for name, typ in LDST_TYPES.items():
        assert schema.field(name).type == typ, name


def test_parquet_and_csv_hold_the_same_rows(synthetic):
    import pandas as pd

    for t in ["ldst", "br", "other"]:
        p = pq.read_table(synthetic / f"pq-{t}.parquet").to_pandas()
        c = pd.read_csv(synthetic / f"csv-{t}.csv", dtype=str, keep_default_na=False)
        assert len(p) == len(c) > 0
        for col in ["cpu", "pc", "time_ns", "tid"]:
            assert [str(v) for v in p[col]] == list(c[col]), (t, col)


def test_stores_have_no_data_source_and_loads_do(synthetic):
    t = pq.read_table(synthetic / "pq-ldst.parquet").to_pandas()
    stores = t[t.op == "ST"]
    loads = t[t.op == "LD"]
    assert len(stores) > 0 and stores.data_source.isna().all()
    assert len(loads) > 0 and loads.data_source.notna().all()
    # Time is ordered across CPUs (merged by time).
    assert t.time_ns.is_monotonic_increasing
