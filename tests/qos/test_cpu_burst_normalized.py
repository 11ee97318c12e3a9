"""CPU burst on the normalized CPU when CPUNormalization is on too (koordinator#2306; issue 37, item 3).

The container: CPU limit 2000m, period 100 000 µs, so its unscaled quota is 200 000 µs. The node's
`cpu-normalization-ratio` 1.6: the normalized quota (the hook's rule, ceil(quota / ratio)) is 125 000 µs.
cfsQuotaBurstPercent 300 (default): ceiling 375 000 µs (unscaled: 600 000). cpuBurstPercent 1000 (default).
"""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType
from typing import Any

import pytest

from hookserver.executor.plan import CgroupResource
from qos.cpu.burst import BurstState, CPUBurst
from qos.snapshot.model import NodeUsage
from tests.qos.helpers import node, pod, topology
from tests.qos.part2_helpers import container, kernel, pod_kernel, spec_snapshot, writes

LS_DIR = "kubepods/burstable/podls/ls-c1"
POD_DIR = "kubepods/burstable/podls"
RATIO = "node.koordinator.sh/cpu-normalization-ratio"
BOTH_ON = MappingProxyType({"CPUBurst": True, "CPUNormalization": True})


def snap(policy: str, *, quota: int, pod_quota: int | None = None, throttled: float = 0.0, ratio: str = "1.6",
         usage: float = 1.0, gates: Any = BOTH_ON, now: float = 1000.0, extra: dict[str, Any] | None = None) -> Any:
    c = container("ls", cpu_limit_milli=2000, quota_us=quota, burst_us=0, throttled_ratio=throttled,
                  cpu_usage_cores=usage)
    s = spec_snapshot(
        {"cpuBurstStrategy": {"policy": policy, **(extra or {})}}, now=now, pods=(pod("ls", "LS"),),
        usage=NodeUsage(cpu_cores=1.0), topology=topology(8), node=node(annotations=MappingProxyType({RATIO: ratio})),
        kernel=kernel(pod_kernel("ls", c, quota_us=pod_quota or quota), cgroup_files=frozenset({"cpu.cfs_burst_us"})),
    )
    return replace(s, feature_gates=gates)


def test_quota_burst_scales_between_the_normalized_base_and_ceiling() -> None:
    # throttled: 125000 x 1.2 = 150000 (unnormalized, 150000 would be raised to the base 200000)
    up = CPUBurst().plan(snap("cfsQuotaBurstOnly", quota=125_000, throttled=0.5), BurstState())
    assert writes(up, CgroupResource.CPU_CFS_QUOTA) == {LS_DIR: 150_000, POD_DIR: 150_000}
    # 550000 x 1.2 = 660000, capped at 125000 x 300 % = 375000
    capped = CPUBurst().plan(snap("cfsQuotaBurstOnly", quota=550_000, throttled=0.9), BurstState())
    assert writes(capped, CgroupResource.CPU_CFS_QUOTA)[LS_DIR] == 375_000
    assert "normalized CPU (ratio 1.6)" in capped.summary


def test_the_kubelets_quota_is_brought_to_the_normalized_base_and_the_cfs_burst_follows() -> None:
    # cpuBurstOnly: quota reset to the base 125000 (pod by the same -75000); burst 125000 x 1000 % = 1250000,
    # clamped to the normalized quota 125000
    plan = CPUBurst().plan(snap("cpuBurstOnly", quota=200_000), BurstState())
    assert writes(plan, CgroupResource.CPU_CFS_QUOTA) == {LS_DIR: 125_000, POD_DIR: 125_000}
    assert writes(plan, CgroupResource.CPU_CFS_BURST) == {LS_DIR: 125_000}
    reason = [w.reason for p in plan.writes for w in p.all_writes() if w.resource is CgroupResource.CPU_CFS_BURST]
    assert "burst 1250000 = normalized quota 125000 × 1000% (ratio 1.6)" in reason[0]


def test_off_resets_to_the_normalized_base() -> None:
    plan = CPUBurst().plan_disabled(snap("none", quota=300_000), BurstState(), "policy none")
    assert writes(plan, CgroupResource.CPU_CFS_QUOTA) == {LS_DIR: 125_000, POD_DIR: 125_000}


def test_the_token_bucket_counts_usage_against_the_normalized_limit() -> None:
    # 1.5 cores of a 2000m limit normalized to 1250m: 120 % -> the bucket loses 20 x 10 s = 200 (of 2000);
    # unnormalized it would be 75 %: no change
    extra = {"cfsQuotaBurstPeriodSeconds": 10}
    r = CPUBurst()
    first = r.plan(snap("cfsQuotaBurstOnly", quota=125_000, usage=1.5, extra=extra), BurstState())
    second = r.plan(snap("cfsQuotaBurstOnly", quota=125_000, usage=1.5, extra=extra, now=1010.0), first.state)
    assert second.state.buckets[LS_DIR].tokens == pytest.approx(1800.0)


@pytest.mark.parametrize(
    ("ratio", "gates", "expected"),
    [
        ("1.6", BOTH_ON, 1.6),
        ("1.6", MappingProxyType({"CPUBurst": True, "CPUNormalization": False}), None),  # the gate is off
        ("0.8", BOTH_ON, None),  # at or below 1 the hook writes the unscaled quota too
        ("fast", BOTH_ON, None),
    ],
)
def test_when_the_ratio_applies(ratio: str, gates: Any, expected: float | None) -> None:
    from qos.cpu.burst import burst_normalization_ratio

    s = snap("auto", quota=200_000, ratio=ratio, gates=gates)
    assert burst_normalization_ratio(s) == expected
    if expected is None:  # unscaled: the base is 200000 as before
        plan = CPUBurst().plan(snap("cpuBurstOnly", quota=200_000, ratio=ratio, gates=gates), BurstState())
        assert writes(plan, CgroupResource.CPU_CFS_QUOTA) == {}
