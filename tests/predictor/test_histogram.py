"""Decaying histogram maths against a direct computation (reference §6 parameters)."""

from __future__ import annotations

import math

import pytest

from hookserver.errors import CheckpointCorrupt
from hookserver.predictor.histogram import (
    CPU_BUCKETS,
    EPSILON,
    GO_ZERO_TIME,
    MAX_CHECKPOINT_WEIGHT,
    MEMORY_BUCKETS,
    DecayingHistogram,
    HistogramCheckpoint,
    format_go_time,
    parse_go_time,
)

HL = 12 * 3600.0
T0 = 1_700_006_400.0  # a multiple of 12 h since Go's zero time: the first sample's reference lands exactly here


def direct_percentile(samples: list[tuple[float, float]], p: float, buckets=CPU_BUCKETS, half_life=HL) -> float:
    """Independent computation: weight 2^((t - t0) / half_life) per sample, cumulative over sorted buckets."""
    t0 = min(t for _, t in samples)
    weights: dict[int, float] = {}
    for value, t in samples:
        b = buckets.find_bucket(value)
        weights[b] = weights.get(b, 0.0) + 2 ** ((t - t0) / half_life)
    total = sum(weights.values())
    acc = 0.0
    ordered = sorted(weights)
    for b in ordered:
        acc += weights[b]
        if acc >= p * total or b == ordered[-1]:
            return buckets.starts[b + 1] if b + 1 < buckets.num_buckets else buckets.starts[b]
    raise AssertionError("unreachable")


def test_bucket_geometry_matches_the_reference():
    assert CPU_BUCKETS.num_buckets == 158
    assert MEMORY_BUCKETS.num_buckets == 205
    assert CPU_BUCKETS.bucket_start(0) == 0.0
    assert CPU_BUCKETS.bucket_start(1) == pytest.approx(0.025)
    assert CPU_BUCKETS.bucket_start(2) == pytest.approx(0.025 + 0.025 * 1.05)
    assert MEMORY_BUCKETS.bucket_start(1) == pytest.approx(5 * 2**20)
    assert CPU_BUCKETS.bucket_start(157) == pytest.approx(0.025 * (1.05**157 - 1) / 0.05)
    assert CPU_BUCKETS.bucket_start(156) < 1024 <= CPU_BUCKETS.bucket_start(157)  # the last bucket starts past max
    with pytest.raises(IndexError):
        CPU_BUCKETS.bucket_start(158)
    assert EPSILON == pytest.approx(0.0001)


def test_values_fall_in_the_bucket_that_starts_at_or_below_them():
    for i in range(1, CPU_BUCKETS.num_buckets):
        start = CPU_BUCKETS.bucket_start(i)
        assert CPU_BUCKETS.find_bucket(start * (1 + 1e-9)) == i
        assert CPU_BUCKETS.find_bucket(start * (1 - 1e-9)) == i - 1
    assert CPU_BUCKETS.find_bucket(0.0) == 0
    assert CPU_BUCKETS.find_bucket(-3.0) == 0
    assert CPU_BUCKETS.find_bucket(1e9) == 157


def test_percentile_is_the_end_of_the_bucket_and_the_last_bucket_its_start():
    h = DecayingHistogram(CPU_BUCKETS, HL)
    assert h.percentile(0.95) == 0.0  # empty
    h.add_sample(1.0, 1.0, T0)
    b = CPU_BUCKETS.find_bucket(1.0)
    for p in (0.0, 0.6, 0.95, 1.0):
        assert h.percentile(p) == CPU_BUCKETS.bucket_start(b + 1)
    top = DecayingHistogram(CPU_BUCKETS, HL)
    top.add_sample(5000.0, 1.0, T0)
    assert top.percentile(0.5) == CPU_BUCKETS.bucket_start(157)


def test_percentile_at_an_exact_cumulative_edge():
    h = DecayingHistogram(CPU_BUCKETS, HL)
    h.add_sample(0.5, 1.0, T0)
    h.add_sample(2.0, 1.0, T0)
    low, high = CPU_BUCKETS.find_bucket(0.5), CPU_BUCKETS.find_bucket(2.0)
    assert h.percentile(0.5) == CPU_BUCKETS.bucket_start(low + 1)  # cumulative reaches exactly 0.5 x total
    assert h.percentile(0.5000001) == CPU_BUCKETS.bucket_start(high + 1)


def test_decay_over_ten_half_lives_against_direct_computation():
    h = DecayingHistogram(CPU_BUCKETS, HL)
    samples = [(0.3, T0), (4.0, T0 + 10 * HL)]
    for v, t in samples:
        h.add_sample(v, 1.0, t)
    # weights 1 and 2^10: the old sample is 1/1025 of the total
    assert h.total_weight == pytest.approx(1 + 1024)
    assert h.reference_ts == T0
    low = CPU_BUCKETS.find_bucket(0.3)
    assert h.weight(low) == pytest.approx(1.0)
    assert h.weight(CPU_BUCKETS.find_bucket(4.0)) == pytest.approx(1024.0)
    for p in (0.0005, 0.00097, 0.001, 0.5, 0.95, 1.0):
        assert h.percentile(p) == direct_percentile(samples, p), p
    assert h.percentile(0.0005) == CPU_BUCKETS.bucket_start(low + 1)
    assert h.percentile(0.001) == CPU_BUCKETS.bucket_start(CPU_BUCKETS.find_bucket(4.0) + 1)


def test_many_samples_over_time_match_direct_computation():
    h = DecayingHistogram(CPU_BUCKETS, HL)
    samples = [((i * 37 % 101) / 10.0, T0 + i * 600.0) for i in range(500)]  # ~3.5 days, 1 sample / 10 min
    for v, t in samples:
        h.add_sample(v, 1.0, t)
    for p in (0.6, 0.9, 0.95, 0.98, 1.0):
        assert h.percentile(p) == direct_percentile(samples, p)


def test_first_sample_rebases_from_go_zero_time_to_the_rounded_half_life():
    h = DecayingHistogram(CPU_BUCKETS, HL)
    assert h.reference_ts == GO_ZERO_TIME
    h.add_sample(1.0, 1.0, T0 + 5 * 3600)  # 5 h past a grid point rounds down
    assert h.reference_ts == T0
    assert h.total_weight == pytest.approx(2 ** (5 / 12))
    g = DecayingHistogram(CPU_BUCKETS, HL)
    g.add_sample(1.0, 1.0, T0 + 6 * 3600)  # exactly half way rounds up (Go Time.Round)
    assert g.reference_ts == T0 + HL


def test_rebasing_before_the_exponent_passes_100_keeps_relative_weights():
    h = DecayingHistogram(CPU_BUCKETS, HL)
    h.add_sample(1.0, 1.0, T0)
    h.add_sample(2.0, 1.0, T0 + 100 * HL)  # exponent exactly 100: no shift yet
    assert h.reference_ts == T0
    assert h.total_weight == pytest.approx(1 + 2.0**100)
    later = T0 + 100 * HL + 7 * 3600  # exponent 100.58 > 100: re-based to the rounded time (T0 + 101 HL)
    h.add_sample(8.0, 1.0, later)
    assert h.reference_ts == T0 + 101 * HL
    b2, b8 = CPU_BUCKETS.find_bucket(2.0), CPU_BUCKETS.find_bucket(8.0)
    assert h.weight(b2) == pytest.approx(0.5)  # 2^100 scaled by 2^-101
    assert h.weight(b8) == pytest.approx(2 ** (-5 / 12))
    assert all(math.isfinite(w) for w in h.weights)
    assert h.offset == CPU_BUCKETS.find_bucket(1.0) and len(h.weights) == b8 - h.offset + 1  # only the used window
    samples = [(1.0, T0), (2.0, T0 + 100 * HL), (8.0, later)]
    for p in (0.3, 0.5, 0.9, 1.0):
        assert h.percentile(p) == direct_percentile(samples, p)


def test_minimum_sample_weight_and_bad_samples():
    h = DecayingHistogram(CPU_BUCKETS, HL)
    h.add_sample(1.0, 0.0, T0)
    assert h.total_weight == pytest.approx(0.1)
    assert h.add_sample(float("nan"), 1.0, T0) is False
    assert h.add_sample(float("inf"), 1.0, T0) is False
    with pytest.raises(ValueError):
        h.add_sample(1.0, -1.0, T0)


def test_checkpoint_round_trip_keeps_weights_and_percentiles():
    h = DecayingHistogram(MEMORY_BUCKETS, 24 * 3600.0)
    samples = [(float((i % 40 + 1) * 64 * 2**20), T0 + i * 900.0) for i in range(300)]
    for v, t in samples:
        h.add_sample(v, 1.0, t)
    ckpt = h.save()
    assert max(ckpt.bucket_weights.values()) == MAX_CHECKPOINT_WEIGHT
    doc = ckpt.to_json()
    back = HistogramCheckpoint.from_json(doc, where="test")
    g = DecayingHistogram(MEMORY_BUCKETS, 24 * 3600.0)
    g.load(back)
    assert g.reference_ts == h.reference_ts
    assert g.total_weight == pytest.approx(h.total_weight)
    largest = max(h.weights)
    scale = g.total_weight / h.total_weight
    for b in range(MEMORY_BUCKETS.num_buckets):
        # each weight survives to within half a checkpoint unit of the largest (rounding to 1/10000)
        assert abs(g.weight(b) / scale - h.weight(b)) <= largest / MAX_CHECKPOINT_WEIGHT, b
    for p in (0.6, 0.9, 0.95, 0.98, 1.0):
        assert g.percentile(p) == h.percentile(p)
    # the restored window grows both ways like the original's
    later = T0 + 300 * 900.0
    for hist in (h, g):
        hist.add_sample(1.0, 1.0, later)  # below every bucket so far
        hist.add_sample(float(1 << 40), 1.0, later)  # above
    assert g.offset == h.offset == 0
    for p in (0.001, 0.5, 0.999, 1.0):
        assert g.percentile(p) == h.percentile(p)


def test_checkpoint_of_an_empty_histogram():
    h = DecayingHistogram(CPU_BUCKETS, HL)
    ckpt = h.save()
    assert ckpt.bucket_weights == {}
    g = DecayingHistogram(CPU_BUCKETS, HL)
    g.load(HistogramCheckpoint.from_json(ckpt.to_json(), where="x"))
    assert g.is_empty()


@pytest.mark.parametrize(
    "doc, message",
    [
        ({"totalWeight": -1}, "totalWeight"),
        ({"totalWeight": "x"}, "totalWeight"),
        ({"bucketWeights": {"a": 1}}, "not an integer"),
        ({"bucketWeights": {"1": -5}}, "uint32"),
        ({"bucketWeights": {"1": 2**33}}, "uint32"),
        ({"bucketWeights": [1]}, "must be an object"),
        ({"referenceTimestamp": "yesterday"}, "RFC 3339"),
        ([], "must be an object"),
    ],
)
def test_bad_checkpoint_parts_are_named(doc, message):
    with pytest.raises(CheckpointCorrupt, match=message):
        HistogramCheckpoint.from_json(doc, where="CPU")


def test_bucket_out_of_range_is_refused_on_load():
    g = DecayingHistogram(CPU_BUCKETS, HL)
    with pytest.raises(CheckpointCorrupt, match="outside"):
        g.load(HistogramCheckpoint(T0, {500: 10}, 1.0))


def test_go_time_round_trip():
    for ts in (GO_ZERO_TIME, 0.0, T0, T0 + 0.125, 1_767_225_600.999999):
        assert parse_go_time(format_go_time(ts), where="t") == pytest.approx(ts, abs=1e-6)
    assert format_go_time(GO_ZERO_TIME) == "0001-01-01T00:00:00Z"
    assert parse_go_time("2026-01-01T01:00:00+01:00", where="t") == parse_go_time("2026-01-01T00:00:00Z", where="t")
