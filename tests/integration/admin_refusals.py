"""Every confluent-kafka AdminClient call an unauthorized user can make, one line of JSON each.

Run as a child process by test_admin_refusals.py (``python admin_refusals.py CONF_JSON``): a
call that makes librdkafka abort kills this process, not pytest, and the lines printed so
far say which call it was. Each line is ``{"call": NAME, "outcome": OUTCOME}`` where OUTCOME
is a KafkaError code name, a list of them (one per result), or ``"ok"``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicCollection, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

TIMEOUT = 15


def outcome(result: Any) -> Any:
    """The error code names in a confluent-kafka admin result (futures, dicts, lists)."""
    if isinstance(result, dict):
        return [outcome(v) for v in result.values()]
    if isinstance(result, list):
        return [outcome(v) for v in result]
    if hasattr(result, "result"):
        try:
            return outcome(result.result(TIMEOUT))
        except KafkaException as exc:
            return exc.args[0].name()
    if isinstance(result, KafkaException):
        return result.args[0].name()
    error = getattr(result, "error", None)
    if error is not None and hasattr(error, "name"):
        return error.name()
    return "ok"


def calls(admin: AdminClient) -> dict[str, Callable[[], Any]]:
    acl = AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:bob", "*",
                     AclOperation.READ, AclPermissionType.ALLOW)
    acl_filter = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                  AclOperation.ANY, AclPermissionType.ANY)
    topic_config = ConfigResource(ResourceType.TOPIC, "orders")
    altered = ConfigResource(ResourceType.TOPIC, "orders", set_config={"retention.ms": "1000"})
    incremental = ConfigResource(ResourceType.TOPIC, "orders", incremental_configs=[
        ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)])
    broker = ConfigResource(ResourceType.BROKER, str(next(iter(admin.list_topics(timeout=TIMEOUT).brokers))))
    group_offsets = ConsumerGroupTopicPartitions("bobs-group", [TopicPartition("orders", 0, 1)])
    return {
        "create_topics": lambda: admin.create_topics([NewTopic("bobs-topic", 1)]),
        "delete_topics": lambda: admin.delete_topics(["orders"]),
        "create_partitions": lambda: admin.create_partitions([NewPartitions("orders", 4)]),
        "describe_configs": lambda: admin.describe_configs([topic_config]),
        "describe_configs_broker": lambda: admin.describe_configs([broker]),
        "alter_configs": lambda: admin.alter_configs([altered]),
        "incremental_alter_configs": lambda: admin.incremental_alter_configs([incremental]),
        "create_acls": lambda: admin.create_acls([acl]),
        "describe_acls": lambda: admin.describe_acls(acl_filter),
        "delete_acls": lambda: admin.delete_acls([acl_filter]),
        "describe_user_scram_credentials": lambda: admin.describe_user_scram_credentials(["alice"]),
        "describe_user_scram_credentials_all": lambda: admin.describe_user_scram_credentials(),
        "alter_user_scram_credentials": lambda: admin.alter_user_scram_credentials([
            UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                         b"password", b"salt")]),
        "describe_cluster": lambda: admin.describe_cluster(include_authorized_operations=True),
        "list_consumer_groups": lambda: admin.list_consumer_groups(),
        "describe_consumer_groups": lambda: admin.describe_consumer_groups(["bobs-group"]),
        "delete_consumer_groups": lambda: admin.delete_consumer_groups(["bobs-group"]),
        "list_consumer_group_offsets": lambda: admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions("bobs-group")]),
        "alter_consumer_group_offsets": lambda: admin.alter_consumer_group_offsets([group_offsets]),
        "describe_topics": lambda: admin.describe_topics(TopicCollection(["orders"])),
        "list_offsets": lambda: admin.list_offsets({TopicPartition("orders", 0): OffsetSpec.latest()}),
        "delete_records": lambda: admin.delete_records([TopicPartition("orders", 0, 1)]),
        # "described": a topic the user may describe, so that librdkafka finds its leader
        "list_offsets_described": lambda: admin.list_offsets({TopicPartition("described", 0): OffsetSpec.latest()}),
        "delete_records_described": lambda: admin.delete_records([TopicPartition("described", 0, 1)]),
    }


def main() -> None:
    admin = AdminClient(json.loads(sys.argv[1]))
    for name, call in calls(admin).items():
        try:
            result = outcome(call())
        except KafkaException as exc:
            result = exc.args[0].name()
        print(json.dumps({"call": name, "outcome": result}), flush=True)


if __name__ == "__main__":
    main()
