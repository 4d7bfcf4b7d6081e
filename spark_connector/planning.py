"""Driver-side planning shared by the batch and the streaming reader.

Which topic-partitions a subscription covers, and turning an :class:`OffsetSpec` into
concrete offsets with ListOffsets — including ``failOnDataLoss`` for requested offsets
outside the log and Spark's rules for ``startingOffsetsByTimestampStrategy``.
"""

from __future__ import annotations

import logging
import re

from .client import DATA_LOSS_HINT, Metadata
from .errors import DataLossError, KafkaOptionError, UnknownTopicError
from .offsets import EARLIEST, LATEST, OffsetMap, OffsetSpec, TopicPartition
from .options import ReadOptions
from .views import is_view_name

log = logging.getLogger("spark_connector")


def topic_partitions(
    opts: ReadOptions, meta: Metadata, *, strict: bool = True
) -> list[TopicPartition]:
    """The topic-partitions ``opts`` reads now (sorted).

    ``subscribe`` and ``assign`` name topics (and partitions) that must exist when
    ``strict`` (raising :class:`UnknownTopicError`); ``subscribePattern`` (a full match,
    as Java's ``Pattern.matches``) may match nothing yet.
    """
    topics = meta.topics()
    if opts.subscribe is not None:
        missing = [t for t in opts.subscribe if t not in topics]
        if missing and strict:
            raise UnknownTopicError(
                f"topic(s) {', '.join(missing)} named by option 'subscribe' do not exist on "
                f"{opts.client.bootstrap_servers} (existing topics: "
                f"{', '.join(sorted(topics)) or 'none'})"
            )
        return sorted((t, p) for t in opts.subscribe if t in topics for p in range(topics[t]))
    if opts.subscribe_pattern is not None:
        pattern = re.compile(opts.subscribe_pattern)
        return sorted(
            (t, p) for t, n in topics.items()
            if pattern.fullmatch(t) and not (opts.view is not None and is_view_name(t))
            for p in range(n)
        )
    assert opts.assign is not None
    missing_tps = [(t, p) for t, p in opts.assign if p >= topics.get(t, 0) or p < 0]
    if missing_tps and strict:
        raise UnknownTopicError(
            "option 'assign' names partitions that do not exist: "
            + ", ".join(
                f"{t}-{p} (topic {'has ' + str(topics[t]) + ' partitions' if t in topics else 'does not exist'})"
                for t, p in missing_tps
            )
        )
    return sorted(tp for tp in opts.assign if tp not in missing_tps)


def resolve(
    spec: OffsetSpec,
    tps: list[TopicPartition],
    meta: Metadata,
    *,
    option: str,
    opts: ReadOptions,
    is_start: bool,
) -> OffsetMap:
    """Concrete offsets for ``tps`` from ``spec`` (``option`` names it in errors)."""
    if not tps:
        return {}
    if spec.kind == "earliest":
        return meta.earliest(tps)
    if spec.kind == "latest":
        return meta.latest(tps)
    if spec.kind in ("timestamp", "timestamps"):
        return _by_time(spec, tps, meta, option, opts, is_start)

    given = spec.per_partition
    extra = sorted(set(given) - set(tps))
    missing = sorted(set(tps) - set(given))
    if extra:
        raise UnknownTopicError(
            f"option '{option}' names topic-partitions the query does not read or that do "
            f"not exist: {', '.join(f'{t}-{p}' for t, p in extra)}"
        )
    if missing:
        raise KafkaOptionError(
            f"if option '{option}' gives specific offsets it must give one for every "
            f"topic-partition (use -2 for earliest, -1 for latest); missing: "
            f"{', '.join(f'{t}-{p}' for t, p in missing)}"
        )
    earliest = meta.earliest(tps)
    latest = meta.latest(tps)
    out: OffsetMap = {}
    for tp in tps:
        offset = given[tp]
        if offset == EARLIEST:
            out[tp] = earliest[tp]
        elif offset == LATEST:
            out[tp] = latest[tp]
        elif offset < earliest[tp]:
            _report(
                opts,
                f"option '{option}' asks for offset {offset} of {tp[0]}-{tp[1]}, but its "
                f"earliest available offset is {earliest[tp]}.",
                f"starting at {earliest[tp]}",
            )
            out[tp] = earliest[tp]
        elif offset > latest[tp]:
            _report(
                opts,
                f"option '{option}' asks for offset {offset} of {tp[0]}-{tp[1]}, beyond its "
                f"latest offset {latest[tp]}.",
                f"using {latest[tp]}",
            )
            out[tp] = latest[tp]
        else:
            out[tp] = offset
    return out


def _by_time(
    spec: OffsetSpec,
    tps: list[TopicPartition],
    meta: Metadata,
    option: str,
    opts: ReadOptions,
    is_start: bool,
) -> OffsetMap:
    if spec.kind == "timestamp":
        assert spec.timestamp is not None
        stamps = {tp: spec.timestamp for tp in tps}
    else:
        stamps = spec.per_partition
        missing = sorted(set(tps) - set(stamps))
        extra = sorted(set(stamps) - set(tps))
        if missing or extra:
            raise KafkaOptionError(
                f"option '{option}' must give a timestamp for exactly the topic-partitions "
                "the query reads"
                + (f"; missing: {', '.join(f'{t}-{p}' for t, p in missing)}" if missing else "")
                + (f"; not read: {', '.join(f'{t}-{p}' for t, p in extra)}" if extra else "")
            )
    found = meta.for_times(stamps)
    no_match = sorted(tp for tp, offset in found.items() if offset < 0)
    if no_match:
        if is_start and opts.timestamp_strategy == "error":
            raise KafkaOptionError(
                f"option '{option}': no record at or after the timestamp in "
                f"{', '.join(f'{t}-{p} ({stamps[(t, p)]})' for t, p in no_match)}; set "
                "startingOffsetsByTimestampStrategy=latest to start at the latest offset there"
            )
        found.update(meta.latest(no_match))  # ending: nothing newer -> read to the end
    return found


def _report(opts: ReadOptions, what: str, instead: str) -> None:
    if opts.fail_on_data_loss:
        raise DataLossError(f"{what} {DATA_LOSS_HINT}")
    log.warning("failOnDataLoss=false: %s %s instead", what, instead)
