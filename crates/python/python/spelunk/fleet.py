"""Fleet analysis: the report's questions (hot functions, data sources, objects, allocation
sites, latency percentiles) over a whole dataset of recordings written by ``spelunk export
--dataset``, on embedded DuckDB (one machine, no server; the ``duckdb`` wheel).

    python -m spelunk.fleet report DIR [--json] [--limit N] [--host H] [--run R]
    spelunk fleet report DIR ...                     # the same, through the command

>>> from spelunk import fleet
>>> tables = fleet.report("fleet/")                  # dict of pandas DataFrames
>>> tables["functions"].head()

Every table and column is defined in docs/dataset.md "Fleet analysis"; the figures are
``spelunk report``'s (docs/report.md). ``spelunk.spark`` computes the same tables on Spark.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

from ._fleet_sql import TABLES, table_sql

__all__ = ["report", "main", "DEFAULT_MEMORY_LIMIT", "FleetError"]

#: DuckDB's memory limit unless told otherwise: DuckDB streams the Parquet files and spills
#: aggregation state beyond this to a temporary directory, so a dataset larger than memory
#: still runs.
DEFAULT_MEMORY_LIMIT = "2GB"
#: Rows per table printed by the command unless ``--limit`` says otherwise (the report's).
DEFAULT_LIMIT = 20
#: The JSON document's schema name.
JSON_SCHEMA = "spelunk-fleet/1"
#: The dataset marker ``spelunk export --dataset`` writes (docs/dataset.md "Layout").
MARKER = "_spelunk_dataset.json"
#: Exit status when a Python package the command needs is missing.
EXIT_MISSING_PACKAGE = 3


class FleetError(Exception):
    """The dataset cannot be read (missing, empty, or not a spelunk dataset)."""


def partitions_glob(directory: str | os.PathLike[str]) -> str:
    """The Parquet files of every partition of a dataset directory, checked to exist."""
    d = Path(directory)
    if not d.is_dir():
        raise FleetError(f"{d}: no such directory: give a dataset written by `spelunk export --dataset`")
    if not (d / MARKER).is_file():
        raise FleetError(
            f"{d}: not a spelunk dataset (no {MARKER}): give a directory written by "
            "`spelunk export FILE --dataset DIR`"
        )
    if not any(d.glob("host=*/run=*/samples.parquet")):
        raise FleetError(f"{d}: the dataset has no partition yet: add one with `spelunk export FILE --dataset {d}`")
    return str(d / "host=*" / "run=*" / "samples.parquet")


def frames(rows_by_table: dict[str, tuple[list[str], list[tuple]]]) -> dict[str, Any]:
    """pandas DataFrames from each table's column names and rows, with the same dtypes whatever
    the engine: integer columns as nullable ``Int64`` (a group without loads has no latency
    percentile: null, never 0), shares and means as float64."""
    import pandas as pd

    out = {}
    for name, (columns, rows) in rows_by_table.items():
        df = pd.DataFrame.from_records([tuple(r) for r in rows], columns=columns)
        for c in columns:
            if c == "share" or c.endswith("_mean_cycles"):
                df[c] = df[c].astype("float64")
            elif c in ("samples", "loads", "stores", "latency_loads") or (
                c.startswith("load_latency_p") and c.endswith("_cycles")
            ):
                df[c] = df[c].astype("Int64")
            else:
                df[c] = df[c].astype("object")
        out[name] = df
    return out


def report(
    directory: str | os.PathLike[str],
    hosts: list[str] | None = None,
    runs: list[str] | None = None,
    limit: int | None = None,
    memory_limit: str = DEFAULT_MEMORY_LIMIT,
    threads: int | None = None,
) -> dict[str, Any]:
    """The fleet tables of a dataset, as a dict of pandas DataFrames keyed by table name
    (``functions``, ``data_sources``, ``objects``, ``allocation_sites``, ``by_host_run``).

    ``hosts``/``runs`` select partitions (every one without them); ``limit`` keeps that many
    rows per table (all without it). ``memory_limit`` bounds DuckDB's memory (DuckDB's syntax,
    e.g. ``"512MB"``); beyond it DuckDB spills to a temporary directory.
    """
    glob = partitions_glob(directory)
    import duckdb

    spill = tempfile.mkdtemp(prefix="spelunk-fleet-")
    try:
        con = duckdb.connect(":memory:")
        try:
            return frames(_duck_tables(con, glob, spill, hosts, runs, limit, memory_limit, threads))
        except duckdb.Error as e:
            # A bad option value, an unreadable or damaged file: one line naming DuckDB's cause.
            raise FleetError(f"{directory}: DuckDB: {e}") from e
        finally:
            con.close()
    finally:
        shutil.rmtree(spill, ignore_errors=True)


def _duck_tables(con, glob, spill, hosts, runs, limit, memory_limit, threads):
    """Each table's column names and rows, computed on the DuckDB connection ``con``."""
    con.execute(f"SET memory_limit = '{_duck_setting(memory_limit)}'")
    con.execute(f"SET temp_directory = '{_duck_setting(spill)}'")
    if threads:
        con.execute(f"SET threads = {int(threads)}")
    # Partition values stay text (`run=0412` is not the number 412); DuckDB decodes
    # Hive's %XX escaping. By name: a later partition may have columns added
    # (docs/dataset.md "Versioning").
    con.execute(
        "CREATE VIEW samples AS SELECT * FROM read_parquet("
        f"'{_duck_setting(glob)}', hive_partitioning = true, hive_types_autocast = false, "
        "union_by_name = true)"
    )
    rows = {}
    for t in TABLES:
        cur = con.execute(table_sql(t, hosts, runs, limit))
        rows[t.name] = ([d[0] for d in cur.description], cur.fetchall())
    return rows


def _duck_setting(value: str) -> str:
    return str(value).replace("'", "''")


def to_json(tables: dict[str, Any], engine: str) -> dict[str, Any]:
    """The JSON document of ``--json``: ``{"schema", "engine", "tables": {name: [row, ...]}}``,
    nulls as ``null``."""

    def cell(v: Any) -> Any:
        if v is None:
            return None
        try:
            import pandas as pd

            if v is pd.NA:
                return None
        except ImportError:  # pragma: no cover - pandas is a dependency
            pass
        if isinstance(v, float) and math.isnan(v):
            return None
        if hasattr(v, "item"):  # numpy scalars
            return v.item()
        return v

    return {
        "schema": JSON_SCHEMA,
        "engine": engine,
        "tables": {
            name: [{c: cell(v) for c, v in zip(df.columns, row)} for row in df.itertuples(index=False)]
            for name, df in tables.items()
        },
    }


def print_tables(tables: dict[str, Any], out=sys.stdout) -> None:
    """The tables as text, one titled section each."""
    titles = {
        "functions": "Hot functions (all hosts and runs)",
        "data_sources": "Load latency by data source",
        "objects": "Data objects",
        "allocation_sites": "Data objects by allocation site",
        "by_host_run": "Samples by host and run",
    }
    for name, df in tables.items():
        print(f"== {titles.get(name, name)}", file=out)
        if df.empty:
            print("(no rows)", file=out)
        else:
            print(_display(df).to_string(index=False), file=out)
        print(file=out)


def _display(df: Any) -> Any:
    """The table as text cells: a missing figure as ``-``, shares and means to 4 digits."""
    import pandas as pd

    def text(v: Any) -> str:
        if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
            return "-"
        if isinstance(v, float):
            return f"{v:.4g}"
        return str(v)

    return pd.DataFrame({c: [text(v) for v in df[c].tolist()] for c in df.columns}, columns=df.columns)


def add_common_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("dataset", metavar="DIR", help="a dataset written by `spelunk export --dataset`")
    p.add_argument("--json", action="store_true", help="print the tables as JSON (schema spelunk-fleet/1)")
    p.add_argument(
        "--limit",
        type=int,
        default=DEFAULT_LIMIT,
        metavar="N",
        help=f"rows per table (default {DEFAULT_LIMIT}; 0: all)",
    )
    p.add_argument("--host", action="append", metavar="H", help="only this host's partitions (repeatable)")
    p.add_argument("--run", action="append", metavar="R", help="only this run's partitions (repeatable)")


def run_command(prog: str, engine: str, argv: list[str] | None, parse: Callable, compute: Callable) -> int:
    """Parses, computes and prints; a missing package or dataset is one line on stderr."""
    # Die quietly of SIGPIPE when the reader of a pipe has gone (`... | head`), as the
    # `spelunk` command does, rather than with a BrokenPipeError traceback.
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    args = parse(argv)
    try:
        tables = compute(args)
    except ModuleNotFoundError as e:
        what = e.name or str(e)
        print(
            f"{prog}: error: the Python package '{what}' is missing: install it with "
            f"`python3 -m pip install {what}` (or `pip install .[fleet]` from spelunk's source)",
            file=sys.stderr,
        )
        return EXIT_MISSING_PACKAGE
    except FleetError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 1
    if args.json:
        json.dump(to_json(tables, engine), sys.stdout, indent=1)
        print()
    else:
        print_tables(tables)
    return 0


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="spelunk fleet",
        description="The report's tables over a whole dataset of recordings, on embedded DuckDB "
        "(docs/dataset.md, Fleet analysis).",
    )
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("report", help="hot functions, data sources, objects, allocation sites, partitions")
    add_common_args(r)
    r.add_argument(
        "--memory-limit",
        default=DEFAULT_MEMORY_LIMIT,
        metavar="SIZE",
        help=f"DuckDB's memory limit (default {DEFAULT_MEMORY_LIMIT}; spills beyond it)",
    )
    r.add_argument("--threads", type=int, metavar="N", help="DuckDB's threads (default: every core)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    def compute(a: argparse.Namespace) -> dict[str, Any]:
        return report(
            a.dataset,
            hosts=a.host,
            runs=a.run,
            limit=a.limit or None,
            memory_limit=a.memory_limit,
            threads=a.threads,
        )

    return run_command("spelunk fleet", "duckdb", argv, _parse, compute)


if __name__ == "__main__":
    sys.exit(main())
