"""The users a SASL listener accepts: configured passwords and stored SCRAM credentials.

Configured users (the ``user_NAME="password"`` entries of the JAAS configuration that
applies to a listener and mechanism, and ``sasl.users.file``) log in with PLAIN and with
either SCRAM mechanism; their SCRAM credentials are derived on first use (4096 iterations,
a random salt per start). :meth:`Credentials.users` is one listener and mechanism's view.
Credentials set with AlterUserScramCredentials are stored in the data directory (never a
password: salt, iterations, StoredKey, ServerKey, as Kafka keeps them) as a JournaledMap,
``scram_users.json`` and ``scram_users.journal`` (one entry per user; storage.journaled_map
has the format and its crash and damage behaviour): a change is durable when the request is
answered, and damage to one file costs no change. ``scram-credentials.json`` (one file
replaced whole, an older version's) is imported once. A stored credential takes precedence
over a configured password for its mechanism.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from kio.schema.errors import ErrorCode
from rmqkafka.storage.journaled_map import LEGACY_IMPORTED, JournaledMap, import_legacy_file

from .scram import (
    BY_CODE,
    MAX_ITERATIONS,
    MECHANISMS,
    MIN_ITERATIONS,
    ScramCredential,
    ScramMechanism,
)

FILE_NAME = "scram_users.json"
LEGACY_FILE_NAME = "scram-credentials.json"
_PREFIX = "u/"  # an entry per user: "u/" + the user name


@dataclass(frozen=True, slots=True)
class Upsertion:
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


@dataclass(frozen=True, slots=True)
class Deletion:
    name: str
    mechanism: int


@dataclass(frozen=True, slots=True)
class UserResult:
    user: str
    error: ErrorCode
    message: str | None = None
    credentials: tuple[tuple[int, int], ...] = ()  # (mechanism code, iterations)


class Credentials:
    def __init__(self, configured: Mapping[str, str], data_dir: Path) -> None:
        self._configured = dict(configured)
        self._derived: dict[tuple[str, str], ScramCredential] = {}
        self._map = JournaledMap(data_dir / FILE_NAME, _check)
        import_legacy_file(self._map, data_dir / LEGACY_FILE_NAME, _legacy_entries)
        self._stored: dict[str, dict[str, ScramCredential]] = {
            name[len(_PREFIX):]: _parse_user(entry) for name, entry in self._map.entries.items()
            if name != LEGACY_IMPORTED}

    def configure(self, configured: Mapping[str, str]) -> None:
        """The JAAS-configured users after a dynamic broker config change."""
        self._configured = dict(configured)

    def plain_password(self, user: str) -> str | None:
        return self._configured.get(user)

    def scram(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        return self.scram_of(user, mechanism, self._configured.get(user))

    def scram_of(self, user: str, mechanism: ScramMechanism, password: str | None) -> ScramCredential | None:
        """The stored credential of ``user``, else one derived from ``password`` (if any)."""
        stored = self._stored.get(user, {}).get(mechanism.name)
        if stored is not None:
            return stored
        if password is None:
            return None
        key = (user, mechanism.name, password)
        if key not in self._derived:
            self._derived[key] = ScramCredential.from_password(mechanism, password)
        return self._derived[key]

    def users(self, configured: Mapping[str, str]) -> Users:
        """The users one listener accepts with one mechanism: ``configured`` (its JAAS
        configuration's) and the stored SCRAM credentials, read at each login."""
        return Users(self, dict(configured))

    def _mechanisms_of(self, user: str) -> list[tuple[int, int]]:
        found = []
        for mechanism in MECHANISMS.values():
            credential = self._stored.get(user, {}).get(mechanism.name)
            if credential is not None:
                found.append((mechanism.code, credential.iterations))
            elif user in self._configured:
                found.append((mechanism.code, MIN_ITERATIONS))
        return found

    def describe(self, users: Iterable[str] | None) -> list[UserResult]:
        """DescribeUserScramCredentials: every user with a credential, or those named."""
        if users is None:
            names = sorted(set(self._stored) | set(self._configured))
            return [UserResult(name, ErrorCode.none, None, tuple(self._mechanisms_of(name))) for name in names]
        counts = Counter(users)
        results = []
        for name in counts:
            if counts[name] > 1:
                results.append(UserResult(name, ErrorCode.duplicate_resource,
                                          "Cannot describe SCRAM credentials for the same user twice in a single request"))
                continue
            mechanisms = self._mechanisms_of(name)
            if not mechanisms:
                results.append(UserResult(name, ErrorCode.resource_not_found,
                                          "Attempt to describe a user credential that does not exist"))
            else:
                results.append(UserResult(name, ErrorCode.none, None, tuple(mechanisms)))
        return results

    def alter(self, deletions: Iterable[Deletion], upsertions: Iterable[Upsertion]) -> list[UserResult]:
        """AlterUserScramCredentials: each user's changes all apply or none do; they are
        durable when this returns (OSError, nothing changed, when they could not be written)."""
        changes: dict[str, list[Deletion | Upsertion]] = {}
        for change in [*deletions, *upsertions]:
            changes.setdefault(change.name, []).append(change)
        results, changed = [], {}
        for name, items in changes.items():
            error = self._refusal(name, items)
            if error is not None:
                results.append(UserResult(name, *error))
                continue
            credentials = dict(self._stored.get(name, {}))
            for item in items:
                mechanism = BY_CODE[item.mechanism]
                if isinstance(item, Deletion):
                    del credentials[mechanism.name]
                else:
                    credentials[mechanism.name] = ScramCredential.from_salted_password(
                        mechanism, item.salt, item.iterations, item.salted_password)
            changed[name] = credentials
            results.append(UserResult(name, ErrorCode.none))
        if changed:
            self._map.commit({_PREFIX + name: _serialise_user(c) for name, c in changed.items() if c},
                             [_PREFIX + name for name, c in changed.items() if not c])
            for name, credentials in changed.items():
                if credentials:
                    self._stored[name] = credentials
                else:
                    self._stored.pop(name, None)
        return results

    def _refusal(self, name: str, items: list[Deletion | Upsertion]) -> tuple[ErrorCode, str] | None:
        if not name:
            return ErrorCode.unacceptable_credential, "Username must not be empty"
        mechanisms = [item.mechanism for item in items]
        if len(set(mechanisms)) != len(mechanisms):
            return ErrorCode.duplicate_resource, "A user credential cannot be altered twice in the same request"
        for item in items:
            mechanism = BY_CODE.get(item.mechanism)
            if mechanism is None:
                return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
            if isinstance(item, Deletion):
                if mechanism.name not in self._stored.get(name, {}):
                    return (ErrorCode.resource_not_found,
                            "Attempt to delete a user credential that does not exist")
                continue
            if item.iterations < MIN_ITERATIONS:
                return ErrorCode.unacceptable_credential, "Too few iterations"
            if item.iterations > MAX_ITERATIONS:
                return ErrorCode.unacceptable_credential, "Too many iterations"
            if not item.salt or not item.salted_password:
                return ErrorCode.unacceptable_credential, "Salt and salted password must not be empty"
        return None


class Users:
    """What a SASL exchange asks: a user's PLAIN password or SCRAM credential (see
    :meth:`Credentials.users`)."""

    def __init__(self, credentials: Credentials, configured: dict[str, str]) -> None:
        self._credentials = credentials
        self._configured = configured

    def plain_password(self, user: str) -> str | None:
        return self._configured.get(user)

    def scram(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        return self._credentials.scram_of(user, mechanism, self._configured.get(user))


def _parse_user(entry: dict) -> dict[str, ScramCredential]:
    return {name: ScramCredential.from_json(MECHANISMS[name], value) for name, value in entry.items()}


def _serialise_user(credentials: dict[str, ScramCredential]) -> dict:
    return {name: credential.to_json() for name, credential in credentials.items()}


def _check(name: str, entry: dict) -> None:
    if name != LEGACY_IMPORTED:
        _parse_user(entry)


def _legacy_entries(data: dict) -> dict[str, dict]:
    for entry in data["users"].values():
        _parse_user(entry)
    return {_PREFIX + user: entry for user, entry in data["users"].items()}
