"""Varve's exceptions: one class per typed error, each carrying its fields.

Every error Varve raises on purpose is a :class:`VarveError`. The fields of
each class are attributes (``e.log``, ``e.seq``, ...); ``str(e)`` is the
message, which says what was wrong and what to do. Some classes also derive
from the built-in exception a Python programmer would catch for the same
thing (``InvalidName`` is a ``ValueError``, ``NotFound`` a ``LookupError``,
``VarveIOError`` an ``OSError``, ``Unavailable`` a ``ConnectionError``).

Four classes are a remote store's own (``varve.open("varve://HOST:PORT")``):
:class:`Unavailable`, :class:`OutcomeUnknown`, :class:`Denied` and
:class:`ProtocolError`; each names the store's URI as ``target``.

The extension module (``src/error.rs``) raises these with the keyword
arguments listed in each docstring; the two must agree. The fields are also
declared on each class, so type checkers know them; a field that applies to
only some errors of a class defaults to None.
"""

from __future__ import annotations

from typing import Any, Optional

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
    "Lost",
    "UnsupportedFormat",
    "NoSpace",
    "Locked",
    "ReadOnly",
    "Poisoned",
    "Closed",
    "VarveIOError",
    "Unavailable",
    "OutcomeUnknown",
    "Denied",
    "ProtocolError",
    "RuntimeStateError",
    "Stopped",
    "Backlogged",
    "VersionNotFound",
    "Forbidden",
    "Tampered",
    "RefMoved",
    "MergeConflict",
    "ProofInvalid",
    "SchemaError",
    "IncompatibleSchema",
    "InitFailed",
    "MigrationFailed",
    "SchemaWarning",
    "RepairError",
]


class VarveError(Exception):
    """Base class of every Varve error. Fields are set as attributes."""

    message: str

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

    namespace: Optional[str] = None
    log: Optional[str] = None
    seq: Optional[int] = None
    latest: Optional[int] = None
    handler: Optional[str] = None


class NoSuchVersion(NotFound):
    """A read named version 0 or a version not yet committed.

    Fields: ``structure``, ``version``, ``latest``.
    """

    structure: str
    version: int


class Trimmed(VarveError, LookupError):
    """The record was trimmed by retention. Fields: ``log``, ``seq``, ``earliest``."""

    log: str
    seq: int
    earliest: int


class Full(VarveError):
    """A ``keep`` log (``on_full="refuse"``) or a structure with
    ``keep_versions`` is full; reads go on. Fields: ``keep`` and ``log``
    (logs) or ``structure`` (structures)."""

    keep: int
    log: Optional[str] = None
    structure: Optional[str] = None


class Conflict(VarveError):
    """``append_if`` (or ``append_batch`` with ``expected``) found another
    latest seq, or a runtime found a seq it did not predict (then also
    ``namespace``). Fields: ``log``, ``expected``, ``actual``."""

    log: str
    expected: int
    actual: int
    namespace: Optional[str] = None


class InvalidName(VarveError, ValueError):
    """A log, namespace or structure name breaks the rules
    (``[A-Za-z0-9_.-]``, 1-200 bytes, no leading ``_``). Fields: ``name``, ``reason``."""

    name: str
    reason: str


class TooLarge(VarveError, ValueError):
    """A record or batch is over its limit. Fields: ``what``, ``size``, ``limit``."""

    what: str
    size: int
    limit: int


class InvalidArgument(VarveError, ValueError):
    """An argument makes no sense (empty batch, ``keep=0``, ...). Field: ``reason``."""

    reason: str


class AlreadyExists(VarveError, ValueError):
    """A log or structure exists with another configuration.
    Fields: ``name``, ``existing``, ``requested``."""

    name: str
    existing: str
    requested: str


class PositionOutOfRange(VarveError, IndexError):
    """A list position past the end. Fields: ``position``, ``len``."""

    position: int
    len: int


class Corrupt(VarveError):
    """Stored bytes fail their checks; never skipped silently.
    Fields: ``segment``, ``offset``, ``reason`` (journal damage) or ``log``,
    ``seq``, ``reason`` (a structure's entry), or just ``reason``."""

    reason: str
    segment: Optional[str] = None
    offset: Optional[int] = None
    log: Optional[str] = None
    seq: Optional[int] = None


class Lost(Corrupt):
    """Records ``first`` to ``last`` of ``log`` are in no intact frame: their
    bytes are damaged, or the segment that held them is missing. The log's
    other records read as usual, and these seqs are never reused; a scan or
    watch raises this once for the run and goes on after it. ``varve fsck
    --repair`` salvages what is intact and records the loss. Fields: ``log``,
    ``first``, ``last``, ``segment``, ``offset`` (or None), ``reason``."""

    first: int
    last: int


class UnsupportedFormat(VarveError):
    """A segment written by a newer Varve, in a format this build does not
    read. Fields: ``segment``, ``offset``, ``reason``."""

    segment: str
    offset: int
    reason: str


class NoSpace(VarveError, OSError):
    """The disk (or quota) is full; nothing was written and the store goes
    on. Fields: ``path``, ``bytes`` (how many more were needed)."""

    path: str
    bytes: int

    def __init__(self, message: str, **fields: Any) -> None:
        VarveError.__init__(self, message, **fields)


class Locked(VarveError):
    """Another writer holds the namespace (one writer process per namespace;
    open with ``read_only=True`` to read). Field: ``path``."""

    path: str


class ReadOnly(VarveError):
    """A write on a store opened with ``read_only=True``. Fields: ``namespace``, ``operation``."""

    namespace: str
    operation: str


class Poisoned(VarveError):
    """An earlier write or fsync failed; the namespace refuses writes until
    the store is reopened. Fields: ``namespace``, ``cause``."""

    namespace: str
    cause: str


class Closed(VarveError):
    """The object's store was closed. Field: ``what`` (the object used)."""

    what: str


class VarveIOError(VarveError, OSError):
    """An operating-system I/O error. Fields: ``context`` (what Varve was
    doing) and ``errno`` (or None; declared by ``OSError``)."""

    context: str

    def __init__(self, message: str, **fields: Any) -> None:
        VarveError.__init__(self, message, **fields)


class Unavailable(VarveError, ConnectionError):
    """A remote store could not be reached: the connection was refused or
    broke before the request was sent, the server is stopping, or another
    writer holds the namespace. Nothing was done; retrying later is safe.
    Fields: ``target`` (the store's URI, ``varve://HOST:PORT``), ``reason``
    (what went wrong). ``errno`` (declared by ``OSError``) is None."""

    target: str
    reason: str

    def __init__(self, message: str, **fields: Any) -> None:
        VarveError.__init__(self, message, **fields)


class OutcomeUnknown(VarveError):
    """A write reached a remote store but its answer was lost (the
    connection broke, the server was killed, the timeout passed): it may or
    may not have landed. Read the log's latest records to find out before
    appending again. Not a ``ConnectionError``, so that code retrying those
    does not append twice. Fields: ``target`` (the store's URI),
    ``operation`` (what was sent, e.g. ``"append to log t"``), ``reason``."""

    target: str
    operation: str
    reason: str


class Denied(VarveError, PermissionError):
    """A remote store refused the request's credentials: no token (pass
    ``token=`` to :func:`varve.open`, or set ``VARVE_TOKEN``), an unknown one,
    a read-only token for a write, or a token for another namespace.
    Fields: ``target`` (the store's URI), ``reason`` (as the server said it).
    ``errno`` (declared by ``OSError``) is None."""

    target: str
    reason: str

    def __init__(self, message: str, **fields: Any) -> None:
        VarveError.__init__(self, message, **fields)


class ProtocolError(VarveError):
    """A remote store answered something this client cannot read: another
    program on that port, an incompatible version, a stream cut short.
    Fields: ``target`` (the store's URI), ``reason`` (what was unexpected)."""

    target: str
    reason: str


class RuntimeStateError(VarveError, RuntimeError):
    """A :class:`varve.Runtime` (or a handler's context) used in the wrong
    phase of its life: a handler registered after ``start()``, an append
    before it, a context kept after its handler returned. Field: ``state``
    (``"not started"``, ``"running"``, ``"stopped"`` or ``"finished"``)."""

    state: str


class Stopped(RuntimeStateError):
    """The runtime was stopped (``stop()``, the end of its ``with`` block, or
    its store's ``close()``); a stopped runtime does not start again — create
    a new one. Field: ``state`` (``"stopped"``)."""


class Backlogged(VarveError):
    """An append from outside the handlers waited for them to catch up
    (backpressure: too many triggers queued or running) and no room came in
    time. Nothing was appended: append again later or more slowly, or give
    the runtime more workers. Fields: ``backlog`` (triggers queued or
    running), ``max`` (the limit), ``waited`` (seconds).
    """

    backlog: int
    max: int
    waited: float


class VersionNotFound(NotFound):
    """An object store's key has no version with this id, prefix or ref
    name (or none the principal may read). Fields: ``store``, ``key``,
    ``version`` (as given)."""

    store: str
    key: str
    version: str


class Forbidden(VarveError, PermissionError):
    """A principal (``ObjectStore.as_principal``) may not read this version
    of a restricted key, or may not change the key's grants (only its owner
    may; then ``version`` is None). Fields: ``principal``, ``key``,
    ``version``, ``owner``. ``errno`` (declared by ``OSError``) is None."""

    principal: str
    key: str
    owner: str
    version: Optional[str] = None

    def __init__(self, message: str, **fields: Any) -> None:
        VarveError.__init__(self, message, **fields)


class Tampered(Corrupt):
    """A version's stored bytes do not hash to its id (``ObjectStore.verify``).
    Fields: ``key``, ``version``, ``reason``, ``log``, ``seq``."""

    key: str
    version: str


class RefMoved(VarveError):
    """A ref of an object store's key is not where the caller expected (a
    branch moved by someone else first, or a tag set to another version):
    re-read it and retry. Fields: ``key``, ``name``, ``expected``, ``actual``
    (short ids, or ``"none"``)."""

    key: str
    name: str
    expected: str
    actual: str


class MergeConflict(VarveError):
    """A three-way merge function found changes it cannot combine; merge
    with an explicit value instead. Field: ``fields`` (what both sides
    changed differently)."""

    fields: list[str]


class ProofInvalid(VarveError):
    """An ancestry proof does not check (``varve.check_proof``). Field: ``reason``."""

    reason: str


class SchemaError(VarveError):
    """A record type (``Namespace.schemas()``) refused a schema, a record or
    a migration: a malformed spec, an unknown subject, a value that does not
    fit its field, an INIT this program has not defined, a migration pending
    or none pending, a stored record that does not decode. Fields (None
    where they do not apply): ``subject``, ``version``, ``reason``,
    ``location`` (the record, ``log@seq``), ``init`` (an INIT not defined),
    ``schema_id`` (a version id the namespace's ``_schema`` log lacks).

    The extension passes every field, so the subclasses can declare the
    ones they always carry as not None."""

    subject: Optional[str]
    version: Optional[int]
    reason: Optional[str]
    location: Optional[str]
    init: Optional[str]
    schema_id: Optional[int]


class IncompatibleSchema(SchemaError):
    """A new version breaks a compatibility rule against an earlier one;
    nothing was registered. Fields: ``subject``, ``version`` (the new one),
    ``against`` (the earlier one), ``field`` (its name), ``rule``
    (``"BACKWARD"``, ``"FORWARD"`` or ``"FIELD_NUMBER"``), ``reason``."""

    subject: str
    version: int
    against: int
    field: str
    rule: str
    reason: str


class InitFailed(SchemaError):
    """An INIT failed on one stored record (it raised, or returned a field
    the version does not add or a value that does not fit); nothing stored
    was changed, and the record's other fields still read. An exception the
    Python INIT raised is this one's ``__cause__``. Fields: ``subject``,
    ``version`` (the version whose INIT failed), ``init``, ``location``
    (``log@seq``), ``reason``."""

    subject: str
    version: int
    init: str
    location: str
    reason: str


class MigrationFailed(SchemaError):
    """A migration function failed on one record; the records migrated
    before it stay in the new generation, and running the migration again
    resumes there. An exception the Python function raised is this one's
    ``__cause__``. Fields: ``subject``, ``migration``, ``location``
    (``log@seq``), ``reason``."""

    subject: str
    migration: str
    location: str
    reason: str


class RepairError(VarveError):
    """A repair (``Namespace.repair``) could not be carried out; nothing was
    swapped, the logs are as they were. ``kind`` names the cause:
    ``"not_replayable"`` (a handler marked not replayable would run again:
    pass ``on_not_replayable="run"`` or ``"skip"`` if that is safe),
    ``"missing_handler"`` (pass its code in ``handlers``),
    ``"missing_value"``, ``"missing_namespace"``, ``"count_changed"`` (a
    replay wrote more or fewer records than the original run),
    ``"handler_failed"`` (a replayed handler raised; the message has the
    traceback), ``"interrupted"`` (an earlier repair was cut short while it
    committed and must be finished first: an offline ``repair`` does it on
    its own, `varve repair resume` too), ``"bad_journal"`` (the namespace's
    ``_repairs`` log is not readable), ``"beyond_retention"`` (the
    correction is older than the events the runtime's retention (``events_keep``, ``events_keep_for``) kept:
    what depended on it is no longer recorded) or ``"unsupported"``
    (something the repair does not do yet, such as an online repair that
    reaches another namespace). A repair
    while a runtime of this process runs that cannot pause it (runs still
    in flight after 30 s) raises :class:`VarveError` and changes nothing. Fields (None
    where they do not apply): ``handler``, ``record`` (the corrected record
    or the replayed run's trigger, ``namespace/log:seq``), ``log``
    (``namespace/log``), ``namespace``."""

    kind: str
    handler: Optional[str]
    record: Optional[str]
    log: Optional[str]
    namespace: Optional[str]


class SchemaWarning(UserWarning):
    """What registering a version means for the data (issued by
    ``Schemas.register`` and ``Schemas.upgrade_eager``, and also returned in
    their ``warnings``): a reset's records left in the old generation, a
    manual version waiting for its migration. Not an error."""
