"""One module per Kafka API; each exposes API_KEY and ``async handle(ctx, request)``.

A handler returns the kio response entity for the request's version, an ``Encoded`` body
already encoded for it (the hot paths, Produce and Fetch), or None when the protocol says no
response is sent (Produce with acks=0).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ..codec import Request
from ..context import BrokerContext
from . import (
    api_versions,
    create_partitions,
    create_topics,
    delete_topics,
    describe_configs,
    fetch,
    init_producer_id,
    list_offsets,
    metadata,
    produce,
)

Handler = Callable[[BrokerContext, Request], Awaitable[Any]]

HANDLERS: dict[int, Handler] = {
    module.API_KEY: module.handle
    for module in (
        api_versions,
        create_partitions,
        create_topics,
        delete_topics,
        describe_configs,
        fetch,
        init_producer_id,
        list_offsets,
        metadata,
        produce,
    )
}
