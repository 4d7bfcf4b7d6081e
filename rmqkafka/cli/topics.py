"""``rmqk topics create|list|describe|delete|alter``: topic administration over the Kafka protocol.

The counterpart of ``kafka-topics.sh`` (AdminClient: CreateTopics, Metadata, DescribeConfigs,
ListOffsets, DeleteTopics, CreatePartitions, IncrementalAlterConfigs). confluent_kafka is
imported inside the commands (see ``rmqkafka.cli.common``).

Subscription views share the topic namespace and Metadata lists them like topics, but they
are not topics: ``topics list`` and ``topics describe`` without names leave them out (they
are told apart by DescribeConfigs, see ``rmqkafka.cli.views``; ``rmqk views list`` lists
them). ``topics describe VIEW`` still describes a view named explicitly (its configs are its
definition).
"""

from __future__ import annotations

from typing import Any

import click

from rmqkafka.cli.common import (
    ClientOptions,
    CliError,
    CliUsageError,
    Command,
    Group,
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
    kafka_uuid,
    parse_key_values,
    report_error,
    request_kwargs,
    topic_error,
)

DYNAMIC_TOPIC_CONFIG = 1  # ConfigSource of a per-topic override
# Kafka's other ConfigSource values: a broker's dynamic config, the cluster-wide dynamic
# default, server.properties, the built-in default
DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 2, 3, 4, 5


@click.group("topics", cls=Group, no_args_is_help=True)
def topics() -> None:
    """Create, list, describe, alter and delete topics (like kafka-topics.sh)."""


# ---------------------------------------------------------------------------------------------
# create


@topics.command("create", cls=Command)
@click.argument("names", metavar="TOPIC...", nargs=-1, required=True)
@click.option("-p", "--partitions", type=click.IntRange(min=1), default=None, help="Number of partitions. [default: the broker's num.partitions]")
@click.option("-r", "--replication-factor", type=click.IntRange(min=1), default=None, help="Replication factor. [default: the broker's default]")
@click.option("-c", "--config", "configs", multiple=True, metavar="KEY=VALUE", help="Topic config (repeatable), e.g. retention.ms=86400000.")
@click.option("--if-not-exists", is_flag=True, help="Succeed when the topic already exists.")
@click.option("--dry-run", is_flag=True, help="Only validate the request (validate_only); create nothing.")
@json_option
@client_options
@handle_errors
def create(
    names: tuple[str, ...],
    partitions: int | None,
    replication_factor: int | None,
    configs: tuple[str, ...],
    if_not_exists: bool,
    dry_run: bool,
    as_json: bool,
    client: ClientOptions,
) -> None:
    """Create one or more topics."""
    from confluent_kafka.admin import NewTopic

    config = dict(parse_key_values(configs, "--config"))
    admin, _ = admin_client(client)
    new = [
        NewTopic(name, num_partitions=partitions or -1, replication_factor=replication_factor or -1, config=config)
        for name in dict.fromkeys(names)
    ]
    futures = admin.create_topics(new, validate_only=dry_run, operation_timeout=client.timeout, **request_kwargs(client))
    results, failed = [], 0
    for name, future in futures.items():
        try:
            future.result()
            results.append({"topic": name, "created": not dry_run, "validated": dry_run, "existed": False})
        except Exception as exc:  # noqa: BLE001
            if if_not_exists and error_code(exc) == "TOPIC_ALREADY_EXISTS":
                results.append({"topic": name, "created": False, "validated": False, "existed": True})
                continue
            failed += 1
            report_error(error_from_exception(exc, f"cannot create topic {name!r}").message)
    if not dry_run:
        counts = _partition_counts(admin, client, [r["topic"] for r in results])
        for result in results:
            result["partitions"] = counts.get(result["topic"])
    if as_json:
        echo_json(results)
    else:
        for r in results:
            if r["existed"]:
                echo(f"topic {r['topic']} already exists")
            elif dry_run:
                echo(f"topic {r['topic']} can be created (dry run, nothing changed)")
            else:
                shown = f" with {r['partitions']} partition{'s' if r['partitions'] != 1 else ''}" if r.get("partitions") else ""
                echo(f"created topic {r['topic']}{shown}")
    if failed:
        raise click.exceptions.Exit(1)


def _partition_counts(admin: Any, client: ClientOptions, names: list[str]) -> dict[str, int]:
    if not names:
        return {}
    try:
        metadata = admin.list_topics(timeout=client.timeout)
    except Exception:  # noqa: BLE001 - the counts are cosmetic
        return {}
    return {n: len(metadata.topics[n].partitions) for n in names if n in metadata.topics and metadata.topics[n].error is None}


# ---------------------------------------------------------------------------------------------
# list


@topics.command("list", cls=Command)
@json_option
@client_options
@handle_errors
def list_topics(as_json: bool, client: ClientOptions) -> None:
    """List topic names, one per line (--json adds partition counts); views are not listed."""
    admin, metadata = admin_client(client)
    names = _without_views(admin, client, sorted(n for n, t in metadata.topics.items() if t.error is None))
    if as_json:
        echo_json([{"topic": n, "partitions": len(metadata.topics[n].partitions)} for n in names])
    else:
        for name in names:
            echo(name)


# ---------------------------------------------------------------------------------------------
# describe


@topics.command("describe", cls=Command)
@click.argument("names", metavar="[TOPIC...]", nargs=-1)
@click.option("--all-configs", is_flag=True, help="Show every config, not only those that differ from the defaults.")
@click.option("--metrics-url", metavar="URL",
              help="The broker's metrics address (what `rmqk serve` prints: http://HOST:PORT): compacted "
                   "partitions then show the log cleaner's progress (cleaned to, dirty ratio, last run).")
@json_option
@client_options
@handle_errors
def describe(names: tuple[str, ...], all_configs: bool, metrics_url: str | None, as_json: bool,
             client: ClientOptions) -> None:
    """Partitions (leader, replicas, ISR, offsets), topic id and configs of topics (default: all);
    with --metrics-url, the log cleaner's progress on compacted ones."""
    from confluent_kafka import TopicCollection

    admin, metadata = admin_client(client)
    wanted = list(dict.fromkeys(names)) or _without_views(
        admin, client, sorted(n for n, t in metadata.topics.items() if t.error is None)
    )
    missing = [n for n in wanted if topic_error(metadata, n)]
    present = [n for n in wanted if n not in missing]
    descriptions: dict[str, Any] = {}
    if present:
        futures = admin.describe_topics(TopicCollection(present), **request_kwargs(client))
        for name, future in futures.items():
            try:
                descriptions[name] = future.result()
            except Exception as exc:  # noqa: BLE001
                if error_code(exc) == "UNKNOWN_TOPIC_OR_PART":
                    missing.append(name)
                else:
                    raise error_from_exception(exc, f"cannot describe topic {name!r}") from None
    present = [n for n in present if n in descriptions]
    every_config = _configs(admin, client, present, True)
    configs = {n: _shown(c, all_configs) for n, c in every_config.items()}
    earliest, latest = _watermarks(admin, client, [(n, p.id) for n in present for p in descriptions[n].partitions])
    cleaner = _cleaner_progress(metrics_url, client.timeout) if metrics_url else {}

    documents = []
    for name in present:
        desc = descriptions[name]
        parts = sorted(desc.partitions, key=lambda p: p.id)
        documents.append(
            {
                "topic": name,
                "topic_id": kafka_uuid(desc.topic_id),
                "internal": bool(getattr(desc, "is_internal", False)),
                "partition_count": len(parts),
                "replication_factor": max((len(p.replicas) for p in parts), default=0),
                "configs": configs.get(name, {}),
                "retention": _retention(every_config.get(name, {})),
                "partitions": [
                    {
                        "partition": p.id,
                        "leader": p.leader.id if p.leader is not None else None,
                        "replicas": [r.id for r in p.replicas],
                        "isr": [r.id for r in p.isr],
                        "earliest_offset": earliest.get((name, p.id)),
                        "latest_offset": latest.get((name, p.id)),
                        **({"cleaner": cleaner[(name, p.id)]} if (name, p.id) in cleaner else {}),
                    }
                    for p in parts
                ],
            }
        )
    if as_json:
        echo_json(documents)
    else:
        for i, doc in enumerate(documents):
            if i:
                echo()
            shown_configs = ",".join(f"{k}={v}" for k, v in doc["configs"].items()) or "-"
            echo(
                f"Topic: {doc['topic']}  TopicId: {doc['topic_id'] or '-'}  Partitions: {doc['partition_count']}  "
                f"ReplicationFactor: {doc['replication_factor']}  Configs: {shown_configs}"
            )
            if doc["retention"]:
                echo("Retention: " + "  ".join(
                    f"{k}={v['value']} ({v['source']})" for k, v in doc["retention"].items() if k != "rule"
                ) + f"  [{doc['retention']['rule']}]")
            echo_table(
                ["PARTITION", "LEADER", "REPLICAS", "ISR", "EARLIEST-OFFSET", "LATEST-OFFSET", "RECORDS"],
                [
                    (
                        p["partition"],
                        p["leader"],
                        ",".join(map(str, p["replicas"])),
                        ",".join(map(str, p["isr"])),
                        p["earliest_offset"],
                        p["latest_offset"],
                        _difference(p["latest_offset"], p["earliest_offset"]),
                    )
                    for p in doc["partitions"]
                ],
            )
            compacted = [p for p in doc["partitions"] if "cleaner" in p]
            if compacted:
                echo_table(
                    ["PARTITION", "CLEANED-TO", "DIRTY-RATIO", "LAST-CLEANED"],
                    [(p["partition"], p["cleaner"]["cleaned_to"], f"{p['cleaner']['dirty_ratio']:.2f}",
                      _when(p["cleaner"]["last_run_ms"])) for p in compacted],
                )
    if missing:
        raise CliError("; ".join(f"topic {n!r} does not exist" for n in missing))


def _without_views(admin: Any, client: ClientOptions, names: list[str]) -> list[str]:
    """``names`` minus the subscription views among them (all of them if that cannot be told)."""
    from rmqkafka.cli.views import definitions

    try:
        found = definitions(admin, client, names)
    except CliError:  # e.g. a Kafka cluster denying DescribeConfigs: it has no views anyway
        return names
    return [n for n in names if found.get(n) is None]


def _views_of(admin: Any, client: ClientOptions, metadata: Any, source: str) -> list[str]:
    from rmqkafka.cli.views import definitions

    try:
        found = definitions(admin, client, sorted(n for n, t in metadata.topics.items() if t.error is None))
    except CliError:
        return []
    return [n for n, d in sorted(found.items()) if d is not None and d["source"] == source]


def _cleaner_progress(metrics_url: str, timeout: float) -> dict[tuple[str, int], dict]:
    """(topic, partition) -> the log cleaner's progress, from the broker's console API."""
    import json
    import urllib.request

    url = metrics_url.rstrip("/") + "/api/topics"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 (the user's URL)
            doc = json.load(response)
    except (OSError, ValueError) as exc:
        raise CliError(f"cannot read the cleaner's progress from {url}: {exc}") from None
    return {(t["name"], p["partition"]): p["cleaner"] for t in doc.get("topics", [])
            for p in t.get("partitions", []) if "cleaner" in p}


def _when(ms: int) -> str:
    if ms < 0:
        return "never"
    import datetime

    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _difference(high: int | None, low: int | None) -> int | None:
    return None if high is None or low is None else max(0, high - low)


def _configs(admin: Any, client: ClientOptions, names: list[str], all_configs: bool) -> dict[str, dict[str, Any]]:
    """Each topic's config entries (only those set on the topic unless ``all_configs``)."""
    from confluent_kafka.admin import ConfigResource, ResourceType

    if not names:
        return {}
    out: dict[str, dict[str, Any]] = {}
    futures = admin.describe_configs([ConfigResource(ResourceType.TOPIC, n) for n in names], **request_kwargs(client))
    for resource, future in futures.items():
        entries = future_result(future, f"cannot describe configs of topic {resource.name!r}")
        out[resource.name] = {
            name: entry
            for name, entry in sorted(entries.items())
            if all_configs or _source(entry) == DYNAMIC_TOPIC_CONFIG
        }
    return out


def _shown(entries: dict[str, Any], all_configs: bool) -> dict[str, str]:
    return {name: entry.value for name, entry in entries.items()
            if all_configs or _source(entry) == DYNAMIC_TOPIC_CONFIG}


_SOURCE_NAMES = {DYNAMIC_TOPIC_CONFIG: "topic", DYNAMIC_BROKER_CONFIG: "broker, dynamic",
                 DYNAMIC_DEFAULT_BROKER_CONFIG: "cluster default, dynamic", STATIC_BROKER_CONFIG: "broker",
                 DEFAULT_CONFIG: "default"}
_RETENTION_KEYS = ("retention.ms", "retention.bytes", "cleanup.policy")


def _retention(entries: dict[str, Any]) -> dict[str, Any]:
    """The effective retention.ms, retention.bytes and cleanup.policy, where each comes from
    (topic, broker (a broker setting), default), and the rule this broker applies: a topic
    setting either retention.* is retained per partition (Kafka's rule); otherwise by the
    broker's log.retention.* on the shared commitlog's segments (docs/operations/retention.md)."""
    out: dict[str, Any] = {}
    for key in _RETENTION_KEYS:
        entry = entries.get(key)
        if entry is not None:
            out[key] = {"value": entry.value, "source": _SOURCE_NAMES.get(_source(entry), "broker")}
    if not out:  # not this broker (or not allowed to describe configs)
        return out
    own = any(out.get(k, {}).get("source") == "topic" for k in _RETENTION_KEYS[:2])
    policy = {p.strip() for p in out.get("cleanup.policy", {}).get("value", "delete").split(",")}
    if "delete" not in policy:
        out["rule"] = "none (compact only)"
    else:
        out["rule"] = "per partition" if own else "broker log.retention.* on commitlog segments"
    return out


def _source(entry: Any) -> int:
    source = entry.source
    return int(getattr(source, "value", source))


def _watermarks(
    admin: Any, client: ClientOptions, partitions: list[tuple[str, int]]
) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]]:
    """(earliest, latest) offsets per (topic, partition) via ListOffsets; failures are left out."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec

    results: list[dict[tuple[str, int], int]] = []
    for spec in (OffsetSpec.earliest(), OffsetSpec.latest()):
        found: dict[tuple[str, int], int] = {}
        if partitions:
            futures = admin.list_offsets({TopicPartition(t, p): spec for t, p in partitions}, **request_kwargs(client))
            for tp, future in futures.items():
                try:
                    found[(tp.topic, tp.partition)] = future.result().offset
                except Exception:  # noqa: BLE001, S110 - shown as '-'
                    pass
        results.append(found)
    return results[0], results[1]


# ---------------------------------------------------------------------------------------------
# delete


@topics.command("delete", cls=Command)
@click.argument("names", metavar="TOPIC...", nargs=-1, required=True)
@click.option("--if-exists", is_flag=True, help="Succeed when the topic does not exist.")
@json_option
@client_options
@handle_errors
def delete(names: tuple[str, ...], if_exists: bool, as_json: bool, client: ClientOptions) -> None:
    """Delete one or more topics (a topic that views read from: delete the views first)."""
    admin, metadata = admin_client(client)
    futures = admin.delete_topics(list(dict.fromkeys(names)), operation_timeout=client.timeout, **request_kwargs(client))
    results, failed = [], 0
    for name, future in futures.items():
        try:
            future.result()
            results.append({"topic": name, "deleted": True})
        except Exception as exc:  # noqa: BLE001
            if if_exists and error_code(exc) == "UNKNOWN_TOPIC_OR_PART":
                results.append({"topic": name, "deleted": False})
                continue
            failed += 1
            if error_code(exc) == "UNKNOWN_TOPIC_OR_PART":
                report_error(f"cannot delete topic {name!r}: it does not exist")
            elif error_code(exc) == "POLICY_VIOLATION" and (dependents := _views_of(admin, client, metadata, name)):
                # DeleteTopics before v5 (librdkafka sends v4) carries no message: say it here
                report_error(
                    f"cannot delete topic {name!r}: it is the source of view(s) {', '.join(dependents)}; "
                    f"delete them first (rmqk views delete {' '.join(dependents)})"
                )
            else:
                report_error(error_from_exception(exc, f"cannot delete topic {name!r}").message)
    if as_json:
        echo_json(results)
    else:
        for r in results:
            echo(f"deleted topic {r['topic']}" if r["deleted"] else f"topic {r['topic']} does not exist")
    if failed:
        raise click.exceptions.Exit(1)


# ---------------------------------------------------------------------------------------------
# alter


@topics.command("alter", cls=Command)
@click.argument("name", metavar="TOPIC")
@click.option("-p", "--partitions", type=click.IntRange(min=1), default=None, help="Grow the topic to this many partitions.")
@click.option("-c", "--config", "configs", multiple=True, metavar="KEY=VALUE", help="Set a topic config (repeatable).")
@click.option("-d", "--delete-config", "deleted", multiple=True, metavar="KEY", help="Remove a topic config override (repeatable).")
@click.option("--dry-run", is_flag=True, help="Only validate the changes; change nothing.")
@json_option
@client_options
@handle_errors
def alter(
    name: str,
    partitions: int | None,
    configs: tuple[str, ...],
    deleted: tuple[str, ...],
    dry_run: bool,
    as_json: bool,
    client: ClientOptions,
) -> None:
    """Grow partitions and set or remove configs (incremental alter configs)."""
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewPartitions,
        ResourceType,
    )

    to_set = dict(parse_key_values(configs, "--config"))
    to_delete = list(dict.fromkeys(k.strip() for k in deleted))
    if partitions is None and not to_set and not to_delete:
        raise CliUsageError("nothing to alter: give --partitions, --config or --delete-config")
    if any(not k for k in to_delete):
        raise CliUsageError("invalid --delete-config '': expected a config name")
    both = sorted(set(to_set) & set(to_delete))
    if both:
        raise CliUsageError(f"config {both[0]!r} is both set and deleted")

    admin, metadata = admin_client(client)
    problem = topic_error(metadata, name)
    if problem:
        raise CliError(problem)
    current = len(metadata.topics[name].partitions)
    if partitions is not None and partitions < current:
        raise CliError(f"topic {name!r} has {current} partitions; the count can only grow")

    result: dict[str, Any] = {"topic": name, "dry_run": dry_run}
    if to_set or to_delete:
        entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in to_set.items()]
        entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in to_delete]
        resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=entries)
        futures = admin.incremental_alter_configs([resource], validate_only=dry_run, **request_kwargs(client))
        for future in futures.values():
            future_result(future, f"cannot alter configs of topic {name!r}")
        result["set"] = to_set
        result["deleted"] = to_delete
    if partitions is not None and partitions != current:
        futures = admin.create_partitions(
            [NewPartitions(name, partitions)], validate_only=dry_run, operation_timeout=client.timeout, **request_kwargs(client)
        )
        for future in futures.values():
            future_result(future, f"cannot grow topic {name!r} to {partitions} partitions")
    if partitions is not None:
        result["partitions"] = {"before": current, "after": partitions}

    if as_json:
        echo_json(result)
        return
    changes = []
    if partitions is not None:
        changes.append(f"partitions {current} -> {partitions}" if partitions != current else f"partitions unchanged ({current})")
    changes += [f"set {k}={v}" for k, v in to_set.items()]
    changes += [f"deleted {k}" for k in to_delete]
    prefix = "dry run, nothing changed: " if dry_run else ""
    echo(f"{'validated' if dry_run else 'altered'} topic {name}: {prefix}{'; '.join(changes)}")
