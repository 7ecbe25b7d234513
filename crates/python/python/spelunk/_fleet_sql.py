"""The fleet tables as SQL text that both engines run: DuckDB (``spelunk.fleet``) and Spark SQL
(``spelunk.spark``), over a view ``samples`` of a dataset written by ``spelunk export
--dataset`` (docs/dataset.md "Fleet analysis" defines every column).

One definition for both engines, so their tables are equal by construction of the query and
differ only if an engine reads the dataset differently (which the tests check). The figures are
``spelunk report``'s (docs/report.md "Figures"):

- a load is a row whose ``op`` is ``LD``, a store one whose ``op`` is ``ST``;
- load latency is ``total_lat`` over the loads that have one;
- percentiles are exact nearest-rank [docs/methodology/statistics.md]: the p-th percentile is
  the smallest latency ``v`` such that at least p % of the loads are <= ``v``, i.e. the value
  at rank ``ceil(p/100 * n)`` (at least 1) in ascending order, computed here from each group's
  exact histogram with a running count, as crates/analysis/src/stats.rs does. ``p/100 * n`` is
  taken in IEEE doubles as there, so the rank is the same for every ``n``;
- ``mean`` is the exact sum of latencies divided by their count in doubles.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["COLUMNS", "TABLES", "Table", "table_sql", "selection_sql", "PERCENTILES"]

#: The dataset's columns the tables read (``host`` and ``run`` from the partition paths).
COLUMNS = (
    "host", "run", "op", "total_lat", "dso", "function", "data_source", "object", "object_kind",
    "allocation_site",
)

#: The percentiles every latency summary has (``spelunk report``'s).
PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class Table:
    """A fleet table: its group keys, which rows it groups, and its figures."""

    name: str
    keys: tuple[str, ...]
    #: rows of the selection that belong to some group (beyond keys that are not null)
    where: str
    #: True: the counts are ``samples``/``loads``/``stores``; False (data sources): loads only
    all_ops: bool = True
    #: True: latency summary columns
    latency: bool = True


TABLES = (
    # Host-independent: a function of a binary is one row whatever host or run it ran on.
    Table("functions", ("dso", "function"), "TRUE"),
    Table("data_sources", ("data_source",), "op = 'LD'", all_ops=False),
    Table("objects", ("object", "object_kind"), "TRUE"),
    Table("allocation_sites", ("allocation_site",), "TRUE"),
    Table("by_host_run", ("host", "run"), "TRUE", latency=False),
)


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def selection_sql(hosts: list[str] | None = None, runs: list[str] | None = None) -> str:
    """The rows selected by ``--host``/``--run`` (every row without them)."""
    conds = []
    if hosts:
        conds.append("host IN (" + ", ".join(_quote(h) for h in hosts) + ")")
    if runs:
        conds.append("run IN (" + ", ".join(_quote(r) for r in runs) + ")")
    return "SELECT * FROM samples" + (" WHERE " + " AND ".join(conds) if conds else "")


def table_sql(
    table: Table,
    hosts: list[str] | None = None,
    runs: list[str] | None = None,
    limit: int | None = None,
) -> str:
    """The query of one table: largest first (samples, or loads for data sources), ties by key."""
    keys = ", ".join(table.keys)
    on = " AND ".join(f"g.{k} = l.{k}" for k in table.keys)
    member = " AND ".join([f"{k} IS NOT NULL" for k in table.keys] + [table.where])
    if table.all_ops:
        counts = (
            "count(*) AS samples, "
            "sum(CASE WHEN op = 'LD' THEN 1 ELSE 0 END) AS loads, "
            "sum(CASE WHEN op = 'ST' THEN 1 ELSE 0 END) AS stores"
        )
        # docs/report.md: share = group samples / selected samples
        total = "SELECT count(*) AS total FROM sel"
        share = "g.samples"
        count_cols = ["samples", "share", "loads", "stores"]
        order = "g.samples DESC"
    else:
        counts = "count(*) AS loads"
        # docs/report.md: a data source's share is its loads / loads with a data source.
        total = f"SELECT count(*) AS total FROM sel WHERE {member}"
        share = "g.loads"
        count_cols = ["loads", "share"]
        order = "g.loads DESC"
    ctes = [f"sel AS ({selection_sql(hosts, runs)})"]
    ctes.append(f"g AS (SELECT {keys}, {counts} FROM sel WHERE {member} GROUP BY {keys})")
    ctes.append(f"t AS ({total})")
    cols = [f"g.{k}" for k in table.keys] + [
        f"CAST({share} AS DOUBLE) / CAST(t.total AS DOUBLE) AS share" if c == "share" else f"g.{c}"
        for c in count_cols
    ]
    join = " CROSS JOIN t"
    if table.latency:
        # The exact histogram of each group's load latencies, then a running count over it.
        ctes.append(
            f"h AS (SELECT {keys}, total_lat AS v, count(*) AS c FROM sel "
            f"WHERE {member} AND op = 'LD' AND total_lat IS NOT NULL GROUP BY {keys}, total_lat)"
        )
        ctes.append(
            f"r AS (SELECT {keys}, v, c, "
            f"sum(c) OVER (PARTITION BY {keys} ORDER BY v "
            "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS cum, "
            f"sum(c) OVER (PARTITION BY {keys}) AS n FROM h)"
        )
        pct = ", ".join(
            # [docs/methodology/statistics.md] nearest rank: rank = max(1, ceil(p/100 * n))
            f"min(CASE WHEN cum >= greatest(ceil(CAST({p / 100!r} AS DOUBLE) * CAST(n AS DOUBLE)), 1) "
            f"THEN v END) AS load_latency_p{p}_cycles"
            for p in PERCENTILES
        )
        ctes.append(
            f"l AS (SELECT {keys}, max(n) AS latency_loads, "
            "CAST(sum(CAST(v AS BIGINT) * c) AS DOUBLE) / CAST(max(n) AS DOUBLE) "
            "AS load_latency_mean_cycles, "
            f"{pct} FROM r GROUP BY {keys})"
        )
        lat_cols = ["latency_loads", "load_latency_mean_cycles"] + [
            f"load_latency_p{p}_cycles" for p in PERCENTILES
        ]
        cols += [f"l.{c}" for c in lat_cols]
        join += f" LEFT JOIN l ON {on}"
    order_keys = ", ".join(f"g.{k} ASC" for k in table.keys)
    sql = f"WITH {', '.join(ctes)} SELECT {', '.join(cols)} FROM g{join} ORDER BY {order}, {order_keys}"
    if limit is not None and limit > 0:
        sql += f" LIMIT {int(limit)}"
    return sql
