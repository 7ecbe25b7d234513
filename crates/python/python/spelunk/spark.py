"""Fleet analysis on a Spark cluster: the tables of ``spelunk.fleet`` (hot functions, data
sources, objects, allocation sites, samples per partition) computed by Spark SQL over a dataset
written by ``spelunk export --dataset``, for datasets beyond one machine.

    python -m spelunk.spark DIR [--json] [--limit N] [--host H] [--run R] [--master local[2]]
    python -m spelunk.spark hdfs:///fleet/ --master spark://HOST:7077   # a cluster

The work is Spark SQL only (no Python function runs on the executors), so the cluster needs
nothing of spelunk: the package (and pyspark) on the machine that submits is enough. With
``spark-submit`` (client deploy mode), submit a one-line driver
``import sys, spelunk.spark; sys.exit(spelunk.spark.main())``; docs/dataset.md "Fleet analysis".

>>> from spelunk import spark
>>> tables = spark.report("fleet/")               # dict of pandas DataFrames

The query text is the one DuckDB runs (``spelunk._fleet_sql``), so the tables are equal
(percentiles: exact nearest rank from each group's histogram, neither ``percentile`` —
interpolated — nor ``percentile_approx``). Only the small result tables reach the driver.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ._fleet_sql import COLUMNS, TABLES, table_sql
from .fleet import MARKER, FleetError, add_common_args, frames, run_command

__all__ = ["report", "session", "main"]


def session(master: str | None = None, shuffle_partitions: int | None = None, app: str = "spelunk-fleet"):
    """A SparkSession set up for datasets of ``spelunk export``: partition values stay text
    (``run=0412`` is not the number 412). ``master`` None: whatever ``spark-submit`` or
    ``SPARK_MASTER`` gives, else ``local[*]``."""
    from pyspark.sql import SparkSession

    b = SparkSession.builder.appName(app)
    if not master and not os.environ.get("SPARK_MASTER") and "--master" not in os.environ.get("PYSPARK_SUBMIT_ARGS", ""):
        master = "local[*]"
    if master:
        b = b.master(master)
    if master and master.startswith("local"):
        # One process on this machine: listen on loopback only, and no web UI.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        b = (
            b.config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
        )
    b = b.config("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
    if shuffle_partitions:
        b = b.config("spark.sql.shuffle.partitions", str(int(shuffle_partitions)))
    s = b.getOrCreate()
    # Spark's warnings about the partition glob and native Hadoop libraries are not the user's.
    s.sparkContext.setLogLevel("ERROR")
    return s


def _dataset_path(directory: str) -> str:
    """The dataset's root; a local directory is checked as ``spelunk.fleet`` checks it, a URI
    (``hdfs://``, ``s3a://``) is left to Spark."""
    if "://" in directory and not directory.startswith("file://"):
        return directory.rstrip("/")
    local = directory[len("file://") :] if directory.startswith("file://") else directory
    if not os.path.isdir(local):
        raise FleetError(f"{local}: no such directory: give a dataset written by `spelunk export --dataset`")
    if not os.path.isfile(os.path.join(local, MARKER)):
        raise FleetError(f"{local}: not a spelunk dataset (no {MARKER})")
    return os.path.abspath(local)


def report(
    directory: str | os.PathLike[str],
    spark: Any = None,
    hosts: list[str] | None = None,
    runs: list[str] | None = None,
    limit: int | None = None,
) -> dict[str, Any]:
    """The fleet tables (``spelunk.fleet.report``'s) computed on ``spark`` (a SparkSession;
    :func:`session` ``()`` without it), as a dict of pandas DataFrames."""
    from pyspark import StorageLevel

    root = _dataset_path(os.fspath(directory))
    if spark is None:
        spark = session()
    df = (
        spark.read.option("basePath", root)
        # a later partition may have columns added (docs/dataset.md "Versioning")
        .option("mergeSchema", "true")
        # Only the partitions' samples files: no _run.json, no .staging-* directory.
        .parquet(f"{root}/host=*/run=*/samples.parquet")
    )
    # Every table reads the same few columns: read them once, kept on the executors' local
    # disk for the five queries. Not MEMORY_AND_DISK: a block spilled to disk is read back
    # into the heap whole, which ran a 1 GB driver out of heap on 84 M rows
    # (scripts/bench-fleet.sh, docs/performance.md "Fleet analysis at scale"); from disk
    # it is streamed, so the heap holds aggregation state only.
    df = df.select(*COLUMNS).persist(StorageLevel.DISK_ONLY)
    try:
        df.createOrReplaceTempView("samples")
        rows = {}
        for t in TABLES:
            result = spark.sql(table_sql(t, hosts, runs, limit))
            rows[t.name] = (result.columns, [tuple(r) for r in result.collect()])
    finally:
        df.unpersist()
    return frames(rows)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m spelunk.spark",
        description="The fleet tables of `spelunk fleet report` on Spark (docs/dataset.md, Fleet analysis).",
    )
    add_common_args(p)
    p.add_argument("--master", metavar="URL", help="Spark master (default: spark-submit's, else local[*])")
    p.add_argument(
        "--shuffle-partitions",
        type=int,
        metavar="N",
        help="spark.sql.shuffle.partitions (default: Spark's, 200; a few for small datasets)",
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    def compute(a: argparse.Namespace) -> dict[str, Any]:
        _dataset_path(a.dataset)  # a wrong path is told before a JVM starts
        s = session(a.master, a.shuffle_partitions)
        try:
            return report(a.dataset, s, hosts=a.host, runs=a.run, limit=a.limit or None)
        finally:
            s.stop()

    return run_command("python -m spelunk.spark", "spark", argv, _parse, compute)


if __name__ == "__main__":
    sys.exit(main())
