"""The write, degrade and publisher rules, and the Node facts as koord-manager reads the annotations."""

from __future__ import annotations

from types import MappingProxyType

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hookserver.capacity.node_facts import node_facts
from hookserver.capacity.quantities import Pair
from hookserver.capacity.rules import decide, degrade_reason, foreign_owners, warmup_left_s, who_publishes
from hookserver.capacity.usage import Freshness
from hookserver.errors import InputError
from hookserver.koord_resources import BATCH_CPU, BATCH_MEMORY
from hookserver.store.records import NodeRecord

T = 1_000_000.0


def _decide(target: dict[str, int] | None, current: dict[str, int], *, last: float = T - 10, ours: tuple[str, ...] = ()):
    return decide(target, current, ours=list(ours), last_write_at=last, now=T, diff_threshold=0.1, update_time_s=300)


def test_appear_and_disappear_always_write() -> None:
    assert _decide({BATCH_CPU: 1}, {}).action == "write"
    assert "appears" in _decide({BATCH_CPU: 1}, {}).reason
    assert _decide({BATCH_CPU: 1}, {BATCH_CPU: 1, BATCH_MEMORY: 5}).reason == f"{BATCH_MEMORY} disappears"


def test_the_diff_is_relative_to_the_old_value_and_strict() -> None:
    assert _decide({BATCH_CPU: 1100}, {BATCH_CPU: 1000}).action == "hold"  # exactly 10 %: not more than
    assert _decide({BATCH_CPU: 1101}, {BATCH_CPU: 1000}).action == "write"
    assert _decide({BATCH_CPU: 899}, {BATCH_CPU: 1000}).action == "write"
    assert _decide({BATCH_CPU: 1}, {BATCH_CPU: 0}).action == "write"  # from 0 anything is a change
    assert _decide({BATCH_CPU: 0}, {BATCH_CPU: 0}).action == "hold"


def test_a_small_change_waits_for_the_refresh_and_an_equal_offer_is_never_rewritten() -> None:
    assert _decide({BATCH_CPU: 1050}, {BATCH_CPU: 1000}, last=T - 299).action == "hold"
    refresh = _decide({BATCH_CPU: 1050}, {BATCH_CPU: 1000}, last=T - 300)
    assert refresh.action == "write" and "refresh" in refresh.reason
    assert _decide({BATCH_CPU: 1050}, {BATCH_CPU: 1000}, last=0.0).action == "write"  # never wrote: refresh
    assert _decide({BATCH_CPU: 1000}, {BATCH_CPU: 1000}, last=0.0).action == "hold"


def test_withdraw_only_what_is_ours() -> None:
    assert _decide(None, {BATCH_CPU: 5}, ours=(BATCH_CPU,)).action == "withdraw"
    assert _decide(None, {BATCH_CPU: 5}).action == "hold"  # not ours: nothing to withdraw
    assert _decide(None, {}, ours=(BATCH_CPU,)).action == "hold"


@given(st.integers(0, 10**12), st.integers(0, 10**12), st.floats(0.01, 1.0))
def test_a_write_happens_exactly_when_koord_manager_would(old: int, new: int, threshold: float) -> None:
    got = decide({BATCH_CPU: new}, {BATCH_CPU: old}, ours=[], last_write_at=T, now=T, diff_threshold=threshold,
                 update_time_s=300)
    assert (got.action == "write") == (abs(new - old) > old * threshold)


def test_degrade_and_warmup() -> None:
    fresh = Freshness(newest_at=T - 10, first_at=T - 100)
    assert degrade_reason(fresh, now=T, started_at=T - 1000, degrade_minutes=1, disabled_collectors=()) == ""
    stale = Freshness(newest_at=T - 61, first_at=T - 1000)
    assert "61 s old" in degrade_reason(stale, now=T, started_at=T - 1000, degrade_minutes=1, disabled_collectors=())
    never = Freshness(None, None)
    assert degrade_reason(never, now=T, started_at=T - 30, degrade_minutes=1, disabled_collectors=()) == ""
    assert "since the publisher started" in degrade_reason(never, now=T, started_at=T - 61, degrade_minutes=1,
                                                           disabled_collectors=())
    assert "node_resource" in degrade_reason(fresh, now=T, started_at=T, degrade_minutes=1,
                                             disabled_collectors=("node_resource: no /proc/stat",))
    assert warmup_left_s(Freshness(T, T - 12), now=T, warmup_s=30) == 18
    assert warmup_left_s(never, now=T, warmup_s=30) == 30


def test_who_publishes() -> None:
    assert who_publishes("auto", standalone=False, koord_manager_evidence="").agent
    assert not who_publishes("auto", standalone=False, koord_manager_evidence="NodeSLO n exists").agent
    assert who_publishes("agent", standalone=False, koord_manager_evidence="NodeSLO n exists").agent
    assert not who_publishes("koord-manager", standalone=False, koord_manager_evidence="").agent
    assert who_publishes("koord-manager", standalone=True, koord_manager_evidence="").agent
    assert foreign_owners({BATCH_CPU: ("hookserver", "kubelet"), BATCH_MEMORY: ("hookserver",)}, "hookserver") == \
        {BATCH_CPU: ("kubelet",)}


def _node(annotations: dict[str, str] | None = None, **status: dict[str, str]) -> NodeRecord:
    return NodeRecord(
        name="n", annotations=MappingProxyType(annotations or {}),
        capacity=MappingProxyType(status.get("capacity", {"cpu": "8", "memory": "32Gi"})),
        allocatable=MappingProxyType(status.get("allocatable", {"cpu": "7500m", "memory": "30Gi",
                                                                BATCH_CPU: "1500", BATCH_MEMORY: "4Gi"})),
    )


def test_node_facts_read_the_annotations_as_koordinator_does() -> None:
    facts = node_facts(_node({
        "node.koordinator.sh/reservation": '{"resources": {"cpu": "1", "memory": "1Gi"}, "reservedCPUs": "0-2,5"}',
        "node.koordinator.sh/cpu-normalization-ratio": "1.25",
        "node.koordinator.sh/thirdPartyAllocations": '{"allocations": [{"name": "yarn", "priority": "koord-batch", '
        '"resources": {"kubernetes.io/batch-cpu": "2k", "kubernetes.io/batch-memory": "2Gi"}}, {"name": "x", '
        '"priority": "koord-prod", "resources": {"kubernetes.io/batch-cpu": "9000"}}]}',
    }))
    assert facts.annotation_reserved == Pair(4000, 1 << 30)  # reservedCPUs replaces the cpu figure: 4 CPUs
    assert facts.kubelet_reserved == Pair(500, 2 << 30) and facts.reserved == Pair(4000, 2 << 30)
    assert facts.cpu_normalization_ratio == 1.25
    assert facts.third_party_batch == Pair(2000, 2 << 30)  # only the koord-batch entry
    assert facts.current == {BATCH_CPU: 1500, BATCH_MEMORY: 4 << 30} and facts.notes == ()


@pytest.mark.parametrize(("key", "value", "note"), [
    ("node.koordinator.sh/reservation", "{broken", "reservation ignored"),
    ("node.koordinator.sh/reservation", '{"reservedCPUs": "3-1"}', "reservation ignored"),
    ("node.koordinator.sh/cpu-normalization-ratio", "fast", "not a number"),
    ("node.koordinator.sh/cpu-normalization-ratio", "inf", "not a positive number"),
    ("node.koordinator.sh/thirdPartyAllocations", '{"allocations": {}}', "thirdPartyAllocations ignored"),
    ("node.koordinator.sh/thirdPartyAllocations",
     '{"allocations": [{"priority": "koord-batch", "resources": {"kubernetes.io/batch-cpu": "lots"}}]}',
     "thirdPartyAllocations ignored"),
])
def test_an_unreadable_annotation_is_ignored_with_a_note(key: str, value: str, note: str) -> None:
    facts = node_facts(_node({key: value}))
    assert any(note in n for n in facts.notes), facts.notes
    assert facts.annotation_reserved is None and facts.cpu_normalization_ratio is None
    assert facts.third_party_batch == Pair()


def test_a_node_without_capacity_is_an_input_error() -> None:
    with pytest.raises(InputError, match="no cpu/memory in status.capacity"):
        node_facts(_node(capacity={"pods": "110"}))
    no_allocatable = node_facts(_node(allocatable={}))
    assert no_allocatable.kubelet_reserved == Pair() and no_allocatable.current == {}
