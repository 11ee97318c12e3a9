"""The time-series store: ring bounds, retention and GC on a fake clock, exact aggregates, concurrency."""

from __future__ import annotations

import math
import statistics
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hookserver.errors import StoreError
from hookserver.store.state import StateStore
from hookserver.store.timeseries import SeriesKey, TimeSeriesStore, make_labels, percentile, series_key

T0 = 1_700_000_000.0
KEY = series_key("pod_cpu_usage", pod="uid-1", qos="BE")


class Clock:
    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_labels_are_canonical_sorted_and_drop_empty_values() -> None:
    assert make_labels(qos="BE", pod="u", priority="") == (("pod", "u"), ("qos", "BE"))
    assert series_key("m", b="2", a="1") == series_key("m", a="1", b="2")
    assert KEY.label("qos") == "BE" and KEY.label("device") == ""


def test_ring_keeps_only_the_newest_capacity_samples() -> None:
    store = TimeSeriesStore(retention_s=10.0, clock=Clock())
    assert store.capacity_for(1.0) == 11
    for i in range(25):
        store.append(KEY, float(i), ts=T0 + i, interval_s=1.0)
    stats = store.series_stats(KEY)
    assert stats is not None and stats.samples == 11 and stats.capacity == 11
    points = store.points(KEY, 100.0, now=T0 + 24)
    # Retention caps the window at 10 s: 14..24, in order, with exact timestamps.
    assert points == [(T0 + i, float(i)) for i in range(14, 25)]
    assert store.last(KEY) == (T0 + 24, 24.0)


def test_capacity_follows_the_series_interval() -> None:
    store = TimeSeriesStore(retention_s=1800.0, clock=Clock())
    store.append(KEY, 1.0, ts=T0, interval_s=10.0)
    other = series_key("node_cpu_usage", node="n")
    store.append(other, 1.0, ts=T0, interval_s=1.0)
    assert store.series_stats(KEY).capacity == 181  # type: ignore[union-attr]
    assert store.series_stats(other).capacity == 1801  # type: ignore[union-attr]


def test_window_edges_are_inclusive_and_exact() -> None:
    store = TimeSeriesStore(retention_s=600.0, clock=Clock())
    for i in range(10):
        store.append(KEY, float(i), ts=T0 + i)
    assert [v for _, v in store.points(KEY, 3.0, now=T0 + 9)] == [6.0, 7.0, 8.0, 9.0]
    assert [v for _, v in store.points(KEY, 3.0, now=T0 + 5)] == [2.0, 3.0, 4.0, 5.0]
    assert store.window(KEY, 3.0, now=T0 + 100) is None
    stats = store.window(KEY, 0.0, now=T0 + 4)
    assert stats is not None and stats.count == 1 and stats.last == 4.0


def test_aggregates_are_exact_on_known_data() -> None:
    store = TimeSeriesStore(retention_s=600.0, clock=Clock(T0 + 100))
    for i in range(101):  # values 1..101 shuffled in time, so last != max
        store.append(KEY, float((i * 37) % 101 + 1), ts=T0 + i)
    stats = store.window(KEY, 600.0)
    assert stats is not None
    assert (stats.count, stats.min, stats.max, stats.avg) == (101, 1.0, 101.0, 51.0)
    assert (stats.p50, stats.p90, stats.p95, stats.p99) == (51.0, 91.0, 96.0, 100.0)
    assert stats.last == float((100 * 37) % 101 + 1)
    assert stats.get("p95") == 96.0
    with pytest.raises(StoreError, match="unknown aggregate"):
        stats.get("p42")


def test_percentile_interpolates_between_ranks() -> None:
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert percentile([10.0], 0.99) == 10.0
    assert percentile([0.0, 10.0], 0.95) == pytest.approx(9.5)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.floats(min_value=-1e12, max_value=1e12, allow_nan=False), min_size=2, max_size=300))
def test_window_stats_match_the_statistics_module(values: list[float]) -> None:
    store = TimeSeriesStore(retention_s=1000.0, clock=Clock(T0 + len(values)))
    for i, value in enumerate(values):
        store.append(KEY, value, ts=T0 + i)
    stats = store.window(KEY)
    assert stats is not None
    assert stats.count == len(values)
    assert (stats.min, stats.max, stats.last) == (min(values), max(values), values[-1])
    assert stats.avg == pytest.approx(math.fsum(values) / len(values), rel=1e-9, abs=1e-6)
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    for got, want in ((stats.p50, cuts[49]), (stats.p90, cuts[89]), (stats.p95, cuts[94]), (stats.p99, cuts[98])):
        assert got == pytest.approx(want, rel=1e-9, abs=1e-3)
    assert stats.min <= stats.p50 <= stats.p90 <= stats.p95 <= stats.p99 <= stats.max


def test_gc_drops_series_older_than_retention() -> None:
    clock = Clock()
    store = TimeSeriesStore(retention_s=60.0, clock=clock)
    gone = series_key("pod_cpu_usage", pod="gone")
    store.append(gone, 1.0, ts=T0)
    store.append(KEY, 1.0, ts=T0)
    clock.now = T0 + 50
    store.append(KEY, 2.0)
    assert store.gc() == 0
    clock.now = T0 + 61
    assert store.gc() == 1
    assert store.keys("pod_cpu_usage") == [KEY]
    assert store.last(gone) is None and store.window(gone) is None
    clock.now = T0 + 111
    assert store.gc() == 1 and len(store) == 0
    assert store.stats().collected_series == 2
    assert store.metrics() == []


def test_bad_samples_are_dropped_and_counted() -> None:
    store = TimeSeriesStore(retention_s=60.0, max_series=2, clock=Clock())
    assert store.append(KEY, 1.0, ts=T0 + 5)
    assert not store.append(KEY, 2.0, ts=T0 + 4)  # older than the last one
    assert not store.append(KEY, float("nan"), ts=T0 + 6)
    assert not store.append(KEY, float("inf"), ts=T0 + 6)
    assert store.append(series_key("a"), 1.0, ts=T0)
    assert not store.append(series_key("b"), 1.0, ts=T0)  # series cap
    stats = store.stats()
    assert (stats.dropped_out_of_order, stats.dropped_not_finite, stats.dropped_series_limit) == (1, 2, 1)
    assert store.points(KEY, now=T0 + 6) == [(T0 + 5, 1.0)]


def test_invalid_names_and_settings_are_refused() -> None:
    store = TimeSeriesStore(clock=Clock())
    with pytest.raises(StoreError, match="must match"):
        store.append(SeriesKey("Bad-Name", ()), 1.0)
    with pytest.raises(StoreError, match="must match"):
        store.append(SeriesKey("ok", (("bad label", "x"),)), 1.0)
    with pytest.raises(StoreError, match="retention_s"):
        TimeSeriesStore(retention_s=0)
    with pytest.raises(StoreError, match="retention_s"):
        TimeSeriesStore(retention_s=40 * 86400)
    with pytest.raises(StoreError, match="interval_s"):
        store.append(KEY, 1.0, interval_s=-1)
    with pytest.raises(StoreError, match="window"):
        store.points(KEY, float("nan"))


def test_timestamps_survive_the_32_bit_rebase() -> None:
    """Offsets are 32-bit ms (~49.7 days); a long-lived sparse series rebases and keeps exact times."""
    day = 86400.0
    store = TimeSeriesStore(retention_s=30 * day, clock=Clock())
    for d in (0, 25, 50):
        store.append(KEY, d, ts=T0 + d * day + 0.123, interval_s=day)
    # Day 50 is past 2**32 ms from the base (day 0): the base moved, day 25 kept with its exact time.
    assert store.points(KEY, 30 * day, now=T0 + 50 * day + 0.123) == [
        (pytest.approx(T0 + 25 * day + 0.123, abs=1e-6), 25.0),
        (pytest.approx(T0 + 50 * day + 0.123, abs=1e-6), 50.0),
    ]
    store.append(KEY, 75.5, ts=T0 + 75.5 * day + 0.123)
    assert [v for _, v in store.points(KEY, 30 * day, now=T0 + 75.5 * day + 0.123)] == [50.0, 75.5]
    assert store.last(KEY) == (pytest.approx(T0 + 75.5 * day + 0.123, abs=1e-6), 75.5)


def test_select_and_latest() -> None:
    store = TimeSeriesStore(clock=Clock())
    a = series_key("pod_cpu_usage", pod="a", qos="BE")
    b = series_key("pod_cpu_usage", pod="b", qos="LS")
    store.append_many(T0, [(a, 1.0), (b, 2.0), (series_key("node_cpu_usage", node="n"), 3.0)])
    assert store.select("pod_cpu_usage", {"qos": "BE"}) == [a]
    assert store.select("pod_cpu_usage", lambda k: k.label("pod") != "a") == [b]
    assert store.select("pod_cpu_usage") == [a, b]
    assert sorted((k.label("pod"), v) for k, _, v, _ in store.latest("pod_cpu_usage")) == [("a", 1.0), ("b", 2.0)]
    assert store.drop(lambda k: k.label("pod") == "a") == 1 and store.keys("pod_cpu_usage") == [b]


def test_static_values_and_the_state_store_attribute() -> None:
    state = StateStore(clock=Clock())
    assert isinstance(state.series, TimeSeriesStore)
    state.series.put_static("node_topology", ("x",))
    assert state.series.get_static("node_topology") == ("x",)
    assert state.series.get_static("missing", 5) == 5


def test_readers_do_not_block_and_see_consistent_windows() -> None:
    """A writer appends increasing values while readers query: every read is ordered and bounded."""
    store = TimeSeriesStore(retention_s=500.0, clock=Clock())
    n = 8_000
    errors: list[str] = []
    done = threading.Event()

    def writer() -> None:
        for i in range(n):
            store.append(KEY, float(i), ts=T0 + i * 0.5, interval_s=0.5)
        done.set()

    def reader() -> None:
        reads = 0
        while not done.is_set() or reads < 5:
            newest = store.last(KEY)
            now = T0 if newest is None else newest[0]
            points = store.points(KEY, 500.0, now=now)
            values = [v for _, v in points]
            times = [t for t, _ in points]
            if values != sorted(values) or times != sorted(times) or len(values) > store.capacity_for(0.5):
                errors.append(f"inconsistent read of {len(values)} points")
            stats = store.window(KEY, 500.0, now=now)
            if stats is not None and not (stats.min <= stats.p50 <= stats.max and stats.last == stats.max):
                errors.append("inconsistent stats")
            reads += 1

    threads = [threading.Thread(target=writer)] + [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not any(t.is_alive() for t in threads)
    assert errors == []
    final = store.points(KEY, 500.0, now=T0 + (n - 1) * 0.5)
    assert len(final) == store.capacity_for(0.5) and final[-1] == (T0 + (n - 1) * 0.5, float(n - 1))
