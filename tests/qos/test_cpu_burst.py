"""CPU burst plans on scripted snapshots (reference §5.4), hand-computed.

An LS pod "ls" with one container: limit 2000m, period 100000 µs -> base quota 200000 µs;
cfsQuotaBurstPercent 300 -> ceiling 600000 µs. The node has 8 CPUs.
"""

from __future__ import annotations

import json
from typing import Any

from hookserver.executor.plan import CgroupResource
from qos.cpu.burst import BurstConfig, BurstState, CPUBurst, TokenBucket, node_burst_state, pod_burst_config
from qos.snapshot.model import NodeUsage
from tests.qos.helpers import pod, topology
from tests.qos.part2_helpers import container, kernel, pod_kernel, spec_snapshot, writes

LS_DIR = "kubepods/burstable/podls/ls-c1"
POD_DIR = "kubepods/burstable/podls"
BURST_FILES = frozenset({"cpu.cfs_burst_us"})


def snap(policy: str = "auto", *, quota: int = 200_000, burst: int | None = 0, throttled: float | None = 0.5,
         node_cpu: float = 1.0, usage: float | None = 1.0, pod_quota: int = 200_000, extra: dict[str, Any] | None = None,
         annotations: dict[str, str] | None = None, now: float = 1000.0, files: frozenset[str] = BURST_FILES) -> Any:
    c = container("ls", cpu_limit_milli=2000, quota_us=quota, burst_us=burst, throttled_ratio=throttled,
                  cpu_usage_cores=usage)
    spec = {"cpuBurstStrategy": {"policy": policy, **(extra or {})}}
    return spec_snapshot(
        spec, now=now, pods=(pod("ls", "LS", annotations=annotations),), usage=NodeUsage(cpu_cores=node_cpu),
        topology=topology(8), kernel=kernel(pod_kernel("ls", c, quota_us=pod_quota), cgroup_files=files),
    )


def test_cfs_burst_is_clamped_to_the_quota_the_kernel_accepts() -> None:
    # wanted = 2000m × 1000 % × 100000 µs = 2 000 000 µs; the kernel refuses more than the quota (200000).
    plan = CPUBurst().plan(snap("cpuBurstOnly"), BurstState())
    assert writes(plan, CgroupResource.CPU_CFS_BURST) == {LS_DIR: 200_000}
    reason = [w.reason for p in plan.writes for w in p.all_writes()][0]
    assert "2000000" in reason and "clamped to the quota 200000" in reason
    assert writes(plan, CgroupResource.CPU_CFS_QUOTA) == {}  # cpuBurstOnly: no quota scaling


def test_cfs_burst_below_the_quota_is_written_as_computed() -> None:
    # 2000m × 5 % × 100000 = 10000 µs <= quota
    plan = CPUBurst().plan(snap("cpuBurstOnly", extra={"cpuBurstPercent": 5}), BurstState())
    assert writes(plan, CgroupResource.CPU_CFS_BURST) == {LS_DIR: 10_000}


def test_a_refused_burst_is_not_retried_every_second() -> None:
    r = CPUBurst()
    first = r.plan(snap("cpuBurstOnly", burst=0), BurstState())
    assert writes(first, CgroupResource.CPU_CFS_BURST) == {LS_DIR: 200_000}
    # the file still shows 0 next round: the kernel refused it
    second = r.plan(snap("cpuBurstOnly", burst=0, now=1001.0), first.state)
    assert writes(second, CgroupResource.CPU_CFS_BURST) == {}
    assert any("refused" in n for n in second.notes)
    third = r.plan(snap("cpuBurstOnly", burst=0, now=1001.0 + 301), second.state)
    assert writes(third, CgroupResource.CPU_CFS_BURST) == {LS_DIR: 200_000}


def test_no_burst_file_is_one_unsupported_note() -> None:
    plan = CPUBurst().plan(snap("cpuBurstOnly", files=frozenset()), BurstState())
    assert writes(plan, CgroupResource.CPU_CFS_BURST) == {}
    assert any("unsupported" in n for n in plan.notes) and "unsupported on this kernel" in plan.summary


def test_quota_scales_over_a_sequence_of_throttle_samples() -> None:
    """Throttled: 200000 -> 240000 -> 288000 (×1.2); then not throttled: ×0.8 -> 230400; ceiling 600000."""
    r = CPUBurst()
    state = BurstState()
    quota, pod_quota = 200_000, 200_000
    seen = []
    for i, throttled in enumerate((0.5, 0.3, 0.0)):
        plan = r.plan(snap("cfsQuotaBurstOnly", quota=quota, pod_quota=pod_quota, throttled=throttled, now=1000.0 + i), state)
        q = writes(plan, CgroupResource.CPU_CFS_QUOTA)
        seen.append(q[LS_DIR])
        # the pod moves by the same delta, in the same leveled plan (pod level first)
        assert q[POD_DIR] == pod_quota + (q[LS_DIR] - quota)
        assert [p.leveled for p in plan.writes] == [True]
        quota, pod_quota, state = int(q[LS_DIR]), int(q[POD_DIR]), plan.state
    assert seen == [240_000, 288_000, 230_400]


def test_quota_stays_within_base_and_ceiling() -> None:
    up = CPUBurst().plan(snap("cfsQuotaBurstOnly", quota=550_000, throttled=0.9), BurstState())
    assert writes(up, CgroupResource.CPU_CFS_QUOTA)[LS_DIR] == 600_000  # 660000 capped at 200000 × 300 %
    down = CPUBurst().plan(snap("cfsQuotaBurstOnly", quota=210_000, throttled=0.0), BurstState())
    assert writes(down, CgroupResource.CPU_CFS_QUOTA)[LS_DIR] == 200_000  # 168000 raised to base


def test_node_overload_turns_scale_up_into_scale_down_and_cooling_holds() -> None:
    # 8 CPUs, threshold 50 %: overload at 4.0 cores, cooling from 3.6
    assert node_burst_state(snap(node_cpu=4.0), 50)[0] == "overload"
    assert node_burst_state(snap(node_cpu=3.7), 50)[0] == "cooling"
    assert node_burst_state(snap(node_cpu=1.0), 50)[0] == "idle"
    over = CPUBurst().plan(snap("auto", quota=300_000, node_cpu=4.0, throttled=0.9), BurstState())
    assert writes(over, CgroupResource.CPU_CFS_QUOTA)[LS_DIR] == 240_000
    cool = CPUBurst().plan(snap("auto", quota=300_000, node_cpu=3.7, throttled=0.9), BurstState())
    assert LS_DIR not in writes(cool, CgroupResource.CPU_CFS_QUOTA)


def test_share_pool_excludes_lsr_cpus_and_their_usage() -> None:
    # LSR pod bound to 4 CPUs using 3.5 cores; node 5.0 cores: pool = 4 CPUs, usage 1.5 -> 37.5 % < 45 %: idle
    s = snap(node_cpu=5.0)
    lsr = pod("lsr", "LSR", cpu=3.5, cpuset=frozenset({0, 1, 2, 3}))
    from dataclasses import replace
    state, ratio = node_burst_state(replace(s, pods=(*s.pods, lsr)), 50)
    assert state == "idle" and ratio == 1.5 / 4


def test_token_bucket_bounds_burst_time() -> None:
    """period 10 s, burst 300 % -> capacity 10 × 200 = 2000 %·s. Using 300 % of the limit costs 200 %·s per
    second: full at t=0, 1800 after 1 s, ..., 0 after 10 s -> scale down instead of up."""
    cfg = BurstConfig("cfsQuotaBurstOnly", 1000, 300, 10)
    bucket = TokenBucket(TokenBucket.capacity(cfg), 0.0)
    assert bucket.tokens == 2000
    for t in range(1, 11):
        bucket = bucket.step(cfg, 300.0, float(t))
    assert bucket.tokens == 0
    bucket = bucket.step(cfg, 20.0, 11.0)  # < 60 %: saves (100 − 20) × 1 s
    assert bucket.tokens == 80
    assert bucket.step(cfg, 80.0, 12.0).tokens == 80  # 60..100 %: neither
    r = CPUBurst()
    extra = {"cfsQuotaBurstPeriodSeconds": 10}
    # usage 6 cores of a 2-core limit = 300 %; throttled every round
    state = BurstState()
    ops = []
    for t in range(12):
        plan = r.plan(snap("cfsQuotaBurstOnly", quota=400_000, usage=6.0, extra=extra, now=1000.0 + t), state)
        ops.append(writes(plan, CgroupResource.CPU_CFS_QUOTA).get(LS_DIR))
        state = plan.state
    assert ops[0] == 480_000 and ops[-1] == 320_000  # up while tokens last, down once the bucket is empty


def test_disabled_resets_quota_to_base_and_burst_to_zero() -> None:
    plan = CPUBurst().plan_disabled(snap("none", quota=300_000, burst=200_000, pod_quota=300_000), BurstState(), "policy none")
    assert writes(plan, CgroupResource.CPU_CFS_BURST) == {LS_DIR: 0}
    q = writes(plan, CgroupResource.CPU_CFS_QUOTA)
    assert q == {LS_DIR: 200_000, POD_DIR: 200_000}


def test_pod_annotation_overrides_the_node_policy() -> None:
    anno = {"koordinator.sh/cpuBurst": json.dumps({"policy": "cpuBurstOnly", "cpuBurstPercent": 5})}
    s = snap("none", annotations=anno)
    assert CPUBurst().enabled(s).enabled
    cfg, problem = pod_burst_config(s.pods[0], s.slo.cpu_burst_strategy)
    assert (cfg.policy, cfg.cpu_burst_percent, cfg.cfs_quota_burst_percent, problem) == ("cpuBurstOnly", 5, 300, "")
    assert writes(CPUBurst().plan(s, BurstState()), CgroupResource.CPU_CFS_BURST) == {LS_DIR: 10_000}


def test_a_malformed_annotation_falls_back_to_the_node_config_with_a_note() -> None:
    for raw in ("{not json", json.dumps({"policy": "sometimes"}), json.dumps({"cpuBurstPercent": -3})):
        s = snap("cpuBurstOnly", annotations={"koordinator.sh/cpuBurst": raw})
        cfg, problem = pod_burst_config(s.pods[0], s.slo.cpu_burst_strategy)
        assert cfg.source == "node" and problem
        plan = CPUBurst().plan(s, BurstState())
        assert any("node config used" in n for n in plan.notes)


def test_koordlet_burst_gauges_come_from_the_kept_state() -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from qos.cpu.burst_metrics import BurstMetricsCollector

    plan = CPUBurst().plan(snap("auto", quota=200_000, throttled=0.5), BurstState())
    registry = CollectorRegistry()
    registry.register(BurstMetricsCollector(lambda: plan.state, node="node-a"))
    text = generate_latest(registry).decode()
    labels = 'container_id="ls-c1",container_name="c1",node="node-a",pod_name="ls",pod_namespace="default"'
    assert f"koordlet_container_scaled_cfs_burst_us{{{labels}}} 200000.0" in text
    assert f"koordlet_container_scaled_cfs_quota_us{{{labels}}} 240000.0" in text


def test_token_bucket_is_bounded_below_at_minus_capacity_like_koordlet() -> None:
    """koordlet's burstLimiter.Allow clamps the tokens to [−capacity, capacity] every update
    (pkg/koordlet/qosmanager/plugins/cpuburst/cpu_burst.go) and allows quota burst only while tokens > 0.

    period 10 s, burst 300 % -> capacity 2000 %·s. Full at t=0; 30 s at 300 % of the limit costs 200 %·s a
    second: 2000 − 6000 = −4000 unbounded, −2000 clamped (reached at t=20 and kept). Then idle at 20 % saves
    80 %·s a second: from −2000 the bucket is above 0 after 26 s (−2000 + 26 × 80 = 80); unbounded it would
    take 51 s (−4000 + 51 × 80 = 80)."""
    cfg = BurstConfig("cfsQuotaBurstOnly", 1000, 300, 10)
    bucket = TokenBucket(TokenBucket.capacity(cfg), 0.0)
    for t in range(1, 31):
        bucket = bucket.step(cfg, 300.0, float(t))
        if t == 20:
            assert bucket.tokens == -2000
    assert bucket.tokens == -2000
    rounds = 0
    while bucket.tokens <= 0:
        rounds += 1
        bucket = bucket.step(cfg, 20.0, 30.0 + rounds)
        assert rounds < 100
    assert rounds == 26 and bucket.tokens == 80
    # The upper bound holds as before: a long idle spell saves at most the capacity.
    for t in range(1, 200):
        bucket = bucket.step(cfg, 0.0, 56.0 + t)
    assert bucket.tokens == 2000


def test_token_bucket_bounds_follow_a_capacity_change_and_never_invert() -> None:
    """The bounds are the capacity of this round's config: shrinking it pulls the tokens into the new range.
    cfsQuotaBurstPercent at 100 gives capacity 0, and one below 100 (koordlet refuses quota burst then) must
    not give a negative capacity whose 'bounds' would invert into a positive floor."""
    small = BurstConfig("cfsQuotaBurstOnly", 1000, 150, 10)  # capacity 500
    low = TokenBucket(-2000.0, 0.0).step(small, 80.0, 1.0)
    assert low.tokens == -500
    high = TokenBucket(2000.0, 0.0).step(small, 80.0, 1.0)
    assert high.tokens == 500
    for percent in (100, 90):
        cfg = BurstConfig("cfsQuotaBurstOnly", 1000, percent, 10)
        assert TokenBucket.capacity(cfg) == 0
        assert TokenBucket(0.0, 0.0).step(cfg, 0.0, 5.0).tokens == 0  # never above 0: never allowed
