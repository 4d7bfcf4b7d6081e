"""Which topics the log cleaner compacts, and by which rules: a topic's configs
(cleanup.policy and the compaction configs, Kafka's LogConfig) turned into the storage
layer's CompactionSettings, which knows nothing of config names."""

from __future__ import annotations

from rmqkafka.rmqsemantics.semantics import SYSTEM_TOPICS
from rmqkafka.storage.compaction_cleaner import CompactionSettings
from rmqkafka.storage.config import StorageConfig

from .config import AdapterConfig
from .topic_configs import effective


def is_compacted(configs: dict[str, str], a: AdapterConfig, s: StorageConfig) -> bool:
    return "compact" in effective("cleanup.policy", configs, a, s).split(",")


def compaction_settings(topic: str, configs: dict[str, str], a: AdapterConfig,
                        s: StorageConfig) -> CompactionSettings | None:
    """The cleaner's rules for ``topic`` with ``configs``; None unless it is compacted. The
    broker's own topics (half messages, schedules, transaction and share state: records
    in their own formats, some without keys) are never cleaned, whatever their configs."""
    if topic in SYSTEM_TOPICS or not is_compacted(configs, a, s):
        return None

    def get(name: str) -> str:
        return effective(name, configs, a, s)

    return CompactionSettings(
        delete_retention_ms=int(get("delete.retention.ms")),
        min_compaction_lag_ms=int(get("min.compaction.lag.ms")),
        max_compaction_lag_ms=int(get("max.compaction.lag.ms")),
        min_cleanable_dirty_ratio=float(get("min.cleanable.dirty.ratio")),
        segment_ms=int(get("segment.ms")),
        segment_bytes=int(get("segment.bytes")),
    )

