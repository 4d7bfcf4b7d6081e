"""Whether an append brings a view something to read: what wakes a fetch waiting on a view.

A fetch long-polling on a view waits on its source partition, and the store tells the
waiters about every append to it (storage.store.Appended: each written batch's parsed
records and tag codes, which the append computed anyway). The test below runs only while
some fetch waits on the view, once per append, and stops at the first record that matches;
an append nobody waits for never reaches it. For tag filters the tag codes are compared
first (a set intersection in C); only a record whose code is one of the filter's has its
headers checked, as the view reader does.
"""

from __future__ import annotations

from collections.abc import Callable

from rmqkafka.storage.consume_queue import CONTROL_CODE
from rmqkafka.storage.store import Appended

from .filters.record_filter import RecordFilter

ArrivalTest = Callable[[Appended], bool]


def arrival_test(flt: RecordFilter) -> ArrivalTest | None:
    """The test for ``flt``'s view, or None when every append matters (``*``)."""
    codes = flt.codes
    matches = flt.matches_headers
    if codes is None and flt.kind == "tags":
        return None

    def brings_a_match(appended: Appended) -> bool:
        for records, batch_codes in zip(appended.records, appended.tag_codes):
            if batch_codes and batch_codes[0] == CONTROL_CODE:
                return True  # control batches pass through views
            if codes is None:
                if any(matches(record.headers) for record in records):
                    return True
            elif batch_codes is not None and not codes.isdisjoint(batch_codes):
                for record, code in zip(records, batch_codes):
                    if code in codes and matches(record.headers):
                        return True
        return False

    return brings_a_match
