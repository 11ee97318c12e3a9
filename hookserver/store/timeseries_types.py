"""The value types of the time-series store: series keys and labels, window aggregates, store statistics.

Kept apart from the store itself so readers (the predictor, QoS planners, `hookctl`) can import the types
without the ring-buffer machinery.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

from hookserver.errors import StoreError

__all__ = [
    "AGGREGATES",
    "KeyLike",
    "Labels",
    "SeriesKey",
    "SeriesStats",
    "StoreStats",
    "WindowStats",
    "make_labels",
    "percentile",
    "series_key",
]

Labels = tuple[tuple[str, str], ...]
# What writers may pass as a key: a SeriesKey or the plain (metric, labels) tuple it equals and hashes like.
# Building a plain tuple is ~10x cheaper than a NamedTuple on the collect path; the store keeps SeriesKeys.
KeyLike = tuple[str, Labels]

# Aggregates a window query answers; `WindowStats.get(name)` accepts each.
AGGREGATES = ("avg", "min", "max", "last", "count", "p50", "p90", "p95", "p99")


class SeriesKey(NamedTuple):
    """Metric name plus labels, sorted by label name, empty values dropped (see `make_labels`)."""

    metric: str
    labels: Labels

    def label(self, name: str, default: str = "") -> str:
        for key, value in self.labels:
            if key == name:
                return value
        return default

    def as_dict(self) -> dict[str, str]:
        return dict(self.labels)


def make_labels(**labels: str) -> Labels:
    """The canonical label tuple: sorted by name, empty values dropped (absent and empty mean the same)."""
    return tuple(sorted((k, v) for k, v in labels.items() if v))


def series_key(metric: str, **labels: str) -> SeriesKey:
    return SeriesKey(metric, make_labels(**labels))


def percentile(ordered: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default; `statistics.quantiles` 'inclusive').

    `ordered` must be sorted and non-empty; `q` is in [0, 1]. p50 of [1, 2, 3, 4] is 2.5.
    """
    n = len(ordered)
    if n == 1:
        return ordered[0]
    rank = q * (n - 1)
    lo = math.floor(rank)
    hi = min(lo + 1, n - 1)
    frac = rank - lo
    return ordered[lo] + (ordered[hi] - ordered[lo]) * frac


@dataclass(frozen=True, slots=True)
class WindowStats:
    """Aggregates of one series over a window. Times are wall-clock seconds."""

    count: int
    avg: float
    min: float
    max: float
    last: float
    last_ts: float
    first_ts: float
    p50: float
    p90: float
    p95: float
    p99: float

    def get(self, name: str) -> float:
        if name not in AGGREGATES:
            raise StoreError(f"unknown aggregate {name!r} (known: {', '.join(AGGREGATES)})")
        return float(getattr(self, name))

    def as_dict(self) -> dict[str, float]:
        return {name: self.get(name) for name in AGGREGATES} | {"last_ts": self.last_ts, "first_ts": self.first_ts}

    @classmethod
    def of(cls, times: list[float], values: list[float]) -> WindowStats:
        ordered = sorted(values)
        return cls(
            count=len(values),
            avg=math.fsum(values) / len(values),
            min=ordered[0],
            max=ordered[-1],
            last=values[-1],
            last_ts=times[-1],
            first_ts=times[0],
            p50=percentile(ordered, 0.50),
            p90=percentile(ordered, 0.90),
            p95=percentile(ordered, 0.95),
            p99=percentile(ordered, 0.99),
        )


@dataclass(frozen=True, slots=True)
class SeriesStats:
    key: SeriesKey
    samples: int
    capacity: int
    interval_s: float
    last_ts: float


@dataclass(frozen=True, slots=True)
class StoreStats:
    series: int
    samples: int
    approx_bytes: int
    dropped_out_of_order: int
    dropped_not_finite: int
    dropped_series_limit: int
    collected_series: int
