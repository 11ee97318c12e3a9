"""v1 -> v2 conversions and value parsing: property tests and the reference's worked values."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hookserver.system.cpulist import format_cpu_list, parse_cpu_list
from hookserver.executor.convert import (
    UNLIMITED,
    blkio_weight_to_io_weight,
    cpu_max_field,
    cpu_max_with_period,
    limit_to_v2,
    parse_limit,
    quota_to_cpu_max,
    shares_to_weight,
    weight_to_shares,
)

shares = st.integers(min_value=2, max_value=262144)


@given(shares)
def test_weight_in_range(s: int) -> None:
    assert 1 <= shares_to_weight(s) <= 10000


@given(shares, shares)
def test_weight_monotonic(a: int, b: int) -> None:
    lo, hi = sorted((a, b))
    assert shares_to_weight(lo) <= shares_to_weight(hi)


@given(st.integers(min_value=-(10**9), max_value=10**9))
def test_weight_clamped_for_any_input(s: int) -> None:
    assert 1 <= shares_to_weight(s) <= 10000


@given(st.integers(min_value=1, max_value=10000))
def test_weight_round_trip_drifts_at_most_one(w: int) -> None:
    # the kubelet's pair of integer formulas truncates, so weight -> shares -> weight may lose one step, no more
    assert w - 1 <= shares_to_weight(weight_to_shares(w)) <= w


def test_weight_reference_values() -> None:
    # reference §4.5 worked example: pod 2048 -> 79, containers 512 -> 20, 1536 -> 59; ends 2 -> 1, 262144 -> 10000
    assert [shares_to_weight(s) for s in (2048, 512, 1536, 2, 262144, 1024)] == [79, 20, 59, 1, 10000, 39]


@given(st.integers(min_value=1000, max_value=10**12))
def test_quota_numbers_pass_through(q: int) -> None:
    assert quota_to_cpu_max(q) == str(q)
    assert parse_limit(quota_to_cpu_max(q)) == q


def test_unlimited_spellings() -> None:
    assert quota_to_cpu_max(-1) == "max"
    assert limit_to_v2(-1) == "max"
    assert limit_to_v2(1 << 30) == str(1 << 30)
    for token in ("max", "-1", "9223372036854771712", "9223372036854775807", " max\n"):
        assert parse_limit(token) == UNLIMITED
    with pytest.raises(ValueError):
        parse_limit("lots")


def test_cpu_max_fields() -> None:
    assert cpu_max_field("max 100000", 0) == "max"
    assert cpu_max_field("50000 100000\n", 1) == "100000"
    assert cpu_max_field("50000", 1) == ""
    assert cpu_max_with_period("50000 100000\n", 20000) == "50000 20000"
    assert cpu_max_with_period("", 20000) == "max 20000"


@given(st.integers(min_value=10, max_value=1000), st.integers(min_value=10, max_value=1000))
def test_io_weight_range_and_monotonic(a: int, b: int) -> None:
    lo, hi = sorted((a, b))
    assert 1 <= blkio_weight_to_io_weight(lo) <= blkio_weight_to_io_weight(hi) <= 10000
    assert blkio_weight_to_io_weight(10) == 1 and blkio_weight_to_io_weight(1000) == 10000


@given(st.frozensets(st.integers(min_value=0, max_value=512), max_size=64))
def test_cpuset_round_trip(cpus: frozenset[int]) -> None:
    text = format_cpu_list(cpus)
    assert parse_cpu_list(text) == cpus
    assert format_cpu_list(parse_cpu_list(text)) == text  # canonical


def test_cpuset_parse() -> None:
    assert parse_cpu_list("0-3,8\n") == frozenset({0, 1, 2, 3, 8})
    assert format_cpu_list(frozenset({0, 1, 2, 3, 8, 10, 11})) == "0-3,8,10-11"
    assert parse_cpu_list("") == frozenset()
    for bad in ("a", "3-1", "0,,1", "1-", "-1", "0-99999999"):
        with pytest.raises(ValueError):
            parse_cpu_list(bad)
