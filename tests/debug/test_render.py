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


def test_top_renders_a_node_line_and_a_pod_table() -> None:
    from hookserver.debug.render import render_top

    doc = {
        "window_s": 300.0,
        "node": {
            "cpu_cores": {"now": 1.25, "p95": 1.5}, "memory_bytes": {"now": 3 * 2**30, "p95": 3.5 * 2**30},
            "system_cpu_cores": {"now": 0.1, "p95": 0.2}, "be_cpu_cores": {"now": 0.5, "p95": None},
            "memory_total_bytes": 16 * 2**30,
        },
        "pods": [
            {"uid": "u1", "namespace": "batch", "name": "spark-1", "qos": "BE", "priority_class": "koord-batch",
             "cpu_cores": {"now": 0.5, "p95": 0.75}, "memory_bytes": {"now": 512 * 2**20, "p95": 600 * 2**20}},
            {"uid": "u2", "namespace": "", "name": "", "qos": "", "priority_class": "",
             "cpu_cores": {"now": None, "p95": None}, "memory_bytes": {"now": 2**20, "p95": 2**20}},
        ],
    }
    lines = render_top(doc).splitlines()
    assert lines[0] == "node: cpu 1.250 cores (p95 1.500), memory 3.0 GiB (p95 3.5 GiB) of 16.0 GiB"
    assert "best-effort cpu 0.500 (p95 -)" in lines[1] and "300s" in lines[1]
    header = lines[3].split()
    assert header == ["POD", "QOS", "PRIORITY", "CPU", "CPU_P95", "MEMORY", "MEMORY_P95"]
    assert lines[4].split() == ["batch/spark-1", "BE", "koord-batch", "0.500", "0.750", "512.0", "MiB", "600.0", "MiB"]
    assert lines[5].split()[:4] == ["u2", "-", "-", "-"]
    assert render_top({"unexpected": 1}) == "unexpected: 1"  # another shape falls back to the generic view


def test_top_renders_gpus_per_node_pod_and_container() -> None:
    from hookserver.debug.render import render_top

    stat = lambda now, p95: {"now": now, "p95": p95}  # noqa: E731
    doc = {
        "window_s": 300.0,
        "node": {"cpu_cores": stat(1.0, 1.0), "memory_bytes": stat(2**30, 2**30), "memory_total_bytes": 2**34,
                 "gpus": [{"device": "GPU-aaa", "minor": 0, "core_percent": stat(60.0, 72.4),
                           "memory_bytes": stat(30 * 2**30, 31 * 2**30), "utilization_percent": stat(75.0, 80.0),
                           "memory_total_bytes": 80 * 2**30}]},
        "pods": [
            {"uid": "u1", "namespace": "ml", "name": "train-0", "qos": "LS", "priority_class": "koord-prod",
             "cpu_cores": stat(0.5, 0.5), "memory_bytes": stat(2**20, 2**20),
             "gpus": [{"device": "GPU-aaa", "minor": 0, "core_percent": stat(55.0, 60.0),
                       "memory_bytes": stat(22 * 2**30, 22 * 2**30),
                       "containers": [{"id": "c1", "name": "trainer", "core_percent": stat(55.0, 60.0),
                                       "memory_bytes": stat(22 * 2**30, 23 * 2**30)}]},
                      {"device": "GPU-bbb", "minor": 1, "core_percent": stat(5.0, 5.0),
                       "memory_bytes": stat(2 * 2**30, 2 * 2**30), "containers": []}]},
            {"uid": "u2", "namespace": "web", "name": "api", "qos": "LS", "priority_class": "",
             "cpu_cores": stat(0.1, 0.1), "memory_bytes": stat(2**20, 2**20)},
        ],
    }
    lines = render_top(doc).splitlines()
    assert lines[2] == ("gpu 0 GPU-aaa: core 60% (p95 72%), memory 30.0 GiB (p95 31.0 GiB) of 80.0 GiB, "
                        "device utilisation 75%")
    header = lines[4].split()
    assert header[-2:] == ["GPU_CORE", "GPU_MEMORY"]
    assert lines[5].split()[-3:] == ["60%", "24.0", "GiB"]  # summed over the pod's two GPUs: 55 + 5, 22 + 2 GiB
    assert lines[6].split()[-2:] == ["-", "-"]  # a pod without GPUs
    assert lines[8] == "GPU use by container:"
    assert lines[9].split() == ["POD", "CONTAINER", "GPU", "CORE", "CORE_P95", "MEMORY", "MEMORY_P95"]
    assert lines[10].split() == ["ml/train-0", "trainer", "0", "55%", "60%", "22.0", "GiB", "23.0", "GiB"]
    cpu_only = render_top({**doc, "node": {k: v for k, v in doc["node"].items() if k != "gpus"},
                           "pods": [doc["pods"][1]]})
    assert "gpu" not in cpu_only.lower()  # a CPU node: nothing new
