"""`hookctl metrics QUERY` and `hookctl top` over a store with known data."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collectors import parse_query, query_report, top_report
from hookserver.errors import InputError
from hookserver.store.state import StateStore
from hookserver.store.timeseries import series_key
from tests.collectors.fakehost import make_pod

T0 = 1_700_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def world() -> tuple[StateStore, Clock]:
    clock = Clock()
    store = StateStore(clock=clock)
    store.upsert_pod(make_pod("uid-a", name="web-0", namespace="shop", qos_class="LS"))
    store.upsert_pod(make_pod("uid-b", name="batch-0", namespace="jobs", qos_class="BE"))
    node = series_key("node_cpu_usage", node="n1")
    mem = series_key("node_memory_usage", node="n1")
    a = series_key("pod_cpu_usage", pod="uid-a", qos="LS")
    b = series_key("pod_cpu_usage", pod="uid-b", qos="BE")
    b_mem = series_key("pod_memory_usage", pod="uid-b", qos="BE")
    for i in range(600):  # 10 minutes at 1 s
        store.series.append_many(
            T0 + i,
            [(node, float(i % 100)), (mem, 1000.0 + i), (a, 0.5), (b, float(i % 10) / 10), (b_mem, 2048.0)],
        )
    clock.now = T0 + 599
    return store, clock


def test_parse_full_syntax() -> None:
    q = parse_query(' pod_cpu_usage { pod_uid = "a\\"b" , qos!="BE", priority=~"koord-.*" } [ 90s ] p95 ')
    assert q.metric == "pod_cpu_usage" and q.window_s == 90 and q.aggregate == "p95"
    assert [(m.label, m.op, m.value) for m in q.matchers] == [("pod", "=", 'a"b'), ("qos", "!=", "BE"), ("priority", "=~", "koord-.*")]
    assert parse_query("node_cpu_usage").window_s == 300 and parse_query("x[2h]").window_s == 7200
    assert parse_query("x{}").matchers == ()


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "expected a metric name"),
        ("{pod=\"a\"}", "expected a metric name"),
        ("m{pod=a}", 'expected label="value"'),
        ("m{pod=\"a\"", "expected ',' or '}'"),
        ("m[5d]", "unexpected character"),
        ("m p42", "unknown aggregate"),
        ("m{pod=~\"(\"}", "bad regular expression"),
        ("m[0s]", "window must be positive"),
        ("m avg extra", "unexpected trailing input"),
        ("m;drop", "unexpected character"),
    ],
)
def test_malformed_queries_name_the_problem_and_position(text: str, why: str) -> None:
    with pytest.raises(InputError, match="position") as info:
        parse_query(text)
    assert why in str(info.value) and info.value.field == "query"


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_any_text_parses_or_raises_input_error(text: str) -> None:
    try:
        q = parse_query(text)
    except InputError:
        return
    assert q.metric and q.window_s > 0


def test_query_report_values(world: tuple[StateStore, Clock]) -> None:
    store, _ = world
    out = query_report(store, 'pod_cpu_usage{qos="BE"}[100s] max')
    assert out["series"] == [{"labels": {"pod": "uid-b", "qos": "BE"}, "value": 0.9}]
    out = query_report(store, "node_cpu_usage[10m] p95")
    # 0..99 six times each: rank 0.95 x 599 = 569.05 sits between sorted[569] = 94 and sorted[570] = 95.
    assert out["series"][0]["value"] == pytest.approx(94.05)
    out = query_report(store, "node_cpu_usage[5s] raw")
    assert out["series"][0]["points"] == [[T0 + i, float(i % 100)] for i in range(594, 600)]
    stats = query_report(store, "node_memory_usage[60s]")["series"][0]["stats"]
    assert (stats["count"], stats["min"], stats["max"], stats["last"]) == (61, 1539.0, 1599.0, 1599.0)
    assert query_report(store, 'pod_cpu_usage{pod=~"uid-.*"} last')["series"][0]["value"] == 0.5
    assert query_report(store, "gpu_utilization")["series"] == []  # known metric, no data on this node
    with pytest.raises(InputError, match="unknown metric 'nope'"):
        query_report(store, "nope")


def test_top_report(world: tuple[StateStore, Clock]) -> None:
    store, clock = world
    report = top_report(store, window_s=300.0)
    assert report["node"]["cpu_cores"]["now"] == 99.0
    assert report["node"]["memory_bytes"] == {"now": 1599.0, "p95": pytest.approx(1584.0), "age_s": 0.0}
    assert [p["uid"] for p in report["pods"]] == ["uid-b", "uid-a"]  # busiest first: 0.9 > 0.5
    b = report["pods"][0]
    assert (b["namespace"], b["name"], b["qos"]) == ("jobs", "batch-0", "BE")
    assert b["cpu_cores"]["p95"] == pytest.approx(0.9) and b["memory_bytes"]["now"] == 2048.0
    assert report["pods"][1]["memory_bytes"]["now"] is None
    assert top_report(store, limit=1)["pods"][0]["uid"] == "uid-b"
    clock.now = T0 + 10_000  # all samples older than the window: nothing is "now"
    stale = top_report(store, window_s=60.0)
    assert stale["node"]["cpu_cores"]["now"] is None and stale["pods"] == []


def test_top_on_a_cpu_node_has_no_gpu_keys(world: tuple[StateStore, Clock]) -> None:
    store, _clock = world
    report = top_report(store, window_s=300.0)
    assert "gpus" not in report["node"] and all("gpus" not in pod for pod in report["pods"])


def test_top_gpu_per_device_pod_and_container(world: tuple[StateStore, Clock]) -> None:
    """GPUs sorted by minor as a number (2 before 10); per pod, each GPU with its containers; now = the newest
    sample, p95 over the window."""
    store, clock = world
    from tests.collectors.fakehost import make_container

    store.upsert_container(make_container("c-train", "uid-a", name="trainer"))
    g2 = {"device": "GPU-two", "minor": "2", "node": "n1"}
    g10 = {"device": "GPU-ten", "minor": "10", "node": "n1"}
    pod_a = {"pod": "uid-a", "qos": "LS"}
    for i in range(20):  # T0+580 .. T0+599, inside the 300 s window
        ts = T0 + 580 + i
        store.series.append_many(ts, [
            (series_key("node_gpu_core_usage", **g2), float(i)),  # 0..19: now 19, p95 = 18 + 0.05 = 18.05
            (series_key("node_gpu_memory_usage", **g2), 4.0 * 2**30),
            (series_key("gpu_utilization", **g2), 50.0),
            (series_key("node_gpu_memory_total", **g2), 80.0 * 2**30),
            (series_key("node_gpu_core_usage", **g10), 7.0),
            (series_key("node_gpu_memory_usage", **g10), 1.0 * 2**30),
            (series_key("pod_gpu_core_usage", **g2, **pod_a), 12.0),
            (series_key("pod_gpu_memory_usage", **g2, **pod_a), 3.0 * 2**30),
            (series_key("container_gpu_core_usage", **g2, **pod_a, container="c-train"), 12.0),
            (series_key("container_gpu_memory_usage", **g2, **pod_a, container="c-train"), 3.0 * 2**30),
        ])
    report = top_report(store, window_s=300.0)
    assert json.loads(json.dumps(report)) == report  # `hookctl top -o json` prints it as is
    gpus = report["node"]["gpus"]
    assert [(g["minor"], g["device"]) for g in gpus] == [(2, "GPU-two"), (10, "GPU-ten")]
    assert gpus[0]["core_percent"]["now"] == 19.0 and gpus[0]["core_percent"]["p95"] == pytest.approx(18.05)
    assert gpus[0]["memory_bytes"]["now"] == 4.0 * 2**30 and gpus[0]["memory_total_bytes"] == 80.0 * 2**30
    assert gpus[0]["utilization_percent"]["now"] == 50.0
    assert gpus[1]["memory_total_bytes"] is None and gpus[1]["utilization_percent"]["now"] is None
    pods = {p["uid"]: p for p in report["pods"]}
    assert "gpus" not in pods["uid-b"]
    (a_gpu,) = pods["uid-a"]["gpus"]
    assert (a_gpu["device"], a_gpu["minor"], a_gpu["core_percent"]["now"]) == ("GPU-two", 2, 12.0)
    assert a_gpu["containers"] == [{"id": "c-train", "name": "trainer",
                                    "core_percent": {"now": 12.0, "p95": 12.0, "age_s": 0.0},
                                    "memory_bytes": {"now": 3.0 * 2**30, "p95": 3.0 * 2**30, "age_s": 0.0}}]
    clock.now = T0 + 10_000  # every GPU sample is out of the window: no GPU rows
    assert "gpus" not in top_report(store, window_s=60.0)["node"]
