"""``async for`` over a :class:`varve.Watch`.

The watch blocks in Rust without the GIL; here each wait runs in a worker
thread (``asyncio.to_thread``) for at most ``_POLL_SECONDS`` at a time, so a
cancelled task frees its thread quickly and the event loop never blocks.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Tuple

if TYPE_CHECKING:
    from ._varve import Watch

_POLL_SECONDS = 0.25


async def anext_record(watch: Watch) -> Tuple[int, bytes]:
    while True:
        record = await asyncio.to_thread(watch.next, _POLL_SECONDS)
        if record is not None:
            return record
