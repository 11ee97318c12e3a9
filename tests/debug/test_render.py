"""The renderer: rows become a table, objects become key: value lines, and nothing breaks it."""

from __future__ import annotations

import json
import re
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from hookserver.debug.render import render, render_table

_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20)
)
_json = st.recursive(
    _scalars,
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(st.text(max_size=8), children, max_size=4)),
    max_leaves=30,
)
_keys = st.text(alphabet="abcdefgh_", min_size=1, max_size=8)


def test_rows_render_as_an_aligned_table() -> None:
    out = render([{"pod": "a/b", "qos": "BE"}, {"pod": "ns/long-name", "qos": None, "extra": True}])
    assert out.splitlines() == [
        "POD           QOS  EXTRA",
        "a/b           BE   -",
        "ns/long-name  -    true",
    ]


def test_objects_render_as_nested_key_value_lines() -> None:
    out = render({"name": "x", "nri": {"state": "connected", "events": ["A", "B"]}, "rows": [{"a": 1}], "empty": []})
    assert out.splitlines() == [
        "name: x",
        "nri:",
        "  state: connected",
        "  events: A, B",
        "rows:",
        "  A",
        "  1",
        "empty: (none)",
    ]


def test_lists_of_nested_objects_render_as_blocks() -> None:
    out = render([{"stage": "S", "hooks": [{"plugin": "P", "values": {"cpu_shares": 2}}]}])
    assert out.splitlines() == [
        "- stage: S",
        "  hooks:",
        "    - plugin: P",
        "      values:",
        "        cpu_shares: 2",
    ]


def test_control_characters_are_escaped() -> None:
    out = render({"error": "bad\x1b[2Jvalue\nnext"})
    assert "\x1b" not in out and "\n" not in out
    assert out == "error: bad\\x1b[2Jvalue\\nnext"


_words = st.one_of(st.integers(), st.text(alphabet="xyz-/.0123456789", max_size=12))


@given(st.lists(st.dictionaries(_keys, _words, min_size=1, max_size=5), min_size=1, max_size=6))
def test_a_table_has_a_header_and_aligned_cells(rows: list[dict[str, Any]]) -> None:
    lines = render_table(rows)
    assert len(lines) == len(rows) + 1
    columns = list(dict.fromkeys(k for row in rows for k in row))
    header_tokens = [(m.start(), m.group()) for m in re.finditer(r"\S+", lines[0])]
    assert [t for _, t in header_tokens] == [c.upper() for c in columns]
    for row, line in zip(rows, lines[1:], strict=True):
        for (start, _), column in zip(header_tokens, columns, strict=True):
            value = row.get(column)
            expected = "-" if value is None or value == "" else str(value)
            assert line[start:].startswith(expected), (line, column)
            assert start == 0 or line[start - 2 : start] == "  "


@given(_json)
def test_any_json_document_renders_without_control_characters(doc: Any) -> None:
    doc = json.loads(json.dumps(doc))
    out = render(doc)
    assert isinstance(out, str)
    assert all(ch == "\n" or ch.isprintable() for ch in out)


def test_floats_are_rounded_for_people_but_whole_numbers_stay_whole() -> None:
    from hookserver.debug.render import _scalar

    assert _scalar(1.0952380952380953) == "1.095"
    assert _scalar(475250688.0) == "475250688"
    assert _scalar(0.0) == "0"
    assert _scalar(float("nan")) == "nan"
