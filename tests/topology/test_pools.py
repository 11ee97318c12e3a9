"""The share pools koordlet's NRT informer computes, by hand: LS minus every bound pod, BE minus LSE only,
both minus reserved and exclusive SYSTEM CPUs, one pool per NUMA node sorted by (socket, node)."""

from __future__ import annotations

import json

import pytest

from hookserver.store.records import PodRecord
from hookserver.system.topology import CpuInfo
from hookserver.topology import ANNOTATION_RESOURCE_STATUS, ResourceStatusError, compute_pools, pod_cpuset
from hookserver.topology.pools import SharePool

# 2 sockets x 1 NUMA node x 2 cores x 2 threads: cpus 0-3 on node 0 (socket 0), 4-7 on node 1 (socket 1).
CPUS = tuple(CpuInfo(cpu=i, core=i % 4 // 2 + 2 * (i // 4), socket=i // 4, numa_node=i // 4, l3=i // 4, online=True)
             for i in range(8))


def _pod(uid: str, qos: str, cpuset: str | None = None, phase: str = "Running", raw: str | None = None) -> PodRecord:
    annotations = {}
    if raw is not None:
        annotations[ANNOTATION_RESOURCE_STATUS] = raw
    elif cpuset is not None:
        annotations[ANNOTATION_RESOURCE_STATUS] = json.dumps({"cpuset": cpuset})
    return PodRecord(uid=uid, namespace="ns", name=uid, labels={"koordinator.sh/qosClass": qos},
                     annotations=annotations, phase=phase)


def test_no_pods_one_pool_per_numa_node() -> None:
    pools = compute_pools(CPUS, {}, {})
    assert pools.ls == (SharePool(0, 0, frozenset(range(4))), SharePool(1, 1, frozenset(range(4, 8))))
    assert pools.be == pools.ls
    assert [p.to_json() for p in pools.ls] == [{"socket": 0, "node": 0, "cpuset": "0-3"},
                                               {"socket": 1, "node": 1, "cpuset": "4-7"}]


def test_lse_leaves_both_pools_lsr_only_the_ls_pool() -> None:
    pods = {"a": _pod("a", "LSE", "0-1"), "b": _pod("b", "LSR", "4"), "c": _pod("c", "LS")}
    pools = compute_pools(CPUS, pods, {})
    assert pools.ls_cpuset() == "2-3,5-7"
    assert sorted(pools.be_cpus) == [2, 3, 4, 5, 6, 7]  # BE may use LSR's CPUs (koordlet's BE share pool)
    assert dict(pools.exclusive) == {"a": ("LSE", frozenset({0, 1})), "b": ("LSR", frozenset({4}))}


def test_reserved_and_system_qos_cpus_leave_both_pools() -> None:
    node = {"node.koordinator.sh/reservation": '{"reservedCPUs":"7"}',
            "node.koordinator.sh/system-qos-resource": '{"cpuset":"0"}'}
    pools = compute_pools(CPUS, {}, node)
    assert pools.ls_cpuset() == "1-6" and pools.be_cpus == pools.ls_cpus
    assert (pools.reserved, pools.system) == (frozenset({7}), frozenset({0}))
    shared = {"node.koordinator.sh/system-qos-resource": '{"cpuset":"0","cpusetExclusive":false}'}
    assert compute_pools(CPUS, {}, shared).ls_cpuset() == "0-7"


def test_a_whole_numa_node_bound_drops_its_pool_and_finished_pods_hold_nothing() -> None:
    pods = {"a": _pod("a", "LSE", "4-7"), "done": _pod("done", "LSR", "0-3", phase="Succeeded")}
    pools = compute_pools(CPUS, pods, {})
    assert [p.to_json() for p in pools.ls] == [{"socket": 0, "node": 0, "cpuset": "0-3"}]


def test_offline_cpus_are_in_no_pool() -> None:
    cpus = tuple(CpuInfo(c.cpu, c.core, c.socket, c.numa_node, c.l3, c.cpu != 3) for c in CPUS)
    assert compute_pools(cpus, {}, {}).ls_cpuset() == "0-2,4-7"


def test_unreadable_annotations_are_named_not_fatal() -> None:
    pods = {"bad": _pod("bad", "LSR", raw="{not json"), "ok": _pod("ok", "LSR", "1")}
    pools = compute_pools(CPUS, pods, {"node.koordinator.sh/reservation": '{"resources":{"cpu":"2"}}'})
    assert pools.ls_cpuset() == "0,2-7"
    assert len(pools.problems) == 2
    assert "ns/bad" in pools.problems[0] and "resource-status" in pools.problems[0]
    assert "CPU count" in pools.problems[1]


@pytest.mark.parametrize("raw, message", [
    ("{not json", "not JSON"),
    ('["0-1"]', "not a JSON object"),
    ('{"cpuset": 3}', "not a CPU list string"),
    ('{"cpuset": "3-1"}', "descending"),
    ('{"cpuset": "a"}', "not a cpu list"),
])
def test_malformed_resource_status_is_an_error_naming_the_annotation(raw: str, message: str) -> None:
    with pytest.raises(ResourceStatusError, match=message) as info:
        pod_cpuset({ANNOTATION_RESOURCE_STATUS: raw})
    assert info.value.field == f"annotations[{ANNOTATION_RESOURCE_STATUS}]"


def test_absent_or_empty_cpuset_is_none() -> None:
    assert pod_cpuset({}) is None
    assert pod_cpuset({ANNOTATION_RESOURCE_STATUS: "{}"}) is None
    assert pod_cpuset({ANNOTATION_RESOURCE_STATUS: '{"cpuset":"","numaNodeResources":[{"node":0}]}'}) is None
    assert pod_cpuset({ANNOTATION_RESOURCE_STATUS: '{"cpuset":"2-3"}'}) == frozenset({2, 3})
