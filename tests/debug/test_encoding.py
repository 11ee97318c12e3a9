"""Provider values of any shape become valid JSON; timestamps and ages read like kubectl's."""

from __future__ import annotations

import enum
import json
import math
from dataclasses import dataclass
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from hookserver.debug.encoding import dumps, format_age, format_ts, to_jsonable


class Color(enum.Enum):
    RED = "red"


@dataclass(frozen=True, slots=True)
class Inner:
    color: Color
    tags: frozenset[str]


class Model(BaseModel):
    limit: int
    inner: dict[str, float]


def test_dataclasses_enums_sets_and_models() -> None:
    value = {"a": Inner(Color.RED, frozenset({"y", "x"})), "m": Model(limit=3, inner={"p95": 0.5}), 1: (1, 2)}
    assert to_jsonable(value) == {
        "a": {"color": "red", "tags": ["x", "y"]},
        "m": {"limit": 3, "inner": {"p95": 0.5}},
        "1": [1, 2],
    }


def test_non_finite_floats_and_unknown_objects_still_encode() -> None:
    text = dumps({"nan": math.nan, "inf": -math.inf, "obj": object(), "raw": b"\xff"})
    doc = json.loads(text)
    assert doc["nan"] == "nan" and doc["inf"] == "-inf"
    assert doc["obj"].startswith("<object object") and doc["raw"] == "\ufffd"


def test_self_referencing_values_do_not_recurse_forever() -> None:
    loop: list[Any] = []
    loop.append(loop)
    assert json.loads(dumps(loop))  # cut at the depth limit, not a RecursionError


def test_format_ts_and_age() -> None:
    assert format_ts(0) == "" and format_ts(math.nan) == ""
    assert format_ts(1_700_000_000.25) == "2023-11-14T22:13:20.250Z"
    assert [format_age(s) for s in (0, 59.9, 61, 3600 * 5 + 120, 86400 * 2 + 3600 * 3)] == [
        "0s", "59s", "1m1s", "5h2m", "2d3h",
    ]
    assert format_age(-5) == "0s"


_any = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(), st.binary(max_size=8)),
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.frozensets(st.integers(), max_size=3),
        st.dictionaries(st.one_of(st.text(max_size=5), st.integers()), children, max_size=3),
    ),
    max_leaves=20,
)


@given(_any)
def test_dumps_always_produces_strict_json(value: Any) -> None:
    json.loads(dumps(value), parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
