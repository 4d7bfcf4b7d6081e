"""What every request handler may use: configs, the store, the clock, the long-poll waiters."""

from __future__ import annotations

from dataclasses import dataclass

from storage.clock import Clock
from storage.config import StorageConfig
from storage.store import MessageStore

from .config import AdapterConfig
from .long_poll import FetchWaiters


@dataclass(frozen=True, slots=True)
class BrokerContext:
    config: AdapterConfig
    storage_config: StorageConfig
    store: MessageStore
    clock: Clock
    waiters: FetchWaiters
    advertised_host: str
    advertised_port: int
