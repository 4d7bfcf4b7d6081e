"""The adapter layer's one configuration object, built once at start-up."""

from __future__ import annotations

from dataclasses import dataclass, field

PLAINTEXT = "PLAINTEXT"
SSL = "SSL"
SASL_PLAINTEXT = "SASL_PLAINTEXT"
SASL_SSL = "SASL_SSL"
SECURITY_PROTOCOLS = (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)


@dataclass(frozen=True, slots=True)
class TlsConfig:
    """The TLS side of SSL and SASL_SSL listeners (Kafka's ``ssl.*`` keys, PEM files only)."""

    keystore_location: str  # ssl.keystore.location: PEM with the certificate chain and key
    key_password: str | None = field(default=None, repr=False)  # ssl.key.password
    truststore_location: str | None = None  # ssl.truststore.location: PEM CA certificates
    client_auth: str = "none"  # ssl.client.auth: none, requested or required
    min_version: str = "TLSv1.2"  # the lowest of ssl.enabled.protocols


@dataclass(frozen=True, slots=True)
class SecurityConfig:
    """Authentication and authorization settings shared by every listener."""

    sasl_mechanisms: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")  # sasl.enabled.mechanisms
    # user -> password, from sasl.jaas.config's user_NAME entries and sasl.users.file
    users: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    tls: TlsConfig | None = None
    # Bytes a client may send in one frame before it has authenticated (Kafka's default).
    sasl_max_receive_size: int = 524_288  # sasl.server.max.receive.size
    authorizer: bool = False  # authorizer.class.name set: ACLs are enforced
    super_users: tuple[str, ...] = ()  # super.users
    allow_everyone_if_no_acl_found: bool = False  # allow.everyone.if.no.acl.found


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
    # A request frame must arrive whole within this time of its first byte: a client sending
    # one byte a second cannot hold its buffer and connection forever.
    request_read_timeout_ms: int = 60_000  # request.read.timeout.ms (ours)
    # Fetch response bytes written to sockets that have not sent them yet, all connections
    # together; no Fetch is built while more are waiting (adapter.response_budget).
    response_buffer_max_bytes: int = 256 * 1024 * 1024  # response.buffer.max.bytes (ours)
    fetch_max_bytes: int = 57_671_680  # fetch.max.bytes: the most one Fetch response carries
    # Partitions created or deleted per second by CreateTopics, CreatePartitions and
    # DeleteTopics, all clients together (adapter.mutation_quota); None = unlimited.
    controller_mutation_rate: float | None = 1000.0  # controller.mutation.rate (ours)
    controller_quota_window_num: int = 11  # controller.quota.window.num: burst = rate x num x size
    controller_quota_window_size_seconds: int = 1  # controller.quota.window.size.seconds
    # Kafka's default is 3000; a broker for tests wants the first rebalance at once.
    group_initial_rebalance_delay_ms: int = 0  # group.initial.rebalance.delay.ms
    group_min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    group_max_session_timeout_ms: int = 1800000  # group.max.session.timeout.ms
    offset_metadata_max_bytes: int = 4096  # offset.metadata.max.bytes
    transaction_max_timeout_ms: int = 900_000  # transaction.max.timeout.ms
    transactional_id_expiration_ms: int = 604_800_000  # transactional.id.expiration.ms
    # The HTTP port of /metrics, /ready, /healthz and the console (adapter.http_server). Off
    # by default: a broker started for a test suite should open the one Kafka port and no
    # other. 0 picks an ephemeral port (printed on stdout after the started line).
    metrics_port: int | None = None  # metrics.port (ours); None = no HTTP port
    metrics_host: str | None = None  # metrics.host (ours); None = the primary listener's host
