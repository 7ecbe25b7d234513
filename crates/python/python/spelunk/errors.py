"""The exceptions spelunk raises. Their message is the one line the ``spelunk`` command prints
for the same problem (without its ``spelunk: error:`` prefix): the file, what failed, and why.
"""

from __future__ import annotations

__all__ = ["SpelunkError", "RecordingNotFoundError"]


class SpelunkError(Exception):
    """A recording could not be opened, decoded or analysed (or ``spelunk record`` failed)."""


class RecordingNotFoundError(SpelunkError, FileNotFoundError):
    """The recording does not exist (also a :class:`FileNotFoundError`)."""
