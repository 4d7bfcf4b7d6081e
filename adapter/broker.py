"""The broker process: the store, the listener and the connections, started and stopped."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading

from storage import record_batch
from storage.clock import Clock, SystemClock
from storage.config import StorageConfig
from storage.store import MessageStore

from .config import AdapterConfig
from .connection import KafkaConnection
from .context import BrokerContext
from .groups.coordinator import GroupCoordinator, GroupSettings
from .long_poll import FetchWaiters

log = logging.getLogger(__name__)


class Broker:
    def __init__(
        self, adapter_config: AdapterConfig, storage_config: StorageConfig, clock: Clock | None = None
    ) -> None:
        self.adapter_config = adapter_config
        self.storage_config = storage_config
        self.clock = clock or SystemClock()
        self.store = MessageStore(storage_config, self.clock)
        self.context: BrokerContext | None = None
        self.groups: GroupCoordinator | None = None
        self._server: asyncio.Server | None = None
        self._connections: set[KafkaConnection] = set()

    async def start(self) -> tuple[str, int]:
        """Bind the listener, recover the store, start serving; returns the bound (host, port).

        The socket is bound before the store is opened, so a port conflict fails before any
        recovery work touches the data directory.
        """
        cfg = self.adapter_config
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: KafkaConnection(self.context, self._connections),
            host=cfg.host,
            port=cfg.port,
            reuse_address=True,
            start_serving=False,
        )
        try:
            self.store.open()
            await self.store.start()
        except BaseException:
            self._server.close()
            self._server = None
            raise
        for sock in self._server.sockets:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        host, port = self._server.sockets[0].getsockname()[:2]
        waiters = FetchWaiters()
        self.store.add_append_listener(waiters.notify)
        self.groups = GroupCoordinator(
            self.store,
            self.clock,
            GroupSettings(
                initial_rebalance_delay_ms=cfg.group_initial_rebalance_delay_ms,
                min_session_timeout_ms=cfg.group_min_session_timeout_ms,
                max_session_timeout_ms=cfg.group_max_session_timeout_ms,
                offset_metadata_max_bytes=cfg.offset_metadata_max_bytes,
            ),
        )
        self.groups.start()
        self.context = BrokerContext(
            config=cfg,
            storage_config=self.storage_config,
            store=self.store,
            clock=self.clock,
            waiters=waiters,
            groups=self.groups,
            advertised_host=cfg.advertised_host or (host if host not in ("0.0.0.0", "::") else "127.0.0.1"),
            advertised_port=cfg.advertised_port or port,
        )
        await self._server.start_serving()
        threading.Thread(target=record_batch.warm_up, name="warm-up", daemon=True).start()
        log.info(
            "serving on %s:%d (advertised %s:%d), data in %s, flush %s, recovered %d batches",
            host, port, self.context.advertised_host, self.context.advertised_port,
            self.storage_config.data_dir, self.storage_config.flush, self.store.recovered_entries,
        )
        return host, port

    async def stop(self) -> None:
        """Stop accepting, close connections, flush, checkpoint, mark the shutdown clean."""
        if self._server is not None:
            self._server.close()
            for connection in list(self._connections):
                connection.close()
            await asyncio.sleep(0)
            self._server = None
        if self.groups is not None:
            await self.groups.stop()
        await self.store.close()
