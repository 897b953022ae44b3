"""The fields of a record type (``Namespace.schemas()``): :class:`Field`.

A field is numbered, and its number is its identity: a number is never
reused for another field, while the name may move to a new number when the
type changes (with an INIT that converts).

>>> Field(1, "celsius", "i32")
Field(number=1, name='celsius', type='i32', default=None)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Union

__all__ = ["Field", "FieldType", "FieldValue"]

FieldType = Literal["bool", "i32", "i64", "u32", "u64", "f32", "f64", "string", "bytes"]
"""A field's type. A type may later widen (Avro's promotions): ``i32`` to
``i64`` or ``f64``, ``u32`` to ``u64``, ``i64`` or ``f64``, ``f32`` or
``i64``/``u64`` to ``f64``, and ``string`` and ``bytes`` into each other."""

FieldValue = Union[bool, int, float, str, bytes]
"""A field's value as Python sees it: ``bool``; ``int`` for the integer
types; ``float`` for ``f32`` and ``f64``; ``str``; ``bytes``."""


@dataclass(frozen=True)
class Field:
    """One field of a record type's version: ``number`` (1 to 2**28, never
    reused), ``name`` (letters, digits, ``_``), ``type`` and ``default``, the
    value records written before the field existed read (stored once, in the
    schema; None: no default, so a version adding it needs an INIT).
    ``Schemas.register`` also takes dicts with these keys."""

    number: int
    name: str
    type: FieldType
    default: Union[FieldValue, None] = None
