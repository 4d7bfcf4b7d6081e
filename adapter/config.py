"""The adapter layer's one configuration object, built once at start-up."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from .groups.migration import MigrationPolicy

PLAINTEXT = "PLAINTEXT"
SSL = "SSL"
SASL_PLAINTEXT = "SASL_PLAINTEXT"
SASL_SSL = "SASL_SSL"
SECURITY_PROTOCOLS = (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass(frozen=True, slots=True)
class TlsConfig:
    """The TLS side of SSL and SASL_SSL listeners (Kafka's ``ssl.*`` keys, PEM files only)."""

    keystore_location: str  # ssl.keystore.location: PEM with the certificate chain and key
    key_password: str | None = field(default=None, repr=False)  # ssl.key.password
    truststore_location: str | None = None  # ssl.truststore.location: PEM CA certificates
    client_auth: str = "none"  # ssl.client.auth: none, requested or required
    min_version: str = "TLSv1.2"  # the lowest of ssl.enabled.protocols


@dataclass(frozen=True, slots=True)
class ListenerSecurity:
    """One SSL or SASL listener's settings: the broker-wide ones with the listener's own
    ``listener.name.<name>.*`` keys in their place (Kafka's listener prefix)."""

    name: str  # the listener name, upper case as in ``listeners``
    protocol: str
    sasl_mechanisms: tuple[str, ...] = SASL_MECHANISMS
    # per mechanism, the users of the JAAS config that applies to it: (mechanism, ((user, password), ...))
    users: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = field(default=(), repr=False)
    tls: TlsConfig | None = None
    # per mechanism, connections.max.reauth.ms; 0 or less: sessions do not expire (KIP-368)
    max_reauth_ms: tuple[tuple[str, int], ...] = ()

    def users_of(self, mechanism: str) -> dict[str, str]:
        return dict(dict(self.users).get(mechanism, ()))

    def reauth_ms(self, mechanism: str) -> int:
        return dict(self.max_reauth_ms).get(mechanism, 0)


@dataclass(frozen=True, slots=True)
class SecurityConfig:
    """Authentication and authorization settings: broker-wide ones, and each SSL or SASL
    listener's own (``listeners``; a listener missing there gets the broker-wide ones)."""

    sasl_mechanisms: tuple[str, ...] = SASL_MECHANISMS  # sasl.enabled.mechanisms
    # user -> password, from sasl.jaas.config's user_NAME entries and sasl.users.file (and, for
    # DescribeUserScramCredentials, every listener's own JAAS users)
    users: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    tls: TlsConfig | None = None
    listeners: tuple[ListenerSecurity, ...] = ()
    # Bytes a client may send in one frame before it has authenticated (Kafka's default).
    sasl_max_receive_size: int = 524_288  # sasl.server.max.receive.size
    # A failed authentication is answered, and its connection closed, this much later (Kafka's
    # default): a client guessing passwords gets a few answers a second per connection.
    failed_authentication_delay_ms: int = 100  # connection.failed.authentication.delay.ms
    connections_max_reauth_ms: int = 0  # connections.max.reauth.ms: 0 = sessions never expire
    authorizer: bool = False  # authorizer.class.name set: ACLs are enforced
    super_users: tuple[str, ...] = ()  # super.users
    allow_everyone_if_no_acl_found: bool = False  # allow.everyone.if.no.acl.found

    def listener(self, name: str, protocol: str) -> ListenerSecurity:
        """The settings of the listener ``name``; the broker-wide ones for a listener the
        configuration does not describe (KIP-684: no client certificates on SASL_SSL then)."""
        for listener in self.listeners:
            if listener.name == name:
                return listener
        tls = self.tls if protocol in (SSL, SASL_SSL) else None
        if tls is not None and protocol == SASL_SSL:
            tls = replace(tls, client_auth="none")
        return ListenerSecurity(
            name, protocol, self.sasl_mechanisms, tuple((m, self.users) for m in self.sasl_mechanisms), tls,
            tuple((m, self.connections_max_reauth_ms) for m in self.sasl_mechanisms))


@dataclass(frozen=True, slots=True)
class ExtraListener:
    """A further listener besides the primary one (server.properties ``listeners``), e.g. an
    EXTERNAL one for clients outside a container network; Metadata and FindCoordinator
    answer a connection with the advertised address of the listener it came in on."""

    name: str
    host: str
    port: int
    advertised_host: str | None = None  # None = the bound host (127.0.0.1 for 0.0.0.0)
    advertised_port: int | None = None  # None = the bound port
    security_protocol: str = PLAINTEXT  # listener.security.protocol.map


@dataclass(frozen=True, slots=True)
class AdapterConfig:
    """Listener and Kafka-protocol settings (server.properties names in comments)."""

    host: str = "127.0.0.1"  # listeners
    port: int = 9092  # listeners; 0 picks an ephemeral port
    advertised_host: str | None = None  # advertised.listeners; None = the bound host
    advertised_port: int | None = None  # advertised.listeners; None = the bound port
    extra_listeners: tuple[ExtraListener, ...] = ()  # the other entries of listeners
    listener_name: str = PLAINTEXT  # the primary listener's name in listeners
    security_protocol: str = PLAINTEXT  # the primary listener's (listener.security.protocol.map)
    security: SecurityConfig = SecurityConfig()
    node_id: int = 0  # node.id / broker.id
    num_partitions: int = 1  # num.partitions
    auto_create_topics: bool = True  # auto.create.topics.enable
    message_max_bytes: int = 1048588  # message.max.bytes
    compression_type: str = "producer"  # compression.type: the default of the topic config
    socket_request_max_bytes: int = 104857600  # socket.request.max.bytes
    # A connection with no request in flight and no bytes either way for this long is closed
    # (Kafka's connections.max.idle.ms, default 10 minutes).
    connections_max_idle_ms: int = 600_000  # connections.max.idle.ms
    # Connections of all listeners together, and from one client address; a connection
    # above either is closed as it is accepted (Kafka's max.connections and
    # max.connections.per.ip, both Int.MaxValue by default).
    max_connections: int = 2**31 - 1  # max.connections
    max_connections_per_ip: int = 2**31 - 1  # max.connections.per.ip
    # A request frame must arrive whole within this time of its first byte: a client sending
    # one byte a second cannot hold its buffer and connection forever.
    request_read_timeout_ms: int = 60_000  # request.read.timeout.ms (ours)
    # Fetch response bytes written to sockets that have not sent them yet, all connections
    # together; no Fetch is built while more are waiting (adapter.response_budget).
    response_buffer_max_bytes: int = 256 * 1024 * 1024  # response.buffer.max.bytes (ours)
    fetch_max_bytes: int = 57_671_680  # fetch.max.bytes: the most one Fetch response carries
    # Incremental fetch sessions (KIP-227, adapter.fetch_sessions): Kafka's names and defaults;
    # 0 slots = no sessions (every Fetch answered in full).
    max_incremental_fetch_session_cache_slots: int = 1000  # max.incremental.fetch.session.cache.slots
    min_incremental_fetch_session_eviction_ms: int = 120_000  # min.incremental.fetch.session.eviction.ms
    # the partitions of all fetch sessions together (ours: 240-480 bytes each, measured)
    incremental_fetch_session_cache_max_partitions: int = 1_000_000  # incremental.fetch.session.cache.max.partitions
    # Partitions created or deleted per second by CreateTopics, CreatePartitions and
    # DeleteTopics, all clients together (adapter.mutation_quota); None = unlimited.
    controller_mutation_rate: float | None = 1000.0  # controller.mutation.rate (ours)
    controller_quota_window_num: int = 11  # controller.quota.window.num: burst = rate x num x size
    controller_quota_window_size_seconds: int = 1  # controller.quota.window.size.seconds
    # Client quotas (adapter.client_quotas): rates measured over num samples of size seconds.
    quota_window_num: int = 11  # quota.window.num
    quota_window_size_seconds: int = 1  # quota.window.size.seconds
    # Kafka's default is 3000; a broker for tests wants the first rebalance at once.
    group_initial_rebalance_delay_ms: int = 0  # group.initial.rebalance.delay.ms
    group_min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    group_max_session_timeout_ms: int = 1800000  # group.max.session.timeout.ms
    group_max_size: int = 2**31 - 1  # group.max.size: members of a classic group
    # Consumer-protocol groups (KIP-848): Kafka's names, defaults and ranges.
    group_consumer_session_timeout_ms: int = 45_000  # group.consumer.session.timeout.ms
    group_consumer_min_session_timeout_ms: int = 45_000  # group.consumer.min.session.timeout.ms
    group_consumer_max_session_timeout_ms: int = 60_000  # group.consumer.max.session.timeout.ms
    group_consumer_heartbeat_interval_ms: int = 5_000  # group.consumer.heartbeat.interval.ms
    group_consumer_min_heartbeat_interval_ms: int = 5_000  # group.consumer.min.heartbeat.interval.ms
    group_consumer_max_heartbeat_interval_ms: int = 15_000  # group.consumer.max.heartbeat.interval.ms
    group_consumer_max_size: int = 2**31 - 1  # group.consumer.max.size
    group_consumer_assignors: tuple[str, ...] = ("uniform", "range")  # group.consumer.assignors
    # group.consumer.migration.policy: online migration between the classic and consumer protocols
    group_consumer_migration_policy: MigrationPolicy = MigrationPolicy.BIDIRECTIONAL
    # Share groups (KIP-932) membership: Kafka's names, defaults and ranges.
    group_share_session_timeout_ms: int = 45_000  # group.share.session.timeout.ms
    group_share_min_session_timeout_ms: int = 45_000  # group.share.min.session.timeout.ms
    group_share_max_session_timeout_ms: int = 60_000  # group.share.max.session.timeout.ms
    group_share_heartbeat_interval_ms: int = 5_000  # group.share.heartbeat.interval.ms
    group_share_min_heartbeat_interval_ms: int = 5_000  # group.share.min.heartbeat.interval.ms
    group_share_max_heartbeat_interval_ms: int = 15_000  # group.share.max.heartbeat.interval.ms
    group_share_max_size: int = 200  # group.share.max.size
    group_consumer_regex_refresh_interval_ms: int = 600_000  # group.consumer.regex.refresh.interval.ms
    # Share groups (KIP-932): Kafka's ShareGroupConfig names, defaults and ranges.
    group_share_record_lock_duration_ms: int = 30_000  # group.share.record.lock.duration.ms
    group_share_min_record_lock_duration_ms: int = 15_000  # group.share.min.record.lock.duration.ms
    group_share_max_record_lock_duration_ms: int = 60_000  # group.share.max.record.lock.duration.ms
    group_share_delivery_count_limit: int = 5  # group.share.delivery.count.limit
    group_share_partition_max_record_locks: int = 2000  # group.share.partition.max.record.locks
    group_share_max_share_sessions: int = 2000  # group.share.max.share.sessions
    offset_metadata_max_bytes: int = 4096  # offset.metadata.max.bytes
    offsets_topic_num_partitions: int = 50  # offsets.topic.num.partitions (__consumer_offsets, presented)
    transaction_max_timeout_ms: int = 900_000  # transaction.max.timeout.ms
    transactional_id_expiration_ms: int = 604_800_000  # transactional.id.expiration.ms
    # The HTTP port of /metrics, /ready, /healthz and the console (adapter.http_server). Off
    # by default: a broker started for a test suite should open the one Kafka port and no
    # other. 0 picks an ephemeral port (printed on stdout after the started line).
    metrics_port: int | None = None  # metrics.port (ours); None = no HTTP port
    metrics_host: str | None = None  # metrics.host (ours); None = the primary listener's host
    # Host names the metrics port answers browsers by, besides IP literals, localhost and the
    # broker's own names (adapter.watch_port: DNS rebinding); "*" = any.
    metrics_allowed_hosts: tuple[str, ...] = ()  # metrics.allowed.hosts (ours)
