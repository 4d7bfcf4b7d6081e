"""Kafka's authorization rules over stored ACLs, and ACL filters (DescribeAcls / DeleteAcls)."""

from __future__ import annotations

import json

import pytest
from rmqkafka.adapter.security.acls import (
    FILE_NAME,
    LEGACY_FILE_NAME,
    AclBinding,
    AclFilter,
    AclStore,
    InvalidAcl,
    PatternType,
    PermissionType,
)
from rmqkafka.adapter.security.acls import (
    AclOperation as Op,
)
from rmqkafka.adapter.security.acls import (
    ResourceType as R,
)
from rmqkafka.adapter.security.authorizer import Authorizer
from rmqkafka.adapter.security.principal import PrincipalError, Session, user

ALICE = Session(user("alice"), "10.0.0.1")
BOB = Session(user("bob"), "10.0.0.2")
ADMIN = Session(user("admin"), "10.0.0.3")


def acl(name="orders", op=Op.READ, principal="User:alice", permission=PermissionType.ALLOW,
        resource=R.TOPIC, pattern=PatternType.LITERAL, host="*") -> AclBinding:
    return AclBinding(resource, name, pattern, principal, host, op, permission)


@pytest.fixture
def store(tmp_path):
    return AclStore(tmp_path)


def authorizer(store, **options) -> Authorizer:
    return Authorizer(store, enabled=True, super_users=["User:admin"], **options)


def test_without_an_authorizer_everything_is_allowed(store):
    assert Authorizer(store, enabled=False).allowed(BOB, Op.WRITE, R.TOPIC, "x")


def test_allow_deny_and_no_acl(store):
    store.add([acl(), acl(op=Op.WRITE, principal="User:*"), acl(op=Op.WRITE, principal="User:bob",
                                                                  permission=PermissionType.DENY)])
    auth = authorizer(store)
    assert auth.allowed(ALICE, Op.READ, R.TOPIC, "orders")
    assert not auth.allowed(BOB, Op.READ, R.TOPIC, "orders")
    assert auth.allowed(ALICE, Op.WRITE, R.TOPIC, "orders")  # User:*
    assert not auth.allowed(BOB, Op.WRITE, R.TOPIC, "orders")  # deny wins over User:*
    assert not auth.allowed(ALICE, Op.READ, R.TOPIC, "other")  # no ACL: denied by default
    assert auth.allowed(ADMIN, Op.DELETE, R.TOPIC, "other")  # super user


def test_allow_everyone_if_no_acl_found_only_where_no_acl_exists(store):
    store.add([acl()])
    auth = authorizer(store, allow_everyone_if_no_acl_found=True)
    assert auth.allowed(BOB, Op.WRITE, R.TOPIC, "unguarded")
    assert not auth.allowed(BOB, Op.READ, R.TOPIC, "orders")


def test_implied_operations(store):
    store.add([acl(op=Op.WRITE), acl(name="cfg", op=Op.ALTER_CONFIGS), acl(name="all", op=Op.ALL)])
    auth = authorizer(store)
    assert auth.allowed(ALICE, Op.DESCRIBE, R.TOPIC, "orders")  # WRITE implies DESCRIBE
    assert not auth.allowed(ALICE, Op.READ, R.TOPIC, "orders")
    assert auth.allowed(ALICE, Op.DESCRIBE_CONFIGS, R.TOPIC, "cfg")
    assert not auth.allowed(ALICE, Op.DESCRIBE, R.TOPIC, "cfg")
    assert auth.allowed(ALICE, Op.DELETE, R.TOPIC, "all")


def test_deny_of_read_does_not_deny_describe_but_deny_all_does(store):
    store.add([acl(op=Op.ALL), acl(op=Op.READ, permission=PermissionType.DENY),
               acl(name="locked", op=Op.ALL), acl(name="locked", op=Op.ALL, permission=PermissionType.DENY)])
    auth = authorizer(store)
    assert not auth.allowed(ALICE, Op.READ, R.TOPIC, "orders")
    assert auth.allowed(ALICE, Op.DESCRIBE, R.TOPIC, "orders")
    assert not auth.allowed(ALICE, Op.DESCRIBE, R.TOPIC, "locked")


def test_wildcard_prefixed_and_host_patterns(store):
    store.add([
        acl(name="*", op=Op.DESCRIBE),
        acl(name="logs-", op=Op.READ, pattern=PatternType.PREFIXED),
        acl(name="pinned", op=Op.READ, host="10.0.0.9"),
        acl(name="g", op=Op.READ, resource=R.GROUP),
    ])
    auth = authorizer(store)
    assert auth.allowed(ALICE, Op.DESCRIBE, R.TOPIC, "anything")
    assert auth.allowed(ALICE, Op.READ, R.TOPIC, "logs-2026")
    assert not auth.allowed(ALICE, Op.READ, R.TOPIC, "log")
    assert not auth.allowed(ALICE, Op.READ, R.TOPIC, "pinned")  # from another host
    assert auth.allowed(Session(user("alice"), "10.0.0.9"), Op.READ, R.TOPIC, "pinned")
    assert auth.allowed(ALICE, Op.READ, R.GROUP, "g") and not auth.allowed(ALICE, Op.READ, R.TOPIC, "g")


def test_answers_follow_acl_changes(store):
    auth = authorizer(store)
    assert not auth.allowed(ALICE, Op.READ, R.TOPIC, "orders")
    store.add([acl()])
    assert auth.allowed(ALICE, Op.READ, R.TOPIC, "orders")
    store.remove([acl()])
    assert not auth.allowed(ALICE, Op.READ, R.TOPIC, "orders")


def test_allowed_on_some_topic(store):
    auth = authorizer(store)
    assert not auth.allowed_on_some(ALICE, Op.WRITE, R.TOPIC)
    store.add([acl(name="p-", op=Op.WRITE, pattern=PatternType.PREFIXED)])
    assert auth.allowed_on_some(ALICE, Op.WRITE, R.TOPIC)
    assert not auth.allowed_on_some(BOB, Op.WRITE, R.TOPIC)
    store.add([acl(name="*", op=Op.ALL, permission=PermissionType.DENY)])
    assert not auth.allowed_on_some(ALICE, Op.WRITE, R.TOPIC)


@pytest.mark.parametrize("binding, reason", [
    (acl(resource=R.ANY), "resourceType"),
    (acl(pattern=PatternType.MATCH), "patternType"),
    (acl(op=Op.ANY), "operation"),
    (acl(permission=PermissionType.ANY), "permissionType"),
    (acl(name=""), "should not be empty"),
    (acl(resource=R.CLUSTER, name="other"), "kafka-cluster"),
])
def test_invalid_bindings(binding, reason):
    with pytest.raises(InvalidAcl, match=reason):
        binding.validate()


def test_a_principal_must_have_a_type():
    with pytest.raises(PrincipalError, match="Could not parse principal"):
        acl(principal="alice").validate()


def everything(**fields) -> AclFilter:
    base = dict(resource_type=R.ANY, resource_name=None, pattern_type=PatternType.ANY, principal=None,
                host=None, operation=Op.ANY, permission=PermissionType.ANY)
    return AclFilter(**{**base, **fields})


def test_filters_match_kafkas_way(store):
    literal, wildcard = acl(name="logs-1"), acl(name="*")
    prefixed = acl(name="logs-", pattern=PatternType.PREFIXED)
    group = acl(name="logs-1", resource=R.GROUP)
    store.add([literal, wildcard, prefixed, group])
    assert store.find(everything()) == [literal, wildcard, prefixed, group]
    assert store.find(everything(resource_type=R.TOPIC, resource_name="logs-1")) == [literal]
    assert store.find(everything(resource_name="logs-1", pattern_type=PatternType.MATCH,
                                 resource_type=R.TOPIC)) == [literal, wildcard, prefixed]
    assert store.find(everything(pattern_type=PatternType.PREFIXED)) == [prefixed]
    assert store.find(everything(principal="User:bob")) == []
    with pytest.raises(InvalidAcl):
        everything(operation=Op.UNKNOWN).validate()


@pytest.mark.parametrize("damaged", [FILE_NAME, "acl_bindings.journal"])
def test_acls_persist_and_damage_to_one_copy_costs_no_change(tmp_path, damaged):
    store = AclStore(tmp_path)
    store.add([acl(), acl(name="gone")])
    store.add([acl(name="second")])
    store.remove([acl(name="gone")])
    assert set(AclStore(tmp_path)) == {acl(), acl(name="second")}
    (tmp_path / damaged).write_bytes(b"\0\0garbage")
    assert set(AclStore(tmp_path)) == {acl(), acl(name="second")}


def test_an_older_versions_acls_file_is_imported_once(tmp_path):
    (tmp_path / LEGACY_FILE_NAME).write_text(json.dumps({"version": 1, "acls": [acl().to_json()]}))
    store = AclStore(tmp_path)
    assert list(store) == [acl()] and not (tmp_path / LEGACY_FILE_NAME).exists()
    store.remove([acl()])
    assert list(AclStore(tmp_path)) == []  # a removed binding does not come back


def test_a_failed_acl_write_changes_nothing(tmp_path, monkeypatch):
    store = AclStore(tmp_path)
    store.add([acl()])

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store._map, "commit", full_disk)
    with pytest.raises(OSError):
        store.add([acl(name="new")])
    with pytest.raises(OSError):
        store.remove([acl()])
    assert list(store) == [acl()]
