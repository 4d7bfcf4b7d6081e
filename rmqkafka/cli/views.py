"""``rmqk views create|list|describe|delete``: subscription views over the Kafka protocol.

A subscription view is a read-only topic over a source topic and a RocketMQ tag or SQL92
expression, evaluated by the broker. There is no view API in Kafka, so these commands use the
AdminClient calls any Kafka tool can make (see ``adapter/view_configs.py`` on the broker):

- create:   CreateTopics with the configs ``rmq.view.source`` and ``rmq.view.tags`` or
            ``rmq.view.sql`` (partition count and replication factor left to the broker);
- list / describe: Metadata (names, ids, partitions) and DescribeConfigs, which answers a
            view's definition (``rmq.view.source`` tells a view from a topic; ``rmq.view.filter``
            is the expression as the broker reads it);
- delete:   DescribeConfigs first (a name that is a topic is refused: ``rmqk views delete``
            never deletes a topic), then DeleteTopics.

confluent_kafka is imported inside the commands (see ``rmqkafka.cli.common``).
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
    handle_errors,
    json_option,
    kafka_uuid,
    report_error,
    request_kwargs,
)

SOURCE, TAGS, SQL, FILTER = "rmq.view.source", "rmq.view.tags", "rmq.view.sql", "rmq.view.filter"


@click.group("views", cls=Group, no_args_is_help=True)
def views() -> None:
    """Create, list, describe and delete subscription views (filtered read-only topics)."""


# ---------------------------------------------------------------------------------------------
# shared


def definitions(admin: Any, client: ClientOptions, names: list[str]) -> dict[str, dict[str, Any] | None]:
    """DescribeConfigs of ``names``: name -> the view's definition (``source``, ``kind``,
    ``expression``, ``filter``), or None for a topic. Names that do not exist (or cannot be
    described) are left out."""
    from confluent_kafka.admin import ConfigResource, ResourceType

    if not names:
        return {}
    futures = admin.describe_configs([ConfigResource(ResourceType.TOPIC, n) for n in names], **request_kwargs(client))
    found: dict[str, dict[str, Any] | None] = {}
    for resource, future in futures.items():
        try:
            entries = future.result()
        except Exception as exc:  # noqa: BLE001
            if error_code(exc) == "UNKNOWN_TOPIC_OR_PART":
                continue
            raise error_from_exception(exc, f"cannot describe {resource.name!r}") from None
        found[resource.name] = _definition(entries)
    return found


def _definition(entries: dict[str, Any]) -> dict[str, Any] | None:
    def value(name: str) -> str | None:
        entry = entries.get(name)
        return None if entry is None else entry.value

    source = value(SOURCE)
    if source is None:
        return None
    kind = "tags" if value(TAGS) is not None else "sql"
    expression = value(TAGS) if kind == "tags" else value(SQL)
    return {"source": source, "kind": kind, "expression": expression, "filter": value(FILTER)}


def _documents(admin: Any, client: ClientOptions, metadata: Any, found: dict[str, dict[str, Any] | None]) -> list[dict[str, Any]]:
    documents = []
    for name in sorted(n for n, d in found.items() if d is not None):
        topic = metadata.topics.get(name)
        partitions = len(topic.partitions) if topic is not None and topic.error is None else None
        documents.append({"view": name, **found[name], "partitions": partitions})  # type: ignore[dict-item]
    return documents


# ---------------------------------------------------------------------------------------------
# create


@views.command("create", cls=Command)
@click.argument("name", metavar="NAME")
@click.option("-s", "--source", required=True, metavar="TOPIC", help="The topic the view reads.")
@click.option("--tags", metavar="EXPR", help="RocketMQ tag expression: '*' or 'TagA || TagB'.")
@click.option("--sql", metavar="EXPR", help="RocketMQ SQL92 expression over record headers, e.g. \"region = 'eu' AND amount > 100\".")
@click.option("--if-not-exists", is_flag=True, help="Succeed when a view with this definition already exists.")
@click.option("--dry-run", is_flag=True, help="Only validate (the expression, the source, the name); create nothing.")
@json_option
@client_options
@handle_errors
def create(
    name: str,
    source: str,
    tags: str | None,
    sql: str | None,
    if_not_exists: bool,
    dry_run: bool,
    as_json: bool,
    client: ClientOptions,
) -> None:
    """Create a view NAME over a source topic with a tag or SQL92 expression."""
    from confluent_kafka.admin import NewTopic

    if (tags is None) == (sql is None):
        raise CliUsageError("give exactly one of --tags and --sql")
    kind, expression = ("tags", tags) if tags is not None else ("sql", sql)
    config = {SOURCE: source, TAGS if kind == "tags" else SQL: expression}
    admin, _ = admin_client(client)
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=-1, replication_factor=-1, config=config)],
        validate_only=dry_run,
        operation_timeout=client.timeout,
        **request_kwargs(client),
    )
    existed = False
    try:
        futures[name].result()
    except Exception as exc:  # noqa: BLE001
        if not (if_not_exists and error_code(exc) == "TOPIC_ALREADY_EXISTS"):
            raise error_from_exception(exc, f"cannot create view {name!r}") from None
        described = definitions(admin, client, [name])
        if name not in described:
            raise error_from_exception(exc, f"cannot create view {name!r}") from None
        existing = described[name]
        if existing is None:
            raise CliError(f"cannot create view {name!r}: a topic with that name exists") from None
        if (existing["source"], existing["kind"], existing["expression"]) != (source, kind, expression):
            raise CliError(
                f"cannot create view {name!r}: a view with that name exists with another definition "
                f"(source {existing['source']!r}, {existing['kind']} {existing['expression']!r})"
            ) from None
        existed = True
    metadata = admin.list_topics(topic=name, timeout=client.timeout) if not dry_run else None
    topic = metadata.topics.get(name) if metadata is not None else None
    partitions = len(topic.partitions) if topic is not None and topic.error is None else None
    result = {
        "view": name, "source": source, "kind": kind, "expression": expression,
        "created": not dry_run and not existed, "validated": dry_run, "existed": existed, "partitions": partitions,
    }
    if as_json:
        echo_json(result)
    elif existed:
        echo(f"view {name} already exists")
    elif dry_run:
        echo(f"view {name} can be created (dry run, nothing changed)")
    else:
        shown = f" ({partitions} partition{'s' if partitions != 1 else ''})" if partitions else ""
        echo(f"created view {name} over {source}{shown}")


# ---------------------------------------------------------------------------------------------
# list


@views.command("list", cls=Command)
@json_option
@client_options
@handle_errors
def list_views(as_json: bool, client: ClientOptions) -> None:
    """List views: name, source, kind and expression."""
    admin, metadata = admin_client(client)
    names = sorted(n for n, t in metadata.topics.items() if t.error is None)
    documents = _documents(admin, client, metadata, definitions(admin, client, names))
    if as_json:
        echo_json(documents)
    else:
        echo_table(
            ["VIEW", "SOURCE", "KIND", "EXPRESSION"],
            [(d["view"], d["source"], d["kind"], d["expression"]) for d in documents],
        )


# ---------------------------------------------------------------------------------------------
# describe


@views.command("describe", cls=Command)
@click.argument("names", metavar="NAME...", nargs=-1, required=True)
@json_option
@client_options
@handle_errors
def describe(names: tuple[str, ...], as_json: bool, client: ClientOptions) -> None:
    """Definition, normalised filter, id and partitions of views."""
    admin, metadata = admin_client(client)
    wanted = list(dict.fromkeys(names))
    present = [n for n in wanted if n in metadata.topics and metadata.topics[n].error is None]
    found = definitions(admin, client, present)
    documents = _documents(admin, client, metadata, found)
    ids = _topic_ids(admin, client, [doc["view"] for doc in documents])
    for doc in documents:
        doc["view_id"] = ids.get(doc["view"])
    problems = [
        f"{n!r} is a topic, not a view" if n in found else f"view {n!r} does not exist"
        for n in wanted
        if found.get(n) is None
    ]
    if as_json:
        echo_json(documents)
    else:
        for i, doc in enumerate(documents):
            if i:
                echo()
            expression_config = TAGS if doc["kind"] == "tags" else SQL
            echo(
                f"View: {doc['view']}  ViewId: {doc['view_id'] or '-'}  Source: {doc['source']}  "
                f"Partitions: {doc['partitions'] if doc['partitions'] is not None else '-'}"
            )
            echo(f"  {expression_config}: {doc['expression']}")
            echo(f"  {FILTER}: {doc['filter'] if doc['filter'] is not None else '-'}")
    if problems:
        raise CliError("; ".join(problems))


def _topic_ids(admin: Any, client: ClientOptions, names: list[str]) -> dict[str, str | None]:
    from confluent_kafka import TopicCollection

    if not names:
        return {}
    ids: dict[str, str | None] = {}
    for name, future in admin.describe_topics(TopicCollection(names), **request_kwargs(client)).items():
        try:
            ids[name] = kafka_uuid(future.result().topic_id)
        except Exception:  # noqa: BLE001, S110 - shown as '-'
            pass
    return ids


# ---------------------------------------------------------------------------------------------
# delete


@views.command("delete", cls=Command)
@click.argument("names", metavar="NAME...", nargs=-1, required=True)
@click.option("--if-exists", is_flag=True, help="Succeed when the view does not exist.")
@json_option
@client_options
@handle_errors
def delete(names: tuple[str, ...], if_exists: bool, as_json: bool, client: ClientOptions) -> None:
    """Delete views (never their source topics, and never a topic named here)."""
    admin, _ = admin_client(client)
    wanted = list(dict.fromkeys(names))
    found = definitions(admin, client, wanted)
    results: list[dict[str, Any]] = []
    failed = 0
    doomed = []
    for name in wanted:
        if name not in found:
            if if_exists:
                results.append({"view": name, "deleted": False})
            else:
                failed += 1
                report_error(f"cannot delete view {name!r}: it does not exist")
        elif found[name] is None:
            failed += 1
            report_error(f"cannot delete view {name!r}: it is a topic, not a view (use rmqk topics delete)")
        else:
            doomed.append(name)
    if doomed:
        futures = admin.delete_topics(doomed, operation_timeout=client.timeout, **request_kwargs(client))
        for name, future in futures.items():
            try:
                future.result()
                results.append({"view": name, "deleted": True})
            except Exception as exc:  # noqa: BLE001
                if if_exists and error_code(exc) == "UNKNOWN_TOPIC_OR_PART":
                    results.append({"view": name, "deleted": False})
                    continue
                failed += 1
                report_error(error_from_exception(exc, f"cannot delete view {name!r}").message)
    order = {name: i for i, name in enumerate(wanted)}
    results.sort(key=lambda r: order[r["view"]])
    if as_json:
        echo_json(results)
    else:
        for r in results:
            echo(f"deleted view {r['view']}" if r["deleted"] else f"view {r['view']} does not exist")
    if failed:
        raise click.exceptions.Exit(1)
