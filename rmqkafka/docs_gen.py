"""Reference tables of the documentation site, generated from the code they describe.

The site's hook (docs/hooks.py) replaces a marker line ``<!-- generated: NAME -->`` in a page
with ``GENERATED[NAME]()``, so the pages show what the broker validates and advertises and
cannot drift from it: the broker config keys (adapter.properties KNOWN_KEYS with their
INTEGER_RANGES, and whether DescribeConfigs lets them change at run time) and the API versions
ApiVersions advertises (adapter.codec.versions). tests/unit/test_docs_site.py checks that
every key and API appears in the built site.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from rmqkafka.adapter import broker_configs
from rmqkafka.adapter.codec.versions import ADVERTISED_VERSIONS, REJECTED_VERSIONS, ApiKey
from rmqkafka.adapter.properties import (
    DEFAULT_DATA_DIR,
    INT_MAX,
    INTEGER_RANGES,
    KNOWN_KEYS,
    LONG_MAX,
    build_config,
)

MARKER = re.compile(r"^<!-- generated: ([a-z-]+) -->$", re.MULTILINE)
_BOUNDS = {INT_MAX: "2^31-1", LONG_MAX: "2^63-1", -INT_MAX - 1: "-2^31", -LONG_MAX - 1: "-2^63"}
_UPDATE_MODES = {
    broker_configs.CLUSTER: "at run time (cluster-wide or per broker)",
    broker_configs.BROKER: "at run time (per broker)",
    broker_configs.PREFIX_ONLY: "at run time with a listener prefix",
    broker_configs.READ_ONLY: "at start",
}


def _bound(value: int) -> str:
    return _BOUNDS.get(value, str(value))


def _default_values() -> dict[str, str]:
    """What DescribeConfigs reports for a broker started without a config file or flags."""
    config = build_config({}, environ={})
    values = {name: spec.value(config) for name, spec in broker_configs.DEFS.items()}
    return {**values, "log.dirs": DEFAULT_DATA_DIR}  # not this machine's expanded home directory


def broker_config_keys() -> str:
    """A Markdown table of every key server.properties accepts."""
    defaults = _default_values()
    rows = ["| key | range | default (DescribeConfigs) | changes |", "|---|---|---|---|"]
    for key in sorted(KNOWN_KEYS):
        bounds = INTEGER_RANGES.get(key)
        range_text = f"{_bound(bounds.low)}..{_bound(bounds.high)} ({bounds.why})" if bounds else ""
        default = f"`{defaults[key]}`" if defaults.get(key) else ""
        mode = _UPDATE_MODES.get(broker_configs.update_mode(key), "")
        rows.append(f"| `{key}` | {range_text} | {default} | {mode} |")
    return "\n".join(rows)


def api_versions() -> str:
    """A Markdown table of the APIs ApiVersions advertises, by api key."""
    rows = ["| API | key | versions | refused with UNSUPPORTED_VERSION |", "|---|---|---|---|"]
    for key in sorted(ADVERTISED_VERSIONS):
        name = "".join(part.capitalize() for part in ApiKey(key).name.split("_"))
        low, high = ADVERTISED_VERSIONS[key]
        refused = ", ".join(str(v) for v in sorted(REJECTED_VERSIONS.get(key, ())))
        rows.append(f"| {name} | {int(key)} | {low}-{high} | {refused} |")
    return "\n".join(rows)


GENERATED: dict[str, Callable[[], str]] = {
    "broker-config-keys": broker_config_keys,
    "api-versions": api_versions,
}


def expand(markdown: str) -> str:
    """``markdown`` with every marker line replaced by its table (an unknown name: KeyError)."""
    return MARKER.sub(lambda m: GENERATED[m[1]](), markdown)
