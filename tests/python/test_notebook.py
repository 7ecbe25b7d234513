"""examples/stream.ipynb (docs/python.md, "Notebook") executed as a user runs it (nbclient,
kernel python3): every cell runs without error, every plot is drawn, and the figures the
notebook prints equal those of `spelunk report --json` / `spelunk topdown --json` run here on
the recording it made."""

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Where the emulator and workloads are built: this checkout, unless SPELUNK_ROOT names another.
BUILT = Path(os.environ.get("SPELUNK_ROOT", ROOT))
SPELUNK = os.environ.get("SPELUNK_BIN", str(ROOT / "target/release/spelunk"))
NOTEBOOK = ROOT / "examples/stream.ipynb"


def requirements_missing():
    arch = "arm64" if os.uname().machine == "aarch64" else "amd64"
    lib = Path(os.environ.get("SPELUNK_EMULATOR_LIB", BUILT / "emulator/build/lib"))
    if not (lib / f"spelunk-{arch}-linux").exists() or not (BUILT / "workloads/build/stream").exists():
        return "emulator or workloads not built (emulator/build.sh, make -C workloads)"
    try:
        import ipykernel  # noqa: F401
        import matplotlib  # noqa: F401
        import nbclient  # noqa: F401
        import nbformat  # noqa: F401
    except ImportError as e:
        return f"{e.name} is not installed: scripts/ensure-deps.sh python"
    return None


def cli_json(*args):
    done = subprocess.run([SPELUNK, *map(str, args)], check=True, capture_output=True, text=True)
    return json.loads(done.stdout)


def test_notebook_runs_and_prints_the_clis_figures(tmp_path):
    missing = requirements_missing()
    if missing:
        if os.environ.get("SPELUNK_REQUIRE_NOTEBOOK"):
            pytest.fail(missing)
        pytest.skip(missing)
    import nbclient
    import nbformat

    nb = nbformat.read(NOTEBOOK, as_version=4)
    env = {"SPELUNK_BIN": SPELUNK, "SPELUNK_NOTEBOOK_OUT": str(tmp_path), "SPELUNK_ROOT": str(BUILT)}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # the kernel inherits the environment
    try:
        started = time.monotonic()
        # A cell's last outputs can reach the client after its reply; nbclient waits
        # iopub_timeout for them (4 s by default) and then drops them silently, which happened
        # on a loaded machine: wait longer, and fail rather than lose an output.
        nbclient.NotebookClient(
            nb, timeout=300, kernel_name="python3",
            iopub_timeout=60, raise_on_iopub_timeout=True,
            resources={"metadata": {"path": str(NOTEBOOK.parent)}},
        ).execute()
        print(f"notebook executed in {time.monotonic() - started:.1f} s")
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) >= 6, "one image per plot: latency, addresses, footprint, top-down, capacity, bandwidth"
    printed = {}
    for o in outputs:
        for line in o.get("text", "").splitlines() if o.get("name") == "stdout" else []:
            if line.startswith("spelunk-figures "):
                printed.update(json.loads(line[len("spelunk-figures "):]))

    data = tmp_path / "stream.data"
    rep = cli_json("report", data, "--json")
    assert printed["loads_per_source"] == {s["source"]: s["loads"] for s in rep["data_sources"]}
    assert sum(printed["loads_per_source"].values()) > 0
    names = [o["name"] for o in rep["objects"]]
    per_object = {}
    for p in rep["timeline"]["points"]:
        o = p["object"]
        name = "no object" if o is None else names[o] if o < len(names) else "other"
        per_object[name] = per_object.get(name, 0) + 1
    assert printed["timeline_points_per_object"] == per_object
    assert {"a", "b", "c"} <= set(per_object)  # STREAM's arrays, named in workloads/stream.c
    assert printed["samples_per_phase"] == {p["name"]: p["samples"] for p in rep["phases"]}
    assert set(printed["samples_per_phase"]) >= {"copy", "scale", "add", "triad"}
    assert printed["footprint_key_points"] == {
        str(k["access_percent"]): k["regions"] for k in rep["footprint"]["key_points"]
    }
    td = cli_json("topdown", "--import", data, "--json")
    assert printed["topdown_bottleneck_path"] == td["scopes"][0]["totals"]["bottleneck_path"]
    assert printed["capacity_points"] > 0
