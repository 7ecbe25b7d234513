"""spelunk.plot (docs/python.md, "Plots") draws the data it is given: each plot's marks are
compared with figures derived without it — the CLI's `spelunk report --json` counts, a footprint
curve recomputed here from the samples, hand-computed rates of a sidecar written here, and
[N1 PMU methodology]'s stall percentages for the top-down tree."""

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

try:
    import matplotlib

    matplotlib.use("Agg")
except ImportError:
    if os.environ.get("SPELUNK_REQUIRE_PLOTS"):
        raise
    pytest.skip("matplotlib is not installed: pip install 'spelunk[plot]'", allow_module_level=True)

import spelunk
from spelunk import plot

ROOT = Path(__file__).resolve().parents[2]
SPELUNK = os.environ.get("SPELUNK_BIN", str(ROOT / "target/release/spelunk"))
SYNTH = os.environ.get("SPELUNK_SYNTH_BIN", str(ROOT / "target/release/spelunk-synth"))
PID = 4242
T0, MID, T1 = 1_000_000_000, 1_000_200_000, 1_000_500_000
BUFFER = 0xFFFF_8000_0000
MIB = 1 << 20


def run(*args):
    return subprocess.run([str(a) for a in args], check=True, capture_output=True, text=True)


def cli_json(*args):
    return json.loads(run(SPELUNK, *args).stdout)


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    """spelunk-synth's 2 CPUs x 1500 records, with a phase and an object named in a sidecar."""
    d = tmp_path_factory.mktemp("plots")
    path = d / "perf.data"
    run(SYNTH, path, "--cpus", "2", "--records-per-cpu", "1500")
    phases = [dict(name="second-half", pid=PID, tid=t, depth=1, start_ns=MID, end_ns=T1)
              for t in (4242, 4243)]
    objects = [dict(name="buffer", pid=PID, address=BUFFER, size=0x800_0000, from_ns=0,
                    until_ns=2**64 - 1, kind="annotated")]
    sidecar = dict(schema="spelunk-sidecar/1", source="runtime", phases=phases, objects=objects)
    (d / "perf.data.spelunk.json").write_text(json.dumps(sidecar))
    return path


@pytest.fixture(scope="module")
def report(recording):
    return cli_json("report", recording, "--json", "--limit", "100000")


def test_latency_histogram_sums_to_each_sources_loads(recording, report):
    ax = plot.latency_by_source(spelunk.open(recording))
    drawn = {c.patches[0].get_label().split(" (")[0]: sum(p.get_height() for p in c) for c in ax.containers}
    assert drawn == {s["source"]: s["total"]["count"] for s in report["data_sources"]}
    assert sum(drawn.values()) > 0 and ax.get_xscale() == "log"
    # The samples table and its DataFrame draw the same.
    df = spelunk.open(recording).samples().to_pandas()
    again = plot.latency_by_source(df)
    assert [sum(p.get_height() for p in c) for c in again.containers] == [
        sum(p.get_height() for p in c) for c in ax.containers
    ]


def test_address_scatter_has_every_timeline_point(recording, report):
    points = report["timeline"]["points"]
    ax = plot.address_over_time(spelunk.open(recording))
    drawn = sorted(tuple(xy) for c in ax.collections for xy in c.get_offsets())
    assert drawn == sorted((p["t_ns"] / 1e6, float(p["address"])) for p in points)
    # A band per phase instance (two threads), from phase_spans.
    assert len(ax.patches) == len(report["phase_spans"]) == 2
    # Only the named object: exactly its points.
    buffer = next(i for i, o in enumerate(report["objects"]) if o["name"] == "buffer")
    only = plot.address_over_time(report, objects=["buffer"])
    assert sum(len(c.get_offsets()) for c in only.collections) == sum(
        p["object"] == buffer for p in points
    ) > 0


def test_access_distribution_passes_through_the_key_points_recomputed_here(recording, report):
    """The key points from the samples alone: accesses per (pid, 4 KiB page), hottest first
    (docs/report.md, "Access distribution over the footprint")."""
    df = spelunk.open(recording).samples().to_pandas()
    mem = df[df.op.isin(["LD", "ST"]) & df.vaddr.notna()]
    pages = sorted(Counter(zip(mem.pid, mem.vaddr.astype("uint64") // 4096)).values(), reverse=True)
    total, n = sum(pages), len(pages)
    expected = []
    for percent in (50, 80, 90, 99):
        k, c = 0, 0
        while c * 100 < percent * total:
            c += pages[k]
            k += 1
        expected.append((k / n * 100, c / total * 100))

    ax = plot.access_distribution(spelunk.open(recording))
    markers = [l for l in ax.lines if l.get_marker() == "o"]
    drawn = [v for m in markers for v in (m.get_xdata()[0], m.get_ydata()[0])]
    assert drawn == pytest.approx([v for xy in expected for v in xy])
    curve = report["footprint"]["curve"]
    line = next(l for l in ax.lines if l.get_label().endswith("pages"))
    assert list(line.get_xdata()) == pytest.approx([c["footprint_fraction"] * 100 for c in curve])
    assert list(line.get_ydata()) == pytest.approx([c["access_fraction"] * 100 for c in curve])


def known_sidecar():
    """Two capacity samples and two counter snapshots 0.1 s apart, 64-byte lines; the second
    interval's LL_CACHE_MISS_RD ran half its enabled time (scaled), a phase on the same clock."""
    return {
        "schema": "spelunk-sidecar/1", "source": "timelines", "command": ["./app"], "exit_status": 0,
        "config": {"timeline_clock": "CLOCK_MONOTONIC", "phases_clock": "CLOCK_MONOTONIC",
                   "timeline_start_ns": 2_000_000_000, "cache_line_bytes": 64},
        "phases": [{"name": "solve", "pid": 7, "tid": 7, "depth": 1,
                    "start_ns": 2_050_000_000, "end_ns": 2_150_000_000}],
        "objects": [],
        "counters": {
            "events": [[55, "LL_CACHE_MISS_RD"]],
            "timeline": [
                {"tid": 0, "cpu": None, "time_ns": 2_100_000_000, "reason": "periodic",
                 "values": [31_250], "time_enabled_ns": [100_000_000],
                 "time_running_ns": [100_000_000]},
                {"tid": 0, "cpu": None, "time_ns": 2_200_000_000, "reason": "final",
                 "values": [46_875], "time_enabled_ns": [200_000_000],
                 "time_running_ns": [150_000_000]},
            ],
            "totals": {"LL_CACHE_MISS_RD": 46_875},
            "not_counted": [{"code": 25, "name": "BUS_ACCESS", "reason": "not in sysfs events/"}],
        },
        "truth": None,
        "capacity": {"source": "numa_maps", "interval_ns": 100_000_000, "samples": [
            {"time_ns": 2_100_000_000, "processes": 1, "nodes": [
                {"node": 0, "heap_bytes": 2 * MIB, "anon_bytes": 4 * MIB, "file_bytes": MIB,
                 "stack_bytes": 0}]},
            {"time_ns": 2_200_000_000, "processes": 1, "nodes": [
                {"node": 0, "heap_bytes": 2 * MIB, "anon_bytes": 12 * MIB, "file_bytes": MIB,
                 "stack_bytes": 131_072}]},
        ]},
    }


@pytest.fixture(scope="module")
def timelines_report(tmp_path_factory):
    d = tmp_path_factory.mktemp("timelines")
    (d / "app.data.spelunk.json").write_text(json.dumps(known_sidecar()))
    return cli_json("report", d / "app.data", "--json")


def test_capacity_draws_each_class_in_mib(timelines_report):
    ax = plot.capacity(timelines_report)
    lines = {l.get_label(): (list(l.get_xdata()), list(l.get_ydata())) for l in ax.lines}
    t = [0.1, 0.2]  # seconds since timeline_start_ns
    assert lines["heap"] == (pytest.approx(t), [2.0, 2.0])
    assert lines["anon"] == (pytest.approx(t), [4.0, 12.0])
    assert lines["file"] == (pytest.approx(t), [1.0, 1.0])
    assert lines["stack"] == (pytest.approx(t), [0.0, 0.125])
    assert lines["total"][1] == [7.0, 15.125]
    assert "peak 15.1 MiB" in lines
    assert len(ax.patches) == 1  # the phase "solve", 0.05..0.15 s
    assert ax.patches[0].get_x() == pytest.approx(0.05)


def test_bandwidth_draws_the_hand_computed_rates(timelines_report):
    # Interval 1: 31 250 misses x 64 B in 0.1 s = 20 MB/s. Interval 2: 15 625 misses counted in
    # 50 of 100 enabled ms -> 31 250 estimated x 64 B in 0.1 s = 20 MB/s, scaled.
    fig = plot.bandwidth(timelines_report)
    (ax,) = fig.axes
    line = next(l for l in ax.lines if l.get_label() == "llc_read_miss_bytes_per_s")
    assert list(line.get_ydata()) == pytest.approx([20.0, 20.0, 20.0, 20.0])
    assert list(line.get_xdata()) == pytest.approx([0.0, 0.1, 0.1, 0.2])
    scaled = [l for l in ax.lines if l.get_marker() == "o"]
    assert [(l.get_xdata()[0], l.get_ydata()[0]) for l in scaled] == [
        (pytest.approx(0.15), pytest.approx(20.0))
    ]


def test_missing_figures_are_not_available_with_the_reason(recording, tmp_path):
    rec = spelunk.open(recording)
    texts = [t.get_text() for t in plot.capacity(rec).texts]
    assert texts and texts[0].startswith("not available: the recording has no timelines")
    sc = known_sidecar()
    sc["counters"] = {"events": [], "timeline": [], "totals": {},
                      "not_counted": [{"code": 17, "name": "CPU_CYCLES", "reason": "no Arm core PMU"}]}
    (tmp_path / "x.data.spelunk.json").write_text(json.dumps(sc))
    fig = plot.bandwidth(cli_json("report", tmp_path / "x.data", "--json"))
    assert "CPU_CYCLES: no Arm core PMU" in fig.axes[0].texts[0].get_text()
    assert not fig.axes[0].lines


def test_topdown_tree_bars_are_the_n1_white_papers_stalls(tmp_path):
    """[N1 PMU methodology] §5, stride benchmark baseline: back-end stalls 83.95 % of cycles,
    front-end 0.0092 % (crates/pmu/tests/data/perf-stat holds its counts)."""
    csv = ROOT / "crates/pmu/tests/data/perf-stat/seed001-stride-baseline.csv"
    td = cli_json("topdown", "--import", csv, "--cpu-model", "neoverse-n1", "--json")
    ax = plot.topdown_tree(td)
    label_at = {y: t.get_text() for y, t in zip(ax.get_yticks(), ax.get_yticklabels())}
    widths = {label_at[b.get_y() + b.get_height() / 2].split(" (")[0]: b.get_width()
              for b in ax.patches}
    assert widths == {
        "frontend_stalled_cycles": pytest.approx(0.0092, abs=5e-5),
        "backend_stalled_cycles": pytest.approx(83.95, abs=5e-3),
    }
    assert any("bottleneck" in t.get_text() and t.get_text().startswith(" 83.9") for t in ax.texts)


def test_topdown_tree_indents_children_and_says_not_available():
    tree = [
        {"metric": "frontend_bound", "value": 10.0, "units": "percent of slots", "flagged": False,
         "bottleneck": False, "children": [
             {"metric": "frontend_core_bound", "value": None, "units": "percent of cycles",
              "flagged": False, "bottleneck": False, "children": [], "next_groups": []}],
         "next_groups": []},
        {"metric": "backend_bound", "value": 55.0, "units": "percent of slots", "flagged": True,
         "bottleneck": True, "children": [
             {"metric": "backend_memory_bound", "value": 70.0, "units": "percent of cycles",
              "flagged": True, "bottleneck": True, "children": [], "next_groups": []}],
         "next_groups": []},
    ]
    metrics = [{"name": "frontend_core_bound", "unavailable": {"reason": "event not counted"}}]
    td = {"schema": "spelunk-topdown/1",
          "scopes": [{"scope": "all", "cpu": {"product": "Neoverse N3"},
                      "totals": {"tree": tree, "metrics": metrics}}]}
    ax = plot.topdown_tree(td)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == [
        "frontend_bound (percent of slots)", "    frontend_core_bound (percent of cycles)",
        "backend_bound (percent of slots)", "    backend_memory_bound (percent of cycles)",
    ]
    assert sorted(b.get_width() for b in ax.patches) == [10.0, 55.0, 70.0]
    assert any("not available: event not counted" in t.get_text() for t in ax.texts)
    assert sum("bottleneck" in t.get_text() for t in ax.texts) == 2


def test_without_matplotlib_the_error_names_the_extra():
    code = (
        "import sys; sys.modules['matplotlib'] = None\n"
        "from spelunk import plot\n"
        "try:\n    plot.access_distribution({})\n"
        "except ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install 'spelunk[plot]'" in out.stdout
