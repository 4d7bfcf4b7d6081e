"""``rmqk groups list|describe|reset-offsets|delete-offsets|delete``: consumer groups, like kafka-consumer-groups.sh.

AdminClient calls: ListGroups, DescribeGroups, OffsetFetch (committed offsets), ListOffsets
(log end offsets, earliest, by timestamp), OffsetCommit (``reset-offsets --execute``) and
DeleteGroups. LAG = log end offset - committed offset, per partition.

Every group type is shown (TYPE: classic, consumer for Kafka 4's KIP-848 protocol, or share
for KIP-932 share groups). The AdminClient does not report a consumer-protocol member's
epoch, and knows nothing of share groups, so ``describe`` asks the group's coordinator with
ConsumerGroupDescribe (69) or ShareGroupDescribe (77), and ``list`` the bootstrap broker with
ListGroups v5 for the types the AdminClient cannot name, over plain TCP (kio, as ``rmqk
transactions`` does); with TLS or SASL properties the epochs and share groups' members are
left out ("-"). A share group has no committed offsets: its CURRENT-OFFSET is each
share-partition's start offset (SPSO) and its LAG KIP-1226's, by DescribeShareGroupOffsets
(``_share_partitions``; rmqkafka.cli.share_offsets).

``reset-offsets`` is a dry run unless ``--execute`` is given (as in Kafka), and refuses
groups that have active members: their consumers would overwrite the new offsets. A share
group's are set by AlterShareGroupOffsets, and ``delete-offsets`` (share groups only) forgets
them by DeleteShareGroupOffsets, as kafka-share-groups.sh does.
"""

from __future__ import annotations

from typing import Any

import click

from rmqkafka.cli import share_offsets
from rmqkafka.cli.common import (
    ClientOptions,
    CliError,
    CliUsageError,
    Command,
    Group,
    Progress,
    admin_client,
    client_options,
    echo,
    echo_json,
    echo_table,
    error_code,
    error_from_exception,
    future_result,
    handle_errors,
    json_option,
    kafka_error_text,
    parse_timestamp,
    progress_option,
    report_error,
    request_kwargs,
    topic_error,
    warn,
)

_STATE_NAMES = {
    "UNKNOWN": "Unknown",
    "PREPARING_REBALANCING": "PreparingRebalance",
    "COMPLETING_REBALANCING": "CompletingRebalance",
    "STABLE": "Stable",
    "DEAD": "Dead",
    "EMPTY": "Empty",
}
_INACTIVE = {"Empty", "Dead", "Unknown"}


@click.group("groups", cls=Group, no_args_is_help=True)
def groups() -> None:
    """List, describe, reset offsets of and delete consumer groups (like kafka-consumer-groups.sh)."""


def _state(value: Any) -> str:
    name = getattr(value, "name", str(value))
    return _STATE_NAMES.get(name, name.title())


# ---------------------------------------------------------------------------------------------
# list


@groups.command("list", cls=Command)
@json_option
@client_options
@handle_errors
def list_groups(as_json: bool, client: ClientOptions) -> None:
    """List groups with their state and protocol type."""
    admin, _ = admin_client(client)
    result = future_result(admin.list_consumer_groups(**request_kwargs(client)), "cannot list groups")
    for err in result.errors or []:
        report_error(f"a broker could not list its groups: {kafka_error_text(err)}")
    listings = sorted(result.valid or [], key=lambda g: g.group_id)
    rows = [
        {
            "group": g.group_id,
            "state": _state(g.state),
            "protocol_type": "" if g.is_simple_consumer_group else "consumer",
            "type": getattr(getattr(g, "type", None), "name", "UNKNOWN").lower(),
        }
        for g in listings
    ]
    # librdkafka's AdminClient lists classic and consumer groups only: the broker's ListGroups
    # v5 adds the share groups
    known = {r["group"] for r in rows}
    for group_id, (group_type, protocol_type, state) in sorted(_listed_types(admin, client).items()):
        if group_id not in known and group_type == "share":
            rows.append({"group": group_id, "state": state, "protocol_type": protocol_type, "type": group_type})
    rows.sort(key=lambda r: r["group"])
    if as_json:
        echo_json(rows)
    else:
        echo_table(["GROUP", "TYPE", "STATE", "PROTOCOL-TYPE"],
                   [(r["group"], r["type"], r["state"], r["protocol_type"] or None) for r in rows])
    if result.errors:
        raise click.exceptions.Exit(1)


# ---------------------------------------------------------------------------------------------
# describe


def _describe_group(admin: Any, client: ClientOptions, group: str) -> Any:
    futures = admin.describe_consumer_groups([group], **request_kwargs(client))
    try:
        return futures[group].result()
    except Exception as exc:  # noqa: BLE001
        if error_code(exc) == "GROUP_ID_NOT_FOUND":
            return None
        raise error_from_exception(exc, f"cannot describe group {group!r}") from None


def _committed(admin: Any, client: ClientOptions, group: str, partitions: list[Any] | None = None) -> dict[tuple[str, int], int]:
    """Committed offsets of ``group`` (all, or for ``partitions``): (topic, partition) -> offset."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    request = ConsumerGroupTopicPartitions(group, partitions) if partitions else ConsumerGroupTopicPartitions(group)
    futures = admin.list_consumer_group_offsets([request], **request_kwargs(client))
    try:
        result = futures[group].result()
    except Exception as exc:  # noqa: BLE001
        if error_code(exc) == "GROUP_ID_NOT_FOUND":
            return {}
        raise error_from_exception(exc, f"cannot fetch the committed offsets of group {group!r}") from None
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions if tp.error is None and tp.offset >= 0}


def _offsets(
    admin: Any, client: ClientOptions, partitions: list[tuple[str, int]], spec: Any, meter: Progress | None = None
) -> dict[tuple[str, int], int]:
    """ListOffsets for ``spec`` per partition; partitions that fail are left out (``meter``
    counts the answers)."""
    from confluent_kafka import TopicPartition

    if not partitions:
        return {}
    futures = admin.list_offsets({TopicPartition(t, p): spec for t, p in partitions}, **request_kwargs(client))
    found = {}
    for tp, future in futures.items():
        try:
            found[(tp.topic, tp.partition)] = future.result().offset
        except Exception:  # noqa: BLE001, S110 - shown as '-'
            pass
        if meter is not None:
            meter.add()
    return found


@groups.command("describe", cls=Command)
@click.argument("names", metavar="GROUP...", nargs=-1, required=True)
@json_option
@client_options
@handle_errors
def describe(names: tuple[str, ...], as_json: bool, client: ClientOptions) -> None:
    """Members and per-partition committed offset, log end offset and LAG of groups."""
    from confluent_kafka.admin import OffsetSpec

    admin, _ = admin_client(client)
    documents, missing = [], []
    for group in dict.fromkeys(names):
        desc = _describe_group(admin, client, group)
        if desc is None or (_state(desc.state) == "Dead" and not desc.members):
            share = _share_group(admin, client, group)
            if share is not None:
                documents.append(share)
                continue
        committed = _committed(admin, client, group)
        members = list(desc.members) if desc is not None else []
        state = _state(desc.state) if desc is not None else "Dead"
        if state in ("Dead", "Unknown") and not members and not committed:
            missing.append(group)
            continue
        owner: dict[tuple[str, int], Any] = {}
        for m in members:
            for tp in m.assignment.topic_partitions if m.assignment else []:
                owner[(tp.topic, tp.partition)] = m
        keys = sorted(set(committed) | set(owner))
        ends = _offsets(admin, client, keys, OffsetSpec.latest())
        partitions = []
        for key in keys:
            current, end, member = committed.get(key), ends.get(key), owner.get(key)
            partitions.append(
                {
                    "topic": key[0],
                    "partition": key[1],
                    "current_offset": current,
                    "log_end_offset": end,
                    "lag": max(0, end - current) if current is not None and end is not None else None,
                    "consumer_id": member.member_id if member else None,
                    "host": member.host if member else None,
                    "client_id": member.client_id if member else None,
                }
            )
        coordinator = getattr(desc, "coordinator", None)
        group_type = getattr(getattr(desc, "type", None), "name", "UNKNOWN").lower() if desc is not None else "unknown"
        epochs = _epochs(client, coordinator, group) if group_type == "consumer" else {}
        documents.append(
            {
                "group": group,
                "type": group_type,
                "group_epoch": epochs.get(None),
                "state": state,
                "protocol_type": "" if desc is None or desc.is_simple_consumer_group else "consumer",
                "assignor": (desc.partition_assignor or None) if desc is not None else None,
                "coordinator": {"id": coordinator.id, "host": coordinator.host, "port": coordinator.port} if coordinator is not None else None,
                "members": [
                    {
                        "consumer_id": m.member_id,
                        "group_instance_id": m.group_instance_id,
                        "client_id": m.client_id,
                        "host": m.host,
                        "member_epoch": epochs.get(m.member_id),
                        "assignment": _partitions(m.assignment),
                        "target_assignment": _partitions(getattr(m, "target_assignment", None)) if group_type == "consumer" else None,
                    }
                    for m in sorted(members, key=lambda m: m.member_id)
                ],
                "total_lag": sum(p["lag"] or 0 for p in partitions),
                "partitions": partitions,
            }
        )
    if as_json:
        echo_json(documents)
    else:
        for i, doc in enumerate(documents):
            if i:
                echo()
            _print_group(doc)
    if missing:
        raise CliError("; ".join(f"group {g!r} does not exist" for g in missing))


def _print_group(doc: dict[str, Any]) -> None:
    coordinator = doc["coordinator"]
    echo_table(
        ["GROUP", "TYPE", "STATE", "PROTOCOL-TYPE", "ASSIGNOR", "EPOCH", "MEMBERS", "TOTAL-LAG", "COORDINATOR"],
        [
            (
                doc["group"],
                doc["type"],
                doc["state"],
                doc["protocol_type"] or None,
                doc["assignor"],
                doc["group_epoch"],
                len(doc["members"]),
                doc["total_lag"],
                f"{coordinator['id']} ({coordinator['host']}:{coordinator['port']})" if coordinator else None,
            )
        ],
    )
    if doc["members"]:
        echo()
        echo_table(
            ["CONSUMER-ID", "HOST", "CLIENT-ID", "EPOCH", "#PARTITIONS", "ASSIGNMENT"],
            [
                (m["consumer_id"], m["host"], m["client_id"], m["member_epoch"], len(m["assignment"]),
                 _assignment_text(m["assignment"]))
                for m in doc["members"]
            ],
        )
    echo()
    if doc["partitions"]:
        echo_table(
            ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"],
            [
                (doc["group"], p["topic"], p["partition"], p["current_offset"], p["log_end_offset"], p["lag"], p["consumer_id"], p["host"], p["client_id"])
                for p in doc["partitions"]
            ],
        )
    else:
        echo(f"group {doc['group']} has no committed offsets and no assigned partitions")


def _partitions(assignment: Any) -> list[dict[str, Any]]:
    parts = assignment.topic_partitions if assignment is not None else []
    return [{"topic": tp.topic, "partition": tp.partition} for tp in sorted(parts, key=lambda t: (t.topic, t.partition))]


def _epochs(client: ClientOptions, coordinator: Any, group: str) -> dict[str | None, int]:
    """Member id -> member epoch (None -> the group epoch) of a consumer-protocol group, by
    ConsumerGroupDescribe at its coordinator; {} when that cannot be asked over plain TCP."""
    from rmqkafka.cli.transactions import _Connection, check_plain_tcp

    try:
        check_plain_tcp(client)
    except CliUsageError:
        return {}
    if coordinator is None:
        return {}
    with _Connection(coordinator.host, coordinator.port, client.timeout) as conn:
        (described,) = conn.request(69, 0, group_ids=(group,), include_authorized_operations=False).groups
    if described.error_code:
        return {}
    epochs: dict[str | None, int] = {m.member_id: m.member_epoch for m in described.members}
    epochs[None] = described.group_epoch
    return epochs


def _plain_tcp_broker(admin: Any, client: ClientOptions) -> tuple[str, int] | None:
    """A broker to ask over plain TCP (None with TLS or SASL properties, or none listed)."""
    from rmqkafka.cli.transactions import check_plain_tcp

    try:
        check_plain_tcp(client)
    except CliUsageError:
        return None
    brokers = sorted((b.id, b.host, b.port) for b in admin.list_topics(timeout=client.timeout).brokers.values())
    return (brokers[0][1], brokers[0][2]) if brokers else None


def _listed_types(admin: Any, client: ClientOptions) -> dict[str, tuple[str, str, str]]:
    """Group id -> (type, protocol type, state) by ListGroups v5 at one broker ({} when it
    cannot be asked over plain TCP)."""
    from rmqkafka.cli.transactions import _Connection

    broker = _plain_tcp_broker(admin, client)
    if broker is None:
        return {}
    with _Connection(*broker, client.timeout) as conn:
        response = conn.request(16, 5, states_filter=(), types_filter=())
    return {g.group_id: (g.group_type, g.protocol_type, g.group_state) for g in response.groups}


def _share_group(admin: Any, client: ClientOptions, group: str) -> dict[str, Any] | None:
    """The describe document of a share group, by ShareGroupDescribe (77) at its coordinator;
    None when it is no share group (or cannot be asked over plain TCP)."""
    from rmqkafka.cli.transactions import _Connection

    broker = _plain_tcp_broker(admin, client)
    if broker is None:
        return None
    with _Connection(*broker, client.timeout) as conn:
        found = conn.request(10, 3, key=group, key_type=0)
        if found.error_code:
            return None
        coordinator = {"id": int(found.node_id), "host": found.host, "port": int(found.port)}
    with _Connection(found.host, int(found.port), client.timeout) as conn:
        try:
            (described,) = conn.request(77, 1, group_ids=(group,), include_authorized_operations=False).groups
        except CliError:
            return None  # a broker without share groups closes the connection
    if described.error_code:
        return None
    members = [
        {
            "consumer_id": m.member_id,
            "group_instance_id": None,
            "client_id": m.client_id,
            "host": m.client_host,
            "member_epoch": m.member_epoch,
            "subscribed_topics": list(m.subscribed_topic_names),
            "assignment": sorted(({"topic": tp.topic_name, "partition": p} for tp in m.assignment.topic_partitions
                                  for p in tp.partitions), key=lambda t: (t["topic"], t["partition"])),
            "target_assignment": None,
        }
        for m in sorted(described.members, key=lambda m: m.member_id)
    ]
    document = {
        "group": group,
        "type": "share",
        "group_epoch": described.group_epoch,
        "state": described.group_state,
        "protocol_type": "share",
        "assignor": described.assignor_name,
        "coordinator": coordinator,
        "members": members,
        "total_lag": None,
        "partitions": [],
    }
    from confluent_kafka.admin import OffsetSpec

    positions = share_offsets.describe_offsets(found.host, int(found.port), client, group)
    readers: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for m in members:
        for tp in m["assignment"]:
            readers.setdefault((tp["topic"], tp["partition"]), []).append(m)
    keys = sorted(set(readers) | set(positions))
    ends = _offsets(admin, client, keys, OffsetSpec.latest())
    partitions = _share_partitions(readers, positions, ends)
    return {**document, "total_lag": sum(p["lag"] or 0 for p in partitions), "partitions": partitions}


def _share_partitions(readers: dict[tuple[str, int], list[dict[str, Any]]],
                      positions: dict[tuple[str, int], tuple[int, int]],
                      ends: dict[tuple[str, int], int]) -> list[dict[str, Any]]:
    """One row per share-partition (assigned, or with a share state) with the members reading
    it: CURRENT-OFFSET is the share-partition start offset (SPSO) and LAG the records from it
    to the log end not yet acknowledged or archived (KIP-1226), both None without a state."""
    rows = []
    for key in sorted(set(readers) | set(positions)):
        ms = readers.get(key, [])
        start, lag = positions.get(key, (-1, -1))
        rows.append({
            "topic": key[0], "partition": key[1], "current_offset": start if start >= 0 else None,
            "log_end_offset": ends.get(key), "lag": lag if lag >= 0 else None,
            "consumer_id": ",".join(m["consumer_id"] for m in ms) or None,
            "host": ",".join(sorted({m["host"] for m in ms})) or None,
            "client_id": ",".join(sorted({m["client_id"] for m in ms})) or None,
        })
    return rows


def _assignment_text(assignment: list[dict[str, Any]]) -> str | None:
    by_topic: dict[str, list[int]] = {}
    for tp in assignment:
        by_topic.setdefault(tp["topic"], []).append(tp["partition"])
    return " ".join(f"{t}:{','.join(map(str, ps))}" for t, ps in by_topic.items()) or None


# ---------------------------------------------------------------------------------------------
# reset-offsets


@groups.command("reset-offsets", cls=Command)
@click.argument("group")
@click.option("-t", "--topic", "topic_specs", multiple=True, metavar="TOPIC[:P,P...]", help="Topic (optionally only some partitions); repeatable.")
@click.option("--all-topics", is_flag=True, help="Every topic the group has committed offsets for.")
@click.option("--to-earliest", is_flag=True, help="Reset to the earliest offset.")
@click.option("--to-latest", is_flag=True, help="Reset to the log end offset.")
@click.option("--to-offset", type=click.IntRange(min=0), default=None, help="Reset to this offset (clamped to the partition's range).")
@click.option("--to-datetime", metavar="ISO8601|MS", help="Reset to the first offset at or after this time (no zone = local time).")
@click.option("--shift-by", type=int, default=None, help="Move the committed offset by N (negative: back), clamped.")
@click.option("--execute/--dry-run", default=False, help="Commit the new offsets; the default only shows them.")
@json_option
@progress_option
@client_options
@handle_errors
def reset_offsets(
    group: str,
    topic_specs: tuple[str, ...],
    all_topics: bool,
    to_earliest: bool,
    to_latest: bool,
    to_offset: int | None,
    to_datetime: str | None,
    shift_by: int | None,
    execute: bool,
    as_json: bool,
    progress: bool | None,
    client: ClientOptions,
) -> None:
    """Reset a group's committed offsets (dry run unless --execute)."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import OffsetSpec

    strategies = [
        name
        for name, given in (
            ("--to-earliest", to_earliest),
            ("--to-latest", to_latest),
            ("--to-offset", to_offset is not None),
            ("--to-datetime", to_datetime is not None),
            ("--shift-by", shift_by is not None),
        )
        if given
    ]
    if len(strategies) != 1:
        raise CliUsageError(
            "give exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime, --shift-by"
            + (f" (got {', '.join(strategies)})" if strategies else "")
        )
    if bool(topic_specs) == all_topics:
        raise CliUsageError("give --topic (repeatable) or --all-topics")
    wanted = [_parse_topic_spec(spec) for spec in topic_specs]
    timestamp = parse_timestamp(to_datetime, "--to-datetime") if to_datetime is not None else None

    admin, metadata = admin_client(client)
    if _listed_types(admin, client).get(group, ("",))[0] == "share":
        if shift_by is not None:
            raise CliUsageError("--shift-by is not supported for share groups (as in kafka-share-groups.sh)")
        _reset_share_offsets(admin, metadata, client, group, wanted, all_topics, to_earliest, to_latest, to_offset,
                             timestamp, execute, as_json, progress)
        return
    desc = _describe_group(admin, client, group)
    if desc is not None:
        state, members = _state(desc.state), list(desc.members)
        if members or state not in _INACTIVE:
            raise CliError(
                f"group {group!r} has {len(members)} active member{'s' if len(members) != 1 else ''} "
                f"(state {state}); stop its consumers before resetting offsets"
            )

    committed_all = _committed(admin, client, group)
    keys: list[tuple[str, int]] = []
    if all_topics:
        keys = sorted(committed_all)
        if not keys:
            raise CliError(f"group {group!r} has no committed offsets; name the topics with --topic")
    keys = _partitions_named(metadata, wanted, keys)

    # The bar (many partitions): one step per partition for each ListOffsets and for the commit.
    steps = len(keys) * (2 + (timestamp is not None) + execute)
    meter = Progress(progress, "reset-offsets", total=steps, unit="steps")
    earliest = _offsets(admin, client, keys, OffsetSpec.earliest(), meter)
    latest = _offsets(admin, client, keys, OffsetSpec.latest(), meter)
    by_time = _offsets(admin, client, keys, OffsetSpec.for_timestamp(timestamp), meter) if timestamp is not None else {}
    plan = []
    for key in keys:
        if key not in earliest or key not in latest:
            raise CliError(f"cannot get the offsets of {key[0]}-{key[1]}")
        low, high, current = earliest[key], latest[key], committed_all.get(key)
        if to_earliest:
            target = low
        elif to_latest:
            target = high
        elif to_offset is not None:
            target = to_offset
        elif timestamp is not None:
            found = by_time.get(key, -1)
            target = found if found >= 0 else high
        else:
            if current is None:
                raise CliError(f"group {group!r} has no committed offset for {key[0]}-{key[1]} to shift from")
            target = current + shift_by  # type: ignore[operator]
        clamped = min(max(target, low), high)
        if clamped != target and not as_json:
            warn(f"{key[0]}-{key[1]}: offset {target} is outside {low}..{high}; using {clamped}")
        plan.append({"topic": key[0], "partition": key[1], "current_offset": current, "new_offset": clamped})

    if execute:
        request = ConsumerGroupTopicPartitions(group, [TopicPartition(p["topic"], p["partition"], p["new_offset"]) for p in plan])
        futures = admin.alter_consumer_group_offsets([request], **request_kwargs(client))
        result = future_result(futures[group], f"cannot commit offsets of group {group!r}")
        meter.add(len(plan))
        errors = [tp for tp in result.topic_partitions if tp.error is not None]
        if errors:
            tp = errors[0]
            raise CliError(f"cannot commit offset of {tp.topic}-{tp.partition} for group {group!r}: {kafka_error_text(tp.error)}")

    meter.done()
    if as_json:
        echo_json({"group": group, "executed": execute, "partitions": plan})
    else:
        echo_table(
            ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"],
            [(group, p["topic"], p["partition"], p["current_offset"], p["new_offset"]) for p in plan],
        )
    if not execute:
        warn("dry run: no offsets were changed; add --execute to commit them")


def _reset_share_offsets(admin: Any, metadata: Any, client: ClientOptions, group: str,
                         wanted: list[tuple[str, list[int] | None]], all_topics: bool, to_earliest: bool,
                         to_latest: bool, to_offset: int | None, timestamp: int | None, execute: bool,
                         as_json: bool, progress: bool | None) -> None:
    """reset-offsets of a share group: its share-partitions' start offsets, by
    AlterShareGroupOffsets (their in-flight state is dropped). CURRENT-OFFSET is the SPSO."""
    from confluent_kafka.admin import OffsetSpec

    described = _share_group(admin, client, group)
    if described is not None and described["members"]:
        count = len(described["members"])
        raise CliError(f"share group {group!r} has {count} active member{'s' if count != 1 else ''} "
                       f"(state {described['state']}); stop its consumers before resetting offsets")
    host, port = share_offsets.coordinator(admin, client, group)
    current = {key: start for key, (start, _) in share_offsets.describe_offsets(host, port, client, group).items()
               if start >= 0}
    keys: list[tuple[str, int]] = sorted(current) if all_topics else []
    if all_topics and not keys:
        raise CliError(f"share group {group!r} has no share-partitions; name the topics with --topic")
    keys = _partitions_named(metadata, wanted, keys)
    meter = Progress(progress, "reset-offsets", total=len(keys) * (2 + (timestamp is not None) + execute), unit="steps")
    earliest = _offsets(admin, client, keys, OffsetSpec.earliest(), meter)
    latest = _offsets(admin, client, keys, OffsetSpec.latest(), meter)
    by_time = _offsets(admin, client, keys, OffsetSpec.for_timestamp(timestamp), meter) if timestamp is not None else {}
    plan = []
    for key in keys:
        if key not in earliest or key not in latest:
            raise CliError(f"cannot get the offsets of {key[0]}-{key[1]}")
        low, high = earliest[key], latest[key]
        if to_earliest:
            target = low
        elif to_latest:
            target = high
        elif to_offset is not None:
            target = to_offset
        else:
            found = by_time.get(key, -1)
            target = found if found >= 0 else high
        clamped = min(max(target, low), high)
        if clamped != target and not as_json:
            warn(f"{key[0]}-{key[1]}: offset {target} is outside {low}..{high}; using {clamped}")
        plan.append({"topic": key[0], "partition": key[1], "current_offset": current.get(key), "new_offset": clamped})
    if execute:
        share_offsets.alter_offsets(host, port, client, group, {(p["topic"], p["partition"]): p["new_offset"] for p in plan})
        meter.add(len(plan))
    meter.done()
    if as_json:
        echo_json({"group": group, "executed": execute, "partitions": plan})
    else:
        echo_table(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"],
                   [(group, p["topic"], p["partition"], p["current_offset"], p["new_offset"]) for p in plan])
    if not execute:
        warn("dry run: no offsets were changed; add --execute to commit them")


# ---------------------------------------------------------------------------------------------
# delete-offsets


@groups.command("delete-offsets", cls=Command)
@click.argument("group")
@click.option("-t", "--topic", "topics", multiple=True, required=True, metavar="TOPIC", help="Topic whose offsets go; repeatable.")
@json_option
@client_options
@handle_errors
def delete_offsets(group: str, topics: tuple[str, ...], as_json: bool, client: ClientOptions) -> None:
    """Delete a share group's offsets of topics (DeleteShareGroupOffsets; the group must be
    empty): its next fetch starts them where share.auto.offset.reset says."""
    admin, _ = admin_client(client)
    if _listed_types(admin, client).get(group, ("",))[0] != "share":
        raise CliError(f"group {group!r} is not a share group (delete-offsets is for share groups)")
    host, port = share_offsets.coordinator(admin, client, group)
    results = share_offsets.delete_offsets(host, port, client, group, list(dict.fromkeys(topics)))
    failed = {t: e for t, e in results.items() if e is not None}
    if as_json:
        echo_json({"group": group, "topics": [{"topic": t, "error": e} for t, e in results.items()]})
    else:
        for t, e in results.items():
            if e is None:
                echo(f"deleted the offsets of share group {group} for topic {t}")
    for t, e in failed.items():
        report_error(f"cannot delete the offsets of share group {group!r} for topic {t!r}: {e}")
    if failed:
        raise click.exceptions.Exit(1)


def _parse_topic_spec(spec: str) -> tuple[str, list[int] | None]:
    topic, sep, rest = spec.partition(":")
    topic = topic.strip()
    if not topic:
        raise CliUsageError(f"invalid --topic {spec!r}: expected TOPIC or TOPIC:P,P")
    if not sep:
        return topic, None
    try:
        parts = [int(p) for p in rest.split(",") if p.strip()]
    except ValueError:
        raise CliUsageError(f"invalid --topic {spec!r}: partitions must be numbers, e.g. {topic}:0,1") from None
    if not parts or any(p < 0 for p in parts):
        raise CliUsageError(f"invalid --topic {spec!r}: expected TOPIC:P,P with partitions >= 0")
    return topic, sorted(set(parts))


# ---------------------------------------------------------------------------------------------
# delete


@groups.command("delete", cls=Command)
@click.argument("names", metavar="GROUP...", nargs=-1, required=True)
@json_option
@client_options
@handle_errors
def delete(names: tuple[str, ...], as_json: bool, client: ClientOptions) -> None:
    """Delete groups (they must have no active members)."""
    admin, _ = admin_client(client)
    futures = admin.delete_consumer_groups(list(dict.fromkeys(names)), **request_kwargs(client))
    results, failed = [], 0
    for group, future in futures.items():
        try:
            future.result()
            results.append({"group": group, "deleted": True})
        except Exception as exc:  # noqa: BLE001
            failed += 1
            code = error_code(exc)
            if code == "GROUP_ID_NOT_FOUND":
                report_error(f"cannot delete group {group!r}: it does not exist")
            elif code == "NON_EMPTY_GROUP":
                report_error(f"cannot delete group {group!r}: it has active members")
            else:
                report_error(error_from_exception(exc, f"cannot delete group {group!r}").message)
    if as_json:
        echo_json(results)
    else:
        for r in results:
            echo(f"deleted group {r['group']}")
    if failed:
        raise click.exceptions.Exit(1)


def _partitions_named(metadata: Any, wanted: list, keys: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """``keys`` plus the partitions ``wanted`` names ([(topic, partitions or None: all)]),
    checked against the metadata, sorted without repeats."""
    keys = list(keys)
    for topic, parts in wanted:
        problem = topic_error(metadata, topic)
        if problem:
            raise CliError(problem)
        available = sorted(metadata.topics[topic].partitions)
        for p in parts or []:
            if p not in available:
                raise CliError(f"topic {topic!r} has no partition {p} (it has {len(available)})")
        keys += [(topic, p) for p in (parts or available)]
    return sorted(dict.fromkeys(keys))
