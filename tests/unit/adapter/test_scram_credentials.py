"""Stored SCRAM credentials: AlterUserScramCredentials / DescribeUserScramCredentials rules,
persistence, and the previous copy as fallback."""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from rmqkafka.adapter.security.credentials import (
    FILE_NAME,
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


def test_a_damaged_file_falls_back_to_its_previous_copy(tmp_path):
    creds = Credentials({}, tmp_path)
    creds.alter([], [upsert("dave")])
    creds.alter([], [upsert("erin")])
    (tmp_path / FILE_NAME).write_text("{not json")
    reopened = Credentials({}, tmp_path)
    assert reopened.scram("dave", SHA_256) is not None  # the previous copy had dave only
    assert reopened.scram("erin", SHA_256) is None
