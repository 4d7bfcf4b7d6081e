"""Per-topic configs this broker knows, with Kafka's names, defaults and validation.

Unknown names are refused (INVALID_CONFIG) rather than silently stored, so nobody believes a
setting took effect when it did not. Settings that exist for tool compatibility but have no
effect on a single-node broker with one shared commitlog say so in their documentation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rmqkafka.storage.config import StorageConfig

from .config import AdapterConfig


class InvalidConfig(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class ConfigSpec:
    name: str
    kind: str  # Kafka's ConfigType names: BOOLEAN STRING INT SHORT LONG DOUBLE LIST
    default: Callable[[AdapterConfig, StorageConfig], str]
    validate: Callable[[str], None]
    doc: str


def _long(minimum: int) -> Callable[[str], None]:
    def check(value: str) -> None:
        try:
            number = int(value)
        except ValueError:
            raise InvalidConfig(f"{value!r} is not an integer") from None
        if number < minimum:
            raise InvalidConfig(f"{number} is below the minimum {minimum}")

    return check


def _one_of(*allowed: str) -> Callable[[str], None]:
    def check(value: str) -> None:
        if value not in allowed:
            raise InvalidConfig(f"{value!r} is not one of {', '.join(allowed)}")

    return check


def _retention_ms(_: AdapterConfig, s: StorageConfig) -> str:
    return str(-1 if s.retention_ms is None else s.retention_ms)


def _retention_bytes(_: AdapterConfig, s: StorageConfig) -> str:
    return str(-1 if s.retention_bytes is None else s.retention_bytes)


SPECS: dict[str, ConfigSpec] = {
    spec.name: spec
    for spec in (
        ConfigSpec(
            "cleanup.policy", "LIST", lambda a, s: "delete", _one_of("delete"),
            "Only 'delete' (whole-segment retention); log compaction is not implemented.",
        ),
        ConfigSpec(
            "compression.type", "STRING", lambda a, s: "producer", _one_of("producer"),
            "Batches are stored as the producer compressed them; the broker never recompresses.",
        ),
        ConfigSpec(
            "max.message.bytes", "INT", lambda a, s: str(a.message_max_bytes), _long(0),
            "The largest record batch this topic accepts (MESSAGE_TOO_LARGE above it).",
        ),
        ConfigSpec(
            "message.timestamp.type", "STRING", lambda a, s: "CreateTime",
            _one_of("CreateTime", "LogAppendTime"),
            "CreateTime keeps the producer's timestamps; LogAppendTime stamps batches on append.",
        ),
        ConfigSpec(
            "retention.ms", "LONG", _retention_ms, _long(-1),
            "Reported for tools; retention applies to the shared commitlog (log.retention.*).",
        ),
        ConfigSpec(
            "retention.bytes", "LONG", _retention_bytes, _long(-1),
            "Reported for tools; retention applies to the shared commitlog (log.retention.*).",
        ),
        ConfigSpec(
            "segment.bytes", "INT", lambda a, s: str(s.segment_bytes), _long(14),
            "Reported for tools; all topics share the commitlog's segments (log.segment.bytes).",
        ),
        ConfigSpec(
            "min.insync.replicas", "INT", lambda a, s: "1", _long(1),
            "Accepted for compatibility; this is a single-replica broker.",
        ),
    )
}


def validate_topic_configs(configs: dict[str, str | None]) -> dict[str, str]:
    """Check names and values; returns the configs to store (None values dropped)."""
    out: dict[str, str] = {}
    for name, value in configs.items():
        spec = SPECS.get(name)
        if spec is None:
            raise InvalidConfig(f"unknown topic config {name!r}")
        if value is None:
            continue
        try:
            spec.validate(value)
        except InvalidConfig as e:
            raise InvalidConfig(f"invalid value for {name}: {e}") from None
        out[name] = value
    return out


def effective(name: str, overrides: dict[str, str], a: AdapterConfig, s: StorageConfig) -> str:
    value = overrides.get(name)
    return value if value is not None else SPECS[name].default(a, s)
