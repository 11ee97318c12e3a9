"""Bounded in-memory time series: what the collectors measured, for the predictor, QoS and `hookctl top`.

Why this shape (koordlet keeps a TSDB on a 150 MiB tmpfs; we keep only what the agent decides from):

* A series is a metric name plus a canonical, sorted label tuple (node, pod UID, container ID, QoS class,
  priority class, device, ...). `SeriesKey` is a NamedTuple; writers may pass the plain `(metric, labels)`
  tuple it equals, which is much cheaper to build on the 1 s collect path.
* Each series is a fixed-capacity ring of two compact arrays: values as `array('d')` (exact doubles) and
  timestamps as `array('I')` milliseconds from a per-series base. 12 bytes a sample, so 200 pods x 10
  series x 30 min at 1 s is ~41 MiB. The capacity is retention / the series' collect interval.
* Writers take one short lock per batch and do O(1) work per sample. Readers copy one series' arrays
  under the lock (a memcpy) and compute outside it, so a slow query never blocks a collector.
* A series whose last sample is older than the retention is garbage-collected by `gc()`.
"""

from __future__ import annotations

import math
import re
import threading
import time
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping
from typing import Any, cast

from hookserver.errors import StoreError
from hookserver.store.timeseries_types import (
    AGGREGATES,
    KeyLike,
    Labels,
    SeriesKey,
    SeriesStats,
    StoreStats,
    WindowStats,
    make_labels,
    percentile,
    series_key,
)

__all__ = [
    "AGGREGATES",
    "DEFAULT_RETENTION_S",
    "KeyLike",
    "Labels",
    "SeriesKey",
    "SeriesStats",
    "StoreStats",
    "TimeSeriesStore",
    "WindowStats",
    "make_labels",
    "percentile",
    "series_key",
]

DEFAULT_RETENTION_S = 1800.0
_NAME = re.compile(r"[a-z_][a-z0-9_]*")
_U32_MAX = 0xFFFFFFFF
_MAX_RETENTION_S = 30 * 86400.0  # timestamps are 32-bit milliseconds from a per-series base (~49 days)


class _Ring:
    """One series. Callers hold the store lock."""

    __slots__ = ("base", "cap", "head", "interval_s", "last_ts", "t", "v")

    def __init__(self, capacity: int, interval_s: float, first_ts: float) -> None:
        self.cap = capacity
        self.interval_s = interval_s
        self.base = first_ts
        self.head = 0  # once full: index of the oldest sample, where the next write goes
        self.last_ts = -math.inf
        self.t: array[int] = array("I")
        self.v: array[float] = array("d")

    def append(self, ts: float, value: float) -> None:
        off = int((ts - self.base) * 1000.0 + 0.5)
        if off > _U32_MAX:
            self._rebase(ts)
            off = int((ts - self.base) * 1000.0 + 0.5)
        if len(self.v) < self.cap:
            self.t.append(off)
            self.v.append(value)
        else:
            self.t[self.head] = off
            self.v[self.head] = value
            self.head = (self.head + 1) % self.cap
        self.last_ts = ts

    def _rebase(self, ts: float) -> None:
        """Move the base to the oldest sample still representable, so offsets fit 32 bits again.

        Happens about every 49 days of a live series; samples that far back are long past any retention.
        """
        base, t, v = self.copy()
        start = bisect_left(t, round((ts - base) * 1000.0) - _U32_MAX)
        t, v = t[start:], v[start:]
        shift = t[0] if len(t) else round((ts - base) * 1000.0)
        self.t = array("I", (x - shift for x in t))
        self.v = v
        self.head = 0
        self.base = base + shift / 1000.0

    def copy(self) -> tuple[float, array[int], array[float]]:
        """Oldest-first copies of the arrays (cheap memcpy slices)."""
        if len(self.v) < self.cap or self.head == 0:
            return self.base, self.t[:], self.v[:]
        h = self.head
        return self.base, self.t[h:] + self.t[:h], self.v[h:] + self.v[:h]

    def last(self) -> tuple[float, float] | None:
        if not self.v:
            return None
        idx = (self.head - 1) % len(self.v) if len(self.v) == self.cap else len(self.v) - 1
        return self.base + self.t[idx] / 1000.0, self.v[idx]

    def first(self) -> tuple[float, float] | None:
        if not self.v:
            return None
        idx = self.head if len(self.v) == self.cap else 0
        return self.base + self.t[idx] / 1000.0, self.v[idx]

    def nbytes(self) -> int:
        return len(self.t) * self.t.itemsize + len(self.v) * self.v.itemsize


class TimeSeriesStore:
    """Ring-buffered series with window queries. Thread-safe; see the module docstring for the design."""

    def __init__(
        self,
        *,
        retention_s: float = DEFAULT_RETENTION_S,
        default_interval_s: float = 1.0,
        max_series: int = 200_000,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._check_retention(retention_s)
        self._check_positive("default_interval_s", default_interval_s)
        if max_series < 1:
            raise StoreError(f"max_series must be at least 1, got {max_series}")
        self._retention_s = float(retention_s)
        self._default_interval_s = float(default_interval_s)
        self._max_series = max_series
        self._clock = clock
        self._lock = threading.Lock()
        self._series: dict[SeriesKey, _Ring] = {}
        self._by_metric: dict[str, set[SeriesKey]] = {}
        self._static: dict[str, Any] = {}
        self._dropped_order = 0
        self._dropped_nan = 0
        self._dropped_limit = 0
        self._collected = 0

    @staticmethod
    def _check_positive(name: str, value: float) -> None:
        if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
            raise StoreError(f"{name} must be a positive number of seconds, got {value!r}")

    @classmethod
    def _check_retention(cls, retention_s: float) -> None:
        cls._check_positive("retention_s", retention_s)
        if retention_s > _MAX_RETENTION_S:
            raise StoreError(f"retention_s must be at most {_MAX_RETENTION_S:.0f} s (30 days), got {retention_s!r}")

    # -- configuration ---------------------------------------------------------------------------
    @property
    def retention_s(self) -> float:
        return self._retention_s

    @property
    def clock(self) -> Callable[[], float]:
        return self._clock

    def configure(self, *, retention_s: float | None = None, max_series: int | None = None) -> None:
        """Change retention (applies to queries and GC at once, to ring sizes of new series) and the cap."""
        with self._lock:
            if retention_s is not None:
                self._check_retention(retention_s)
                self._retention_s = float(retention_s)
            if max_series is not None:
                if max_series < 1:
                    raise StoreError(f"max_series must be at least 1, got {max_series}")
                self._max_series = max_series

    def capacity_for(self, interval_s: float) -> int:
        """Ring size for a series collected every `interval_s`: the whole retention, both ends included."""
        return max(2, math.ceil(self._retention_s / interval_s) + 1)

    # -- writers ---------------------------------------------------------------------------------
    def append(self, key: KeyLike, value: float, *, ts: float | None = None, interval_s: float | None = None) -> bool:
        """Add one sample; False when it was dropped (not finite, older than the last one, series cap)."""
        return self.append_many(self._clock() if ts is None else ts, ((key, value),), interval_s=interval_s) == 1

    def append_many(
        self, ts: float, items: Iterable[tuple[KeyLike, float]], *, interval_s: float | None = None
    ) -> int:
        """Add one sample per key, all at `ts`, under one lock. Returns how many were kept.

        Keys may be `SeriesKey`s or plain `(metric, labels)` tuples (equal and hash-equal to them)."""
        interval = self._default_interval_s if interval_s is None else interval_s
        self._check_positive("interval_s", interval)
        if not math.isfinite(ts):
            raise StoreError(f"sample timestamp must be finite, got {ts!r}")
        kept = 0
        batch = list(items)
        isfinite = math.isfinite
        with self._lock:
            # A plain (metric, labels) tuple hashes and compares equal to its SeriesKey.
            get = cast("Callable[[KeyLike], _Ring | None]", self._series.get)
            for key, value in batch:
                if not isfinite(value):
                    self._dropped_nan += 1
                    continue
                ring = get(key)
                if ring is None:
                    ring = self._create(key, interval, ts)
                    if ring is None:
                        continue
                elif ts < ring.last_ts:
                    self._dropped_order += 1
                    continue
                # _Ring.append, inlined: this loop runs once per sample on the 1 s collect path.
                off = int((ts - ring.base) * 1000.0 + 0.5)
                if off > _U32_MAX:
                    ring.append(ts, float(value))
                elif len(ring.v) < ring.cap:
                    ring.t.append(off)
                    ring.v.append(value)
                    ring.last_ts = ts
                else:
                    head = ring.head
                    ring.t[head] = off
                    ring.v[head] = value
                    ring.head = head + 1 if head + 1 < ring.cap else 0
                    ring.last_ts = ts
                kept += 1
        return kept

    def _create(self, raw: KeyLike, interval_s: float, ts: float) -> _Ring | None:
        if len(self._series) >= self._max_series:
            self._dropped_limit += 1
            return None
        key = raw if isinstance(raw, SeriesKey) else SeriesKey(raw[0], tuple(raw[1]))
        if not _NAME.fullmatch(key.metric) or any(not _NAME.fullmatch(name) for name, _ in key.labels):
            raise StoreError(f"series {key!r}: metric and label names must match {_NAME.pattern}")
        ring = _Ring(self.capacity_for(interval_s), interval_s, ts)
        self._series[key] = ring
        self._by_metric.setdefault(key.metric, set()).add(key)
        return ring

    def gc(self, *, now: float | None = None) -> int:
        """Drop series with no sample inside the retention. Returns how many went."""
        cutoff = (self._clock() if now is None else now) - self._retention_s
        with self._lock:
            dead = [key for key, ring in self._series.items() if ring.last_ts < cutoff]
            for key in dead:
                self._forget(key)
            self._collected += len(dead)
        return len(dead)

    def drop(self, predicate: Callable[[SeriesKey], bool]) -> int:
        """Drop the series a predicate picks (e.g. every series of a pod that was removed)."""
        with self._lock:
            dead = [key for key in self._series if predicate(key)]
            for key in dead:
                self._forget(key)
        return len(dead)

    def _forget(self, key: SeriesKey) -> None:
        del self._series[key]
        keys = self._by_metric.get(key.metric)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._by_metric[key.metric]

    # -- static values (node CPU topology, GPU inventory): set whole, read whole ----------------
    def put_static(self, name: str, value: Any) -> None:
        """Keep a value that is not a time series (koordlet's KV part of the metric cache). Immutable please."""
        with self._lock:
            self._static[name] = value

    def get_static(self, name: str, default: Any = None) -> Any:
        with self._lock:
            return self._static.get(name, default)

    # -- readers ---------------------------------------------------------------------------------
    def metrics(self) -> list[str]:
        with self._lock:
            return sorted(self._by_metric)

    def keys(self, metric: str | None = None) -> list[SeriesKey]:
        with self._lock:
            if metric is None:
                return list(self._series)
            return list(self._by_metric.get(metric, ()))

    def select(self, metric: str, match: Mapping[str, str] | Callable[[SeriesKey], bool] | None = None) -> list[SeriesKey]:
        """Keys of `metric` whose labels equal every pair in `match` (or for which `match(key)` is true)."""
        keys = self.keys(metric)
        if match is None:
            return sorted(keys)
        if callable(match):
            return sorted(k for k in keys if match(k))
        wanted = tuple(match.items())
        return sorted(k for k in keys if all(k.label(name) == value for name, value in wanted))

    def last(self, key: SeriesKey) -> tuple[float, float] | None:
        """(timestamp, value) of the newest sample, or None."""
        with self._lock:
            ring = self._series.get(key)
            return None if ring is None else ring.last()

    def first(self, key: SeriesKey) -> tuple[float, float] | None:
        """(timestamp, value) of the oldest sample still held, or None."""
        with self._lock:
            ring = self._series.get(key)
            return None if ring is None else ring.first()

    def latest(self, metric: str | None = None) -> list[tuple[SeriesKey, float, float, float]]:
        """(key, timestamp, value, interval_s) of the newest sample of every series (of one metric), one lock."""
        out: list[tuple[SeriesKey, float, float, float]] = []
        with self._lock:
            keys = self._series.keys() if metric is None else self._by_metric.get(metric, set())
            for key in keys:
                ring = self._series[key]
                last = ring.last()
                if last is not None:
                    out.append((key, last[0], last[1], ring.interval_s))
        return out

    def interval_of(self, key: SeriesKey) -> float | None:
        with self._lock:
            ring = self._series.get(key)
            return None if ring is None else ring.interval_s

    def points(self, key: SeriesKey, window_s: float | None = None, *, now: float | None = None) -> list[tuple[float, float]]:
        """Samples with now - window <= ts <= now, oldest first. The window is capped at the retention."""
        times, values = self._window(key, window_s, now)
        return list(zip(times, values, strict=True))

    def values(self, key: KeyLike, window_s: float | None = None, *, now: float | None = None) -> list[float]:
        """Only the values with now - window <= ts <= now, oldest first: the predictor's per-minute read,
        without building the timestamps it does not need."""
        return self._window(key, window_s, now, with_times=False)[1]

    def averages(self, key: KeyLike, windows_s: tuple[float, ...], *, now: float | None = None) -> list[float | None]:
        """The mean of the samples in each trailing window (now - w <= ts <= now), None where a window holds
        none; one copy of the ring for all of them. For readers that need only means over a few windows (the
        capacity publisher reads a report window and a short one per pod, every few seconds)."""
        end = self._clock() if now is None else now
        for w in windows_s:
            if w < 0 or not math.isfinite(w):
                raise StoreError(f"window must be a non-negative number of seconds, got {w!r}")
        with self._lock:
            ring = cast("Callable[[KeyLike], _Ring | None]", self._series.get)(key)
            if ring is None:
                return [None] * len(windows_s)
            base, t, v = ring.copy()
        end_off = math.floor(round((end - base) * 1000.0, 6))
        hi = len(t)
        while hi > 0 and t[hi - 1] > end_off:
            hi -= 1
        out: list[float | None] = []
        for w in windows_s:
            span = min(w, self._retention_s)
            lo = bisect_left(t, math.ceil(round((end - span - base) * 1000.0, 6)), 0, hi)
            out.append(math.fsum(v[lo:hi]) / (hi - lo) if hi > lo else None)
        return out

    def window(self, key: SeriesKey, window_s: float | None = None, *, now: float | None = None) -> WindowStats | None:
        """avg/min/max/last/count/p50/p90/p95/p99 over the window, or None when it holds no sample."""
        times, values = self._window(key, window_s, now)
        if not values:
            return None
        return WindowStats.of(times, values)

    def _window(
        self, key: KeyLike, window_s: float | None, now: float | None, *, with_times: bool = True
    ) -> tuple[list[float], list[float]]:
        end = self._clock() if now is None else now
        span = self._retention_s if window_s is None else min(window_s, self._retention_s)
        if span < 0 or not math.isfinite(span):
            raise StoreError(f"window must be a non-negative number of seconds, got {window_s!r}")
        with self._lock:
            ring = cast("Callable[[KeyLike], _Ring | None]", self._series.get)(key)
            if ring is None:
                return [], []
            base, t, v = ring.copy()
        # Work in integer milliseconds, as stored, so window edges are exact.
        lo = bisect_left(t, math.ceil(round((end - span - base) * 1000.0, 6)))
        hi = len(t)
        end_off = math.floor(round((end - base) * 1000.0, 6))
        while hi > lo and t[hi - 1] > end_off:
            hi -= 1
        times = [base + x / 1000.0 for x in t[lo:hi]] if with_times else []
        return times, v[lo:hi].tolist()

    def series_stats(self, key: SeriesKey) -> SeriesStats | None:
        with self._lock:
            ring = self._series.get(key)
            if ring is None:
                return None
            return SeriesStats(key, len(ring.v), ring.cap, ring.interval_s, ring.last_ts)

    def stats(self) -> StoreStats:
        with self._lock:
            rings = list(self._series.values())
            samples = sum(len(r.v) for r in rings)
            nbytes = sum(r.nbytes() for r in rings)
            return StoreStats(
                series=len(rings),
                samples=samples,
                approx_bytes=nbytes + len(rings) * 400,  # ring object, two array headers, dict slot, key
                dropped_out_of_order=self._dropped_order,
                dropped_not_finite=self._dropped_nan,
                dropped_series_limit=self._dropped_limit,
                collected_series=self._collected,
            )

    def __len__(self) -> int:
        with self._lock:
            return len(self._series)
