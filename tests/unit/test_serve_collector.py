"""The serving process tunes the cyclic garbage collector once it has started (rmqk serve)."""

from __future__ import annotations

import gc

from rmqkafka.cli import serve


def test_serving_freezes_start_up_objects_and_collects_the_young_generation_less_often():
    before = gc.get_threshold()
    try:
        serve._tune_collector()
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == (serve.GC_YOUNG_THRESHOLD, before[1], before[2])
        assert serve.GC_YOUNG_THRESHOLD > before[0]
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
