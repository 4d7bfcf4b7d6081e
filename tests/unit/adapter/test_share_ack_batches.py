"""How ShareFetch/ShareAcknowledge hand acknowledgement batches on (adapter/handlers/_share.py)."""

from __future__ import annotations


def test_adjacent_single_type_batches_are_joined_and_nothing_else():
    from types import SimpleNamespace as B

    from rmqkafka.adapter.handlers._share import ack_batches

    def b(first, last, *types):
        return B(first_offset=first, last_offset=last, acknowledge_types=types)

    joined = ack_batches([b(0, 0, 1), b(1, 1, 1), b(2, 4, 1), b(5, 5, 2), b(6, 6, 2), b(8, 8, 2)])
    assert [(x.first_offset, x.last_offset, x.types) for x in joined] == [(0, 4, (1,)), (5, 6, (2,)), (8, 8, (2,))]
    kept = ack_batches([b(0, 0, 1), b(0, 0, 1), b(3, 1, 1), b(4, 5, 1, 2), b(6, 6, 9), b(7, 7, 1)])
    assert [(x.first_offset, x.last_offset, x.types) for x in kept] == [
        (0, 0, (1,)), (0, 0, (1,)), (3, 1, (1,)), (4, 5, (1, 2)), (6, 6, (9,)), (7, 7, (1,))]
