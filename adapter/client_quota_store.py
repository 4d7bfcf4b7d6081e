"""Client quotas as Kafka stores them (KIP-55, KIP-546): which entity has which quota, the
rules AlterClientQuotas and DescribeClientQuotas check, and the quota that applies to a
client.

Entities: a user, a client id, a user with a client id, or an IP address; each name may be
the default (``<default>`` in kafka-configs, null on the wire). A user is the principal's name
as the authorizer sees it (``User:alice`` is user ``alice``: a SCRAM or PLAIN user, a
certificate's name, ``ANONYMOUS`` without authentication). Keys per entity, Kafka's
(QuotaConfig): ``producer_byte_rate`` and ``consumer_byte_rate`` (whole numbers),
``request_percentage`` and ``controller_mutation_rate`` on users and client ids;
``connection_creation_rate`` (a whole number) on IPs. Every value must be above 0.

Precedence (KIP-55), for a (user, client id) pair and one key, the first entity that has
the key: user+client-id, user+default client-id, user, default user+client-id, default
user+default client-id, default user, client-id, default client-id. The matched level also
says who shares the measured rate (Kafka's metric tags): the user's clients share a user
quota, each client id has its own rate under a client-id or a per-pair quota.

IP quotas (``connection_creation_rate``, KIP-612): an address's own, else the default IP's.

Errors are ``QuotaRequestError`` with Kafka's code and message (ClientQuotaControlManager,
ClientQuotasImage). Deviation: an IP entity must be an address; Kafka also takes a host name
it can resolve, which would cost this broker's one event loop a DNS lookup.

``ClientQuotaStore`` keeps them in the data directory as a JournaledMap
(``client_quotas.json`` and ``client_quotas.journal``; without a data directory, in memory).
An entry's name is ``q/`` + the entity as JSON (sorted [type, name] pairs), its object
{key: value}; an entity without quotas has no entry.
"""

from __future__ import annotations

import ipaddress
import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from kio.schema.errors import ErrorCode
from rmqkafka.storage.journaled_map import JournaledMap

FILE_NAME = "client_quotas.json"
USER, CLIENT_ID, IP = "user", "client-id", "ip"
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"
# key -> whether it must be a whole number (Kafka's LONG and INT types)
CLIENT_KEYS = {PRODUCER_BYTE_RATE: True, CONSUMER_BYTE_RATE: True, REQUEST_PERCENTAGE: False,
               CONTROLLER_MUTATION_RATE: False}
IP_KEYS = {CONNECTION_CREATION_RATE: True}
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2
_PREFIX = "q/"
_APPLIED_CACHED = 100_000
MAX_ENTITIES = 100_000  # ours: AlterClientQuotas refuses a new entity past it
_INT_MAX = 2**31 - 1
_LONG_MAX = 2**63 - 1

Entity = tuple[tuple[str, str | None], ...]  # sorted (type, name); a None name is the default


class QuotaRequestError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def entity_text(pairs: Iterable[tuple[str, str | None]]) -> str:
    """Kafka's ClientQuotaEntity.toString."""
    return "ClientQuotaEntity(entries={" + ", ".join(f"{t}={n}" for t, n in pairs) + "})"


def validate_entity(pairs: list[tuple[str, str | None]]) -> Entity:
    """The entity of an alteration, or QuotaRequestError (Kafka's validateEntity and
    configKeysForEntityType)."""
    if not pairs:
        raise QuotaRequestError(ErrorCode.invalid_request, "Invalid empty client quota entity")
    seen: dict[str, str | None] = {}
    for kind, name in pairs:
        if kind in seen:
            raise QuotaRequestError(ErrorCode.invalid_request,
                                    f"Invalid client quota entity, duplicate entity entry {kind}")
        if kind not in (USER, CLIENT_ID, IP):
            raise QuotaRequestError(ErrorCode.invalid_request, f"Unhandled client quota entity type: {kind}")
        if name is not None and not name:
            raise QuotaRequestError(ErrorCode.invalid_request, f"Empty {kind} not supported")
        seen[kind] = name
    if IP in seen:
        if len(seen) > 1:
            raise QuotaRequestError(ErrorCode.invalid_request, "Invalid quota entity combination, IP entity should"
                                    "not be combined with User or ClientId")  # sic, Kafka's
        if seen[IP] is not None:
            try:
                ipaddress.ip_address(seen[IP])
            except ValueError:
                raise QuotaRequestError(ErrorCode.invalid_request,
                                        f"{seen[IP]} is not a valid IP or resolvable host.") from None
    return tuple(sorted(seen.items()))


def validate_value(entity: Entity, key: str, value: float) -> None:
    """Kafka's validateQuotaKeyValue."""
    keys = IP_KEYS if entity[0][0] == IP else CLIENT_KEYS
    whole = keys.get(key)
    if whole is None:
        raise QuotaRequestError(ErrorCode.invalid_request, f"Invalid configuration key {key}")
    if not value > 0.0:
        raise QuotaRequestError(ErrorCode.invalid_request, f"Quota {key} must be greater than 0")
    if whole:
        if value > (_INT_MAX if keys is IP_KEYS else _LONG_MAX):
            kind = "an INT" if keys is IP_KEYS else "a LONG"
            raise QuotaRequestError(ErrorCode.invalid_request, f"Proposed value for {key} is too large for {kind}.")
        if abs(value % 1.0) > 1e-6:
            raise QuotaRequestError(ErrorCode.invalid_request, f"{key} cannot be a fractional value.")


@dataclass(frozen=True, slots=True)
class Applied:
    """The quota that applies to a client for one key: its bound and who shares the rate
    (Kafka's metric tags: user, client id; "" where the level does not split by it)."""

    bound: float
    user: str
    client_id: str


def _levels(user: str, client_id: str) -> list[tuple[Entity, str, str]]:
    """KIP-55's eight levels, first to last: (entity, tag user, tag client id)."""
    return [
        (((CLIENT_ID, client_id), (USER, user)), user, client_id),
        (((CLIENT_ID, None), (USER, user)), user, client_id),
        (((USER, user),), user, ""),
        (((CLIENT_ID, client_id), (USER, None)), user, client_id),
        (((CLIENT_ID, None), (USER, None)), user, client_id),
        (((USER, None),), user, ""),
        (((CLIENT_ID, client_id),), "", client_id),
        (((CLIENT_ID, None),), "", client_id),
    ]


class ClientQuotaStore:
    """Every entity's quotas, durable in ``<data dir>/client_quotas.json`` and its journal
    (storage.journaled_map: format, crash and damage behaviour)."""

    def __init__(self, data_dir: Path | None, snapshot_interval_ms: int = 1000,
                 now_ms: Callable[[], int] | None = None) -> None:
        self._map = None if data_dir is None else JournaledMap(
            Path(data_dir) / FILE_NAME, _check, snapshot_interval_ms=snapshot_interval_ms, now_ms=now_ms)
        self._quotas: dict[Entity, dict[str, float]] = {}
        self._in_use: Counter[str] = Counter()  # key -> entities that have it
        self._ips: dict[str | None, float] = {}  # normalized address (None: default) -> connection rate
        # (key, user, client id) -> what applies; emptied by every change, bounded
        self._applied: dict[tuple[str, str, str], Applied | None] = {}
        self.version = 0  # bumped by every change, so callers may cache what applies
        if self._map is not None:
            for name, values in self._map.entries.items():
                self._put(_entity_of(name), {k: float(v) for k, v in values.items()})

    def _put(self, entity: Entity, values: dict[str, float]) -> None:
        self._in_use.subtract(self._quotas.pop(entity, {}).keys())
        if values:
            self._quotas[entity] = values
            self._in_use.update(values.keys())
        if entity[0][0] == IP:
            address = _normalized(entity[0][1])
            if CONNECTION_CREATION_RATE in values:
                self._ips[address] = values[CONNECTION_CREATION_RATE]
            else:
                self._ips.pop(address, None)
        self._applied.clear()
        self.version += 1

    def has(self, key: str) -> bool:
        """Whether any entity has a quota on ``key``."""
        return self._in_use[key] > 0

    def connection_rate(self, host: str) -> float | None:
        """The ``connection_creation_rate`` of connections from ``host``: its own, else the
        default IP's (Kafka's ConnectionQuotas); None: unlimited."""
        if not self._ips:
            return None
        own = self._ips.get(_normalized(host))
        return own if own is not None else self._ips.get(None)

    @property
    def size(self) -> int:
        return len(self._quotas)

    def get(self, entity: Entity) -> dict[str, float]:
        return dict(self._quotas.get(entity, {}))

    def set(self, changes: Mapping[Entity, dict[str, float]]) -> None:
        """Give each entity its whole new set of quotas (empty: none); durable when this
        returns (OSError, nothing changed, when it could not be written)."""
        if self._map is not None:
            self._map.commit({_name_of(e): v for e, v in changes.items() if v},
                             [_name_of(e) for e, v in changes.items() if not v])
        for entity, values in changes.items():
            self._put(entity, dict(values))

    def close(self) -> None:
        if self._map is not None:
            self._map.write_snapshot_if_stale()

    def applied(self, key: str, user: str, client_id: str) -> Applied | None:
        """The quota on ``key`` for this client (KIP-55 precedence), None without one."""
        if not self._in_use[key]:
            return None  # the common case costs one lookup
        wanted = (key, user, client_id)
        try:
            return self._applied[wanted]
        except KeyError:
            pass
        found = None
        for entity, tag_user, tag_client in _levels(user, client_id):
            values = self._quotas.get(entity)
            if values is not None and key in values:
                found = Applied(values[key], tag_user, tag_client)
                break
        if len(self._applied) >= _APPLIED_CACHED:
            self._applied.clear()
        self._applied[wanted] = found
        return found

    def describe(self, components: list[tuple[str, int, str | None]], strict: bool
                 ) -> list[tuple[Entity, dict[str, float]]]:
        """The entities a DescribeClientQuotas filter matches (Kafka's ClientQuotasImage)."""
        exact: dict[str, str | None] = {}
        typed: set[str] = set()
        for kind, match_type, match in components:
            if not kind:
                raise QuotaRequestError(ErrorCode.invalid_request, "Invalid empty entity type.")
            if kind in exact or kind in typed:
                raise QuotaRequestError(ErrorCode.invalid_request,
                                        f"Entity type {kind} cannot appear more than once in the filter.")
            if kind not in (IP, USER, CLIENT_ID):
                raise QuotaRequestError(ErrorCode.unsupported_version, f"Unsupported entity type {kind}")
            if match_type == MATCH_EXACT:
                if match is None:
                    raise QuotaRequestError(ErrorCode.invalid_request,
                                            "Request specified MATCH_TYPE_EXACT, but set match string to null.")
                exact[kind] = match
            elif match_type == MATCH_DEFAULT:
                if match is not None:
                    raise QuotaRequestError(ErrorCode.invalid_request,
                                            "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
                exact[kind] = None
            elif match_type == MATCH_SPECIFIED:
                if match is not None:
                    raise QuotaRequestError(ErrorCode.invalid_request,
                                            "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
                typed.add(kind)
            else:
                raise QuotaRequestError(ErrorCode.unsupported_version, f"Unsupported match type {match_type}")
        if (IP in exact or IP in typed) and ({USER, CLIENT_ID} & (exact.keys() | typed)):
            raise QuotaRequestError(ErrorCode.invalid_request,
                                    "Invalid entity filter component combination. IP filter component should "
                                    "not be used with user or clientId filter component.")
        found = []
        for entity, values in self._quotas.items():
            names = dict(entity)
            if strict and len(names) != len(exact) + len(typed):
                continue
            if all(k in names and names[k] == v for k, v in exact.items()) and all(k in names for k in typed):
                found.append((entity, dict(values)))
        return found


def _normalized(address: str | None) -> str | None:
    """An address as one spelling (``::FFFF:1.2.3.4``, ``0::1``...); anything else as is."""
    if address is None:
        return None
    try:
        return str(ipaddress.ip_address(address))
    except ValueError:
        return address


def _name_of(entity: Entity) -> str:
    return _PREFIX + json.dumps([list(pair) for pair in entity])


def _entity_of(name: str) -> Entity:
    return tuple((kind, entity_name) for kind, entity_name in json.loads(name[len(_PREFIX):]))


def _check(name: str, values: dict) -> None:
    if not name.startswith(_PREFIX):
        raise ValueError(f"not a client quota entry: {name!r}")
    entity = _entity_of(name)
    if not entity or not all(isinstance(v, (int, float)) for v in values.values()):
        raise ValueError(f"not a client quota entry: {name!r}")
