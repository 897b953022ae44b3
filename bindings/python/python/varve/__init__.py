"""Varve: versioned, append-only data — logs and versioned structures.

>>> import varve, tempfile
>>> with varve.open(tempfile.mkdtemp()) as store:
...     log = store.namespace("sensors").log("temperature")
...     log.append(b"21.5")
...     log.get(1)
1
b'21.5'

- :func:`open` returns a :class:`Store` (the namespaces of a directory, or
  of a ``varve serve`` when given ``varve://HOST:PORT``).
- :meth:`Store.namespace` returns a :class:`Namespace` (logs sharing one
  journal; batches across them are atomic).
- :meth:`Namespace.log` returns a :class:`Log` (append, get, scan, watch).
- :meth:`Namespace.sorted_set`, :meth:`Namespace.sorted_map` and
  :meth:`Namespace.list` return versioned structures whose every version
  stays readable (``at=version``).
- :class:`PersistentMap` is PART's in-memory persistent ordered map (O(1)
  snapshots, set operations); :meth:`Namespace.durable_map` returns a
  :class:`DurableMap`, the same tree made durable on the namespace's logs.
- :meth:`Namespace.objects` returns an :class:`ObjectStore` of versioned
  objects: a DAG of verifiable versions per key, merges, refs, grants,
  ancestry proofs (:func:`check_proof`).
- :meth:`Namespace.schemas` returns the namespace's :class:`Schemas`:
  record types whose versions list numbered fields (:class:`Field`), a
  :class:`TypedLog` of dicts per subject, old records upgraded on read
  (defaults and INITs), migrations into a new generation.
- :class:`Runtime` runs handlers (Python functions or commands) when
  records are appended, and records every cause in ``_events``.
- :meth:`Namespace.repair_plan` and :meth:`Namespace.repair` correct a
  record (or a handler's code) and replay what depended on it (:class:`RepairPlan`).
- Errors are :class:`VarveError` subclasses (see :mod:`varve.errors`).

See docs/python.md in the repository for the guide.
"""

from __future__ import annotations

from . import errors
from ._varve import (
    DELETE,
    DeleteType,
    DurableMap,
    KEY_INT_MAX,
    KEY_INT_MIN,
    List,
    Log,
    LogInfo,
    Namespace,
    ObjectStore,
    ObjectWatch,
    PartIterator,
    PersistentMap,
    RepairPlan,
    Scan,
    Schemas,
    SortedMap,
    SortedSet,
    Store,
    TypedLog,
    TypedScan,
    Version,
    Watch,
    _bench_rust,
    check_proof,
    open,
)
from .runtime import Event, HandlerContext, HandlerMap, MapReader, Runtime, to_dot, to_otel
from .schema import Field, FieldType, FieldValue
from .errors import (
    AlreadyExists,
    Backlogged,
    Closed,
    Conflict,
    Corrupt,
    Denied,
    Forbidden,
    Full,
    IncompatibleSchema,
    InitFailed,
    InvalidArgument,
    InvalidName,
    Locked,
    Lost,
    MergeConflict,
    MigrationFailed,
    NoSpace,
    NoSuchVersion,
    NotFound,
    OutcomeUnknown,
    Poisoned,
    PositionOutOfRange,
    ProofInvalid,
    ProtocolError,
    ReadOnly,
    RefMoved,
    RepairError,
    RuntimeStateError,
    SchemaError,
    SchemaWarning,
    Stopped,
    Tampered,
    TooLarge,
    Trimmed,
    Unavailable,
    UnsupportedFormat,
    VarveError,
    VarveIOError,
    VersionNotFound,
)

# Written out in full: mypy follows neither `*errors.__all__` in the list nor
# `__all__.extend(errors.__all__)`, and without the error classes here a
# strict type checker rejects `varve.NotFound`. stubtest (tests/test_typing.py)
# checks this list against the runtime's.
__all__ = [
    "open",
    "Store",
    "Namespace",
    "Log",
    "LogInfo",
    "Scan",
    "Watch",
    "SortedSet",
    "SortedMap",
    "List",
    "PersistentMap",
    "DurableMap",
    "ObjectStore",
    "ObjectWatch",
    "Version",
    "check_proof",
    "Schemas",
    "TypedLog",
    "TypedScan",
    "Field",
    "FieldType",
    "FieldValue",
    "PartIterator",
    "DeleteType",
    "DELETE",
    "Runtime",
    "HandlerContext",
    "HandlerMap",
    "MapReader",
    "Event",
    "to_dot",
    "to_otel",
    "RepairPlan",
    "KEY_INT_MIN",
    "KEY_INT_MAX",
    "errors",
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
    "Lost",
    "UnsupportedFormat",
    "NoSpace",
    "Locked",
    "ReadOnly",
    "Poisoned",
    "Closed",
    "VarveIOError",
    "VersionNotFound",
    "Forbidden",
    "Tampered",
    "RefMoved",
    "MergeConflict",
    "ProofInvalid",
    "Unavailable",
    "OutcomeUnknown",
    "Denied",
    "ProtocolError",
    "RuntimeStateError",
    "Stopped",
    "Backlogged",
    "SchemaError",
    "IncompatibleSchema",
    "InitFailed",
    "MigrationFailed",
    "SchemaWarning",
    "RepairError",
]
