"""The users a SASL listener accepts: configured passwords and stored SCRAM credentials.

Configured users (the ``user_NAME="password"`` entries of the JAAS configuration that
applies to a listener and mechanism, and ``sasl.users.file``) log in with PLAIN and with
either SCRAM mechanism; their SCRAM credentials are derived on first use (4096 iterations,
a random salt per start). :meth:`Credentials.users` is one listener and mechanism's view.
Credentials set with AlterUserScramCredentials are stored in ``scram-credentials.json`` in
the data directory (never a password: salt, iterations, StoredKey, ServerKey, as Kafka keeps
them), written atomically with the previous version kept as ``.prev``; a stored credential
takes precedence over a configured password for its mechanism.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from kio.schema.errors import ErrorCode
from rmqkafka.storage.files import read_json_with_fallback, write_json_atomically

from .scram import (
    BY_CODE,
    MAX_ITERATIONS,
    MECHANISMS,
    MIN_ITERATIONS,
    ScramCredential,
    ScramMechanism,
)

FILE_NAME = "scram-credentials.json"


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
        self._path = data_dir / FILE_NAME
        self._derived: dict[tuple[str, str], ScramCredential] = {}
        self._stored: dict[str, dict[str, ScramCredential]] = read_json_with_fallback(
            self._path, _parse) or {}

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
        names = list(users)
        results = []
        for name in dict.fromkeys(names):
            if names.count(name) > 1:
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
        """AlterUserScramCredentials: each user's changes all apply or none do."""
        changes: dict[str, list[Deletion | Upsertion]] = {}
        for change in [*deletions, *upsertions]:
            changes.setdefault(change.name, []).append(change)
        results, updated = [], False
        for name, items in changes.items():
            error = self._refusal(name, items)
            if error is not None:
                results.append(UserResult(name, *error))
                continue
            for item in items:
                mechanism = BY_CODE[item.mechanism]
                if isinstance(item, Deletion):
                    del self._stored[name][mechanism.name]
                    if not self._stored[name]:
                        del self._stored[name]
                else:
                    self._stored.setdefault(name, {})[mechanism.name] = ScramCredential.from_salted_password(
                        mechanism, item.salt, item.iterations, item.salted_password)
            updated = True
            results.append(UserResult(name, ErrorCode.none))
        if updated:
            write_json_atomically(self._path, _serialise(self._stored), keep_previous=True)
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


def _parse(data: dict) -> dict[str, dict[str, ScramCredential]]:
    return {user: {name: ScramCredential.from_json(MECHANISMS[name], value) for name, value in by_mech.items()}
            for user, by_mech in data["users"].items()}


def _serialise(stored: dict[str, dict[str, ScramCredential]]) -> dict:
    return {"version": 1,
            "users": {user: {name: c.to_json() for name, c in by_mech.items()} for user, by_mech in stored.items()}}
