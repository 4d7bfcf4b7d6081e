"""May this principal do that? Kafka's StandardAuthorizer rules over the stored ACLs.

For one (principal, host, operation, resource):

1. a super user (``super.users``) may do anything;
2. a matching DENY for the operation or ALL refuses;
3. a matching ALLOW for the operation or ALL grants; READ, WRITE, DELETE and ALTER imply
   DESCRIBE, and ALTER_CONFIGS implies DESCRIBE_CONFIGS;
4. with no ACL at all on the resource, ``allow.everyone.if.no.acl.found`` decides (false by
   default, as in Kafka);
5. otherwise refused.

A binding matches when its pattern applies to the resource (the same literal name, the
literal ``*``, or a prefix), its principal is the session's or ``User:*``, and its host is
the client's address or ``*``. Without ``authorizer.class.name`` every request is allowed,
as in Kafka. Answers are cached until the ACLs change.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from .acls import (
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclOperation,
    AclStore,
    PatternType,
    PermissionType,
    ResourceType,
)
from .principal import Session

log = logging.getLogger("rmqkafka.authorizer")

_IMPLIES = {
    AclOperation.DESCRIBE: {AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE,
                            AclOperation.DELETE, AclOperation.ALTER},
    AclOperation.DESCRIBE_CONFIGS: {AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS},
}
_CACHE_LIMIT = 100_000


class Authorizer:
    def __init__(self, acls: AclStore, *, enabled: bool, super_users: Iterable[str] = (),
                 allow_everyone_if_no_acl_found: bool = False) -> None:
        self.acls = acls
        self.enabled = enabled
        self._super_users = frozenset(super_users)
        self._allow_if_none = allow_everyone_if_no_acl_found
        self._cache: dict[tuple, bool] = {}
        self._cache_version = -1

    def allowed(self, session: Session, operation: AclOperation, resource_type: ResourceType,
                name: str) -> bool:
        if not self.enabled:
            return True
        if self._cache_version != self.acls.version or len(self._cache) > _CACHE_LIMIT:
            self._cache = {}
            self._cache_version = self.acls.version
        key = (session, operation, resource_type, name)
        answer = self._cache.get(key)
        if answer is None:
            answer = self._cache[key] = self._decide(session, operation, resource_type, name)
            if not answer:
                log.info("Principal = %s is Denied operation = %s from host = %s on resource = %s:%s",
                         session.principal, operation.name, session.client_host, resource_type.name, name)
        return answer

    def _decide(self, session: Session, operation: AclOperation, resource_type: ResourceType,
                name: str) -> bool:
        principal = str(session.principal)
        if principal in self._super_users:
            return True
        on_resource = [b for b in self.acls if b.applies_to(resource_type, name)]
        mine = [b for b in on_resource
                if b.principal in (principal, WILDCARD_PRINCIPAL) and b.host in (session.client_host, WILDCARD)]
        if any(b.permission is PermissionType.DENY and b.operation in (AclOperation.ALL, operation) for b in mine):
            return False
        granting = _IMPLIES.get(operation, {operation}) | {AclOperation.ALL}
        if any(b.permission is PermissionType.ALLOW and b.operation in granting for b in mine):
            return True
        return not on_resource and self._allow_if_none

    def allowed_on_some(self, session: Session, operation: AclOperation, resource_type: ResourceType) -> bool:
        """Whether the principal may do ``operation`` on at least one resource of the type
        (Kafka's authorizeByResourceType, e.g. an idempotent producer with WRITE on some
        topic): an ALLOW for it on any pattern, unless a DENY on every name (``*`` or the
        empty prefix) takes it away."""
        if not self.enabled or str(session.principal) in self._super_users:
            return True
        principal = str(session.principal)
        mine = [b for b in self.acls if b.resource_type == resource_type
                and b.principal in (principal, WILDCARD_PRINCIPAL) and b.host in (session.client_host, WILDCARD)
                and b.operation in (AclOperation.ALL, operation)]
        if any(b.permission is PermissionType.DENY and _covers_everything(b.pattern_type, b.resource_name)
               for b in mine):
            return False
        if any(b.permission is PermissionType.ALLOW for b in mine):
            return True
        return self._allow_if_none and not any(b.resource_type == resource_type for b in self.acls)


def _covers_everything(pattern: PatternType, name: str) -> bool:
    return (pattern is PatternType.LITERAL and name == WILDCARD) or (pattern is PatternType.PREFIXED and name == "")
