"""The report and the c2c analysis as pandas DataFrames, over the same figures as
``spelunk report FILE --json`` and ``spelunk c2c FILE --json`` (docs/report.md, docs/c2c.md).
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping

import pandas as pd

__all__ = ["Report", "C2cReport"]


def _frame(rows: List[Dict[str, Any]]) -> pd.DataFrame:
    """Rows of the JSON as a DataFrame; nested summaries become dotted columns
    (``load_latency.p99``), lists (``sources``) stay lists."""
    return pd.json_normalize(rows, sep=".") if rows else pd.DataFrame()


def _table(*path: str, doc: str) -> property:
    """A property: the JSON's rows at ``path`` as a DataFrame (none when absent, as
    ``allocation_sites`` is from recordings without allocations)."""

    def rows(self: Any) -> pd.DataFrame:
        value: Any = self.json
        for key in path:
            value = value.get(key, [])
        return _frame(value)

    return property(rows, doc=doc)


class Report:
    """``spelunk report``'s figures for one recording.

    :attr:`json` is exactly what ``spelunk report FILE --json`` prints (schema
    ``spelunk-report/1``), as Python values. The tables are DataFrames with one row per JSON row:
    :attr:`functions`, :attr:`lines`, :attr:`instructions`, :attr:`dsos` (hotspots),
    :attr:`data_sources`, :attr:`objects`, :attr:`allocation_sites`, :attr:`phases`,
    :attr:`threads`, :attr:`cpus`, :attr:`timeline` and :attr:`losses` (one row); :meth:`tables`
    gives them all in a dict.
    """

    TABLES = (
        "functions",
        "lines",
        "instructions",
        "dsos",
        "data_sources",
        "objects",
        "allocation_sites",
        "phases",
        "threads",
        "cpus",
        "timeline",
        "losses",
    )

    def __init__(self, json: Dict[str, Any]) -> None:
        self.json: Dict[str, Any] = json

    def __repr__(self) -> str:
        r = self.json["recording"]
        return (
            f"<spelunk.Report {r['file']}: {r['samples_selected']} of "
            f"{r['samples_decoded']} samples>"
        )

    @property
    def recording(self) -> Dict[str, Any]:
        """The recording: file, CPU model, duration, samples decoded and selected, sampling."""
        return self.json["recording"]

    @property
    def totals(self) -> Dict[str, Any]:
        """Counts and load latency of every selected sample."""
        return self.json["totals"]

    functions = _table("hotspots", "functions", doc="Hotspots by function (``--by function``).")
    lines = _table("hotspots", "lines", doc="Hotspots by source line.")
    instructions = _table("hotspots", "instructions", doc="Hotspots by instruction (address).")
    dsos = _table("hotspots", "dsos", doc="Hotspots by DSO (binary or library).")
    data_sources = _table(
        "data_sources", doc="Loads per data source with latency summaries, nearest first."
    )
    objects = _table("objects", doc="Data objects and the accesses to them, most sampled first.")
    allocation_sites = _table(
        "allocation_sites",
        doc="Heap blocks by allocation site (LD_PRELOAD runtime recordings; else empty).",
    )
    phases = _table("phases", doc="Phases named with include/spelunk.h and their samples.")
    threads = _table("threads", doc="Samples per thread.")
    cpus = _table("cpus", doc="Samples per CPU.")
    timeline = _table(
        "timeline", "points", doc="The uniform sample of memory accesses (address over time)."
    )

    @property
    def losses(self) -> pd.DataFrame:
        """Everything lost between the hardware and the report, as one row."""
        return _frame([self.json["recording"]["losses"]])

    def tables(self) -> Dict[str, pd.DataFrame]:
        """Every table, by name (see :attr:`TABLES`)."""
        return {name: getattr(self, name) for name in self.TABLES}


class C2cReport:
    """``spelunk c2c``'s cache lines shared between cores.

    :attr:`json` is exactly what ``spelunk c2c FILE --json`` prints (schema ``spelunk-c2c/1``);
    :attr:`lines` has one row per cache line (its offsets, PCs and threads stay nested lists).
    """

    def __init__(self, json: Mapping[str, Any]) -> None:
        self.json: Dict[str, Any] = dict(json)

    def __repr__(self) -> str:
        return f"<spelunk.C2cReport {self.json['file']}: {len(self.json['lines'])} lines>"

    @property
    def totals(self) -> Dict[str, Any]:
        """perf c2c's counters over every selected load and store."""
        return self.json["totals"]

    lines = _table("lines", doc="Cache lines ranked by peer-snoop loads, with the verdict.")
