"""Share groups' (KIP-932) offsets for ``rmqk groups``: read, reset and delete them at the
group's coordinator, as kafka-share-groups.sh does, with DescribeShareGroupOffsets (90, v1:
start offset and KIP-1226 lag), AlterShareGroupOffsets (91) and DeleteShareGroupOffsets (92).

A share group has no committed offsets: its position in a partition is the share-partition
start offset (SPSO), below which every record is acknowledged or archived. These requests are
sent over plain TCP (the AdminClient in the venv has no share-group calls), like ``rmqk
transactions``; with TLS or SASL properties they are refused with a usage error.

Only an empty group's offsets may be changed: the broker answers NON_EMPTY_GROUP otherwise,
and the dry run checks the same up front.
"""

from __future__ import annotations

from typing import Any

from rmqkafka.cli.common import CliError, ClientOptions


def coordinator(admin: Any, client: ClientOptions, group: str) -> tuple[str, int]:
    """(host, port) of the group's coordinator (FindCoordinator at a broker over plain TCP)."""
    from rmqkafka.cli.transactions import _code_name, _Connection, _ok, check_plain_tcp

    check_plain_tcp(client)
    brokers = sorted((b.id, b.host, b.port) for b in admin.list_topics(timeout=client.timeout).brokers.values())
    if not brokers:
        raise CliError("no broker to ask")
    with _Connection(brokers[0][1], brokers[0][2], client.timeout) as conn:
        found = conn.request(10, 3, key=group, key_type=0)
    if not _ok(found.error_code):
        raise CliError(f"cannot find the coordinator of group {group!r}: {_code_name(found.error_code)}")
    return found.host, int(found.port)


def describe_offsets(host: str, port: int, client: ClientOptions, group: str,
                     topics: dict[str, list[int]] | None = None) -> dict[tuple[str, int], tuple[int, int]]:
    """(topic, partition) -> (start offset, lag) of the group's share-partitions (all of them
    when ``topics`` is None); -1, -1 for a partition without a share state."""
    from kio.schema.describe_share_group_offsets.v1.request import (
        DescribeShareGroupOffsetsRequestGroup,
        DescribeShareGroupOffsetsRequestTopic,
    )

    from rmqkafka.cli.transactions import _code_name, _Connection, _ok

    wanted = None if topics is None else tuple(
        DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=tuple(ps)) for t, ps in topics.items())
    with _Connection(host, port, client.timeout) as conn:
        response = conn.request(90, 1, groups=(DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=wanted),))
    (described,) = response.groups
    if not _ok(described.error_code):
        raise CliError(f"cannot describe the offsets of share group {group!r}: {_code_name(described.error_code)}"
                       + (f" ({described.error_message})" if described.error_message else ""))
    out: dict[tuple[str, int], tuple[int, int]] = {}
    for topic in described.topics:
        for p in topic.partitions:
            if not _ok(p.error_code):
                raise CliError(f"cannot describe the offset of {topic.topic_name}-{p.partition_index} for share group "
                               f"{group!r}: {_code_name(p.error_code)}")
            out[(topic.topic_name, p.partition_index)] = (int(p.start_offset), int(p.lag))
    return out


def alter_offsets(host: str, port: int, client: ClientOptions, group: str, plan: dict[tuple[str, int], int]) -> None:
    """Set the share-partitions' start offsets (their in-flight state is dropped)."""
    from kio.schema.alter_share_group_offsets.v0.request import (
        AlterShareGroupOffsetsRequestPartition,
        AlterShareGroupOffsetsRequestTopic,
    )

    from rmqkafka.cli.transactions import _code_name, _Connection, _ok

    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), offset in sorted(plan.items()):
        by_topic.setdefault(topic, []).append(
            AlterShareGroupOffsetsRequestPartition(partition_index=partition, start_offset=offset))
    with _Connection(host, port, client.timeout) as conn:
        response = conn.request(91, 0, group_id=group, topics=tuple(
            AlterShareGroupOffsetsRequestTopic(topic_name=t, partitions=tuple(ps)) for t, ps in by_topic.items()))
    if not _ok(response.error_code):
        raise CliError(f"cannot reset the offsets of share group {group!r}: {_code_name(response.error_code)}"
                       + (f" ({response.error_message})" if response.error_message else ""))
    for topic in response.responses:
        for p in topic.partitions:
            if not _ok(p.error_code):
                raise CliError(f"cannot reset the offset of {topic.topic_name}-{p.partition_index} for share group "
                               f"{group!r}: {_code_name(p.error_code)}")


def delete_offsets(host: str, port: int, client: ClientOptions, group: str, topics: list[str]) -> dict[str, str | None]:
    """Forget the group's share-partitions of these topics: topic -> None, or its error name."""
    from kio.schema.delete_share_group_offsets.v0.request import DeleteShareGroupOffsetsRequestTopic

    from rmqkafka.cli.transactions import _code_name, _Connection, _ok

    with _Connection(host, port, client.timeout) as conn:
        response = conn.request(92, 0, group_id=group, topics=tuple(
            DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in topics))
    if not _ok(response.error_code):
        raise CliError(f"cannot delete the offsets of share group {group!r}: {_code_name(response.error_code)}"
                       + (f" ({response.error_message})" if response.error_message else ""))
    return {t.topic_name: None if _ok(t.error_code) else _code_name(t.error_code) for t in response.responses}
