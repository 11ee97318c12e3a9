"""Decaying exponential histograms: koordlet's port of the VPA histogram, with its exact parameters.

Why this shape: a sample's weight grows as 2^((t - ref) / half_life), so recent samples outweigh old ones
without ever rewriting old buckets (decay is relative). The reference time is re-based, rounded to the half
life, before the exponent passes 100 so weights stay finite. Bucket i starts at
first * (ratio^i - 1) / (ratio - 1); `percentile(p)` returns the end of the bucket where the cumulative weight
first reaches p x total (the last bucket returns its start).

Weights live in one `array('d')` per histogram (8 bytes a bucket, no float objects) covering only the buckets
that ever got a sample, and bucket starts are computed once per options object and shared, so a model costs
well under 1 KiB and a sample is a log and two adds.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from array import array
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hookserver.errors import CheckpointCorrupt

__all__ = [
    "CPU_BUCKETS",
    "EPSILON",
    "GO_ZERO_TIME",
    "MAX_CHECKPOINT_WEIGHT",
    "MAX_DECAY_EXPONENT",
    "MEMORY_BUCKETS",
    "MIN_SAMPLE_WEIGHT",
    "DecayingHistogram",
    "ExponentialBuckets",
    "HistogramCheckpoint",
    "format_go_time",
    "parse_go_time",
]

MIN_SAMPLE_WEIGHT = 0.1
EPSILON = 0.001 * MIN_SAMPLE_WEIGHT  # 0.0001: the smallest weight a bucket keeps
MAX_DECAY_EXPONENT = 100
MAX_CHECKPOINT_WEIGHT = 10000
# Go's zero time.Time (0001-01-01T00:00:00Z) in Unix seconds: where koordlet's reference time starts, and
# the origin `time.Round` rounds from.
GO_ZERO_TIME = -62135596800.0


def _round_half_up(x: float) -> int:
    """Go's `int(math.Floor(x + 0.5))`."""
    return math.floor(x + 0.5)


class ExponentialBuckets:
    """Bucket geometry (VPA `exponentialHistogramOptions`). Immutable; share one per resource."""

    __slots__ = ("epsilon", "first_bucket", "num_buckets", "ratio", "starts", "_log_ratio", "_scale")

    def __init__(self, *, max_value: float, first_bucket: float, ratio: float, epsilon: float = EPSILON) -> None:
        if not (max_value > 0 and first_bucket > 0 and ratio > 1 and epsilon > 0):
            raise ValueError("max_value, first_bucket and epsilon must be > 0, ratio must be > 1")
        self.first_bucket = first_bucket
        self.ratio = ratio
        self.epsilon = epsilon
        self._log_ratio = math.log(ratio)
        self._scale = (ratio - 1) / first_bucket
        self.num_buckets = int(math.ceil(math.log(max_value * (ratio - 1) / first_bucket + 1) / self._log_ratio)) + 1
        self.starts: tuple[float, ...] = tuple(
            0.0 if i == 0 else first_bucket * (math.pow(ratio, i) - 1) / (ratio - 1) for i in range(self.num_buckets)
        )

    def find_bucket(self, value: float) -> int:
        if value < self.first_bucket:
            return 0
        bucket = int(math.log(value * self._scale + 1) / self._log_ratio)
        return bucket if bucket < self.num_buckets else self.num_buckets - 1

    def bucket_start(self, bucket: int) -> float:
        if not 0 <= bucket < self.num_buckets:
            raise IndexError(f"bucket {bucket} out of range [0..{self.num_buckets - 1}]")
        return self.starts[bucket]


# koordlet's `defaultCPUHistogram` (cores; the code comment says 0.05 but the code uses 0.025) and
# `defaultMemoryHistogram` (bytes): 158 and 205 buckets.
CPU_BUCKETS = ExponentialBuckets(max_value=1024.0, first_bucket=0.025, ratio=1.05)
MEMORY_BUCKETS = ExponentialBuckets(max_value=float(1 << 41), first_bucket=float(5 << 20), ratio=1.05)


@dataclass(frozen=True, slots=True)
class HistogramCheckpoint:
    """koordlet's `HistogramCheckpoint`: bucket weights scaled so the largest is 10000, plus the total."""

    reference_ts: float
    bucket_weights: Mapping[int, int]
    total_weight: float

    def to_json(self) -> dict[str, Any]:
        return {
            "referenceTimestamp": format_go_time(self.reference_ts),
            "bucketWeights": {str(k): v for k, v in sorted(self.bucket_weights.items())},
            "totalWeight": self.total_weight,
        }

    @classmethod
    def from_json(cls, raw: Any, *, where: str) -> HistogramCheckpoint:
        if not isinstance(raw, Mapping):
            raise CheckpointCorrupt(f"{where}: must be an object, got {type(raw).__name__}")
        ts_raw = raw.get("referenceTimestamp", "0001-01-01T00:00:00Z")
        reference_ts = parse_go_time(ts_raw, where=f"{where}.referenceTimestamp")
        total = raw.get("totalWeight", 0.0)
        if isinstance(total, bool) or not isinstance(total, int | float) or not math.isfinite(total) or total < 0:
            raise CheckpointCorrupt(f"{where}.totalWeight: must be a finite number >= 0, got {total!r}")
        weights_raw = raw.get("bucketWeights") or {}
        if not isinstance(weights_raw, Mapping):
            raise CheckpointCorrupt(f"{where}.bucketWeights: must be an object, got {type(weights_raw).__name__}")
        weights: dict[int, int] = {}
        for key, value in weights_raw.items():
            try:
                bucket = int(key)
            except (TypeError, ValueError):
                raise CheckpointCorrupt(f"{where}.bucketWeights: bucket {key!r} is not an integer") from None
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 0xFFFFFFFF:
                raise CheckpointCorrupt(f"{where}.bucketWeights[{key}]: must be a uint32, got {value!r}")
            weights[bucket] = value
        return cls(reference_ts, weights, float(total))


class DecayingHistogram:
    """One resource's histogram. Not thread-safe: the model store serialises access.

    Weights are stored only for the window of buckets that ever received a sample (`offset` is the first one's
    index): a pod's usage spans a few dozen of the 158/205 buckets, so a model costs hundreds of bytes, not
    kilobytes. Buckets outside the window weigh 0; `weight(b)` reads any bucket.
    """

    __slots__ = ("buckets", "half_life_s", "max_bucket", "min_bucket", "offset", "reference_ts", "total_weight",
                 "weights")

    def __init__(self, buckets: ExponentialBuckets, half_life_s: float) -> None:
        if not half_life_s > 0:
            raise ValueError(f"half life must be positive, got {half_life_s!r}")
        self.buckets = buckets
        self.half_life_s = float(half_life_s)
        self.reference_ts = GO_ZERO_TIME
        self.offset = 0
        self.weights: array[float] = array("d")
        self.total_weight = 0.0
        self.min_bucket = buckets.num_buckets - 1
        self.max_bucket = 0

    def weight(self, bucket: int) -> float:
        i = bucket - self.offset
        return self.weights[i] if 0 <= i < len(self.weights) else 0.0

    def _slot(self, bucket: int) -> int:
        """The index of `bucket` in `weights`, growing the window to hold it."""
        weights = self.weights
        n = len(weights)
        if n == 0:
            self.offset = bucket
            weights.append(0.0)
            return 0
        i = bucket - self.offset
        if i < 0:
            self.weights = array("d", bytes(8 * -i)) + weights
            self.offset = bucket
            return 0
        if i >= n:
            weights.frombytes(bytes(8 * (i - n + 1)))
        return i

    # -- writers ---------------------------------------------------------------------------------
    def add_sample(self, value: float, weight: float, ts: float) -> bool:
        """Add `value` with `weight` (at least MIN_SAMPLE_WEIGHT) at time `ts`. False for a non-finite value."""
        if not (math.isfinite(value) and math.isfinite(ts)):
            return False
        if weight < 0:
            raise ValueError(f"sample weight must be non-negative, got {weight!r}")
        weight = max(weight, MIN_SAMPLE_WEIGHT) * self._decay_factor(ts)
        bucket = self.buckets.find_bucket(value)
        i = self._slot(bucket)
        weights = self.weights
        weights[i] += weight
        self.total_weight += weight
        if weights[i] >= self.buckets.epsilon:
            if bucket < self.min_bucket:
                self.min_bucket = bucket
            if bucket > self.max_bucket:
                self.max_bucket = bucket
        return True

    def _decay_factor(self, ts: float) -> float:
        half_life = self.half_life_s
        if ts > self.reference_ts + half_life * MAX_DECAY_EXPONENT:
            self.shift_reference(ts)
        return math.pow(2.0, (ts - self.reference_ts) / half_life)

    def shift_reference(self, new_reference_ts: float) -> None:
        """Re-base to `new_reference_ts` rounded to the half life (Go `Time.Round`, halves up), rescaling weights."""
        half_life = self.half_life_s
        rounded = GO_ZERO_TIME + _round_half_up((new_reference_ts - GO_ZERO_TIME) / half_life) * half_life
        exponent = _round_half_up((self.reference_ts - rounded) / half_life)
        self._scale(math.ldexp(1.0, max(exponent, -2000)))
        self.reference_ts = rounded

    def _scale(self, factor: float) -> None:
        weights = self.weights
        for i in range(len(weights)):
            weights[i] *= factor
        self.total_weight *= factor
        self._update_min_max()

    def _update_min_max(self) -> None:
        eps = self.buckets.epsilon
        last = self.buckets.num_buckets - 1
        weight = self.weight
        while weight(self.min_bucket) < eps and self.min_bucket < last:
            self.min_bucket += 1
        while weight(self.max_bucket) < eps and self.max_bucket > 0:
            self.max_bucket -= 1

    # -- readers ---------------------------------------------------------------------------------
    def is_empty(self) -> bool:
        return self.weight(self.min_bucket) < self.buckets.epsilon

    def percentile(self, p: float) -> float:
        """End of the bucket where the cumulative weight first reaches p x total; 0 when empty."""
        if self.is_empty():
            return 0.0
        threshold = p * self.total_weight
        weights = self.weights
        offset = self.offset
        partial = 0.0
        bucket = self.min_bucket  # min..max lie inside the window: both hold weight >= epsilon
        while bucket < self.max_bucket:
            partial += weights[bucket - offset]
            if partial >= threshold:
                break
            bucket += 1
        if bucket < self.buckets.num_buckets - 1:
            return self.buckets.starts[bucket + 1]
        return self.buckets.starts[bucket]

    # -- checkpoints -----------------------------------------------------------------------------
    def save(self) -> HistogramCheckpoint:
        if self.is_empty():
            return HistogramCheckpoint(self.reference_ts, {}, self.total_weight)
        offset = self.offset
        live = self.weights[self.min_bucket - offset:self.max_bucket - offset + 1]
        ratio = MAX_CHECKPOINT_WEIGHT / max(live)
        scaled: dict[int, int] = {}
        for i, w in enumerate(live):
            value = _round_half_up(w * ratio)
            if value > 0:
                scaled[self.min_bucket + i] = value
        return HistogramCheckpoint(self.reference_ts, scaled, self.total_weight)

    def load(self, checkpoint: HistogramCheckpoint, *, where: str = "histogram") -> None:
        """Add a checkpoint's weights (into an empty histogram, on restore). CheckpointCorrupt on bad buckets."""
        n = self.buckets.num_buckets
        for bucket in checkpoint.bucket_weights:
            if not 0 <= bucket < n:
                raise CheckpointCorrupt(f"{where}: bucket {bucket} outside [0..{n - 1}]")
        total = sum(checkpoint.bucket_weights.values())
        self.reference_ts = checkpoint.reference_ts
        if total == 0:
            return
        ratio = checkpoint.total_weight / total
        for bucket in (min(checkpoint.bucket_weights), max(checkpoint.bucket_weights)):
            self._slot(bucket)
        for bucket, weight in checkpoint.bucket_weights.items():
            self.min_bucket = min(self.min_bucket, bucket)
            self.max_bucket = max(self.max_bucket, bucket)
            self.weights[bucket - self.offset] += weight * ratio
        self.total_weight += checkpoint.total_weight


# -- Go time.Time JSON (RFC 3339), as koordlet's checkpoints carry it ------------------------------------

_RFC3339 = re.compile(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)")
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)


def format_go_time(ts: float) -> str:
    """RFC 3339 in UTC with nanoseconds trimmed, like Go's `time.Time` MarshalJSON for UTC times."""
    whole = math.floor(ts)
    nanos = round((ts - whole) * 1e9)
    if nanos >= 1_000_000_000:
        whole, nanos = whole + 1, nanos - 1_000_000_000
    moment = _EPOCH + _dt.timedelta(seconds=whole)
    text = (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}"
    )
    if nanos:
        text += "." + f"{nanos:09d}".rstrip("0")
    return text + "Z"


def parse_go_time(raw: Any, *, where: str) -> float:
    """Unix seconds of an RFC 3339 time (any offset, up to nanoseconds). CheckpointCorrupt otherwise."""
    if not isinstance(raw, str):
        raise CheckpointCorrupt(f"{where}: must be an RFC 3339 time string, got {type(raw).__name__}")
    match = _RFC3339.fullmatch(raw)
    if match is None:
        raise CheckpointCorrupt(f"{where}: not an RFC 3339 time: {raw[:64]!r}")
    year, month, day, hour, minute, second, frac, zone = match.groups()
    try:
        moment = _dt.datetime(int(year), int(month), int(day), int(hour), int(minute), int(second), tzinfo=_dt.UTC)
    except ValueError as exc:
        raise CheckpointCorrupt(f"{where}: {raw[:64]!r}: {exc}") from None
    offset = 0
    if zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        offset = sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    delta = moment - _EPOCH
    seconds = delta.days * 86400 + delta.seconds - offset
    return seconds + (int(frac.ljust(9, "0")) / 1e9 if frac else 0.0)
