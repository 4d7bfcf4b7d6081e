"""Which topics the log cleaner compacts, and by which rules: a topic's configs
(cleanup.policy and the compaction configs, Kafka's LogConfig) turned into the storage
layer's CompactionSettings, which knows nothing of config names.

The broker's own topics are never compacted; a cleanup.policy naming "compact" is refused
on them (topic_configs.NEVER_COMPACTED), and one stored before that refusal existed is
dropped at start (``drop_compaction_of_system_topics``) so their retention applies again."""

from __future__ import annotations

import logging

from rmqkafka.rmqsemantics.semantics import SYSTEM_TOPICS
from rmqkafka.storage.compaction_cleaner import CompactionSettings
from rmqkafka.storage.config import StorageConfig
from rmqkafka.storage.topics import TopicRegistry

from .config import AdapterConfig
from .topic_configs import NEVER_COMPACTED, effective

log = logging.getLogger(__name__)


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



def drop_compaction_of_system_topics(topics: TopicRegistry) -> None:
    """Remove a cleanup.policy naming "compact" from the system topics that hold records (an
    older broker accepted it; retention stopped there and the cleaner never ran): logged, and
    written as any config change. A write that fails is logged; the next start tries again."""
    for name in sorted(NEVER_COMPACTED):
        meta = topics.get(name)
        policy = None if meta is None else meta.configs.get("cleanup.policy")
        if policy is None or "compact" not in policy.split(","):
            continue
        configs = {k: v for k, v in meta.configs.items() if k != "cleanup.policy"}
        try:
            topics.set_configs(name, configs)
        except OSError as exc:
            log.error("system topic %s has cleanup.policy=%s, which stops its retention; could not remove it "
                      "(%s): tried again at the next start", name, policy, exc)
            continue
        log.warning("system topic %s had cleanup.policy=%s, which stopped its retention (the log cleaner never "
                    "compacts it); removed: it follows the delete policy again", name, policy)
