"""Memory QoS plans (reference §5.5), hand-computed. Page size 4096 assumed where rounding shows."""

from __future__ import annotations

import mmap

import pytest

from hookserver.executor.plan import CgroupResource
from hookserver.slo.qos import MemoryQOS
from qos.memory_qos import MemoryQoS, memory_values
from tests.qos.helpers import node, pod
from tests.qos.part2_helpers import container, kernel, pod_kernel, spec_snapshot, writes

GiB = 1 << 30
FILES = frozenset({"memory.min", "memory.low", "memory.high"})


def cfg(**kw: int | bool) -> MemoryQOS:
    return MemoryQOS.model_validate({"enable": True, **kw})


def test_formulas() -> None:
    # request 1 GiB, limit 2 GiB: min 50 % = 512 MiB; low 80 % = 819.2 MiB -> 858993459 B;
    # high = 1 GiB + 1 GiB × 60 % = 1717986918 -> page-aligned down
    mn, low, high = memory_values(cfg(minLimitPercent=50, lowLimitPercent=80, throttlingPercent=60), GiB, 2 * GiB, 0)
    assert mn == 536_870_912 and low == 858_993_459
    assert high == 1_717_986_918 // mmap.PAGESIZE * mmap.PAGESIZE
    # low below min is raised to min; throttling 0 is max
    assert memory_values(cfg(minLimitPercent=50, lowLimitPercent=10), GiB, 0, 0) == (GiB // 2, GiB // 2, -1)
    # no limit: node allocatable stands in (8 GiB): 1 GiB + 7 GiB × 50 % = 4.5 GiB
    assert memory_values(cfg(throttlingPercent=50), GiB, 0, 8 * GiB)[2] == 4 * GiB + GiB // 2
    # disabled: kernel defaults
    assert memory_values(MemoryQOS.model_validate({}), GiB, 2 * GiB, 0) == (0, 0, -1)


def _snap(files: frozenset[str] = FILES, be_enable: bool = True) -> object:
    spec = {"resourceQOSStrategy": {
        "lsClass": {"memoryQOS": {"enable": True, "minLimitPercent": 100, "lowLimitPercent": 100}},
        "beClass": {"memoryQOS": {"enable": be_enable, "minLimitPercent": 50}},
    }}
    ls = pod_kernel("ls", container("ls", memory_request_bytes=GiB, memory_limit_bytes=2 * GiB),
                    memory_request_bytes=GiB, memory_limit_bytes=2 * GiB)
    # BE uses batch-memory (the reader fills memory_* from it): 2 GiB request
    be = pod_kernel("be", container("be", memory_request_bytes=2 * GiB), memory_request_bytes=2 * GiB)
    return spec_snapshot(spec, pods=(pod("ls", "LS"), pod("be", "BE")), node=node(memory=16 * GiB),
                         kernel=kernel(ls, be, cgroup_files=files))


def test_per_tier_pod_and_container_in_leveled_plans_tiers_first() -> None:
    plan = MemoryQoS().plan(_snap(), None)  # type: ignore[arg-type]
    assert [(p.leveled, p.cacheable) for p in plan.writes] == [(True, False), (True, True)]
    levels = plan.writes[0].levels
    assert [w.cgroup_dir for w in levels[0]] == ["kubepods", "kubepods"]  # root first
    mins = writes(plan, CgroupResource.MEMORY_MIN)
    assert mins["kubepods/burstable/podls"] == GiB and mins["kubepods/burstable/podls/ls-c1"] == GiB
    assert mins["kubepods/besteffort/podbe"] == GiB  # 2 GiB × 50 %
    assert mins["kubepods/burstable"] == GiB and mins["kubepods/besteffort"] == GiB
    assert mins["kubepods"] == 2 * GiB  # parents >= the sum of their children
    assert writes(plan, CgroupResource.MEMORY_HIGH)["kubepods/burstable/podls"] == -1


def test_a_disabled_class_gets_kernel_defaults() -> None:
    plan = MemoryQoS().plan(_snap(be_enable=False), None)  # type: ignore[arg-type]
    assert writes(plan, CgroupResource.MEMORY_MIN)["kubepods/besteffort/podbe"] == 0


def test_plain_v1_is_one_unsupported_status() -> None:
    plan = MemoryQoS().plan(_snap(files=frozenset()), None)  # type: ignore[arg-type]
    assert plan.skipped and "unsupported on this kernel" in plan.skipped and not plan.writes


def test_anolis_files_only_where_present() -> None:
    plan = MemoryQoS().plan(_snap(files=FILES | {"memory.wmark_ratio"}), None)  # type: ignore[arg-type]
    ratios = writes(plan, CgroupResource.MEMORY_WMARK_RATIO)
    assert ratios["kubepods/burstable/podls"] == 95  # koordinator's default wmarkRatio once enabled
    assert writes(plan, CgroupResource.MEMORY_WMARK_MIN_ADJ) == {}


def test_turning_every_class_off_resets_what_was_set() -> None:
    r = MemoryQoS()
    first = r.plan(_snap(), None)  # type: ignore[arg-type]
    off = spec_snapshot({}, pods=_snap().pods, kernel=_snap().kernel)  # type: ignore[attr-defined]
    verdict = r.enabled(off)
    assert not verdict.enabled
    plan = r.plan_disabled(off, first.state, verdict.reason)
    assert writes(plan, CgroupResource.MEMORY_MIN)["kubepods/burstable/podls"] == 0
    assert r.plan_disabled(off, None, verdict.reason).skipped  # never set: the node is left alone


@pytest.mark.parametrize("bad", [{"minLimitPercent": 101}, {"wmarkMinAdj": 60}])
def test_invalid_memory_qos_is_refused_by_the_model(bad: dict[str, int]) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        MemoryQOS.model_validate({"enable": True, **bad})


def test_a_quiet_pod_is_planned_once_then_only_in_its_refresh_slot() -> None:
    import zlib
    from dataclasses import replace

    from qos.memory_qos import REFRESH_SLOTS

    r = MemoryQoS()
    s = _snap()
    first = r.plan(s, r.initial_state(0))  # type: ignore[arg-type]
    assert "kubepods/burstable/podls" in writes(first, CgroupResource.MEMORY_MIN)
    slot = zlib.crc32(b"uid-ls") % REFRESH_SLOTS
    quiet_now = float((slot + 1) % REFRESH_SLOTS) + 6000.0
    quiet = r.plan(replace(s, now=quiet_now), first.state)  # type: ignore[arg-type]
    mins = writes(quiet, CgroupResource.MEMORY_MIN)
    assert "kubepods/burstable/podls" not in mins
    assert mins["kubepods/burstable"] == GiB and mins["kubepods"] == 2 * GiB  # tiers every round, sums kept
    refresh = r.plan(replace(s, now=float(slot) + 6000.0), first.state)  # type: ignore[arg-type]
    assert "kubepods/burstable/podls" in writes(refresh, CgroupResource.MEMORY_MIN)
    # a changed request is planned at once
    grown = replace(s.kernel.pods["uid-ls"], memory_request_bytes=2 * GiB)  # type: ignore[attr-defined]
    kern = replace(s.kernel, pods={**s.kernel.pods, "uid-ls": grown})  # type: ignore[attr-defined]
    changed = r.plan(replace(s, now=quiet_now, kernel=kern), first.state)  # type: ignore[arg-type]
    assert writes(changed, CgroupResource.MEMORY_MIN)["kubepods/burstable/podls"] == 2 * GiB
