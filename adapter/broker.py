"""The broker process: the store, the listener and the connections, started and stopped."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time

from rmqkafka.rmqsemantics.config import SemanticsConfig
from rmqkafka.rmqsemantics.semantics import Semantics
from rmqkafka.rmqsemantics.share.state_store import ShareStateStore
from rmqkafka.storage import record_batch
from rmqkafka.storage.clock import Clock, SystemClock
from rmqkafka.storage.compaction_cleaner import CompactionSettings
from rmqkafka.storage.config import StorageConfig
from rmqkafka.storage.store import MessageStore

from .broker_configs import BrokerConfigs
from .client_quota_store import ClientQuotaStore
from .client_quotas import ClientQuotas
from .config import AdapterConfig
from .connection import KafkaConnection
from .context import BrokerContext, Live
from .fetch_sessions import FetchSessionCache
from .group_configs import GroupConfigStore
from .groups.consumer_coordinator import ConsumerGroupSettings
from .groups.coordinator import GroupCoordinator, GroupSettings
from .groups.share_coordinator import ShareCoordinatorSettings
from .groups.topic_catalog import SemanticsCatalog
from .long_poll import FetchWaiters
from .mutation_quota import MutationQuota
from .properties import ServerConfig
from .request_stats import RequestStats
from .response_budget import ResponseBudget
from .security.service import Security
from .share.partitions import SharePartitionManager
from .share.sessions import ShareSessionCache
from .share.settings import ShareBrokerDefaults, dead_letter_target, group_settings
from .topic_configs import effective
from .transactions.coordinator import TxnSettings
from .transactions.service import TransactionService

from .topic_compaction import compaction_settings, drop_compaction_of_system_topics

log = logging.getLogger(__name__)


class Broker:
    def __init__(self, server_config: ServerConfig, clock: Clock | None = None) -> None:
        """``server_config``: the static configs (file and command line); the dynamic broker
        configs stored in its data directory go on top (adapter.broker_configs)."""
        self.configs = BrokerConfigs(server_config, self._prepare)
        adapter_config, storage_config = self.adapter_config, self.storage_config
        self.clock = clock or SystemClock()
        self.store = MessageStore(storage_config, self.clock)
        self.store.cleaner.settings_for = self._compaction_settings
        self.context: BrokerContext | None = None
        self.client_quotas: ClientQuotas | None = None
        self.semantics: Semantics | None = None
        self.groups: GroupCoordinator | None = None
        self.shares: SharePartitionManager | None = None
        self.transactions: TransactionService | None = None
        self._servers: list[asyncio.Server] = []  # the primary listener first
        self._contexts: list[BrokerContext] = []  # one per listener, same order
        self._connections: set[KafkaConnection] = set()
        self._sweeper: asyncio.Task | None = None
        self.security: Security | None = None
        self._response_budget = ResponseBudget(adapter_config.response_buffer_max_bytes)
        # The metrics port (adapter.watch_port), when configured: counters for it, its server,
        # its bound address (rmqk serve prints it) and whether Kafka clients are served.
        self.stats = RequestStats() if adapter_config.metrics_port is not None else None
        self._watch = None
        self.metrics_address: tuple[str, int] | None = None
        self.serving = False
        self._live: Live | None = None

    def _compaction_settings(self, topic: str) -> CompactionSettings | None:
        """The log cleaner's rules for ``topic`` (None: not compacted), from its configs now."""
        meta = self.store.topics.get(topic)
        if meta is None:
            return None
        return compaction_settings(topic, meta.configs, self.adapter_config, self.storage_config)

    # The configs in force: replaced wholesale by a dynamic broker config change.
    @property
    def adapter_config(self) -> AdapterConfig:
        return self.configs.current.adapter

    @property
    def storage_config(self) -> StorageConfig:
        return self.configs.current.storage

    @property
    def semantics_config(self) -> SemanticsConfig:
        return self.configs.current.semantics

    def _prepare(self, new: ServerConfig):
        """What BrokerConfigs.alter calls before it stores a change: build what the new
        configs need (a listener's new TLS keys load here, or the change is refused) and
        return the function that swaps it all in. Values read per request or per loop turn
        (message.max.bytes, retention, max.connections, ...) need nothing more: they are read
        from ``configs.current``; the store, the semantics layer and security are told."""
        security = None
        if self.security is not None and new.adapter.security != self.security.config:
            security = self.security.reconfigured(new.adapter.security)

        def swap() -> None:
            self.store.reconfigure(new.storage)
            if self.semantics is not None:
                self.semantics.reconfigure(new.semantics)
            if security is not None and self._live is not None:
                security.credentials.configure(new.adapter.security.users)
                self.security = self._live.security = security

        return swap

    async def start(self) -> tuple[str, int]:
        """Bind the listeners, recover the store, start serving; returns the primary
        listener's bound (host, port).

        The sockets are bound before the store is opened, so a port conflict fails before any
        recovery work touches the data directory. Each listener has its own context, which
        differs only in the advertised address Metadata and FindCoordinator answer with.
        """
        cfg = self.adapter_config
        endpoints = [(cfg.host, cfg.port, cfg.advertised_host, cfg.advertised_port, cfg.security_protocol,
                      cfg.listener_name)] + [
            (x.host, x.port, x.advertised_host, x.advertised_port, x.security_protocol, x.name)
            for x in cfg.extra_listeners
        ]
        self.security = security = Security.open(cfg.security, self.storage_config.data_dir, self.clock.monotonic)
        try:
            for host, port, _, _, protocol, name in endpoints:
                security.listener(name, protocol)  # its TLS keys load now, before recovery
                self._servers.append(await self._bind(host, port, len(self._servers)))
            if self.stats is not None:  # bound before recovery: /ready says 503 meanwhile
                await self._start_watch(self.stats)
            semantics = Semantics(self.semantics_config, self.store, self.storage_config.data_dir,
                                  self.clock, self._delivery_options)
            self.store.open()
            drop_compaction_of_system_topics(self.store.topics)
            await self.store.start()
            semantics.start()
            self.semantics = semantics
        except BaseException:
            for server in self._servers:
                server.close()
            self._servers = []
            self._stop_watch()
            raise
        waiters = FetchWaiters()
        self.store.add_append_listener(waiters.notify)
        group_configs = GroupConfigStore(self.storage_config.data_dir, now_ms=self.clock.now_ms)
        self.groups = GroupCoordinator(
            self.store,
            self.clock,
            GroupSettings(
                initial_rebalance_delay_ms=cfg.group_initial_rebalance_delay_ms,
                min_session_timeout_ms=cfg.group_min_session_timeout_ms,
                max_session_timeout_ms=cfg.group_max_session_timeout_ms,
                max_size=cfg.group_max_size,
                offset_metadata_max_bytes=cfg.offset_metadata_max_bytes,
            ),
            SemanticsCatalog(semantics),
            ConsumerGroupSettings(
                session_timeout_ms=cfg.group_consumer_session_timeout_ms,
                heartbeat_interval_ms=cfg.group_consumer_heartbeat_interval_ms,
                max_size=cfg.group_consumer_max_size,
                assignors=cfg.group_consumer_assignors,
                regex_refresh_interval_ms=cfg.group_consumer_regex_refresh_interval_ms,
                migration_policy=cfg.group_consumer_migration_policy,
            ),
            lambda group_id: group_configs.consumer_timeouts(group_id, self.adapter_config),
            group_configs,
            ShareCoordinatorSettings(
                session_timeout_ms=cfg.group_share_session_timeout_ms,
                heartbeat_interval_ms=cfg.group_share_heartbeat_interval_ms,
                max_size=cfg.group_share_max_size,
            ),
            lambda group_id: group_configs.share_timeouts(group_id, self.adapter_config),
            # the share-partition side (created below, before anything is served)
            on_share_member_left=lambda group_id, member_id: self.shares and self.shares.member_left(group_id,
                                                                                                   member_id),
            on_share_group_deleted=lambda group_id: self.shares and self.shares.group_deleted(group_id),
        )
        self.groups.start()
        self.shares = self._share_manager(semantics, group_configs, waiters)
        share_groups = self.groups.share
        share_groups.restore(self.shares.group_ids_with_state())
        self.shares.use_membership(lambda group_id: not share_groups.member_count(group_id),
                                   share_groups.is_assigned)
        self.transactions = TransactionService(
            self.store, self.clock, self.groups,
            TxnSettings(max_timeout_ms=cfg.transaction_max_timeout_ms,
                        transactional_id_expiration_ms=cfg.transactional_id_expiration_ms),
        )
        self.transactions.open()
        self.transactions.start()
        bound = []
        mutation_quota = MutationQuota(cfg.controller_mutation_rate,
                                       cfg.controller_quota_window_num * cfg.controller_quota_window_size_seconds,
                                       self.clock.now_ms)
        self.client_quotas = client_quotas = ClientQuotas(
            ClientQuotaStore(self.storage_config.data_dir, now_ms=self.clock.now_ms),
            cfg.quota_window_num, cfg.quota_window_size_seconds, self.clock.now_ms,
            cfg.controller_quota_window_num * cfg.controller_quota_window_size_seconds)
        self._live = live = Live(self.configs, security)
        fetch_sessions = FetchSessionCache(cfg.max_incremental_fetch_session_cache_slots,
                                           cfg.min_incremental_fetch_session_eviction_ms, self.clock.now_ms,
                                           self.storage_config.max_partitions,
                                           cfg.incremental_fetch_session_cache_max_partitions)
        for server, (_, _, advertised_host, advertised_port, protocol, name) in zip(self._servers, endpoints):
            host, port = server.sockets[0].getsockname()[:2]
            bound.append((host, port))
            self._contexts.append(
                BrokerContext(
                    live=live,
                    store=self.store,
                    semantics=semantics,
                    clock=self.clock,
                    waiters=waiters,
                    groups=self.groups,
                    transactions=self.transactions,
                    advertised_host=advertised_host or (host if host not in ("0.0.0.0", "::") else "127.0.0.1"),
                    advertised_port=advertised_port or port,
                    listener_protocol=protocol,
                    listener_name=name,
                    mutation_quota=mutation_quota,
                    client_quotas=client_quotas,
                    shares=self.shares,
                    fetch_sessions=fetch_sessions,
                )
            )
        self.context = self._contexts[0]
        for server in self._servers:
            await server.start_serving()
        self.serving = True
        self._sweeper = asyncio.create_task(self._sweep_connections(), name="connection-sweep")
        threading.Thread(target=record_batch.warm_up, name="warm-up", daemon=True).start()
        log.info(
            "serving on %s, data in %s, flush %s, recovered %d batches",
            ", ".join(
                f"{c.listener_protocol}://{h}:{p} (advertised {c.advertised_host}:{c.advertised_port})"
                for (h, p), c in zip(bound, self._contexts)
            ),
            self.storage_config.data_dir, self.storage_config.flush, self.store.recovered_entries,
        )
        return bound[0]

    def _share_manager(self, semantics: Semantics, group_configs: GroupConfigStore,
                       waiters: FetchWaiters) -> SharePartitionManager:
        """Share groups' share-partitions over ``__share_group_state`` (replayed here), with
        the broker's group.share.* defaults under each group's configs."""
        cfg = self.adapter_config
        defaults = ShareBrokerDefaults(
            record_lock_duration_ms=cfg.group_share_record_lock_duration_ms,
            delivery_count_limit=cfg.group_share_delivery_count_limit,
            partition_max_record_locks=cfg.group_share_partition_max_record_locks,
            max_share_sessions=cfg.group_share_max_share_sessions,
            delay_levels_ms=self.semantics_config.delay_levels_ms,
        )
        state = ShareStateStore(self.store, self.clock)
        state.open()
        shares = SharePartitionManager(
            semantics, self.clock, state, lambda group_id: group_settings(group_configs.get(group_id), defaults),
            ShareSessionCache(defaults.max_share_sessions), lambda topic, partition: waiters.notify(topic, partition),
            dead_letter_target=lambda group_id: dead_letter_target(group_configs.get(group_id)))
        shares.start()
        return shares

    async def _start_watch(self, stats: RequestStats) -> None:
        # imported here: prometheus_client is loaded only with a metrics port
        from .metrics import time_fsyncs
        from .watch_port import WatchPort

        cfg = self.adapter_config
        if not time_fsyncs(self.store, stats.fsync):
            log.warning("fsync latency is not measured: the store has no _fdatasync to time")
        self._watch = WatchPort(
            stats, lambda: self.context if self.serving else None, lambda: self.store.failure,
            lambda: len(self._connections), self._plaintext_bootstrap, allowed_hosts=self._own_host_names())
        host = cfg.metrics_host if cfg.metrics_host is not None else cfg.host
        self.metrics_address = await self._watch.start(host, cfg.metrics_port)

    def _own_host_names(self) -> frozenset[str]:
        """The names the console answers (watch_port's Host check): metrics.allowed.hosts,
        and the names the broker is configured or known by (its listeners' hosts and
        advertised hosts, metrics.host, this machine's host name)."""
        cfg = self.adapter_config
        names = {cfg.host, cfg.advertised_host, cfg.metrics_host, socket.gethostname(), socket.getfqdn(),
                 *cfg.metrics_allowed_hosts}
        for listener in cfg.extra_listeners:
            names.update((listener.host, listener.advertised_host))
        return frozenset(name.lower().rstrip(".") for name in names if name)

    def _stop_watch(self) -> None:
        if self._watch is not None:
            self._watch.close()
            self._watch = None

    def _plaintext_bootstrap(self) -> str | None:
        """HOST:PORT of a PLAINTEXT listener, for the console's DLQ resend (a child rmqk)."""
        for ctx in self._contexts:
            if ctx.listener_protocol == "PLAINTEXT":
                host = ctx.advertised_host
                return f"[{host}]:{ctx.advertised_port}" if ":" in host else f"{host}:{ctx.advertised_port}"
        return None

    def _delivery_options(self, configs: dict[str, str]) -> dict:
        """How delivered records are appended to a topic with these configs: its timestamp
        type (they keep their CreateTime, or get the append time)."""
        kind = effective("message.timestamp.type", configs, self.adapter_config, self.storage_config)
        return {"log_append_time": kind == "LogAppendTime"}

    async def _bind(self, host: str, port: int, index: int) -> asyncio.Server:
        """A listening socket; TLS, where the listener has it, is the connection's to start
        (KafkaConnection), so that a failed handshake is known with its peer."""
        server = await asyncio.get_running_loop().create_server(
            lambda: KafkaConnection(self._contexts[index], self._connections, self._response_budget, self.stats),
            host=host,
            port=port,
            reuse_address=True,
            start_serving=False,
        )
        for sock in server.sockets:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return server

    async def _sweep_connections(self) -> None:
        """Close idle connections and those stuck mid-request (KafkaConnection.stalled)."""
        idle_s = self.adapter_config.connections_max_idle_ms / 1000
        read_s = self.adapter_config.request_read_timeout_ms / 1000
        while True:
            await asyncio.sleep(min(1.0, idle_s / 4, read_s / 4))
            now = time.monotonic()
            for connection in list(self._connections):
                reason = connection.stalled(now, idle_s, read_s)
                if reason is not None:
                    log.info("closing %s: %s", connection.peer, reason)
                    connection.close()

    async def stop(self, answer_within: float = 0.0) -> None:
        """Stop accepting, close connections, flush, checkpoint, mark the shutdown clean.

        ``answer_within``: seconds the connections have to write the answers of the requests
        they hold before they are closed (after a storage failure, the produces that were
        waiting for the failed fsync are answered KAFKA_STORAGE_ERROR)."""
        self.serving = False  # /ready answers 503 from here on; the metrics port closes last
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        if self._servers:
            for server in self._servers:
                server.close()
            connections = list(self._connections)
            if answer_within > 0 and connections:
                await asyncio.wait([asyncio.ensure_future(c.close_when_answered(answer_within))
                                    for c in connections])
            for connection in connections:
                connection.close()
            await asyncio.sleep(0)
            self._servers = []
        if self.transactions is not None:
            await self.transactions.stop()
        if self.shares is not None:
            await self.shares.stop()
        if self.groups is not None:
            await self.groups.stop()
        if self.client_quotas is not None:
            self.client_quotas.store.close()
        if self.semantics is not None:
            await self.semantics.stop()
        await self.store.close()
        if self.semantics is not None:
            self.semantics.scheduler.close()
            self.semantics = None
        self._stop_watch()
