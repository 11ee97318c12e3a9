"""GC pauses are measured per generation and exported; the start-up heap is frozen out of full collections."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from hookserver.observability.gcpauses import GcPauses, freeze_startup_heap


@pytest.fixture
def pauses() -> Iterator[GcPauses]:
    watcher = GcPauses().attach()
    yield watcher
    watcher.detach()


def test_a_full_collection_is_counted_and_timed(pauses: GcPauses) -> None:
    registry = CollectorRegistry()
    pauses.register(registry)
    before = pauses.collections[2]
    gc.collect()
    assert pauses.collections[2] == before + 1
    assert pauses.pause_s[2] > 0 and pauses.max_pause_s[2] > 0
    text = generate_latest(registry).decode()
    assert f'hookserver_gc_collections_total{{generation="2"}} {float(before + 1)}' in text
    assert 'hookserver_gc_pause_seconds_total{generation="2"}' in text
    assert "hookserver_gc_frozen_objects" in text
    status = pauses.status()
    assert status["generations"]["2"]["collections"] == before + 1
    assert status["generations"]["2"]["pause_ms_max"] > 0


def test_detached_it_counts_nothing_more(pauses: GcPauses) -> None:
    gc.collect()
    pauses.detach()
    counted = pauses.collections[2]
    gc.collect()
    assert pauses.collections[2] == counted
    assert pauses._on_gc not in gc.callbacks
    pauses.detach()  # twice is fine


def test_a_stop_without_its_start_is_ignored() -> None:
    pauses = GcPauses(clock=lambda: 5.0)
    pauses._on_gc("stop", {"generation": 2, "collected": 3})  # attached mid-collection
    assert pauses.collections == [0, 0, 0]
    pauses._on_gc("start", {"generation": 1})
    pauses._on_gc("stop", {"generation": 1, "collected": 3})
    assert pauses.collections == [0, 1, 0] and pauses.collected[1] == 3


def test_freezing_the_start_up_heap_takes_it_out_of_full_collections() -> None:
    # Live objects are frozen (never walked again); garbage made afterwards is still collected.
    try:
        frozen, took = freeze_startup_heap()
        assert frozen == gc.get_freeze_count() > 1000 and took > 0

        class Cycle:
            def __init__(self) -> None:
                self.me = self

        Cycle()
        assert gc.collect() >= 1  # the new cycle is garbage the collector still finds
    finally:
        gc.unfreeze()
    assert gc.get_freeze_count() == 0


def test_a_collection_started_by_a_reader_holding_the_lock_does_not_deadlock() -> None:
    """`status()` and a scrape allocate under the lock; a collection they start runs the callback on the same
    thread. It must not wait on its own lock (it did: `hookctl status` and SIGTERM hung, ~1 run in 10 of the
    e2e reconciler test)."""
    import gc
    import threading

    from hookserver.observability.gcpauses import GcPauses

    pauses = GcPauses().attach()
    done = threading.Event()

    def reader() -> None:
        with pauses._lock:  # what status() and collect() hold while they build their answer
            gc.collect()  # a collection the reader's allocations started
        done.set()

    thread = threading.Thread(target=reader, daemon=True)
    try:
        thread.start()
        finished = done.wait(5.0)
    finally:
        pauses.detach()  # before the fix the reader thread is stuck for good; keep other collections out of it
    assert finished, "the collection's callback waited on the lock its own thread holds"
    assert sum(pauses.status()["generations"][g]["collections"] for g in ("0", "1", "2")) >= 1
