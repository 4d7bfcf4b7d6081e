"""Everything security the broker builds once at start-up, shared by every listener."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

from ..config import SecurityConfig
from .acls import AclStore
from .authorizer import Authorizer
from .credentials import Credentials
from .tls import server_context


@dataclass(frozen=True, slots=True)
class Security:
    config: SecurityConfig
    credentials: Credentials
    authorizer: Authorizer
    tls_context: ssl.SSLContext | None

    @classmethod
    def open(cls, config: SecurityConfig, data_dir: Path) -> Security:
        """Load the stored credentials and ACLs and the TLS keys (TlsConfigError, or the
        storage layer's DamagedFileError, when one cannot be used)."""
        acls = AclStore(data_dir)
        return cls(
            config=config,
            credentials=Credentials(dict(config.users), data_dir),
            authorizer=Authorizer(acls, enabled=config.authorizer, super_users=config.super_users,
                                  allow_everyone_if_no_acl_found=config.allow_everyone_if_no_acl_found),
            tls_context=server_context(config.tls) if config.tls is not None else None,
        )
