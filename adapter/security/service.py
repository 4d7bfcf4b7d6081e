"""Everything security the broker builds once at start-up, shared by every listener."""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..config import ListenerSecurity, SecurityConfig
from .acls import AclStore
from .authorizer import Authorizer
from .credentials import Credentials, Users
from .events import AuthenticationEvents
from .tls import server_context


@dataclass(frozen=True, slots=True)
class ListenerAuth:
    """One listener's TLS context and, per SASL mechanism, the users it accepts."""

    config: ListenerSecurity
    tls_context: ssl.SSLContext | None
    users: dict[str, Users]


@dataclass(frozen=True, slots=True)
class Security:
    config: SecurityConfig
    credentials: Credentials
    authorizer: Authorizer
    events: AuthenticationEvents = field(default_factory=AuthenticationEvents)
    _listeners: dict[str, ListenerAuth] = field(default_factory=dict)

    @classmethod
    def open(cls, config: SecurityConfig, data_dir: Path,
             monotonic: Callable[[], float] = time.monotonic) -> Security:
        """Load the stored credentials and ACLs and every configured listener's TLS keys
        (TlsConfigError, or the storage layer's DamagedFileError, when one cannot be used)."""
        acls = AclStore(data_dir)
        security = cls(
            config=config,
            credentials=Credentials(dict(config.users), data_dir),
            authorizer=Authorizer(acls, enabled=config.authorizer, super_users=config.super_users,
                                  allow_everyone_if_no_acl_found=config.allow_everyone_if_no_acl_found),
            events=AuthenticationEvents(monotonic),
        )
        for listener in config.listeners:
            security.listener(listener.name, listener.protocol)
        return security

    def reconfigured(self, config: SecurityConfig) -> Security:
        """A Security for new security settings (dynamic broker configs), sharing this one's
        credential store, ACLs and counters; every configured listener's TLS keys load now
        (TlsConfigError when one cannot be used). Connections already open keep the
        listener settings they were accepted with, as in Kafka."""
        security = replace(self, config=config, _listeners={})
        for listener in config.listeners:
            security.listener(listener.name, listener.protocol)
        return security

    def listener(self, name: str, protocol: str) -> ListenerAuth:
        """The listener ``name``'s authentication, built at its first use."""
        auth = self._listeners.get(name)
        if auth is None:
            settings = self.config.listener(name, protocol)
            auth = self._listeners[name] = ListenerAuth(
                settings,
                server_context(settings.tls) if settings.tls is not None else None,
                {m: self.credentials.users(settings.users_of(m)) for m in settings.sasl_mechanisms},
            )
        return auth
