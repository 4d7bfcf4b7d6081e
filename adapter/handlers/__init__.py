"""One module per Kafka API; each exposes API_KEY and ``async handle(ctx, request)``.

A handler returns the kio response entity for the request's version, an ``Encoded`` body
already encoded for it (the hot paths, Produce and Fetch), or None when the protocol says no
response is sent (Produce with acks=0). Every public module of this package is a handler and
is registered by its API_KEY; modules whose names start with an underscore are helpers.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Awaitable, Callable
from typing import Any

from ..codec import Request
from ..context import BrokerContext

Handler = Callable[[BrokerContext, Request], Awaitable[Any]]


def _discover() -> dict[int, Handler]:
    handlers: dict[int, Handler] = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        if module.API_KEY in handlers:
            raise RuntimeError(f"two handlers for api key {module.API_KEY}")
        handlers[module.API_KEY] = module.handle
    return handlers


HANDLERS: dict[int, Handler] = _discover()
