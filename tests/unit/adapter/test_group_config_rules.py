"""Group configs (issue 22): Kafka's names, ranges and messages, and their durable store."""

from __future__ import annotations

import dataclasses
import json

import pytest

from rmqkafka.adapter.config import AdapterConfig
from rmqkafka.adapter.group_configs import GroupConfigStore, validate_group_configs
from rmqkafka.adapter.topic_configs import InvalidConfig

CONFIG = AdapterConfig()


def refusal(configs: dict, config: AdapterConfig = CONFIG) -> str:
    with pytest.raises(InvalidConfig) as caught:
        validate_group_configs(configs, config)
    return str(caught.value)


def test_valid_overrides_are_kept_and_nulls_dropped():
    configs = {"consumer.session.timeout.ms": "50000", "consumer.heartbeat.interval.ms": "6000",
               "share.auto.offset.reset": "by_duration:PT1H", "share.isolation.level": "read_committed",
               "share.record.lock.duration.ms": "15000", "rmq.redelivery.backoff": "levels",
               "rmq.max.reconsume.times": "3", "share.session.timeout.ms": None}
    expected = {k: v for k, v in configs.items() if v is not None}
    assert validate_group_configs(configs, CONFIG) == expected


def test_unknown_name_is_refused():
    assert refusal({"session.timeout.ms": "50000"}) == "Unknown group config name: session.timeout.ms"


@pytest.mark.parametrize("name, value, message", [
    ("consumer.session.timeout.ms", "44999",
     "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms"),
    ("consumer.session.timeout.ms", "60001",
     "consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms"),
    ("consumer.heartbeat.interval.ms", "4999",
     "consumer.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms"),
    ("consumer.heartbeat.interval.ms", "15001",
     "consumer.heartbeat.interval.ms must be less than or equal to group.consumer.max.heartbeat.interval.ms"),
    ("share.session.timeout.ms", "61000",
     "share.session.timeout.ms must be less than or equal to group.share.max.session.timeout.ms"),
    ("share.heartbeat.interval.ms", "100",
     "share.heartbeat.interval.ms must be greater than or equal to group.share.min.heartbeat.interval.ms"),
    ("consumer.session.timeout.ms", "abc",
     "Invalid value abc for configuration consumer.session.timeout.ms: Not a number of type INT"),
    ("consumer.session.timeout.ms", "0",
     "Invalid value 0 for configuration consumer.session.timeout.ms: Value must be at least 1"),
    ("consumer.session.timeout.ms", "2147483648",
     "Invalid value 2147483648 for configuration consumer.session.timeout.ms: Not a number of type INT"),
    ("share.record.lock.duration.ms", "999",
     "Invalid value 999 for configuration share.record.lock.duration.ms: Value must be at least 1000"),
    ("share.record.lock.duration.ms", "14999",
     "share.record.lock.duration.ms must be greater than or equal to group.share.min.record.lock.duration.ms"),
    ("share.record.lock.duration.ms", "60001",
     "share.record.lock.duration.ms must be less than or equal to group.share.max.record.lock.duration.ms"),
    ("share.isolation.level", "serializable",
     "Invalid value serializable for configuration share.isolation.level: String must be one of: "
     "read_committed, read_uncommitted"),
    ("share.auto.offset.reset", "newest",
     "Invalid value newest for configuration share.auto.offset.reset: must be latest, earliest or "
     "by_duration:<ISO-8601 duration>"),
    ("rmq.redelivery.backoff", "fast",
     "Invalid value fast for configuration rmq.redelivery.backoff: String must be one of: none, levels"),
    ("rmq.max.reconsume.times", "-1",
     "Invalid value -1 for configuration rmq.max.reconsume.times: Value must be at least 0"),
    ("rmq.max.reconsume.times", "40000",
     "Invalid value 40000 for configuration rmq.max.reconsume.times: Value must be in the range [0, 32766]"),
])
def test_out_of_range_values_are_refused_with_kafkas_message(name, value, message):
    assert refusal({name: value}) == message


def test_max_reconsume_times_zero_is_accepted_as_rocketmq_allows_it():
    # RocketMQ's maxReconsumeTimes=0: no retry, a failed record goes straight to the DLQ
    assert validate_group_configs({"rmq.max.reconsume.times": "0"}, CONFIG) == {"rmq.max.reconsume.times": "0"}


def test_ranges_follow_the_brokers_settings():
    wide = dataclasses.replace(CONFIG, group_consumer_min_session_timeout_ms=6000,
                               group_consumer_min_heartbeat_interval_ms=1000)
    assert validate_group_configs({"consumer.session.timeout.ms": "6000",
                                   "consumer.heartbeat.interval.ms": "1000"}, wide)
    refusal({"consumer.session.timeout.ms": "6000"})  # the default minimum is 45000


def test_share_ranges_and_defaults_follow_the_brokers_group_share_settings():
    fast = dataclasses.replace(CONFIG, group_share_min_session_timeout_ms=3000, group_share_session_timeout_ms=3000,
                               group_share_min_heartbeat_interval_ms=500, group_share_heartbeat_interval_ms=500)
    assert validate_group_configs({"share.session.timeout.ms": "4000", "share.heartbeat.interval.ms": "700"}, fast)
    assert refusal({"share.session.timeout.ms": "4000"}) == (
        "share.session.timeout.ms must be greater than or equal to group.share.min.session.timeout.ms")
    assert refusal({"share.heartbeat.interval.ms": "400"}, fast) == (
        "share.heartbeat.interval.ms must be greater than or equal to group.share.min.heartbeat.interval.ms")
    store = GroupConfigStore(None)
    assert store.share_timeouts("g", fast) == (3000, 500)
    store.set("g", {"share.heartbeat.interval.ms": "700"})
    assert store.share_timeouts("g", fast) == (3000, 700)


def test_session_timeout_must_exceed_the_heartbeat_interval_of_the_whole_set():
    wide = dataclasses.replace(CONFIG, group_consumer_min_session_timeout_ms=6000)
    # the heartbeat interval is the broker's default (5000), not overridden
    assert refusal({"consumer.session.timeout.ms": "6000"}, dataclasses.replace(
        wide, group_consumer_heartbeat_interval_ms=6000, group_consumer_max_heartbeat_interval_ms=6000)) == (
        "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms")


def test_store_is_durable_and_drops_a_group(tmp_path):
    store = GroupConfigStore(tmp_path)
    store.set("g1", {"consumer.session.timeout.ms": "50000"})
    store.set("#seq", {"consumer.heartbeat.interval.ms": "6000"})  # any group id, the map's own key too
    again = GroupConfigStore(tmp_path)
    assert again.get("g1") == {"consumer.session.timeout.ms": "50000"}
    assert again.groups() == ["#seq", "g1"]
    assert again.consumer_timeouts("#seq", CONFIG) == (45_000, 6000)
    assert again.consumer_timeouts("other", CONFIG) == (45_000, 5000)
    again.drop("g1")
    assert GroupConfigStore(tmp_path).groups() == ["#seq"]


def test_snapshot_lags_by_the_interval_but_the_journal_holds_every_change(tmp_path):
    now = [0]
    store = GroupConfigStore(tmp_path, snapshot_interval_ms=1000, now_ms=lambda: now[0])
    store.set("g1", {"consumer.session.timeout.ms": "50000"})  # the first commit writes the snapshot
    store.set("g2", {"share.isolation.level": "read_committed"})
    snapshot = json.loads((tmp_path / "group_configs.json").read_text())
    assert "g/g2" not in snapshot  # within the interval: not rewritten
    (tmp_path / "group_configs.json").write_text("{damaged")
    assert GroupConfigStore(tmp_path).groups() == ["g1", "g2"]  # the journal has it all
    store.close()
    assert "g/g2" in json.loads((tmp_path / "group_configs.json").read_text())
