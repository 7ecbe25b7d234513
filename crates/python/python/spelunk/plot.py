"""The plots people expect from a memory profile, drawn with matplotlib (``pip install
'spelunk[plot]'``) from spelunk's own figures: nothing here computes a figure the report does not
have, so every mark on a plot is a number of ``spelunk report --json`` (docs/report.md) or
``spelunk topdown --json`` (docs/topdown.md), or a sample of ``Recording.samples()``.

>>> from spelunk import plot
>>> rec = spelunk.open("stream.data")
>>> plot.latency_by_source(rec)              # load latency histogram per data source
>>> plot.address_over_time(rec)              # NMO's address-over-time figure, phases shaded
>>> plot.access_distribution(rec)            # the footprint curve with its 50/80/90/99 % points

Each function returns the matplotlib Axes it drew on (``bandwidth``: the Figure, one Axes per
rate) and takes ``ax=`` to draw into a figure of your own. A figure that cannot be drawn (the
recording has no timelines, no counter was counted) is drawn as "not available: REASON", never
as zeros. Without a display (no ``$DISPLAY``, no backend chosen) matplotlib uses Agg.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Union

if TYPE_CHECKING:  # matplotlib is optional: imported when a plot is drawn
    import pandas as pd
    import pyarrow as pa
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from ._recording import Recording
    from ._report import Report

__all__ = [
    "latency_by_source",
    "address_over_time",
    "capacity",
    "bandwidth",
    "access_distribution",
    "topdown_tree",
]

ReportLike = Union["Recording", "Report", Mapping[str, Any]]

MIB = 1 << 20
# Capacity classes, in the order of the report's terminal table (docs/report.md, "Timelines").
CAPACITY_CLASSES = ("heap_bytes", "anon_bytes", "file_bytes", "stack_bytes")
# Objects with a colour of their own on the address plot; the rest share "other objects".
MAX_OBJECT_COLOURS = 9


def _pyplot() -> Any:
    """matplotlib.pyplot, with Agg when there is no display and no backend was chosen."""
    try:
        import matplotlib
    except ImportError as e:
        raise ImportError(
            "spelunk.plot needs matplotlib: pip install 'spelunk[plot]' "
            "(or python3 -m pip install matplotlib)"
        ) from e
    headless = not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    if headless and "MPLBACKEND" not in os.environ and "matplotlib.pyplot" not in sys.modules:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _axes(ax: Optional["Axes"]) -> "Axes":
    if ax is not None:
        _pyplot()
        return ax
    _, new = _pyplot().subplots(figsize=(8, 4.5))
    return new


def _report_json(report: ReportLike) -> Mapping[str, Any]:
    """The report's JSON from a Recording (its default ``report()``), a Report or the dict
    ``spelunk report --json`` printed (``json.load``)."""
    if hasattr(report, "report") and callable(report.report):
        return report.report().json
    if hasattr(report, "json") and isinstance(report.json, Mapping):
        return report.json
    if isinstance(report, Mapping):
        return report
    raise TypeError(
        f"expected a spelunk.Recording, a spelunk.Report or the dict of `spelunk report --json`, "
        f"not {type(report).__name__}"
    )


def _not_available(ax: "Axes", reason: str) -> "Axes":
    ax.text(
        0.5, 0.5, f"not available: {reason}", ha="center", va="center", wrap=True,
        transform=ax.transAxes,
    )
    ax.set_xticks([])
    ax.set_yticks([])
    return ax


def _phase_bands(ax: "Axes", spans: Sequence[Mapping[str, Any]], scale_ns: float) -> None:
    """One translucent band per phase instance (``start_ns``..``end_ns``), a colour per phase
    name, labelled once per name."""
    plt = _pyplot()
    colours = plt.get_cmap("Pastel1").colors
    names: Dict[str, Any] = {}
    for span in spans:
        name = span["name"]
        first = name not in names
        colour = names.setdefault(name, colours[len(names) % len(colours)])
        ax.axvspan(
            span["start_ns"] / scale_ns, span["end_ns"] / scale_ns, color=colour, alpha=0.35,
            zorder=0, label=f"phase {name}" if first else None,
        )


def _samples_frame(samples: Union["Recording", "pa.Table", "pd.DataFrame"]) -> "pd.DataFrame":
    if hasattr(samples, "samples") and callable(samples.samples):
        samples = samples.samples()
    if hasattr(samples, "to_pandas"):
        samples = samples.to_pandas()
    return samples


def latency_by_source(
    samples: Union["Recording", "pa.Table", "pd.DataFrame"],
    ax: Optional["Axes"] = None,
    *,
    bins: int = 40,
) -> "Axes":
    """Histogram of the loads' total latency (cycles, SPE counter 0), one per data source,
    on a logarithmic x axis.

    ``samples`` is a Recording, its ``samples()`` table or that table as a DataFrame: the loads
    (``op == "LD"``) with a ``data_source`` and a ``total_lat`` are drawn, so each source's bar
    heights sum to its ``total.count`` in the report's ``data_sources``. Bins are ``bins``
    geometric steps between the smallest and largest latency (a latency of 0 cycles is counted
    in the first bin); sources are drawn most loads first.
    """
    import numpy as np

    ax = _axes(ax)
    df = _samples_frame(samples)
    loads = df[(df.op == "LD") & df.data_source.notna() & df.total_lat.notna()]
    if loads.empty:
        return _not_available(ax, "no load with a data source and a total latency")
    latency = loads.total_lat.astype(float).clip(lower=1.0)
    edges = np.geomspace(latency.min(), max(latency.max(), latency.min() * 2), bins + 1)
    for source, count in loads.data_source.value_counts().items():
        values = latency[loads.data_source == source]
        ax.hist(values, bins=edges, alpha=0.6, label=f"{source} ({count} loads)")
    ax.set_xscale("log")
    ax.set_xlabel("total load latency (cycles, log scale)")
    ax.set_ylabel("loads sampled")
    ax.set_title("Load latency by data source")
    ax.legend(fontsize="small")
    return ax


def _hex_address(value: float, _pos: int) -> str:
    return f"0x{int(value):x}" if value >= 0 else ""


def address_over_time(
    report: ReportLike,
    objects: Optional[Sequence[str]] = None,
    ax: Optional["Axes"] = None,
) -> "Axes":
    """The sampled data addresses over time, coloured by data object, with a band per phase
    instance: [NMO paper §VI-C, figs. 4–6]'s view of STREAM's arrays.

    The points are the report's ``timeline.points`` (a uniform reservoir of the selected loads
    and stores, docs/report.md): x = time since the first sample (ms), y = data address. The
    colour is the object (``timeline.points[].object`` indexes ``objects``). With ``objects``
    (names), only those objects' points are drawn, so the y axis spans their addresses; without
    it every point is drawn, the 9 most sampled objects in a colour each, the rest as "other
    objects" and accesses outside any object as "no object". Bands are ``phase_spans``.
    """
    from matplotlib.ticker import FuncFormatter

    ax = _axes(ax)
    rep = _report_json(report)
    points = rep.get("timeline", {}).get("points", [])
    if not points:
        return _not_available(ax, "no load or store with a data address was selected")
    names = [o["name"] for o in rep.get("objects", [])]
    shown = list(objects) if objects is not None else names[:MAX_OBJECT_COLOURS]
    groups: Dict[str, List[Mapping[str, Any]]] = {}
    for p in points:
        index = p.get("object")
        name = names[index] if index is not None and index < len(names) else None
        label = "no object" if name is None else (name if name in shown else "other objects")
        if objects is not None and label not in shown:
            continue
        groups.setdefault(label, []).append(p)
    _phase_bands(ax, rep.get("phase_spans", []), 1e6)
    rest = [n for n in ("other objects", "no object") if n in groups]
    order = [n for n in shown if n in groups] + rest
    for label in order:
        group = groups[label]
        ax.scatter(
            [p["t_ns"] / 1e6 for p in group], [float(p["address"]) for p in group], s=6,
            label=f"{label} ({len(group)})", zorder=2,
        )
    ax.yaxis.set_major_formatter(FuncFormatter(_hex_address))
    ax.set_xlabel("time since the first sample (ms)")
    ax.set_ylabel("data address")
    drawn = sum(len(groups[label]) for label in order)
    population = rep.get("timeline", {}).get("population", len(points))
    ax.set_title(f"Addresses over time ({drawn} points of a sample of {population} accesses)")
    ax.legend(fontsize="small", markerscale=2, loc="upper left", bbox_to_anchor=(1.01, 1))
    return ax


def _timelines(rep: Mapping[str, Any]) -> Optional[Mapping[str, Any]]:
    return rep.get("timelines")


NO_TIMELINES = (
    "the recording has no timelines (they come from `spelunk record --no-spe` or a hardware "
    "SPE recording; emulated recordings have none)"
)


def capacity(report: ReportLike, ax: Optional["Axes"] = None) -> "Axes":
    """Resident memory per mapping class (heap, anon, file, stack) and in total, in MiB, over
    time: [NMO paper §VI]'s temporal capacity, from the report's ``timelines.capacity`` (a
    ``spelunk record --no-spe`` recording; ``report`` is then the dict of ``spelunk report
    FILE --json``, which ``spelunk.open`` cannot open yet). x = ``t_ns`` in seconds since the
    timeline's origin; the peak total is marked; ``timelines.phases`` are shaded."""
    ax = _axes(ax)
    tl = _timelines(_report_json(report))
    if tl is None:
        return _not_available(ax, NO_TIMELINES)
    points = tl.get("capacity", {}).get("points", [])
    if not points:
        return _not_available(ax, "the capacity timeline has no sample")
    _phase_bands(ax, tl.get("phases", []), 1e9)
    t_s = [p["t_ns"] / 1e9 for p in points]
    for cls in CAPACITY_CLASSES:
        ax.plot(t_s, [p["all_nodes"][cls] / MIB for p in points], label=cls[: -len("_bytes")])
    totals = [p["all_nodes"]["total_bytes"] / MIB for p in points]
    ax.plot(t_s, totals, "k--", label="total")
    peak = max(range(len(points)), key=lambda i: totals[i])
    ax.plot([t_s[peak]], [totals[peak]], "k*", markersize=10, label=f"peak {totals[peak]:.1f} MiB")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("resident memory (MiB)")
    ax.set_title(f"Resident memory by class ({tl['capacity'].get('source', '?')})")
    ax.legend(fontsize="small")
    return ax


def bandwidth(report: ReportLike, axes: Optional[Sequence["Axes"]] = None) -> "Figure":
    """The counters' derived rates over time, one Axes per rate (``timelines.counters.derived``:
    LLC read-miss bytes/s, L2 refill bytes/s, bus beats/s, IPC; docs/report.md "Timelines"),
    each a step per interval. Byte rates are in MB/s (10^6 bytes/s, as the terminal prints
    them); a rate from a multiplexed (scaled) count is marked with an open circle, one that
    cannot be computed (null) is a gap. With no rate, the Axes says "not available" and names
    the events not counted, with their reasons. ``axes``: one Axes per rate, to draw into."""
    plt = _pyplot()
    tl = _timelines(_report_json(report))
    counters = (tl or {}).get("counters", {})
    derived = counters.get("derived", [])
    if axes is None:
        fig, made = plt.subplots(max(len(derived), 1), 1, figsize=(8, 2.6 * max(len(derived), 1)),
                                 squeeze=False, sharex=True)
        axes = list(made[:, 0])
    else:
        axes = list(axes)
        fig = axes[0].figure
    if tl is None:
        _not_available(axes[0], NO_TIMELINES)
        return fig
    if not derived:
        not_counted = counters.get("not_counted", [])
        reasons = "; ".join(f"{n['name']}: {n['reason']}" for n in not_counted)
        _not_available(axes[0], "no counter rate: " + (reasons or "no counter was recorded"))
        return fig
    if len(axes) < len(derived):
        raise ValueError(f"bandwidth: {len(derived)} rates need as many Axes, got {len(axes)}")
    intervals = counters.get("intervals", [])
    events = [e["name"] for e in counters.get("events", [])]
    for i, (rate, ax) in enumerate(zip(derived, axes)):
        byte_rate = rate["unit"] == "bytes/s"
        scale = 1e6 if byte_rate else 1.0
        _phase_bands(ax, tl.get("phases", []), 1e9)
        xs: List[float] = []
        ys: List[float] = []
        for iv in intervals:
            value = iv["rates"][i]
            y = float("nan") if value is None else value / scale
            xs += [iv["start_ns"] / 1e9, iv["end_ns"] / 1e9]
            ys += [y, y]
            used = [events.index(e) for e in rate["events"] if e in events]
            if value is not None and any(iv["scaled"][k] for k in used):
                ax.plot([(iv["start_ns"] + iv["end_ns"]) / 2e9], [y], "o", mfc="none", color="C3")
        ax.plot(xs, ys, label=rate["name"])
        ax.set_ylabel("MB/s" if byte_rate else rate["unit"])
        ax.set_title(f"{rate['name']} = {rate['formula']}", fontsize="small")
    axes[len(derived) - 1].set_xlabel("time (s)")
    return fig


def access_distribution(report: ReportLike, ax: Optional["Axes"] = None) -> "Axes":
    """The access distribution over the footprint (docs/report.md, "the tiering question"):
    x = fraction of the touched 4 KiB pages, hottest first
    (``footprint.curve[].footprint_fraction``), y = fraction of the sampled accesses they
    received (``access_fraction``), both in %; the diagonal (a uniform spread) dashed, and the
    50/80/90/99 % ``key_points`` marked at (``footprint_fraction``, ``accesses`` /
    ``footprint.accesses``) with their bytes."""
    ax = _axes(ax)
    fp = _report_json(report).get("footprint")
    if fp is None:
        return _not_available(ax, "no selected load or store has a data address")
    curve = fp["curve"]
    ax.plot([0, 100], [0, 100], "--", color="grey", label="uniform")
    ax.plot(
        [c["footprint_fraction"] * 100 for c in curve], [c["access_fraction"] * 100 for c in curve],
        label=f"{fp['accesses']} accesses over {fp['regions']} pages",
    )
    for kp in fp["key_points"]:
        x, y = kp["footprint_fraction"] * 100, kp["accesses"] / fp["accesses"] * 100
        ax.plot([x], [y], "o", color="C3")
        ax.annotate(
            f"{kp['access_percent']} %: {x:.1f} % ({kp['bytes'] / 1024:.0f} KiB)", (x, y),
            textcoords="offset points", xytext=(6, -12), fontsize="small",
        )
    ax.set_xlim(0, 100)
    ax.set_ylim(0, 100)
    ax.set_xlabel("footprint (% of pages touched, hottest first)")
    ax.set_ylabel("accesses (%)")
    ax.set_title(f"Access distribution over {fp['footprint_bytes'] / MIB:.1f} MiB of footprint")
    ax.legend(fontsize="small", loc="lower right")
    return ax


def topdown_tree(
    topdown: Mapping[str, Any], ax: Optional["Axes"] = None, *, scope: int = 0
) -> "Axes":
    """The stage-1 top-down tree of ``spelunk topdown --json`` (schema ``spelunk-topdown/1``,
    docs/topdown.md) as horizontal bars: one bar per tree node, children under their parent
    and indented, the value's units in the label. Flagged nodes (over their threshold) are red,
    the bottleneck path is marked ``◀ bottleneck``, and a node without a value says "not
    available" with the metric's reason. ``scope`` picks one of ``scopes`` (0: the first,
    e.g. "all")."""
    ax = _axes(ax)
    scopes = topdown.get("scopes", [])
    if scope >= len(scopes):
        return _not_available(ax, f"the report has {len(scopes)} scope(s), no scope {scope}")
    sc = scopes[scope]
    reasons = {
        m["name"]: (m.get("unavailable") or {}).get("reason", "no value")
        for m in sc["totals"]["metrics"]
    }
    rows: List[tuple] = []

    def walk(nodes: Sequence[Mapping[str, Any]], depth: int) -> None:
        for node in nodes:
            rows.append((depth, node))
            walk(node.get("children", []), depth + 1)

    walk(sc["totals"]["tree"], 0)
    if not rows:
        return _not_available(ax, "the scope's tree is empty")
    ys = list(range(len(rows)))[::-1]
    for y, (depth, node) in zip(ys, rows):
        value = node.get("value")
        colour = "C3" if node.get("flagged") else "C0"
        if value is None:
            ax.text(0, y, f" not available: {reasons.get(node['metric'], 'no value')}", va="center",
                    fontsize="small")
            continue
        ax.barh(y, value, color=colour, height=0.6)
        mark = "  ◀ bottleneck" if node.get("bottleneck") else ""
        ax.text(value, y, f" {value:.1f}{mark}", va="center", fontsize="small",
                fontweight="bold" if mark else "normal")
    ax.set_yticks(ys)
    ax.set_yticklabels(["    " * d + f"{n['metric']} ({n['units']})" for d, n in rows])
    ax.set_xlabel("value")
    cpu = sc.get("cpu", {}).get("product", "")
    ax.set_title(f"Top-down, stage 1: {sc['scope']} ({cpu})")
    return ax
