"""The Kubernetes quantity parser: exact values, Go rounding, and clear errors."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hookserver.errors import QuantityError
from hookserver.quantity import parse_quantity

DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}


@pytest.mark.parametrize(
    ("text", "value", "milli"),
    [
        ("1", 1, 1000),
        ("1k", 1000, 1000000),
        ("500m", 1, 500),
        ("1.5", 2, 1500),
        ("0.1", 1, 100),
        (".5", 1, 500),
        ("5.", 5, 5000),
        ("1Ki", 1024, 1024000),
        ("1Gi", 1 << 30, (1 << 30) * 1000),
        ("1e3", 1000, 1000000),
        ("1E3", 1000, 1000000),
        ("12e-1", 2, 1200),
        ("+7", 7, 7000),
        ("-1", -1, -1000),
        ("-1.5", -2, -1500),
        ("0", 0, 0),
        ("1n", 1, 1),
        ("2.5Mi", 2621440, 2621440000),
    ],
)
def test_known_values(text: str, value: int, milli: int) -> None:
    q = parse_quantity(text)
    assert q.value() == value
    assert q.milli_value() == milli


@pytest.mark.parametrize("text", ["", " ", "abc", "1.2.3", "1KiB", "1kk", "1 k", "e3", "1e", "--1", "1e1001", "0x10", "1ki"])
def test_rejects_bad_syntax_and_names_the_field(text: str) -> None:
    with pytest.raises(QuantityError) as info:
        parse_quantity(text, field="limits[kubernetes.io/batch-cpu]")
    assert "limits[kubernetes.io/batch-cpu]" in str(info.value)


@given(st.integers(min_value=0, max_value=10**6), st.sampled_from(sorted(DECIMAL)))
def test_decimal_suffixes(number: int, suffix: str) -> None:
    q = parse_quantity(f"{number}{suffix}")
    assert q.exact == Fraction(number) * Fraction(10) ** DECIMAL[suffix]


@given(st.integers(min_value=0, max_value=10**6), st.sampled_from(sorted(BINARY)))
def test_binary_suffixes(number: int, suffix: str) -> None:
    assert parse_quantity(f"{number}{suffix}").value() == number << BINARY[suffix]


@given(st.integers(min_value=0, max_value=10**6), st.integers(min_value=-12, max_value=12))
def test_exponents_match_decimal(number: int, exponent: int) -> None:
    q = parse_quantity(f"{number}e{exponent}")
    assert q.exact == Fraction(number) * Fraction(10) ** exponent


@given(st.decimals(min_value=0, max_value=10**9, places=3, allow_nan=False, allow_infinity=False))
def test_value_rounds_up_like_go(number) -> None:  # type: ignore[no-untyped-def]
    text = format(number, "f")
    q = parse_quantity(text)
    exact = Fraction(text)
    assert q.value() >= exact and q.value() - exact < 1
    assert q.milli_value() >= exact * 1000 and q.milli_value() - exact * 1000 < 1


@given(st.text(max_size=12))
def test_never_raises_anything_but_quantity_error(text: str) -> None:
    try:
        parse_quantity(text)
    except QuantityError:
        pass


def test_json_numbers_are_accepted_but_booleans_are_not() -> None:
    assert parse_quantity(1000).value() == 1000
    assert parse_quantity(1.5).milli_value() == 1500
    with pytest.raises(QuantityError):
        parse_quantity(True)
    with pytest.raises(QuantityError):
        parse_quantity(None)
