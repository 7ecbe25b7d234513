"""Opening a recording and reading it: samples as an Arrow table, the report and the c2c
analysis as DataFrames. The work is done in Rust by the same library code as the ``spelunk``
commands (crates/python, crates/analysis).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import List, Any, Dict, Optional, Sequence, Union

import pyarrow as pa

from . import _native
from ._report import C2cReport, Report
from .errors import SpelunkError

__all__ = ["Recording", "open", "record"]

PathLike = Union[str, "os.PathLike[str]"]


class Recording:
    """An Arm SPE recording: a perf.data and, when there is one, its sidecar
    ``FILE.spelunk.json`` (phases, objects, counters). Made by :func:`open`."""

    def __init__(self, native: _native.NativeRecording) -> None:
        self._native = native

    def __repr__(self) -> str:
        return f"<spelunk.Recording {self.path}>"

    @property
    def path(self) -> str:
        """The file, as given to :func:`open`."""
        return self._native.path

    def samples(self, *, batch_rows: int = 65536) -> pa.Table:
        """Every sample, one row each, in time order, symbolized and attributed.

        The decode columns have ``spelunk decode``'s names and values (docs/decode.md):
        ``time_ns``, ``cpu``, ``pid``, ``tid``, ``op``, ``pc``, ``el``, ``event``,
        ``event_bits``, ``issue_lat``, ``total_lat``, ``xlat_lat``, ``exec_lat``, ``vaddr``,
        ``paddr``, ``data_source``, ``data_source_raw``, ``br_tgt``, ``context``, ``ts``. The
        attribution columns are the report's: ``thread`` (name), ``function``,
        ``function_offset``, ``file``, ``line``, ``dso``, ``object``, ``object_kind``,
        ``object_start``, ``allocation_site``, ``phase`` (innermost open phase) and
        ``phases`` (all open phases, outermost first). Absent values are null.

        The table is built in Rust in ``batch_rows``-row record batches and handed over
        through the Arrow C stream interface (no copy); ``.to_pandas()`` or
        ``polars.from_arrow()`` convert it. It holds every sample in memory.
        """
        return pa.RecordBatchReader.from_stream(self._native.samples(batch_rows)).read_all()

    def report(
        self, *, limit: int = 20, sort: str = "cost", c2c: bool = False, line_size: int = 64
    ) -> Report:
        """The figures of ``spelunk report FILE --json`` (with ``--limit``, ``--sort``,
        ``--c2c``, ``--line-size``): hotspots, data sources, objects, phases, threads, losses.

        Raises :class:`~spelunk.SpelunkError` when no sample was decoded, and ValueError for an
        unknown ``sort`` or a bad ``line_size``, with the CLI's messages.
        """
        return Report(self._native.report(limit, sort, c2c, line_size))

    def advice(self) -> Dict[str, Any]:
        """The advisor's output, exactly as ``spelunk advise FILE --json`` prints it:
        ``findings`` (most cycles at stake first), ``ruled_out``, ``totals``, ``notes``
        (docs/advise.md). A recording without samples gives every class "insufficient
        evidence", not an error."""
        return dict(self._native.advice())

    def findings(self) -> List[Dict[str, Any]]:
        """The advisor's findings (``advice()["findings"]``): each with ``class``, ``location``,
        ``evidence``, ``fix`` and ``gain``, most cycles at stake first."""
        return list(self.advice()["findings"])

    def c2c(self, *, line_size: int = 64, limit: int = 20) -> C2cReport:
        """The cache lines shared between cores, as ``spelunk c2c FILE --json`` (with
        ``--line-size``, ``--limit``) reports them."""
        return C2cReport(self._native.c2c(line_size, limit))

    def topdown(self, *, per_phase: bool = False) -> Dict[str, Any]:
        """The top-down figures of the PMU counts in the recording's sidecar (what ``spelunk
        record --emulate`` and ``spelunk record`` write), exactly as ``spelunk topdown --import
        FILE --json`` (with ``--per-phase`` when ``per_phase``) prints them: ``scopes`` with
        each scope's ``totals`` (metrics, stage-1 tree, bottleneck path) and ``events``.
        ``spelunk.plot.topdown_tree`` draws it.

        Raises :class:`~spelunk.SpelunkError` when the recording has no sidecar with counts.
        """
        return dict(self._native.topdown(per_phase))


def open(  # noqa: A001 - the package's entry point, like io.open
    path: PathLike, *, ignore_sidecar: bool = False
) -> Recording:
    """Opens ``path``, a perf.data with Arm SPE data (``perf record -e arm_spe_0//``,
    ``spelunk record``), and its sidecar (``PATH.spelunk.json``) when there is one.

    Raises :class:`~spelunk.RecordingNotFoundError` (a FileNotFoundError) when it does not
    exist and :class:`~spelunk.SpelunkError` when it is not a perf.data, has no SPE metadata or
    no SPE data, or its sidecar cannot be read; the message is the ``spelunk`` command's.
    ``ignore_sidecar=True`` (``--ignore-sidecar``) analyses it without the sidecar: no phases,
    named objects, heap blocks or PMU counts, and a problem in the report's losses.
    """
    return Recording(_native.open(os.fspath(path), ignore_sidecar))


def record(
    command: Sequence[str],
    output: PathLike = "perf.data",
    *,
    emulate: bool = True,
    options: Sequence[str] = (),
    spelunk: Optional[PathLike] = None,
) -> Recording:
    """Records ``command`` with ``spelunk record`` and opens the recording.

    This runs the ``spelunk`` binary (``spelunk record [--emulate] -o OUTPUT [OPTIONS] --
    COMMAND``): the recorder runs the command as a child process anyway, under the SPE/PMU
    emulator with ``emulate=True`` (any Linux machine; needs valgrind and the emulator built
    by emulator/build.sh), with the machine's SPE otherwise. ``options`` are more ``spelunk
    record`` options (e.g. ``["-c", "4096"]``). The binary is ``spelunk``, else
    ``$SPELUNK_BIN``, else ``spelunk`` on PATH. Raises :class:`~spelunk.SpelunkError` with
    the command's error message when it fails.
    """
    exe = spelunk or os.environ.get("SPELUNK_BIN") or shutil.which("spelunk")
    if not exe:
        raise SpelunkError(
            "spelunk record: the spelunk binary was not found: put it on PATH "
            "(cargo build --release --locked -p spelunk makes target/release/spelunk) "
            "or set SPELUNK_BIN"
        )
    argv = [os.fspath(exe), "record"]
    if emulate:
        argv.append("--emulate")
    argv += ["-o", os.fspath(output), *options, "--", *command]
    done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        errors = [
            line[len("spelunk: error: ") :]
            for line in done.stderr.splitlines()
            if line.startswith("spelunk: error: ")
        ]
        raise SpelunkError(
            errors[-1] if errors else f"spelunk record exited with {done.returncode}: {done.stderr.strip()}"
        )
    return open(output)
