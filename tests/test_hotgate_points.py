"""The background passes that walk every pod step aside at the hot gate as they go, not only between passes.

`python -m tests.bench nri_busy` measures, per background thread, the CPU time between two of its pause
points (`time.thread_time`); a call that arrives inside such a stretch waits for the GIL up to one switch
interval per hand-off. At 500 pods these passes had no pause point inside them and held 10-120 ms of CPU:
the collectors' target resolution, the capacity tick's inputs and its report, a training round's window reads and model
updates. Each now pauses every few pods; these tests count the pauses with the gate kept busy.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hookserver.aio.hotgate import GATE
from hookserver.store import StateStore
from tests.predictor.helpers import NOW, pod

PODS = 120


@pytest.fixture
def busy_gate() -> Iterator[list[int]]:
    """The process's gate enabled and always busy (a call in flight), with no time to wait: each pause returns
    at once and is counted. Yields [pauses at start]; restores the gate."""
    saved = (GATE.enabled, GATE.linger_s, GATE.max_defer_s, GATE.last_left, GATE.pauses)
    GATE.configure(enabled=True, linger_s=1e9, max_defer_s=0.0)
    GATE.last_left = GATE.clock()
    try:
        yield [GATE.pauses]
    finally:
        GATE.configure(enabled=saved[0], linger_s=saved[1], max_defer_s=saved[2])
        GATE.last_left, GATE.pauses = saved[3], saved[4]


def _store() -> StateStore:
    store = StateStore(clock=lambda: NOW)
    for i in range(PODS):
        store.upsert_pod(pod(f"p{i:03d}", kube_qos="BestEffort"))
    return store


def test_the_collectors_target_resolution_pauses_every_few_pods(busy_gate: list[int]) -> None:
    from collectors.targets import TargetResolver
    from hookserver.system.cgroupnames import CgroupDriver, ContainerRuntime

    resolver = TargetResolver(driver=CgroupDriver.CGROUPFS, runtime=ContainerRuntime.CONTAINERD, exists=lambda _: True)
    targets = resolver.resolve(_store().snapshot())
    assert len(targets.pods) == PODS
    assert GATE.pauses - busy_gate[0] >= PODS // 16


def test_the_capacity_ticks_inputs_pause_every_few_pods(busy_gate: list[int]) -> None:
    from hookserver.capacity.usage import gather_inputs

    store = _store()
    pods, _usage, _fresh, _notes = gather_inputs(store.snapshot(), store.series, now=NOW, window_s=300.0,
                                                 fast_window_s=60.0, memory_policy="usageWithoutPageCache")
    assert len(pods) == PODS
    assert GATE.pauses - busy_gate[0] >= PODS // 8


def test_a_training_rounds_window_reads_pause_every_few_pods(busy_gate: list[int]) -> None:
    from hookserver.predictor.training import collect_training_round
    from tests.predictor.conftest import feed

    store = _store()
    for i in range(PODS):
        feed(store, uid=f"uid-p{i:03d}", cpu=[1.0] * 3, memory=[1.0] * 3, end=NOW)
    before_round = GATE.pauses
    round_ = collect_training_round(store.snapshot().pods, store.series, now=NOW, window_s=60.0)
    assert round_.pods_trained == PODS
    # the window reads of two metrics every 16 pods, then the pods themselves one by one
    assert GATE.pauses - before_round >= 2 * (PODS // 16) + PODS


def test_the_capacity_report_pauses_every_few_pods_lines(busy_gate: list[int]) -> None:
    """The capacity document (written every tick) carries every pod's line: 500 pods' lines and the JSON were
    ~14 ms of CPU after the tick's last pause point."""
    from tests.capacity.test_publisher import _warm
    from tests.capacity.world import GI, World, ls_pod

    world = World()
    for i in range(PODS):
        world.add_pod(ls_pod(f"web-{i:03d}", cpu="100m"), 0.05, 0.1 * GI)
    publisher = world.publisher()
    _warm(world)
    publisher.tick()
    before_view = GATE.pauses
    view = publisher.view()
    assert len(view["pods"]) == PODS
    assert GATE.pauses - before_view >= PODS // 32


def test_a_json_document_is_encoded_with_pauses_and_reads_back_as_json_dumps_wrote_it(busy_gate: list[int]) -> None:
    """The standalone documents (capacity, NodeMetric, topology) are indented JSON, encoded in pure Python: the
    capacity document of 500 pods was ~14 ms of CPU in one piece."""
    from hookserver.system.atomicfile import json_text

    doc = {"pods": [{"pod": f"ns/web-{i}", "used": {"cpu_milli": i, "memory": i * 1024}} for i in range(PODS * 4)]}
    text = json_text(doc, indent=2, sort_keys=True)
    assert text == json.dumps(doc, indent=2, sort_keys=True)
    assert GATE.pauses - busy_gate[0] >= 4  # ~12,000 pieces: a pause every 2,048


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=30,
)


@given(doc=_JSON, indent=st.sampled_from([None, 1, 2]), sort_keys=st.booleans())
def test_json_text_is_json_dumps(doc: object, indent: int | None, sort_keys: bool) -> None:
    from hookserver.system.atomicfile import json_text

    assert json_text(doc, indent=indent, sort_keys=sort_keys) == json.dumps(doc, indent=indent, sort_keys=sort_keys)
