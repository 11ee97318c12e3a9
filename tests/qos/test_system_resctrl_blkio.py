"""System config, resctrl and blkio plans on scripted snapshots (reference §5.6–5.8), hand-computed."""

from __future__ import annotations

import json
from types import MappingProxyType

import pytest

from hookserver.executor.plan import CgroupResource
from qos.blkio import BlkIO
from qos.snapshot.kernel import BlockDevice, ResctrlFacts, SysctlFacts
from qos.resctrl import Resctrl, cat_mask, mba_value
from qos.system_config import SystemConfig
from tests.qos.helpers import node, pod
from tests.qos.part2_helpers import container, kernel, pod_kernel, spec_snapshot, writes

# -- system config ------------------------------------------------------------------------------------

SYSCTL = SysctlFacts(mem_total_kib=16_000_000, values=MappingProxyType({
    "vm.min_free_kbytes": 67584, "vm.watermark_scale_factor": 10, "memcg_reaper.reap_background": None}))


def test_min_free_kbytes_and_watermark_scale_factor() -> None:
    # Node memory 16 000 000 KiB × 100 / 10000 = 160 000 (koordlet uses the Node's capacity)
    s = spec_snapshot({"systemStrategy": {"minFreeKbytesFactor": 100, "watermarkScaleFactor": 150}},
                      kernel=kernel(read=("sysctl",), sysctl=SYSCTL), node=node(memory=16_000_000 * 1024))
    r = SystemConfig()
    assert r.enabled(s).enabled
    plan = r.plan(s, None)
    files = {f.path: f for f in plan.files}
    assert files["vm/min_free_kbytes"].value == "160000" and files["vm/watermark_scale_factor"].value == "150"
    assert files["vm/min_free_kbytes"].original == "record"
    assert "kernel/mm/memcg_reaper/reap_background" not in files  # the kernel has no such file
    # without a Node, MemTotal from /proc/meminfo stands in (here 16 000 000 KiB as well)
    bare = SystemConfig().plan(spec_snapshot({"systemStrategy": {"minFreeKbytesFactor": 50}}, node=None,
                                             kernel=kernel(read=("sysctl",), sysctl=SYSCTL)), None)
    assert {f.path: f.value for f in bare.files}["vm/min_free_kbytes"] == "80000"


def test_memcg_reaper_is_written_under_the_sys_root_where_it_exists() -> None:
    facts = SysctlFacts(mem_total_kib=16_000_000, values=MappingProxyType({
        "vm.min_free_kbytes": 160000, "vm.watermark_scale_factor": 150, "memcg_reaper.reap_background": 0}))
    s = spec_snapshot({"systemStrategy": {"memcgReapBackGround": 1}}, node=node(memory=16_000_000 * 1024),
                      kernel=kernel(read=("sysctl",), sysctl=facts))
    plan = SystemConfig().plan(s, None)
    assert [(f.root, f.path, f.value) for f in plan.files] == [("sys", "kernel/mm/memcg_reaper/reap_background", "1")]


def test_absent_system_strategy_means_leave_the_node_and_restore_recorded_values() -> None:
    recorded = SysctlFacts(mem_total_kib=16_000_000, values=SYSCTL.values,
                           originals=MappingProxyType({"vm.min_free_kbytes": "67584"}))
    s = spec_snapshot({}, kernel=kernel(read=("sysctl",), sysctl=recorded))
    verdict = SystemConfig().enabled(s)
    assert not verdict.enabled and "left as they were" in verdict.reason
    plan = SystemConfig().plan_disabled(s, None, verdict.reason)
    assert [(f.path, f.value, f.original) for f in plan.files] == [("vm/min_free_kbytes", "67584", "restore")]
    nothing = spec_snapshot({}, kernel=kernel(read=("sysctl",), sysctl=SYSCTL))
    assert SystemConfig().plan_disabled(nothing, None, "off").files == ()


# -- resctrl ------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("bits", "start", "end", "mask"), [
    (11, 0, 100, 0x7FF), (11, 0, 30, 0xF),        # ceil(3.3) = 4 ways
    (20, 0, 100, 0xFFFFF), (20, 0, 30, 0x3F),     # 6 ways
    (11, 30, 100, 0x7F0),                         # ways 4..10
    (20, 50, 80, 0xFC00),                         # ways 10..15 (end = ceil(16.0) = 16)
])
def test_cat_masks(bits: int, start: int, end: int, mask: int) -> None:
    assert cat_mask(bits, start, end) == mask


def test_mba_rounding() -> None:
    assert [mba_value(p, vendor="intel") for p in (100, 55, 31, 1)] == [100, 60, 40, 10]
    assert [mba_value(p, vendor="amd") for p in (100, 50, 31)] == [2048, 80, 49]


def _resctrl(**kw: object) -> ResctrlFacts:
    base: dict[str, object] = {"root_exists": True, "cat": True, "mba": True, "cbm_bits": 11, "num_closids": 16,
                               "l3_domains": ("0", "1"), "mb_domains": ("0", "1")}
    base.update(kw)
    return ResctrlFacts(**base)  # type: ignore[arg-type]


def test_resctrl_groups_schemata_and_tasks() -> None:
    spec = {"resourceQOSStrategy": {"lsClass": {"resctrlQOS": {"enable": True}},
                                    "beClass": {"resctrlQOS": {"enable": True, "mbaPercent": 55}}}}
    be = pod_kernel("be", container("be", tasks=frozenset({101, 102})))
    ls = pod_kernel("ls", container("ls", tasks=frozenset({201})))
    facts = _resctrl(groups=MappingProxyType({"BE": "L3:0=7ff;1=7ff\nMB:0=100;1=100"}),
                     group_tasks=MappingProxyType({"BE": frozenset({101})}))
    s = spec_snapshot(spec, pods=(pod("be", "BE"), pod("ls", "LS")), kernel=kernel(be, ls, read=("pods", "resctrl"), resctrl=facts))
    plan = Resctrl().plan(s, None)
    ops = [(f.op, f.path, f.value) for f in plan.files]
    assert ("mkdir", "LSR", "") in ops and ("mkdir", "LS", "") in ops and ("mkdir", "BE", "") not in ops
    assert ("write", "BE/schemata", "L3:0=f;1=f") in ops and ("write", "BE/schemata", "MB:0=60;1=60") in ops
    assert ("write", "LS/schemata", "L3:0=7ff;1=7ff") in ops
    assert ("write", "BE/tasks", "102") in ops and ("write", "BE/tasks", "101") not in ops
    assert ("write", "LS/tasks", "201") in ops


def test_resctrl_skips_lines_that_hold_and_reports_unsupported_once() -> None:
    spec = {"resourceQOSStrategy": {"beClass": {"resctrlQOS": {"enable": True}}}}
    full = "L3:0=7ff;1=7ff\nMB:0=100;1=100"
    facts = _resctrl(groups=MappingProxyType({"LSR": full, "LS": full, "BE": "L3:0=f;1=f\nMB:0=100;1=100"}))
    plan = Resctrl().plan(spec_snapshot(spec, kernel=kernel(read=("pods", "resctrl"), resctrl=facts)), None)
    assert plan.files == ()
    none = ResctrlFacts(problem="resctrl is not mounted at /x")
    skipped = Resctrl().plan(spec_snapshot(spec, kernel=kernel(read=("pods", "resctrl"), resctrl=none)), None)
    assert skipped.skipped.startswith("unsupported") and not skipped.files


def test_resctrl_disabled_removes_only_groups_it_created() -> None:
    facts = _resctrl(created=frozenset({"BE", "LS"}))
    plan = Resctrl().plan_disabled(spec_snapshot({}, kernel=kernel(read=("resctrl",), resctrl=facts)), None, "off")
    assert [(f.op, f.path, f.original) for f in plan.files] == [("rmdir", "BE", "restore"), ("rmdir", "LS", "restore")]


# -- blkio --------------------------------------------------------------------------------------------

def _blkio_spec(read_bps: int = 1048576) -> dict[str, object]:
    return {"resourceQOSStrategy": {"beClass": {"blkioQOS": {"enable": True, "blocks": [
        {"name": "/dev/vdb", "type": "device", "ioCfg": {"readBPS": read_bps, "writeIOPS": 300, "ioWeightPercent": 60}},
        {"name": "/dev/nope", "type": "device", "ioCfg": {"readBPS": 5}},
    ]}}}}


DEVICES = (BlockDevice("/dev/vdb", "device", devno="253:16"), BlockDevice("/dev/nope", "device", problem="no block device 'nope'"))


def test_blkio_throttles_for_the_be_tier_and_annotated_pods() -> None:
    anno = {"koordinator.sh/blkioQOS": json.dumps({"enable": True, "blocks": [
        {"name": "/dev/vdb", "type": "device", "ioCfg": {"writeBPS": 2048}}]})}
    be = pod_kernel("be", container("be"))
    s = spec_snapshot(_blkio_spec(), pods=(pod("be", "BE", annotations=anno),),
                      kernel=kernel(be, read=("pods", "blkio"), devices=DEVICES,
                                    cgroup_files=frozenset({"blkio.cost.weight", "blkio.cost.qos", "blkio.cost.model"})))
    plan = BlkIO().plan(s, frozenset())
    tier = "kubepods/besteffort"
    assert writes(plan, CgroupResource.BLKIO_READ_BPS) == {tier: "253:16 1048576"}
    assert writes(plan, CgroupResource.BLKIO_WRITE_IOPS) == {tier: "253:16 300"}
    assert writes(plan, CgroupResource.BLKIO_WRITE_BPS) == {"kubepods/besteffort/podbe": "253:16 2048"}
    assert writes(plan, CgroupResource.BLKIO_COST_WEIGHT)[tier] == 60
    assert writes(plan, CgroupResource.BLKIO_COST_QOS) == {"": "253:16 enable=1 ctrl=user rpct=95 rlat=3000 wpct=95 wlat=3000"}
    assert any("nope" in n for n in plan.notes)  # the missing device is reported, not an error
    # a throttle NodeSLO stops asking for is lifted
    later = BlkIO().plan(spec_snapshot(_blkio_spec(read_bps=0), kernel=kernel(read=("blkio",), devices=DEVICES)), plan.state)
    assert writes(later, CgroupResource.BLKIO_READ_BPS) == {tier: "253:16 0"}
    off = BlkIO().plan_disabled(spec_snapshot({}), later.state, "off")
    assert writes(off, CgroupResource.BLKIO_WRITE_IOPS) == {tier: "253:16 0"}
