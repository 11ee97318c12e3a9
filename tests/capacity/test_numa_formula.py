"""koord-manager's NUMA-level batch capacity (`calculateOnNUMALevel`), on nodes worked out by hand.

Every expected number below was worked out on paper from koordinator's rules (batchresource/plugin.go,
noderesource/plugins/util/util.go), not by running hookserver; the arithmetic is in the comments. Units: CPU in
milli-cores, memory in bytes, and in milli-bytes (thousandths of a byte) where the even split leaves a fraction.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from hookserver.capacity.formula import CapacityResult, compute_capacity
from hookserver.capacity.inputs import NodeFacts, PodInput, UsageFacts, WindowedUsage
from hookserver.capacity.numa_formula import ZoneAllocatable, compute_zone_capacity, milli_bytes_quantity
from hookserver.capacity.quantities import Pair
from hookserver.capacity.zone_offer import zones_of_nrt
from hookserver.koord_resources import BATCH_CPU, BATCH_MEMORY
from hookserver.slo.colocation import ColocationStrategy
from hookserver.topology import ANNOTATION_RESOURCE_STATUS, ResourceStatusError, pod_numa_nodes

GI = 1 << 30


def _strategy(**fields: Any) -> ColocationStrategy:
    return ColocationStrategy.model_validate({"enable": True, **fields})


def _pod(name: str, *, cpu: int, memory: int, usage: tuple[int, int] | None, priority: str = "koord-prod",
         qos: str = "LS", numa: tuple[int, ...] = (), phase: str = "Running") -> PodInput:
    window = WindowedUsage.of(Pair(*usage)) if usage is not None else None
    return PodInput(f"uid-{name}", f"ns/{name}", priority, qos, phase, Pair(cpu, memory), window, numa)


def _usage(system: tuple[int, int], dangling: tuple[PodInput, ...] = ()) -> UsageFacts:
    return UsageFacts(node=None, system=WindowedUsage.of(Pair(*system)), dangling=dangling)


def _zones(n: int, cpu_milli: int, memory_bytes: int) -> tuple[ZoneAllocatable, ...]:
    return tuple(ZoneAllocatable(f"node-{i}", cpu_milli, memory_bytes) for i in range(n))


def _figures(strategy: ColocationStrategy, node: NodeFacts, pods: list[PodInput], usage: UsageFacts,
             zones: tuple[ZoneAllocatable, ...]) -> list[tuple[str, int, int, str, str]]:
    result = compute_capacity(strategy, node, pods, usage, prod_reclaimable=None)
    return [(z.zone, z.batch_cpu_milli, z.batch_memory_milli_bytes, z.batch_cpu, z.batch_memory)
            for z in compute_zone_capacity(strategy, node, result, pods, zones)]


# 16 cores / 64 GiB in two zones of 8 cores / 32 GiB; the kubelet reserves 1 core / 2 GiB.
NODE = NodeFacts(name="n", capacity=Pair(16000, 64 * GI), allocatable=Pair(15000, 62 * GI))
TWO = _zones(2, 8000, 32 * GI)


def test_usage_policy_with_a_pod_on_every_zone() -> None:
    # defaults: reclaim 60 % cpu, 65 % memory; policy usage.
    # per zone: margin cpu 8000 x 0.4 = 3200; memory int(34359738368 x 0.35) = 12025908428 B
    # reserved / 2 = 500m, 1 GiB; system (2000m, 4 GiB) / 2 = 1000m, 2 GiB; floor = max = 1000m, 2 GiB
    # the prod pod (usage 2000m, 6 GiB, no NUMA binding) / 2 = 1000m, 3 GiB per zone; the batch pod does not count
    # cpu:    8000 - 3200 - 1000 - 1000 = 2800
    # memory: 34359738368 - 12025908428 - 2147483648 - 3221225472 = 16965120820 B (not a multiple of 1 Ki)
    pods = [_pod("web", cpu=4000, memory=8 * GI, usage=(2000, 6 * GI)),
            _pod("job", cpu=8000, memory=16 * GI, usage=(8000, 16 * GI), priority="koord-batch", qos="BE")]
    got = _figures(_strategy(), NODE, pods, _usage((2000, 4 * GI)), TWO)
    assert got == [("node-0", 2800, 16965120820000, "2800", "16965120820"),
                   ("node-1", 2800, 16965120820000, "2800", "16965120820")]


def test_a_pod_bound_to_one_numa_node_counts_there_only_and_memory_by_request() -> None:
    # reclaim 60 % cpu, 50 % memory; memory policy request. Reserved 1000m / 2 GiB, system 1000m / 2 GiB:
    # per zone reserved = system = floor = 500m, 1 GiB; margin 3200m, 16 GiB.
    # the pod is bound to NUMA node 1 (numaNodeResources): request 4000m / 8 GiB and usage 3000m there, 0 on node-0
    # cpu (usage):      node-0 8000 - 3200 - 500 - 0 = 4300; node-1 8000 - 3200 - 500 - 3000 = 1300
    # memory (request): node-0 32 - 16 - 1 - 0 = 15 GiB;    node-1 32 - 16 - 1 - 8 = 7 GiB
    pods = [_pod("db", cpu=4000, memory=8 * GI, usage=(3000, 6 * GI), numa=(1,))]
    strategy = _strategy(memoryReclaimThresholdPercent=50, memoryCalculatePolicy="request")
    got = _figures(strategy, NODE, pods, _usage((1000, 2 * GI)), TWO)
    assert got == [("node-0", 4300, 15 * GI * 1000, "4300", "15Gi"), ("node-1", 1300, 7 * GI * 1000, "1300", "7Gi")]


def test_max_usage_request_thresholds_normalization_lse_no_sample_and_dangling_on_three_zones() -> None:
    # 12 cores / 48 GiB in three zones of 4 cores / 16 GiB (17179869184 B); nothing reserved.
    # reclaim 100 % (no margin); both policies maxUsageRequest; batch thresholds cpu 50 %, memory 70 %;
    # cpu-normalization-ratio 1.1.
    # system 1000m / 1000 B, / 3 rounded up: 334m, ceil(1000000 / 3) = 333334 milli-bytes = the floor.
    # LSE pod bound to node 0: request 2000m / 4 GiB, usage 500m / 2 GiB: max(used, request) 2000m / 4 GiB on node-0.
    # prod pod without a sample: request 1000m / 3 GiB, / 3: 334m, 1 GiB on every zone.
    # dangling usage 300m / 3000 B, / 3: 100m, 1000 B on every zone.
    # node-0: cpu 4000 - 334 - (2000 + 334 + 100) = 1232 (cap 2000);
    #         memory 17179869184000 - 333334 - (4294967296000 + 1073741824000 + 1000000) = 11811158730666 milli-bytes
    #         (cap int(17179869184 x 0.7) = 12025908428 B): a fraction of a byte, written "11811158730666m"
    # node-1/2: cpu 4000 - 334 - 434 = 3232, capped at 2000; memory 16106126026666, capped at 12025908428000
    # batch-cpu written x 1.1, truncated: 1232000 x 1.1 = 1355200 milli ("1355200m"); 2000000 x 1.1 -> "2200"
    node = NodeFacts(name="n", capacity=Pair(12000, 48 * GI), allocatable=Pair(12000, 48 * GI),
                     cpu_normalization_ratio=1.1)
    dangling = (_pod("gone", cpu=0, memory=0, usage=(300, 3000), phase=""),)
    pods = [_pod("lse", cpu=2000, memory=4 * GI, usage=(500, 2 * GI), qos="LSE", numa=(0,)),
            _pod("new", cpu=1000, memory=3 * GI, usage=None)]
    strategy = _strategy(cpuReclaimThresholdPercent=100, memoryReclaimThresholdPercent=100,
                         cpuCalculatePolicy="maxUsageRequest", memoryCalculatePolicy="maxUsageRequest",
                         batchCPUThresholdPercent=50, batchMemoryThresholdPercent=70)
    got = _figures(strategy, node, pods, _usage((1000, 1000), dangling), _zones(3, 4000, 16 * GI))
    assert got == [("node-0", 1232, 11811158730666, "1355200m", "11811158730666m"),
                   ("node-1", 2000, 12025908428000, "2200", "12025908428"),
                   ("node-2", 2000, 12025908428000, "2200", "12025908428")]


def test_a_binding_to_a_numa_node_the_node_lacks_shares_every_zone() -> None:
    # bound to nodes 1 and 7 of a two-zone node: only node-1 exists, so the whole pod counts there (koord-manager
    # counts the valid ids only); bound to node 7 alone: no valid id, split over both zones.
    # defaults, no reserved, no system usage: cpu 8000 - 3200 - pod's share.
    node = NodeFacts(name="n", capacity=Pair(16000, 64 * GI), allocatable=Pair(16000, 64 * GI))
    one = [_pod("a", cpu=2000, memory=0, usage=(2000, 0), numa=(1, 7))]
    none = [_pod("a", cpu=2000, memory=0, usage=(2000, 0), numa=(7,))]
    assert [z[1] for z in _figures(_strategy(), node, one, _usage((0, 0)), TWO)] == [4800, 2800]
    assert [z[1] for z in _figures(_strategy(), node, none, _usage((0, 0)), TWO)] == [3800, 3800]


def test_a_pod_goes_to_its_numa_id_not_to_a_position_in_the_name_sorted_zones() -> None:
    # eleven zones sorted by name: node-0, node-1, node-10, node-2, ... A pod bound to NUMA node 2 counts in
    # "node-2" (the fourth entry), where koord-manager's positional index would pick "node-10".
    names = sorted((f"node-{i}" for i in range(11)))
    zones = tuple(ZoneAllocatable(name, 1000, GI) for name in names)
    node = NodeFacts(name="n", capacity=Pair(11000, 11 * GI), allocatable=Pair(11000, 11 * GI))
    pods = [_pod("p", cpu=400, memory=0, usage=(400, 0), numa=(2,))]
    strategy = _strategy(cpuReclaimThresholdPercent=100)
    got = {z[0]: z[1] for z in _figures(strategy, node, pods, _usage((0, 0)), zones)}
    assert got["node-2"] == 600 and got["node-10"] == 1000


def test_zones_are_never_negative() -> None:
    # the bound pod uses more than its zone: node-1 is 0, node-0 keeps its own figure (koordinator clamps per zone)
    pods = [_pod("big", cpu=8000, memory=0, usage=(8000, 0), numa=(1,))]
    got = _figures(_strategy(), NODE, pods, _usage((0, 0)), TWO)
    assert [z[1] for z in got] == [8000 - 3200 - 500, 0]


@pytest.mark.parametrize(("milli_bytes", "text"), [
    (0, "0"), (1000, "1"), (1000_000, "1k"), (1024_000, "1Ki"), (1023_000, "1023"), (1536_500, "1536500m"), (7 * GI * 1000, "7Gi"),
])
def test_memory_quantities_print_as_apimachinery_prints_them(milli_bytes: int, text: str) -> None:
    assert milli_bytes_quantity(milli_bytes) == text


def _node_internal(result: CapacityResult, resource: str) -> int:
    return next(o.internal for o in result.resources if o.resource == resource)


def test_the_zones_add_up_to_the_node_figure_when_everything_divides() -> None:
    # the second table case: node cpu 16000 - 6400 - 1000 - 3000 = 5600 = 4300 + 1300;
    # node memory (request) 64 - 32 - 2 - 8 = 22 GiB = 15 + 7
    pods = [_pod("db", cpu=4000, memory=8 * GI, usage=(3000, 6 * GI), numa=(1,))]
    strategy = _strategy(memoryReclaimThresholdPercent=50, memoryCalculatePolicy="request")
    usage = _usage((1000, 2 * GI))
    result = compute_capacity(strategy, NODE, pods, usage, prod_reclaimable=None)
    zones = compute_zone_capacity(strategy, NODE, result, pods, TWO)
    assert sum(z.batch_cpu_milli for z in zones) == _node_internal(result, BATCH_CPU) == 5600
    assert sum(z.batch_memory_milli_bytes for z in zones) == _node_internal(result, BATCH_MEMORY) * 1000 == 22 * GI * 1000


_pods = st.lists(st.tuples(st.integers(0, 3000), st.integers(0, 4 * GI), st.integers(0, 3000), st.integers(0, 4 * GI),
                           st.booleans(), st.sampled_from([(), (0,), (1,), (2,), (0, 2), (5,)])), max_size=6)


@settings(max_examples=150, deadline=None)
@example(n=3, pods=[], system=(0, 0), reserved=(0, 0), reclaim=(71, 1))
@given(n=st.integers(1, 4), pods=_pods, system=st.tuples(st.integers(0, 4000), st.integers(0, 8 * GI)),
       reserved=st.tuples(st.integers(0, 4000), st.integers(0, 8 * GI)),
       reclaim=st.tuples(st.integers(0, 100), st.integers(0, 100)))
def test_the_zones_add_up_to_the_node_figure_within_koordinators_roundings(
        n: int, pods: list[tuple[int, int, int, int, bool, tuple[int, ...]]], system: tuple[int, int],
        reserved: tuple[int, int], reclaim: tuple[int, int]) -> None:
    """Zones whose allocatable adds up to the node's capacity, and no zone or node clamped at 0: the zones' sum
    differs from the node figure only by koordinator's roundings. Each even split rounds up (the floor and every
    pod's share: up to n - 1 thousandths each, so the sum is lower), and the margin truncates per zone rather than
    once (up to n - 1 whole units higher: milli-cores, or bytes = 1000 milli-bytes). The node's own margin is a
    float product truncated too (18000 x 0.69 = 12419.99.. -> 12419), which can put the node one unit above the
    zones (found by Hypothesis: n=3, reserved 1m, reclaim 31 %: zones 3 x 1859 = 5577, node 5580)."""
    zones = _zones(n, 6000, 24 * GI)
    node = NodeFacts(name="n", capacity=Pair(6000 * n, 24 * GI * n),
                     allocatable=Pair(6000 * n - reserved[0], 24 * GI * n - reserved[1]))
    inputs = [_pod(f"p{i}", cpu=c, memory=m, usage=(uc, um) if sampled else None, numa=numa)
              for i, (c, m, uc, um, sampled, numa) in enumerate(pods)]
    strategy = _strategy(cpuReclaimThresholdPercent=reclaim[0], memoryReclaimThresholdPercent=reclaim[1])
    result = compute_capacity(strategy, node, inputs, _usage(system), prod_reclaimable=None)
    out = compute_zone_capacity(strategy, node, result, inputs, zones)
    # the unclamped figures, to keep the property to cases where neither side was floored at 0
    assume(_node_internal(result, BATCH_CPU) > 0 and _node_internal(result, BATCH_MEMORY) > 0)
    assume(all(z.batch_cpu_milli > 0 and z.batch_memory_milli_bytes > 0 for z in out))
    splits = 1 + len(inputs)  # the floor, and each pod's request or usage
    cpu_gap = sum(z.batch_cpu_milli for z in out) - _node_internal(result, BATCH_CPU)
    memory_gap = sum(z.batch_memory_milli_bytes for z in out) - _node_internal(result, BATCH_MEMORY) * 1000
    # The node's float truncation works both ways: one unit above the zones, or one below (found by Hypothesis:
    # n=3, no pods, reclaim 71 %: 18000 x 0.71 = 12779.99.. -> 12779 on the node, the zones 3 higher).
    assert -(n - 1) * splits - 1 <= cpu_gap <= n
    assert -(n - 1) * splits - 1000 <= memory_gap <= n * 1000


def test_zones_are_read_from_the_nrt_document_as_koord_manager_reads_them() -> None:
    doc = {"zones": [
        {"name": "node-0", "type": "Node", "resources": [
            {"name": "cpu", "capacity": "16", "allocatable": "15", "available": "15"},
            {"name": "kubernetes.io/batch-cpu", "capacity": "5k", "allocatable": "5k", "available": "5k"},
            {"name": "memory", "capacity": "64Gi", "allocatable": "63Gi", "available": "63Gi"}]},
        {"name": "node-1", "type": "Node", "resources": [{"name": "cpu", "capacity": "x", "allocatable": "x"}]},
    ]}
    assert zones_of_nrt(doc) == (ZoneAllocatable("node-0", 15000, 63 * GI), ZoneAllocatable("node-1", 0, 0))
    assert zones_of_nrt({"zones": [{"name": "node-0", "type": "Node", "resources": []}]}) == ()  # nothing created
    assert zones_of_nrt({}) == ()


@pytest.mark.parametrize(("text", "nodes"), [
    (None, ()), ('{"cpuset":"0-3"}', ()), ('{"numaNodeResources":[{"node":1},{"node":0},{"node":1}]}', (0, 1)),
    ('{"numaNodeResources":[{"resources":{"cpu":"2"}}]}', (0,)), ('{"numaNodeResources":[{"node":null}]}', (0,)),
])
def test_numa_nodes_of_a_pod(text: str | None, nodes: tuple[int, ...]) -> None:
    annotations = {} if text is None else {ANNOTATION_RESOURCE_STATUS: text}
    assert pod_numa_nodes(annotations) == nodes


@pytest.mark.parametrize("text", ['{"numaNodeResources":[{"node":"1"}]}', '{"numaNodeResources":{"node":1}}',
                                  '{"numaNodeResources":[{"node":1.5}]}', "[1]", "{"])
def test_a_numa_binding_that_does_not_decode_is_a_clear_error(text: str) -> None:
    with pytest.raises(ResourceStatusError, match="resource-status"):
        pod_numa_nodes({ANNOTATION_RESOURCE_STATUS: text})
