"""koord-manager's batch and mid formulas on a scripted node: one hand computation per policy and per input.

The node: 8 cores / 32 GiB capacity, 7.5 cores / 30 GiB allocatable (kubelet reserves 500m / 2 GiB). Usage
numbers are chosen so every term is visible in the arithmetic written next to each expectation.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hookserver.capacity import NodeFacts, Pair, PodInput, UsageFacts, WindowedUsage, compute_capacity
from hookserver.capacity.inputs import HostAppUsage
from hookserver.koord_resources import BATCH_CPU, BATCH_MEMORY, MID_CPU, MID_MEMORY
from hookserver.kubewire import memory_quantity
from hookserver.slo.colocation import ColocationStrategy

Ki, Mi, Gi = 1 << 10, 1 << 20, 1 << 30
CAP = Pair(8000, 32 * Gi)
NODE = NodeFacts(name="n", capacity=CAP, allocatable=Pair(7500, 30 * Gi))
MEM_MARGIN = int(float(32 * Gi) * 0.35)  # capacity x (100 - 65) %, truncated as Go does
CPU_MARGIN = 3200  # 8000 x (100 - 60) %


def _u(cpu: int, memory: int, fast: Pair | None = None) -> WindowedUsage:
    return WindowedUsage.of(Pair(cpu, memory), fast)


def _pod(name: str, cls: str, qos: str, request: Pair, usage: WindowedUsage | None, phase: str = "Running") -> PodInput:
    return PodInput(uid=f"uid-{name}", key=f"ns/{name}", priority_class=cls, qos=qos, phase=phase, request=request,
                    usage=usage)


PODS = [
    _pod("ls1", "koord-prod", "LS", Pair(1000, 2 * Gi), _u(600, 1536 * Mi)),
    _pod("ls2", "koord-prod", "LS", Pair(500, 1 * Gi), None),  # no sample: counts at its request
    _pod("lse", "koord-prod", "LSE", Pair(2000, 4 * Gi), _u(1500, 3 * Gi)),  # LSE: CPU at request
    _pod("be", "koord-batch", "BE", Pair(0, 0), _u(1000, 2 * Gi)),  # batch: not high-priority
    _pod("done", "koord-prod", "LS", Pair(1000, 1 * Gi), None, phase="Succeeded"),  # finished, no sample
    _pod("mid", "koord-mid", "LS", Pair(300, 512 * Mi), _u(200, 256 * Mi)),
]
USAGE = UsageFacts(
    node=_u(5000, 12 * Gi),
    system=_u(400, 1 * Gi),
    host_apps=(HostAppUsage("nginx", "koord-prod", _u(100, 256 * Mi)),
               HostAppUsage("yarn", "koord-batch", _u(300, 1 * Gi))),  # batch host apps do not count
    dangling=(_pod("gone", "", "", Pair(0, 0), _u(100, 128 * Mi), phase=""),),
)
# HP used:    600 + 500 (request) + 2000 (LSE request) + 200 + 100 (dangling) = 3400m
#             1536Mi + 1Gi + 3Gi + 256Mi + 128Mi = 6016Mi
# HP request: 1000 + 500 + 2000 + 300 = 3800m; 2Gi + 1Gi + 4Gi + 512Mi = 7680Mi
# HP max:     1000 + 500 + 2000 + 300 + 100 = 3900m; 2Gi + 1Gi + 4Gi + 512Mi + 128Mi = 7808Mi
# system used = 400m + 100m (prod host app) = 500m; 1Gi + 256Mi; reserved = 500m / 2Gi (kubelet)
HP_USED, HP_REQUEST, HP_MAX = Pair(3400, 6016 * Mi), Pair(3800, 7680 * Mi), Pair(3900, 7808 * Mi)
FLOOR = Pair(500, 2 * Gi)  # max(system used, reserved)


def _compute(strategy: ColocationStrategy | None = None, node: NodeFacts = NODE, pods: list[PodInput] = PODS,
             usage: UsageFacts = USAGE, prod: Pair | None = Pair(1500, 4 * Gi)) -> dict[str, int]:
    result = compute_capacity(strategy or ColocationStrategy(), node, pods, usage, prod_reclaimable=prod)
    return result.values()


def test_sums_are_koord_managers() -> None:
    result = compute_capacity(ColocationStrategy(), NODE, PODS, USAGE, prod_reclaimable=None)
    assert result.sums == {"hp_request": HP_REQUEST, "hp_used": HP_USED, "hp_max_used_request": HP_MAX}
    how = {line.key: line.counted_as for line in result.pods}
    assert how == {"ns/ls1": "usage", "ns/ls2": "request:no-sample", "ns/lse": "lse:cpu-at-request",
                   "ns/be": "skipped:koord-batch", "ns/done": "skipped:phase Succeeded", "ns/mid": "usage",
                   "ns/gone": "dangling"}


def test_usage_policy() -> None:
    values = _compute()
    assert values[BATCH_CPU] == 8000 - CPU_MARGIN - FLOOR.cpu - HP_USED.cpu == 900
    assert values[BATCH_MEMORY] == 32 * Gi - MEM_MARGIN - FLOOR.memory - HP_USED.memory


def test_max_usage_request_policy() -> None:
    values = _compute(ColocationStrategy(cpuCalculatePolicy="maxUsageRequest", memoryCalculatePolicy="maxUsageRequest"))
    assert values[BATCH_CPU] == 8000 - CPU_MARGIN - FLOOR.cpu - HP_MAX.cpu == 400
    assert values[BATCH_MEMORY] == 32 * Gi - MEM_MARGIN - FLOOR.memory - HP_MAX.memory


def test_request_policy_is_memory_only_and_ignores_usage() -> None:
    values = _compute(ColocationStrategy(memoryCalculatePolicy="request"))
    assert values[BATCH_MEMORY] == 32 * Gi - MEM_MARGIN - 2 * Gi - HP_REQUEST.memory
    assert values[BATCH_CPU] == 900  # CPU stays on usage
    busier = replace(USAGE, system=_u(3000, 8 * Gi))
    assert _compute(ColocationStrategy(memoryCalculatePolicy="request"), usage=busier)[BATCH_MEMORY] == \
        values[BATCH_MEMORY]


def test_reserved_is_the_larger_of_kubelet_and_annotation_per_resource() -> None:
    node = replace(NODE, annotation_reserved=Pair(1000, 1 * Gi))  # more CPU than kubelet, less memory
    values = _compute(node=node)
    assert values[BATCH_CPU] == 8000 - CPU_MARGIN - 1000 - HP_USED.cpu == 400  # the annotation wins
    assert values[BATCH_MEMORY] == 32 * Gi - MEM_MARGIN - 2 * Gi - HP_USED.memory  # the kubelet's 2Gi wins


def test_system_usage_above_reserved_counts_instead() -> None:
    usage = replace(USAGE, system=_u(1200, 3 * Gi))  # + 100m / 256Mi prod host app
    values = _compute(usage=usage)
    assert values[BATCH_CPU] == 8000 - CPU_MARGIN - 1300 - HP_USED.cpu
    assert values[BATCH_MEMORY] == 32 * Gi - MEM_MARGIN - (3 * Gi + 256 * Mi) - HP_USED.memory


def test_dangling_batch_usage_is_left_out() -> None:
    usage = replace(USAGE, dangling=(_pod("gone", "koord-batch", "BE", Pair(0, 0), _u(2000, 4 * Gi), phase=""),))
    assert _compute(usage=usage)[BATCH_CPU] == 900 + 100  # the prod dangling 100m is gone, the batch one ignored


def test_a_finished_pod_with_usage_is_a_dangling_metric() -> None:
    pods = [*PODS[:4], _pod("done", "koord-prod", "LS", Pair(1000, 1 * Gi), _u(250, 0), phase="Failed"), PODS[5]]
    assert _compute(pods=pods)[BATCH_CPU] == 900 - 250


def test_thresholds_cap_the_result() -> None:
    values = _compute(ColocationStrategy(batchCPUThresholdPercent=5, batchMemoryThresholdPercent=10))
    assert values[BATCH_CPU] == 400  # min(900, 8000 x 5 %)
    assert values[BATCH_MEMORY] == int(float(32 * Gi) * 0.10)
    assert _compute(ColocationStrategy(batchCPUThresholdPercent=50))[BATCH_CPU] == 900  # a cap above is no cap


def test_normalization_ratio_scales_batch_cpu_only_and_rounds_up() -> None:
    assert _compute(node=replace(NODE, cpu_normalization_ratio=1.5))[BATCH_CPU] == 1350
    assert _compute(node=replace(NODE, cpu_normalization_ratio=1.1))[BATCH_CPU] == 990
    # 333 milli-cores x 1.1 = 366.3: koord-manager's quantity is not whole, so its Value() rounds up to 367
    small = replace(USAGE, system=_u(400 + 567, 1 * Gi))
    assert _compute(usage=small)[BATCH_CPU] == 333
    assert _compute(usage=small, node=replace(NODE, cpu_normalization_ratio=1.1))[BATCH_CPU] == 367
    assert _compute(node=replace(NODE, cpu_normalization_ratio=0.8))[BATCH_CPU] == 900  # below 1: untouched
    scaled = _compute(node=replace(NODE, cpu_normalization_ratio=1.5))
    assert scaled[MID_CPU] == _compute()[MID_CPU]  # mid-cpu is never normalized


def test_third_party_allocations_are_taken_off_after_normalization() -> None:
    node = replace(NODE, cpu_normalization_ratio=1.5, third_party_batch=Pair(1000, 40 * Gi))
    values = _compute(node=node)
    assert values[BATCH_CPU] == 1350 - 1000
    assert values[BATCH_MEMORY] == 0  # floored


def test_nothing_left_is_zero_not_negative() -> None:
    busy = replace(USAGE, system=_u(7000, 30 * Gi))
    values = _compute(usage=busy)
    assert values[BATCH_CPU] == 0 and values[BATCH_MEMORY] == 0


def test_mid_dynamic() -> None:
    # base = min(prod reclaimable 1500m / 4Gi, capacity - node usage 3000m / 20Gi) = 1500m / 4Gi
    # unallocated = capacity - max(reserved 500m/2Gi, system 400m/1Gi + prod app 100m/256Mi)
    #               - requests of prod/none pods (ls1, ls2, lse; not mid, batch, or the finished one)
    #             = 8000 - 500 - 3500 = 4000m; 32Gi - 2Gi - 7Gi = 23Gi
    strategy = ColocationStrategy(midUnallocatedPercent=10)
    values = _compute(strategy)
    assert values[MID_CPU] == 1500 + 400
    assert values[MID_MEMORY] == 4 * Gi + int(float(23 * Gi) * 0.1)
    assert _compute(ColocationStrategy(midCPUThresholdPercent=20))[MID_CPU] == 1500  # cap 1600 above 1500
    assert _compute(ColocationStrategy(midCPUThresholdPercent=10))[MID_CPU] == 800
    assert _compute(prod=None)[MID_CPU] == 0  # no prod reclaimable reported: 0, not a reset
    assert _compute(usage=replace(USAGE, node=_u(7000, 12 * Gi)))[MID_CPU] == 1000  # node unused 1000m < 1500m


def test_mid_static() -> None:
    strategy = ColocationStrategy(midReclaimMode="static", midStaticCPUReservedPercent=25,
                                  midStaticMemoryReservedPercent=10, midMemoryThresholdPercent=5)
    values = _compute(strategy)
    assert values[MID_CPU] == 2000
    assert values[MID_MEMORY] == int(float(32 * Gi) * 0.05)  # capped by the threshold


def test_the_fast_window_counts_when_it_is_higher() -> None:
    spike = _pod("ls1", "koord-prod", "LS", Pair(1000, 2 * Gi), _u(600, 1536 * Mi, fast=Pair(1600, 1 * Gi)))
    result = compute_capacity(ColocationStrategy(), NODE, [spike, *PODS[1:]], USAGE, prod_reclaimable=None)
    line = next(p for p in result.pods if p.key == "ns/ls1")
    assert line.usage == Pair(1600, 1536 * Mi) and line.usage_set_by == "fast"
    assert result.value(BATCH_CPU) == max(900 - 1000, 0)
    quiet = _pod("ls1", "koord-prod", "LS", Pair(1000, 2 * Gi), _u(600, 1536 * Mi, fast=Pair(100, 1 * Gi)))
    result = compute_capacity(ColocationStrategy(), NODE, [quiet, *PODS[1:]], USAGE, prod_reclaimable=None)
    assert result.value(BATCH_CPU) == 900  # a quiet fast window never raises the offer above the report window's


def test_terms_add_up_to_the_value_and_name_their_sources() -> None:
    result = compute_capacity(ColocationStrategy(), NODE, PODS, USAGE, prod_reclaimable=None)
    cpu = result.resources[0]
    terms = {t.name: t.value for t in cpu.terms}
    assert cpu.resource == BATCH_CPU and cpu.policy == "usage"
    assert terms["capacity"] - terms["safety margin"] - terms["max(system used, reserved)"] - terms["HP used"] == \
        cpu.value
    assert cpu.formula == "max(8000 - 3200 - 500 - 3400, 0) = 900m"
    values = result.node_values()
    assert values[BATCH_CPU] == "900" and values[MID_CPU] == "0"  # integer milli-cores, as koord-manager writes
    assert values[BATCH_MEMORY] == memory_quantity(result.value(BATCH_MEMORY))  # bytes, BinarySI


@given(st.integers(0, 64_000), st.integers(0, 64_000), st.integers(0, 100), st.sampled_from(["usage", "maxUsageRequest"]))
def test_batch_cpu_never_negative_and_never_above_capacity_minus_margin(system: int, used: int, pct: int,
                                                                        policy: str) -> None:
    strategy = ColocationStrategy(cpuReclaimThresholdPercent=pct, cpuCalculatePolicy=policy)
    pods = [_pod("p", "koord-prod", "LS", Pair(used // 2, 0), _u(used, 0))]
    value = _compute(strategy, pods=pods, usage=UsageFacts(node=None, system=_u(system, 0)))[BATCH_CPU]
    assert 0 <= value <= int(8000 * pct / 100) + 1


def test_more_usage_never_means_more_batch() -> None:
    low = _compute(usage=replace(USAGE, system=_u(400, 1 * Gi)))
    high = _compute(usage=replace(USAGE, system=_u(900, 2 * Gi)))
    assert high[BATCH_CPU] <= low[BATCH_CPU] and high[BATCH_MEMORY] <= low[BATCH_MEMORY]


@pytest.mark.parametrize("policy", ["usage", "maxUsageRequest"])
def test_a_pod_without_a_sample_counts_at_its_request_in_every_policy(policy: str) -> None:
    strategy = ColocationStrategy(cpuCalculatePolicy=policy)
    with_sample = [_pod("x", "koord-prod", "LS", Pair(2000, 0), _u(100, 0))]
    without = [_pod("x", "koord-prod", "LS", Pair(2000, 0), None)]
    empty = UsageFacts(node=None, system=_u(0, 0))
    assert _compute(strategy, pods=without, usage=empty)[BATCH_CPU] == 8000 - CPU_MARGIN - 500 - 2000
    assert _compute(strategy, pods=with_sample, usage=empty)[BATCH_CPU] >= \
        _compute(strategy, pods=without, usage=empty)[BATCH_CPU]
