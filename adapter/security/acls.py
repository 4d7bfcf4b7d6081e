"""ACL bindings, the filters that find them, and where they are kept.

A binding is Kafka's AclBinding: a resource pattern (type, name, LITERAL or PREFIXED), a
principal (``User:alice`` or ``User:*``), a host (an IP address or ``*``), an operation and
ALLOW or DENY. Codes are Kafka's (ResourceType, PatternType, AclOperation,
AclPermissionType), so they go over the wire unchanged.

:class:`AclStore` keeps them in the data directory as a JournaledMap (``acl_bindings.json``
and ``acl_bindings.journal``; storage.journaled_map has the format and its crash and damage
behaviour): a change is durable when CreateAcls / DeleteAcls answer, and damage to one file
costs no change. ``acls.json`` (one file replaced whole, an older version's) is imported once.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from rmqkafka.storage.journaled_map import LEGACY_IMPORTED, JournaledMap, import_legacy_file

from .principal import Principal

FILE_NAME = "acl_bindings.json"
LEGACY_FILE_NAME = "acls.json"
_PREFIX = "b/"  # an entry per binding: "b/" + the binding as canonical JSON
WILDCARD = "*"  # a literal resource name or host matching every one
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class PermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class InvalidAcl(ValueError):
    """A binding or filter Kafka refuses with INVALID_REQUEST; the message says why."""


@dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: PermissionType

    def validate(self) -> None:
        """Kafka's checks on a new ACL (AclControlManager.validateNewAcl)."""
        if self.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            raise InvalidAcl(f"Invalid resourceType {self.resource_type.name}")
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise InvalidAcl(f"Invalid patternType {self.pattern_type.name}")
        if self.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
            raise InvalidAcl(f"Invalid operation {self.operation.name}")
        if self.permission in (PermissionType.ANY, PermissionType.UNKNOWN):
            raise InvalidAcl(f"Invalid permissionType {self.permission.name}")
        if not self.resource_name:
            raise InvalidAcl("Resource name should not be empty")
        if self.resource_type is ResourceType.CLUSTER and self.resource_name != CLUSTER_NAME:
            raise InvalidAcl(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
        Principal.parse(self.principal)  # PrincipalError is a ValueError: INVALID_REQUEST
        if not self.host:
            raise InvalidAcl("Host should not be empty; use * for every host")

    def applies_to(self, resource_type: ResourceType, name: str) -> bool:
        """Whether this binding is about that resource (the authorizer's match)."""
        if self.resource_type != resource_type:
            return False
        if self.pattern_type is PatternType.PREFIXED:
            return name.startswith(self.resource_name)
        return self.resource_name == name or self.resource_name == WILDCARD

    def to_json(self) -> dict:
        data = asdict(self)
        for key in ("resource_type", "pattern_type", "operation", "permission"):
            data[key] = int(data[key])
        return data

    @classmethod
    def from_json(cls, data: dict) -> AclBinding:
        return cls(ResourceType(data["resource_type"]), data["resource_name"], PatternType(data["pattern_type"]),
                   data["principal"], data["host"], AclOperation(data["operation"]),
                   PermissionType(data["permission"]))


@dataclass(frozen=True, slots=True)
class AclFilter:
    """DescribeAcls / DeleteAcls filter: None or ANY matches every value of a field."""

    resource_type: ResourceType
    resource_name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission: PermissionType

    def validate(self) -> None:
        for field, value in (("resourceType", self.resource_type), ("patternType", self.pattern_type),
                             ("operation", self.operation), ("permissionType", self.permission)):
            if value == 0:
                raise InvalidAcl(f"Filter {field} is UNKNOWN")

    def matches(self, binding: AclBinding) -> bool:
        return (self._resource_matches(binding)
                and self.principal in (None, binding.principal)
                and self.host in (None, binding.host)
                and self.operation in (AclOperation.ANY, binding.operation)
                and self.permission in (PermissionType.ANY, binding.permission))

    def _resource_matches(self, binding: AclBinding) -> bool:
        """Kafka's ResourcePatternFilter.matches, MATCH included: every pattern that would
        apply to the named resource."""
        if self.resource_type not in (ResourceType.ANY, binding.resource_type):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, binding.pattern_type):
            return False
        if self.resource_name is None:
            return True
        if self.pattern_type in (PatternType.ANY, binding.pattern_type):
            return self.resource_name == binding.resource_name
        if binding.pattern_type is PatternType.LITERAL:
            return binding.resource_name in (self.resource_name, WILDCARD)
        return self.resource_name.startswith(binding.resource_name)


class AclStore:
    """Every ACL binding, durable in ``acl_bindings.json`` and its journal (see the module
    docstring); ``version`` changes with each change."""

    def __init__(self, data_dir: Path) -> None:
        self._map = JournaledMap(data_dir / FILE_NAME, _check)
        import_legacy_file(self._map, data_dir / LEGACY_FILE_NAME, _legacy_entries)
        self._bindings: dict[AclBinding, None] = dict.fromkeys(
            AclBinding.from_json(entry) for name, entry in self._map.entries.items() if name != LEGACY_IMPORTED)
        self.version = 0

    def __iter__(self):
        return iter(list(self._bindings))

    def __len__(self) -> int:
        return len(self._bindings)

    def add(self, bindings: Iterable[AclBinding]) -> None:
        """Durable when this returns; a failed write (OSError) changes nothing."""
        new = [b for b in dict.fromkeys(bindings) if b not in self._bindings]
        if new:
            self._map.commit({_entry_name(b): b.to_json() for b in new})
            self._bindings.update(dict.fromkeys(new))
            self.version += 1

    def remove(self, bindings: Iterable[AclBinding]) -> None:
        """Durable when this returns; a failed write (OSError) changes nothing."""
        gone = [b for b in dict.fromkeys(bindings) if b in self._bindings]
        if gone:
            self._map.commit({}, [_entry_name(b) for b in gone])
            for binding in gone:
                del self._bindings[binding]
            self.version += 1

    def find(self, acl_filter: AclFilter) -> list[AclBinding]:
        return [binding for binding in self._bindings if acl_filter.matches(binding)]


def _entry_name(binding: AclBinding) -> str:
    return _PREFIX + json.dumps(binding.to_json(), sort_keys=True, separators=(",", ":"))


def _check(name: str, entry: dict) -> None:
    if name != LEGACY_IMPORTED:
        AclBinding.from_json(entry)


def _legacy_entries(data: dict) -> dict[str, dict]:
    return {_entry_name(binding): binding.to_json()
            for binding in (AclBinding.from_json(item) for item in data["acls"])}
