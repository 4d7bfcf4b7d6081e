"""``rmqk configs describe|alter``: broker configs at run time, the counterpart of
``kafka-configs.sh --entity-type brokers`` (DescribeConfigs, IncrementalAlterConfigs).

``--broker ID`` names one broker (default: the one ``--bootstrap-server`` reaches first);
``--broker-defaults`` the cluster-wide defaults (kafka-configs' ``--entity-default``, the
resource named ""). ``--add-config`` takes kafka-configs' syntax, ``k1=v1,k2=[a,b]`` (square
brackets around a value with commas), and may be repeated; ``--delete-config k1,k2`` too.
Works against this broker and a real Kafka alike.

librdkafka and kafka-python's public admin calls refuse the resource name "" (they route a
broker resource by its id); for ``--broker-defaults`` the request is built and sent with
kafka-python's own request classes instead, with the bootstrap servers and the ``-X``
security settings translated (see ``_KAFKA_PYTHON``).
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
    future_result,
    handle_errors,
    json_option,
    request_kwargs,
)

SOURCES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
           4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG"}
_DYNAMIC = (2, 3)
# librdkafka -X keys that --broker-defaults understands, and kafka-python's names for them
_KAFKA_PYTHON = {"security.protocol": "security_protocol", "sasl.mechanism": "sasl_mechanism",
                 "sasl.mechanisms": "sasl_mechanism", "sasl.username": "sasl_plain_username",
                 "sasl.password": "sasl_plain_password", "ssl.ca.location": "ssl_cafile",
                 "ssl.certificate.location": "ssl_certfile", "ssl.key.location": "ssl_keyfile"}


def _target(options: list[Any]) -> Any:
    """click option pair --broker / --broker-defaults."""
    options.insert(0, click.option("--broker-defaults", is_flag=True,
                                   help="The cluster-wide defaults (kafka-configs --entity-default)."))
    options.insert(0, click.option("--broker", "broker_id", type=click.IntRange(min=0), default=None, metavar="ID",
                                   help="The broker's id [default: the bootstrap broker]."))

    def decorate(func: Any) -> Any:
        for option in reversed(options):
            func = option(func)
        return func

    return decorate


@click.group("configs", cls=Group, no_args_is_help=True)
def configs() -> None:
    """Describe and change broker configs at run time (dynamic broker configs)."""


@configs.command("describe", cls=Command)
@_target([click.option("--all", "show_all", is_flag=True, help="Every config, not only the dynamic ones.")])
@json_option
@client_options
@handle_errors
def describe(broker_id: int | None, broker_defaults: bool, show_all: bool, as_json: bool,
             client: ClientOptions) -> None:
    """A broker's configs with their sources (default: only those set dynamically)."""
    name, entries = _describe(client, _resource_name(client, broker_id, broker_defaults))
    shown = [e for e in entries if show_all or e["source"] in (SOURCES[2], SOURCES[3])]
    if as_json:
        echo_json({"broker": name, "configs": shown})
        return
    echo(f"Configs of {'the cluster-wide defaults' if name == '' else 'broker ' + name}:")
    echo_table(["NAME", "VALUE", "SOURCE", "READ-ONLY"],
               [(e["name"], "[hidden]" if e["sensitive"] else e["value"], e["source"], str(e["read_only"]).lower())
                for e in shown])


@configs.command("alter", cls=Command)
@_target([
    click.option("--add-config", "added", multiple=True, metavar="K=V[,K=V]",
                 help="Configs to set: k1=v1,k2=[a,b] (repeatable)."),
    click.option("--delete-config", "deleted", multiple=True, metavar="K[,K]",
                 help="Configs to remove, back to the next level (repeatable)."),
    click.option("--dry-run", is_flag=True, help="Only validate (validate_only); change nothing."),
])
@json_option
@client_options
@handle_errors
def alter(broker_id: int | None, broker_defaults: bool, added: tuple[str, ...], deleted: tuple[str, ...],
          dry_run: bool, as_json: bool, client: ClientOptions) -> None:
    """Set or remove dynamic broker configs (incremental alter configs)."""
    to_set: dict[str, str] = {}
    for text in added:
        to_set.update(parse_add_config(text))
    to_delete = list(dict.fromkeys(k.strip() for text in deleted for k in text.split(",") if k.strip()))
    if not to_set and not to_delete:
        raise CliUsageError("nothing to alter: give --add-config or --delete-config")
    both = sorted(set(to_set) & set(to_delete))
    if both:
        raise CliUsageError(f"config {both[0]!r} is both set and deleted")
    name = _resource_name(client, broker_id, broker_defaults)
    what = f"cannot alter configs of {'the cluster-wide defaults' if name == '' else 'broker ' + name}"
    if name == "":
        _defaults_alter(client, to_set, to_delete, dry_run, what)
    else:
        from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

        admin, _ = admin_client(client)
        entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in to_set.items()]
        entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in to_delete]
        resource = ConfigResource(ResourceType.BROKER, name, incremental_configs=entries)
        for future in admin.incremental_alter_configs([resource], validate_only=dry_run,
                                                      **request_kwargs(client)).values():
            future_result(future, what)
    if as_json:
        echo_json({"broker": name, "dry_run": dry_run, "set": to_set, "deleted": to_delete})
        return
    changes = [f"set {k}={v}" for k, v in to_set.items()] + [f"deleted {k}" for k in to_delete]
    target = "the cluster-wide defaults" if name == "" else f"broker {name}"
    prefix = "validated" if dry_run else "altered"
    echo(f"{prefix} {target}: {'dry run, nothing changed: ' if dry_run else ''}{'; '.join(changes)}")


def parse_add_config(text: str) -> dict[str, str]:
    """kafka-configs' ``--add-config`` syntax: ``k1=v1,k2=[a,b]``; brackets keep commas."""
    pairs: dict[str, str] = {}
    depth, start, parts = 0, 0, []
    for i, char in enumerate(text):
        if char == "[":
            depth += 1
        elif char == "]":
            depth = max(0, depth - 1)
        elif char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    for part in (p for p in parts if p.strip()):
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise CliUsageError(f"invalid --add-config {part!r}: expected KEY=VALUE")
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        pairs[key.strip()] = value
    return pairs


def _resource_name(client: ClientOptions, broker_id: int | None, broker_defaults: bool) -> str:
    if broker_defaults and broker_id is not None:
        raise CliUsageError("give --broker or --broker-defaults, not both")
    if broker_defaults:
        return ""
    if broker_id is not None:
        return str(broker_id)
    _, metadata = admin_client(client)
    return str(metadata.orig_broker_id if metadata.orig_broker_id >= 0 else min(metadata.brokers))


def _describe(client: ClientOptions, name: str) -> tuple[str, list[dict[str, Any]]]:
    what = f"cannot describe configs of {'the cluster-wide defaults' if name == '' else 'broker ' + name}"
    if name == "":
        return name, _defaults_describe(client, what)
    from confluent_kafka.admin import ConfigResource, ResourceType

    admin, _ = admin_client(client)
    resource = ConfigResource(ResourceType.BROKER, name)
    (future,) = admin.describe_configs([resource], **request_kwargs(client)).values()
    entries = future_result(future, what)
    return name, [
        {"name": e.name, "value": e.value, "source": SOURCES.get(_int(e.source), str(e.source)),
         "read_only": bool(e.is_read_only), "sensitive": bool(e.is_sensitive)}
        for e in sorted(entries.values(), key=lambda e: e.name)
    ]


def _int(value: Any) -> int:
    return int(getattr(value, "value", value))


# --------------------------------------------------------------------------- the "" resource


def _kafka_python(client: ClientOptions) -> Any:
    from kafka import KafkaAdminClient

    kwargs: dict[str, Any] = {}
    for key, value in client.properties:
        if key not in _KAFKA_PYTHON:
            raise CliUsageError(f"-X {key} is not supported with --broker-defaults "
                                f"(supported: {', '.join(sorted(_KAFKA_PYTHON))})")
        kwargs[_KAFKA_PYTHON[key]] = value
    if "security_protocol" in kwargs:
        kwargs["security_protocol"] = kwargs["security_protocol"].upper()
    try:
        return KafkaAdminClient(bootstrap_servers=client.bootstrap.split(","), client_id="rmqk",
                                request_timeout_ms=max(1000, int(client.timeout * 1000)), **kwargs)
    except Exception as exc:  # noqa: BLE001 - NoBrokersAvailable and bad settings alike
        raise CliError(f"cannot connect to {client.bootstrap}: {exc}") from None


def _send(admin: Any, request: Any) -> Any:
    async def send() -> Any:
        return await admin._manager.send(request)  # noqa: SLF001 - see the module docstring

    return admin._manager.run(send)  # noqa: SLF001


def _defaults_describe(client: ClientOptions, what: str) -> list[dict[str, Any]]:
    from kafka.admin import ConfigResource, ConfigResourceType

    admin = _kafka_python(client)
    try:
        request = admin._describe_configs_request([ConfigResource(ConfigResourceType.BROKER, "")], False)  # noqa: SLF001
        (result,) = _send(admin, request).results
    finally:
        admin.close()
    _check(result, what)
    return [{"name": c.name, "value": c.value, "source": SOURCES.get(c.config_source, str(c.config_source)),
             "read_only": bool(c.read_only), "sensitive": bool(c.is_sensitive)}
            for c in sorted(result.configs, key=lambda c: c.name)]


def _defaults_alter(client: ClientOptions, to_set: dict[str, str], to_delete: list[str], dry_run: bool,
                    what: str) -> None:
    from kafka.admin import ConfigResource, ConfigResourceType

    configs: dict[str, Any] = {k: ("SET", v) for k, v in to_set.items()}
    configs.update({k: ("DELETE", None) for k in to_delete})
    admin = _kafka_python(client)
    try:
        request = admin._alter_configs_request(  # noqa: SLF001
            [ConfigResource(ConfigResourceType.BROKER, "", configs=configs)], dry_run, incremental=True)
        (result,) = _send(admin, request).responses
    finally:
        admin.close()
    _check(result, what)


def _check(result: Any, what: str) -> None:
    """An error in the words librdkafka's errors are shown in (message, then the code's name)."""
    if result.error_code:
        from kio.schema.errors import ErrorCode

        raise CliError(f"{what}: {result.error_message or ''} ({ErrorCode(result.error_code).name.upper()})")
