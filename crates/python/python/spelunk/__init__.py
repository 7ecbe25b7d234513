"""spelunk: memory-centric performance analysis of Arm SPE recordings, from Python.

>>> import spelunk
>>> rec = spelunk.open("perf.data")
>>> samples = rec.samples()            # pyarrow.Table, one row per sample
>>> report = rec.report()              # the figures of `spelunk report --json`
>>> report.functions.head()            # pandas DataFrames

The decoding, symbolization, attribution and aggregation are spelunk's Rust code, the same as
the ``spelunk`` command's; see docs/python.md.
"""

from ._native import __version__
from ._recording import Recording, open, record
from ._report import C2cReport, Report
from .errors import RecordingNotFoundError, SpelunkError

__all__ = [
    "__version__",
    "open",
    "record",
    "Recording",
    "Report",
    "C2cReport",
    "SpelunkError",
    "RecordingNotFoundError",
]
