"""Varve's exceptions: one class per typed error, each carrying its fields.

Every error Varve raises on purpose is a :class:`VarveError`. The fields of
each class are attributes (``e.log``, ``e.seq``, ...); ``str(e)`` is the
message, which says what was wrong and what to do. Some classes also derive
from the built-in exception a Python programmer would catch for the same
thing (``InvalidName`` is a ``ValueError``, ``NotFound`` a ``LookupError``,
``VarveIOError`` an ``OSError``).

The extension module (``src/error.rs``) raises these with the keyword
arguments listed in each docstring; the two must agree.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "VarveError",
    "NotFound",
    "NoSuchVersion",
    "Trimmed",
    "Full",
    "Conflict",
    "InvalidName",
    "TooLarge",
    "InvalidArgument",
    "AlreadyExists",
    "PositionOutOfRange",
    "Corrupt",
    "Locked",
    "ReadOnly",
    "Poisoned",
    "Closed",
    "VarveIOError",
    "RuntimeStateError",
    "Stopped",
]


class VarveError(Exception):
    """Base class of every Varve error. Fields are set as attributes."""

    def __init__(self, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.message = message
        for name, value in fields.items():
            setattr(self, name, value)

    def __str__(self) -> str:
        return self.message


class NotFound(VarveError, LookupError):
    """A namespace, log, or record does not exist.

    Fields (those that apply): ``namespace``, ``log``, ``seq``, ``latest``
    (the log's newest seq when ``seq`` is beyond it, or 0), ``handler`` (a
    handler name a runtime does not have).
    """


class NoSuchVersion(NotFound):
    """A read named version 0 or a version not yet committed.

    Fields: ``structure``, ``version``, ``latest``.
    """


class Trimmed(VarveError, LookupError):
    """The record was trimmed by retention. Fields: ``log``, ``seq``, ``earliest``."""


class Full(VarveError):
    """A ``keep`` log (``on_full="refuse"``) or a structure with
    ``keep_versions`` is full; reads go on. Fields: ``keep`` and ``log``
    (logs) or ``structure`` (structures)."""


class Conflict(VarveError):
    """``append_if`` found another latest seq. Fields: ``log``, ``expected``, ``actual``."""


class InvalidName(VarveError, ValueError):
    """A log, namespace or structure name breaks the rules
    (``[A-Za-z0-9_.-]``, 1-200 bytes, no leading ``_``). Fields: ``name``, ``reason``."""


class TooLarge(VarveError, ValueError):
    """A record or batch is over its limit. Fields: ``what``, ``size``, ``limit``."""


class InvalidArgument(VarveError, ValueError):
    """An argument makes no sense (empty batch, ``keep=0``, ...). Field: ``reason``."""


class AlreadyExists(VarveError, ValueError):
    """A log or structure exists with another configuration.
    Fields: ``name``, ``existing``, ``requested``."""


class PositionOutOfRange(VarveError, IndexError):
    """A list position past the end. Fields: ``position``, ``len``."""


class Corrupt(VarveError):
    """Stored bytes fail their checks; never skipped silently.
    Fields: ``segment``, ``offset``, ``reason`` (journal damage) or ``log``,
    ``seq``, ``reason`` (a structure's entry), or just ``reason``."""


class Locked(VarveError):
    """Another writer holds the namespace (one writer process per namespace;
    open with ``read_only=True`` to read). Field: ``path``."""


class ReadOnly(VarveError):
    """A write on a store opened with ``read_only=True``. Fields: ``namespace``, ``operation``."""


class Poisoned(VarveError):
    """An earlier write or fsync failed; the namespace refuses writes until
    the store is reopened. Fields: ``namespace``, ``cause``."""


class Closed(VarveError):
    """The object's store was closed. Field: ``what`` (the object used)."""


class VarveIOError(VarveError, OSError):
    """An operating-system I/O error. Fields: ``context`` (what Varve was
    doing) and ``errno`` (or None)."""

    def __init__(self, message: str, **fields: Any) -> None:
        VarveError.__init__(self, message, **fields)


class RuntimeStateError(VarveError, RuntimeError):
    """A :class:`varve.Runtime` (or a handler's context) used in the wrong
    phase of its life: a handler registered after ``start()``, an append
    before it, a context kept after its handler returned. Field: ``state``
    (``"not started"``, ``"running"``, ``"stopped"`` or ``"finished"``)."""


class Stopped(RuntimeStateError):
    """The runtime was stopped (``stop()``, the end of its ``with`` block, or
    its store's ``close()``); a stopped runtime does not start again — create
    a new one. Field: ``state`` (``"stopped"``)."""
