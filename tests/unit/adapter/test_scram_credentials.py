"""Stored SCRAM credentials: AlterUserScramCredentials / DescribeUserScramCredentials rules,
persistence (damage to one copy costs no change), the import of an older version's file, and a
failed write that changes nothing."""

from __future__ import annotations

import json

import pytest
from kio.schema.errors import ErrorCode
from rmqkafka.adapter.security.credentials import (
    FILE_NAME,
    LEGACY_FILE_NAME,
    Credentials,
    Deletion,
    Upsertion,
)
from rmqkafka.adapter.security.scram import SHA_256, SHA_512, salted_password


def upsert(name, mechanism=SHA_256, password="pw", iterations=4096, salt=b"salt"):
    return Upsertion(name, mechanism.code, iterations, salt, salted_password(mechanism, password, salt, iterations))


def test_upsert_describe_delete_and_persist(tmp_path):
    creds = Credentials({}, tmp_path)
    results = creds.alter([], [upsert("bob"), upsert("bob", SHA_512, iterations=8192)])
    assert [(r.user, r.error) for r in results] == [("bob", ErrorCode.none)]
    described = creds.describe(["bob"])[0]
    assert described.error is ErrorCode.none and described.credentials == ((1, 4096), (2, 8192))
    reopened = Credentials({}, tmp_path)
    credential = reopened.scram("bob", SHA_256)
    assert credential is not None and credential.salt == b"salt"
    assert reopened.alter([Deletion("bob", 1)], [])[0].error is ErrorCode.none
    assert Credentials({}, tmp_path).describe(["bob"])[0].credentials == ((2, 8192),)


def test_kafkas_refusals(tmp_path):
    creds = Credentials({}, tmp_path)
    results = creds.alter(
        [Deletion("ghost", 1), Deletion("twice", 1)],
        [upsert(""), upsert("few", iterations=4095), upsert("many", iterations=16385), upsert("twice"),
         Upsertion("odd", 9, 4096, b"s", b"p")],
    )
    assert {r.user: r.error for r in results} == {
        "ghost": ErrorCode.resource_not_found,
        "twice": ErrorCode.duplicate_resource,
        "": ErrorCode.unacceptable_credential,
        "few": ErrorCode.unacceptable_credential,
        "many": ErrorCode.unacceptable_credential,
        "odd": ErrorCode.unsupported_sasl_mechanism,
    }
    assert not (tmp_path / FILE_NAME).exists()  # nothing was accepted, nothing written


def test_one_users_changes_apply_together(tmp_path):
    creds = Credentials({}, tmp_path)
    results = creds.alter([Deletion("carol", 2)], [upsert("carol")])  # the deletion fails
    assert results[0].error is ErrorCode.resource_not_found
    assert creds.scram("carol", SHA_256) is None


def test_configured_users_are_described_and_stored_ones_win(tmp_path):
    creds = Credentials({"alice": "alice-secret"}, tmp_path)
    assert [(r.user, r.credentials) for r in creds.describe(None)] == [("alice", ((1, 4096), (2, 4096)))]
    derived = creds.scram("alice", SHA_256)
    assert derived is creds.scram("alice", SHA_256)  # derived once
    creds.alter([], [upsert("alice", password="new", iterations=5000)])
    assert creds.scram("alice", SHA_256).iterations == 5000
    assert creds.describe(["nobody"])[0].error is ErrorCode.resource_not_found
    assert creds.describe(["alice", "alice"])[0].error is ErrorCode.duplicate_resource


@pytest.mark.parametrize("damaged", [FILE_NAME, "scram_users.journal"])
def test_damage_to_one_copy_costs_no_change(tmp_path, damaged):
    creds = Credentials({}, tmp_path)
    creds.alter([], [upsert("dave")])
    creds.alter([], [upsert("erin")])
    creds.alter([Deletion("dave", SHA_256.code)], [])
    (tmp_path / damaged).write_text("{not json")
    reopened = Credentials({}, tmp_path)
    assert reopened.scram("erin", SHA_256) is not None  # the last change but one
    assert reopened.scram("dave", SHA_256) is None  # the last change: a deletion stays deleted


def test_an_older_versions_file_is_imported_once(tmp_path):
    (tmp_path / "scratch").mkdir()
    legacy = Credentials({}, tmp_path / "scratch")
    legacy.alter([], [upsert("frank"), upsert("gina")])
    entries = {name[2:]: entry for name, entry in legacy._map.entries.items()}
    (tmp_path / LEGACY_FILE_NAME).write_text(json.dumps({"version": 1, "users": entries}))
    (tmp_path / (LEGACY_FILE_NAME + ".prev")).write_text(json.dumps({"version": 1, "users": {}}))
    imported = Credentials({}, tmp_path)
    assert imported.scram("frank", SHA_256) is not None and imported.scram("gina", SHA_256) is not None
    assert not (tmp_path / LEGACY_FILE_NAME).exists() and not (tmp_path / (LEGACY_FILE_NAME + ".prev")).exists()
    imported.alter([Deletion("frank", SHA_256.code)], [])
    assert Credentials({}, tmp_path).scram("frank", SHA_256) is None  # never imported again


def test_a_failed_write_changes_nothing(tmp_path, monkeypatch):
    creds = Credentials({}, tmp_path)
    creds.alter([], [upsert("hank")])

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(creds._map, "commit", full_disk)
    with pytest.raises(OSError):
        creds.alter([Deletion("hank", SHA_256.code)], [upsert("ivy")])
    assert creds.scram("hank", SHA_256) is not None and creds.scram("ivy", SHA_256) is None
    monkeypatch.undo()
    assert Credentials({}, tmp_path).scram("hank", SHA_256) is not None


def test_describe_counts_duplicates_in_linear_time(tmp_path):
    names = [f"user-{i}" for i in range(50_000)] * 2
    results = Credentials({}, tmp_path).describe(names)
    assert len(results) == 50_000 and {r.error for r in results} == {ErrorCode.duplicate_resource}
