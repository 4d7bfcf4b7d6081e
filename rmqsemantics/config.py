"""The semantics layer's one configuration object, built once at start-up from server.properties."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SemanticsConfig:
    """RocketMQ settings, under RocketMQ's key names where RocketMQ has them."""

    # enablePropertyFilter: SQL92 views. RocketMQ's default is false (its brokers evaluate SQL
    # only when asked to); here filtering is the point of the broker, so it is on by default.
    enable_property_filter: bool = True
    tag_header: str = "TAGS"  # the record header holding a record's tag (RocketMQ's TAGS property)
