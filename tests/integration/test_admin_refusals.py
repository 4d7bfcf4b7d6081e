"""Every confluent-kafka AdminClient call, made by a user without any ACL against a broker
with an authorizer, ends in the right KafkaError and never aborts the client process.

The calls run in a child process (admin_refusals.py): confluent-kafka 2.16 aborted on a
refused DescribeUserScramCredentials (``munmap_chunk(): invalid pointer``), which would
otherwise take pytest down with it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, AdminClient, NewTopic
from confluent_kafka.admin import ResourcePatternType, ResourceType

USERS = 'user_admin="admin-secret" user_bob="bob-secret"'
PROPERTIES = (
    "listeners=SASL_PLAINTEXT://127.0.0.1:9092\n"
    f"sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required {USERS};\n"
    "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
    "super.users=User:admin\n"
)
TOPIC, CLUSTER, GROUP = "TOPIC_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED", "GROUP_AUTHORIZATION_FAILED"

EXPECTED = {
    "create_topics": [TOPIC],
    "delete_topics": [TOPIC],
    "create_partitions": [TOPIC],
    "describe_configs": [TOPIC],
    "describe_configs_broker": [CLUSTER],
    "alter_configs": [TOPIC],
    "incremental_alter_configs": [TOPIC],
    "create_acls": [CLUSTER],
    "describe_acls": [],  # librdkafka drops DescribeAcls' top-level error (test_security asks kafka-python)
    "delete_acls": [CLUSTER],
    "describe_user_scram_credentials": [CLUSTER],
    "describe_user_scram_credentials_all": [],  # listed: only what the caller may describe
    "alter_user_scram_credentials": [CLUSTER],
    "describe_cluster": "ok",  # Metadata, which needs no right
    "list_consumer_groups": "ok",  # listed: only what the caller may describe
    "describe_consumer_groups": [GROUP],
    "delete_consumer_groups": [GROUP],
    "list_consumer_group_offsets": [GROUP],
    "alter_consumer_group_offsets": [GROUP],
    "describe_topics": [TOPIC],
    # librdkafka looks the partition leaders up with Metadata first, which is refused, and
    # answers with its own "no leaders found"
    "list_offsets": ["_NOENT"],
    "delete_records": ["_NOENT"],
    "list_offsets_described": ["ok"],  # DESCRIBE is what ListOffsets needs
    "delete_records_described": [TOPIC],
}


def test_every_admin_call_of_an_unauthorized_user_is_refused_with_its_kafka_error(broker_factory, tmp_path):
    config = tmp_path / "server.properties"
    config.write_text(PROPERTIES)
    broker = broker_factory(config_file=config)
    base = {"bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN"}
    admin = AdminClient({**base, "sasl.username": "admin", "sasl.password": "admin-secret"})
    for future in admin.create_topics([NewTopic("orders", 2), NewTopic("described", 1)]).values():
        future.result(10)
    for future in admin.create_acls([AclBinding(ResourceType.TOPIC, "described", ResourcePatternType.LITERAL,
                                                "User:bob", "*", AclOperation.DESCRIBE,
                                                AclPermissionType.ALLOW)]).values():
        future.result(10)

    bob = json.dumps({**base, "sasl.username": "bob", "sasl.password": "bob-secret"})
    child = subprocess.run([sys.executable, str(Path(__file__).with_name("admin_refusals.py")), bob],
                           capture_output=True, text=True, timeout=300)
    outcomes = {line["call"]: line["outcome"] for line in map(json.loads, child.stdout.splitlines())}
    assert child.returncode == 0, f"the client process died ({child.returncode}) after {list(outcomes)}: {child.stderr[-2000:]}"
    assert outcomes == EXPECTED
