"""What every request handler may use: configs, the store, the semantics layer over it, the
clock, the long-poll waiters, the group and transaction coordinators."""

from __future__ import annotations

import contextvars
from dataclasses import dataclass

from rmqkafka.rmqsemantics.semantics import Semantics
from rmqkafka.storage.clock import Clock
from rmqkafka.storage.config import StorageConfig
from rmqkafka.storage.store import MessageStore

from .config import AdapterConfig
from .groups.coordinator import GroupCoordinator
from .long_poll import FetchWaiters
from .transactions.service import TransactionService

# The peer address of the connection whose request is being handled (DescribeGroups shows it).
CLIENT_HOST: contextvars.ContextVar[str] = contextvars.ContextVar("client_host", default="")


@dataclass(frozen=True, slots=True)
class BrokerContext:
    config: AdapterConfig
    storage_config: StorageConfig
    store: MessageStore
    semantics: Semantics
    clock: Clock
    waiters: FetchWaiters
    groups: GroupCoordinator
    transactions: TransactionService
    advertised_host: str
    advertised_port: int
