"""What every request handler may use: configs, the store, the semantics layer over it, the
clock, the long-poll waiters, the group and transaction coordinators, the share-partitions, and who is asking
(``SESSION``, set per request by the connection) with what they may do (``allowed``; on a
subscription view, that includes the rights on its source: adapter/view_access.py)."""

from __future__ import annotations

import contextvars
from dataclasses import dataclass, field

from rmqkafka.rmqsemantics.semantics import Semantics
from rmqkafka.rmqsemantics.views import View
from rmqkafka.storage.clock import Clock
from rmqkafka.storage.config import StorageConfig
from rmqkafka.storage.store import MessageStore

from .broker_configs import BrokerConfigs
from .client_quota_store import ClientQuotaStore
from .client_quotas import CHARGE, ClientQuotas
from .config import AdapterConfig
from .fetch_sessions import FetchSessionCache
from .groups.coordinator import GroupCoordinator
from .long_poll import FetchWaiters
from .mutation_quota import MutationQuota, MutationQuotas
from .security.acls import AclOperation, ResourceType
from .security.authentication import Authentication
from .security.principal import ANONYMOUS, Session
from .security.service import Security
from .share.partitions import SharePartitionManager
from .transactions.service import TransactionService
from .view_access import SOURCE_OPERATION

# The identity and address of the connection whose request is being handled.
SESSION: contextvars.ContextVar[Session] = contextvars.ContextVar("session", default=Session(ANONYMOUS, ""))
# Its authentication state, for the SaslHandshake and SaslAuthenticate handlers.
AUTHENTICATION: contextvars.ContextVar[Authentication | None] = contextvars.ContextVar(
    "authentication", default=None)


@dataclass(slots=True)
class Live:
    """What a dynamic broker config change replaces: the configs in force (``configs.current``)
    and the security built from them. Every listener's context shares one, so a change reaches
    every connection, open ones included, at its next request."""

    configs: BrokerConfigs
    security: Security


@dataclass(frozen=True, slots=True)
class BrokerContext:
    live: Live
    store: MessageStore
    semantics: Semantics
    clock: Clock
    waiters: FetchWaiters
    groups: GroupCoordinator
    transactions: TransactionService
    advertised_host: str
    advertised_port: int
    listener_protocol: str = "PLAINTEXT"
    listener_name: str = "PLAINTEXT"
    # partitions CreateTopics/CreatePartitions/DeleteTopics may change per second, all
    # listeners together (adapter.mutation_quota)
    mutation_quota: MutationQuota = field(default_factory=lambda: MutationQuota(None, 11, lambda: 0))
    # the client quotas in force and every client's measured rates (adapter.client_quotas)
    client_quotas: ClientQuotas = field(
        default_factory=lambda: ClientQuotas(ClientQuotaStore(None), 11, 1, lambda: 0))
    # share groups' share-partitions and share sessions (adapter.share); None in contexts
    # built without a running broker
    shares: SharePartitionManager | None = None
    # incremental fetch sessions (KIP-227), all listeners together; contexts built without a
    # running broker open none
    fetch_sessions: FetchSessionCache = field(default_factory=lambda: FetchSessionCache(0, 120_000, lambda: 0))

    def mutation_quotas(self) -> MutationQuota | MutationQuotas:
        """What the current request's partition mutations count against: the broker's
        budget, and the client's ``controller_mutation_rate`` quota when one applies."""
        charge = CHARGE.get()
        own = None if charge is None else self.client_quotas.mutation_quota(charge.user, charge.client_id)
        return self.mutation_quota if own is None else MutationQuotas(self.mutation_quota, own)

    @property
    def config(self) -> AdapterConfig:
        return self.live.configs.current.adapter

    @property
    def storage_config(self) -> StorageConfig:
        return self.live.configs.current.storage

    @property
    def security(self) -> Security:
        return self.live.security

    @property
    def broker_configs(self) -> BrokerConfigs:
        return self.live.configs

    def allowed(self, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        """Whether the current request's principal may do ``operation`` on the resource; on a
        view, reading or describing also needs the matching right on its source."""
        return self.allowed_to(SESSION.get(), operation, resource_type, name)

    def allowed_to(self, session: Session, operation: AclOperation, resource_type: ResourceType,
                   name: str) -> bool:
        """``allowed`` for a given session: for decisions taken later on a client's behalf
        (a consumer group resolving its member's regular expression at another heartbeat)."""
        authorizer = self.security.authorizer
        if not authorizer.allowed(session, operation, resource_type, name):
            return False
        if not authorizer.enabled or resource_type is not ResourceType.TOPIC:
            return True
        on_source = SOURCE_OPERATION.get(operation)
        view = None if on_source is None else self.semantics.views.get(name)
        return view is None or authorizer.allowed(session, on_source, ResourceType.TOPIC, view.source)

    def may_see_source(self, view: View) -> bool:
        """Whether an error message may name the view's source to the current caller."""
        return self.allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, view.source)

    def allowed_on_some(self, operation: AclOperation, resource_type: ResourceType) -> bool:
        return self.security.authorizer.allowed_on_some(SESSION.get(), operation, resource_type)
