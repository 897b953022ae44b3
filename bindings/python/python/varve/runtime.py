"""The runtime from Python: handlers that run when records are appended.

:class:`Runtime` is the extension's runtime (``varve._varve.Runtime``) plus
the :meth:`Runtime.handler` decorator. See docs/python.md, "Handlers in
Python".
"""

from __future__ import annotations

import atexit
from typing import Callable, Optional, Sequence, TypeVar, Union, overload

from . import _varve
from ._varve import Event, HandlerContext, HandlerMap, MapReader, to_dot, to_otel

__all__ = ["Runtime", "HandlerContext", "HandlerMap", "MapReader", "Event", "to_dot", "to_otel"]

Handler = TypeVar("Handler", bound=Callable[[HandlerContext], object])


class Runtime(_varve.Runtime):
    """The event-driven runtime over one namespace (see the class's
    ``__doc__`` in the extension, and docs/python.md)."""

    __doc__ = _varve.Runtime.__doc__

    @overload
    def handler(self, name: Handler) -> Handler: ...

    @overload
    def handler(
        self,
        name: Optional[str] = None,
        *,
        log: Union[str, Sequence[str], None] = None,
        attempts: int = 3,
        backoff: float = 0.1,
        backoff_max: float = 10.0,
    ) -> Callable[[Handler], Handler]: ...

    def handler(
        self,
        name: Union[str, Handler, None] = None,
        *,
        log: Union[str, Sequence[str], None] = None,
        attempts: int = 3,
        backoff: float = 0.1,
        backoff_max: float = 10.0,
    ) -> Union[Handler, Callable[[Handler], Handler]]:
        """Decorator: register the function as a handler (named `name`, by
        default the function's name), subscribed to `log` (a name or a list
        of names). The function is returned unchanged.

        ``@rt.handler`` alone registers it with no subscription (subscribe
        later with :meth:`subscribe`).
        """
        if callable(name):
            self.add_handler(name.__name__, name)
            return name

        def register(function: Handler) -> Handler:
            self.add_handler(
                name or function.__name__,
                function,
                log=log,
                attempts=attempts,
                backoff=backoff,
                backoff_max=backoff_max,
            )
            return function

        return register


# Workers must not try to run Python while the interpreter shuts down: stop
# every runtime still running first (each waits up to 5 s for its handlers).
atexit.register(_varve._stop_all_runtimes)
