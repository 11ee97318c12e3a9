"""Every config koordinator's validation accepts is accepted here too (issue 37, item 1).

Each row is a value koordinator's `validate:` tags (apis/configuration/slo_controller_config.go,
apis/slo/v1alpha1/nodeslo_types.go) or its plain string types take, which hookserver used to refuse, and what
koordinator then does with it, worked out by hand from koord-manager's / koordlet's code (file named per row).
The capacity rows are koord-manager's own `TestPluginCalculate` cases with reclaim thresholds above 100
(noderesource/plugins/batchresource/plugin_test.go), whose sums are rebuilt from two pods.
"""

from __future__ import annotations

import json
import logging
from types import MappingProxyType
from typing import Any

import pytest

from hookserver.capacity import NodeFacts, Pair, PodInput, UsageFacts, WindowedUsage, compute_capacity
from hookserver.capacity.report import capacity_report
from hookserver.debug.render_capacity import render_capacity
from hookserver.informer.slo_state import SLOState
from hookserver.koord_resources import BATCH_CPU, BATCH_MEMORY
from hookserver.slo import parse_slo_configmap, parse_slo_document, spec_from_json
from hookserver.slo.colocation import ColocationStrategy, ResolvedColocation, parse_colocation_config
from hookserver.store import StateStore
from hookserver.executor.plan import CgroupResource
from qos.blkio import BlkIO
from qos.group_identity import bvt_rule
from qos.system_config import SystemConfig
from qos.snapshot.kernel import BlockDevice, SysctlFacts
from qos.snapshot.kernel_reader import resolve_block_device
from tests.capacity.world import World
from tests.qos.helpers import node
from tests.qos.part2_helpers import kernel, spec_snapshot, writes

G = 10**9


def _resolve(doc: dict[str, Any], labels: dict[str, str] | None = None,
             annotations: dict[str, str] | None = None) -> ResolvedColocation:
    problems: list[str] = []
    config = parse_colocation_config(doc, origin="cm", problems=problems)
    assert config is not None and problems == [], problems
    return config.resolve(labels or {}, annotations)


# -- colocation-config: accepted, used as koord-manager uses it, and noted -------------------------------------

@pytest.mark.parametrize(
    ("doc", "labels", "annotations", "expect", "note"),
    [
        # validate:"omitempty,min=0" and no max: above 100 is a negative safety margin
        ({"cpuReclaimThresholdPercent": 150}, {}, {}, {"cpuReclaimThresholdPercent": 150},
         "cpuReclaimThresholdPercent 150 is above 100"),
        ({"memoryReclaimThresholdPercent": 120}, {}, {}, {"memoryReclaimThresholdPercent": 120},
         "memoryReclaimThresholdPercent 120 is above 100"),
        ({"nodeConfigs": [{"name": "big", "nodeSelector": {"matchLabels": {"pool": "big"}},
                           "memoryReclaimThresholdPercent": 101}]},
         {"pool": "big"}, {}, {"memoryReclaimThresholdPercent": 101}, "memoryReclaimThresholdPercent 101"),
        # the node label is a ratio: int64(1.5 * 100) = 150 (UpdateColocationStrategyForNode has no range check)
        ({}, {"node.koordinator.sh/cpu-reclaim-ratio": "1.5"}, {}, {"cpuReclaimThresholdPercent": 150},
         "cpuReclaimThresholdPercent 150"),
        ({}, {}, {"node.koordinator.sh/colocation-strategy": '{"memoryReclaimThresholdPercent": 500}'},
         {"memoryReclaimThresholdPercent": 500}, "memoryReclaimThresholdPercent 500"),
        # CalculatePolicy is a string type without a tag; batch-cpu tests only for maxUsageRequest (util.go)
        ({"cpuCalculatePolicy": "request"}, {}, {}, {"cpuCalculatePolicy": "request"},
         "cpuCalculatePolicy 'request' is not a policy koord-manager computes for this resource: computed as "
         "'usage'"),
        ({"memoryCalculatePolicy": "usageAndRequest"}, {}, {}, {"memoryCalculatePolicy": "usageAndRequest"},
         "computed as 'usage'"),
        # MidReclaimMode: validate:"omitempty" only
        ({"midReclaimMode": "dynamic"}, {}, {}, {"midReclaimMode": "dynamic"}, "midReclaimMode 'dynamic'"),
        # NodeMemoryCollectPolicy: any non-empty string (IsColocationStrategyValid)
        ({"metricMemoryCollectPolicy": "usageWithColdPageCache"}, {}, {},
         {"metricMemoryCollectPolicy": "usageWithColdPageCache"}, "collected without page cache"),
    ],
)
def test_colocation_values_koordinator_accepts_are_used_and_noted(
        doc: dict[str, Any], labels: dict[str, str], annotations: dict[str, str], expect: dict[str, Any],
        note: str) -> None:
    resolved = _resolve({"enable": True, **doc}, labels, annotations)
    wire = resolved.strategy.to_json()
    assert {k: wire[k] for k in expect} == expect
    assert resolved.enabled
    assert [n for n in resolved.notes if note in n], resolved.notes


@pytest.mark.parametrize(
    ("cpu_policy", "memory_policy", "cpu_used", "memory_used"),
    [
        ("request", "request", "usage", "request"),  # CPU has no request policy in koord-manager
        ("maxUsageRequest", "maxUsageRequest", "maxUsageRequest", "maxUsageRequest"),
        ("Usage", "MaxUsageRequest", "usage", "usage"),  # Go compares the strings exactly
    ],
)
def test_the_policy_used_is_koord_managers(cpu_policy: str, memory_policy: str, cpu_used: str,
                                           memory_used: str) -> None:
    resolved = _resolve({"cpuCalculatePolicy": cpu_policy, "memoryCalculatePolicy": memory_policy,
                         "cpuReclaimThresholdPercent": 100, "midReclaimMode": "static"})
    s = resolved.strategy
    assert (s.batch_cpu_policy(), s.batch_memory_policy()) == (cpu_used, memory_used)
    # a note only where the policy written is not the one used (100 % and static are ordinary)
    assert len(resolved.notes) == (cpu_policy != cpu_used) + (memory_policy != memory_used), resolved.notes


# -- koord-manager's six cases with reclaim thresholds above 100 ------------------------------------------------
# Node: capacity = allocatable = 100 cores / 120G (makeNodeStat("100", "120G")); system usage 7 cores / 12G.
# koordinator's messages give the sums: HP used 33000m / 33G, HP request (memory) 60G, HP max(used, request)
# 42000m / 60G. Two pods give exactly those: a = request 10 / 20G, usage 15 / 13G (max 15 / 20G);
# b = request 27 / 40G, usage 18 / 20G (max 27 / 40G).
# Margins: cpu 100000 x (100 - 150) / 100 = -50000m; memory int(120G x (100 - 120) / 100) = -24G.
NODE = NodeFacts(name="test-node1", capacity=Pair(100_000, 120 * G), allocatable=Pair(100_000, 120 * G))
PODS = [
    PodInput(uid="a", key="test/a", priority_class="koord-prod", qos="LS", phase="Running",
             request=Pair(10_000, 20 * G), usage=WindowedUsage.of(Pair(15_000, 13 * G))),
    PodInput(uid="b", key="test/b", priority_class="koord-prod", qos="LS", phase="Running",
             request=Pair(27_000, 40 * G), usage=WindowedUsage.of(Pair(18_000, 20 * G))),
]
USAGE = UsageFacts(node=WindowedUsage.of(Pair(40_000, 45 * G)), system=WindowedUsage.of(Pair(7_000, 12 * G)))


@pytest.mark.parametrize(
    ("name", "fields", "batch_cpu", "batch_memory"),
    [
        # cpu maxUsageRequest: 100000 + 50000 - max(7000, 0) - 42000 = 101000
        # memory request:      120G + 24G - 0 (reserved) - 60G = 84G
        ("calculate with adjusted reclaim ratio",
         {"cpuCalculatePolicy": "maxUsageRequest", "memoryCalculatePolicy": "request"}, 101_000, 84 * G),
        # min(100000 x 100 %, 101000) = 100000
        ("calculate with batch cpu threshold percent only",
         {"cpuCalculatePolicy": "maxUsageRequest", "memoryCalculatePolicy": "request",
          "batchCPUThresholdPercent": 100}, 100_000, 84 * G),
        # min(120G x 100 %, 84G) = 84G
        ("calculate with batch memory threshold percent only",
         {"cpuCalculatePolicy": "maxUsageRequest", "memoryCalculatePolicy": "request",
          "batchMemoryThresholdPercent": 100}, 101_000, 84 * G),
        ("calculate with both batch cpu/mem threshold percent",
         {"cpuCalculatePolicy": "maxUsageRequest", "memoryCalculatePolicy": "request",
          "batchCPUThresholdPercent": 100, "batchMemoryThresholdPercent": 100}, 100_000, 84 * G),
        # cpu usage:             100000 + 50000 - 7000 - 33000 = 110000
        # memory maxUsageRequest: 120G + 24G - max(12G, 0) - 60G = 72G
        ("calculate without batch cpu/mem threshold percent-with different xxxCalculatePolicy",
         {"cpuCalculatePolicy": "usage", "memoryCalculatePolicy": "maxUsageRequest"}, 110_000, 72 * G),
        ("calculate with both batch cpu/mem threshold percent-with different xxxCalculatePolicy",
         {"cpuCalculatePolicy": "usage", "memoryCalculatePolicy": "maxUsageRequest",
          "batchCPUThresholdPercent": 100, "batchMemoryThresholdPercent": 100}, 100_000, 72 * G),
    ],
)
def test_koord_managers_cases_above_100_percent(name: str, fields: dict[str, Any], batch_cpu: int,
                                                batch_memory: int) -> None:
    doc = {"enable": True, "degradeTimeMinutes": 15, "updateTimeThresholdSeconds": 300,
           "resourceDiffThreshold": 0.1, "cpuReclaimThresholdPercent": 150, "memoryReclaimThresholdPercent": 120,
           **fields}
    # through the ConfigMap, as a cluster writes it: the whole document must be accepted first
    parsed = parse_slo_configmap({"colocation-config": json.dumps(doc)}, origin="cm")
    assert parsed.colocation is not None
    resolved = parsed.colocation.resolve({}, {})
    values = compute_capacity(resolved.strategy, NODE, PODS, USAGE, prod_reclaimable=None).values()
    assert (values[BATCH_CPU], values[BATCH_MEMORY]) == (batch_cpu, batch_memory), name


def test_a_cluster_at_150_percent_gets_an_offer_and_hookctl_capacity_says_why() -> None:
    world = World()  # 8 cores / 32Gi, kubelet reserves 500m / 2Gi, system 500m / 1Gi, no pods
    world.store.set_colocation(_resolve({"enable": True, "cpuReclaimThresholdPercent": 150,
                                         "memoryReclaimThresholdPercent": 120}))
    publisher = world.publisher()
    world.sample(15)
    outcome = publisher.tick()
    assert outcome.state == "published", outcome
    # 8000 - (8000 x -50 %) - max(500, 500) = 11500; 32Gi - int(32Gi x -20 %) - max(1Gi, 2Gi)
    assert world.sink.calls[-1][1][BATCH_CPU] == "11500"
    gi = 1 << 30
    assert publisher.last_result is not None
    assert publisher.last_result.values()[BATCH_MEMORY] == 32 * gi + 6_871_947_673 - 2 * gi == 39_084_202_393
    doc = capacity_report(publisher)
    notes = doc["policy"]["notes"]
    assert len(notes) == 2 and "cpuReclaimThresholdPercent 150 is above 100" in notes[0]
    text = render_capacity(doc)
    assert "note: cpuReclaimThresholdPercent 150 is above 100" in text
    assert "note: memoryReclaimThresholdPercent 120 is above 100" in text


def test_the_unusual_value_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    store = StateStore(clock=lambda: 100.0)
    state = SLOState(store, node_labels={"pool": "a"})
    state.publish_defaults()
    data = {"colocation-config": json.dumps({"enable": True, "cpuReclaimThresholdPercent": 150})}
    with caplog.at_level(logging.WARNING, logger="hookserver.informer.slo_state"):
        state.set_configmap(parse_slo_document({"kind": "ConfigMap", "data": data}, origin="cm"), input_name="cm")
        state.set_node_metadata({"pool": "a", "other": "x"}, {})  # re-resolved: the same note, not repeated
        data2 = {"colocation-config": json.dumps({"enable": True, "cpuReclaimThresholdPercent": 150,
                                                  "degradeTimeMinutes": 20})}
        # changed, with the note still in force: not repeated
        state.set_configmap(parse_slo_document({"kind": "ConfigMap", "data": data2}, origin="cm"), input_name="cm")
    logged = [r.getMessage() for r in caplog.records if "cpuReclaimThresholdPercent 150" in r.getMessage()]
    assert len(logged) == 1, logged
    assert store.snapshot().colocation.strategy.cpu_reclaim_threshold_percent == 150


# -- NodeSLO: accepted as koordinator accepts, acted on as koordlet acts ----------------------------------------

@pytest.mark.parametrize(
    ("spec", "check"),
    [
        # SystemStrategy.MinFreeKbytesFactor: validate:"omitempty,gt=0" (no max)
        ({"systemStrategy": {"minFreeKbytesFactor": 20000}},
         lambda s: s.system_strategy.min_free_kbytes_factor == 20000),
        # NETQOSPolicy "terway-qos" is koordinator's constant (NETQOSPolicyTerwayQos)
        ({"resourceQOSStrategy": {"policies": {"netQOSPolicy": "terway-qos"}}},
         lambda s: s.resource_qos_strategy.policies.net_qos_policy == "terway-qos"),
        # CPUQOSPolicy is a plain string: "" means group identity in koordlet (isPolicyGroupIdentity)
        ({"resourceQOSStrategy": {"policies": {"cpuPolicy": ""}}},
         lambda s: s.resource_qos_strategy.policies.uses_group_identity()),
        ({"resourceQOSStrategy": {"policies": {"cpuPolicy": "none"}}},
         lambda s: not s.resource_qos_strategy.policies.uses_group_identity()),
        # CPUSuppressPolicy: a string; anything but cfsQuota suppresses by cpuset (cpu_suppress.go)
        ({"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressPolicy": "cpuShare"}},
         lambda s: s.resource_used_threshold_with_be.suppress_policy_in_effect() == "cpuset"),
        # CPUEvictPolicy: a string; anything but evictByAllocatable evicts by real limit (cpu_evict.go)
        ({"resourceUsedThresholdWithBE": {"cpuEvictPolicy": "evictByUsage"}},
         lambda s: s.resource_used_threshold_with_be.cpu_evict_policy == "evictByUsage"),
        # CPUBurstPolicy: a string; koordlet bursts only for cpuBurstOnly / cfsQuotaBurstOnly / auto
        ({"cpuBurstStrategy": {"policy": "cpuBurstAndCFSQuota"}},
         lambda s: s.cpu_burst_strategy.policy == "cpuBurstAndCFSQuota"),
        # BlockType is a string; koordlet skips a block of an unknown type (blkio_reconcile.go), the NodeSLO stays
        ({"resourceQOSStrategy": {"beClass": {"blkioQOS": {"enable": True, "blocks": [
            {"name": "sda", "type": "device"}, {"name": "nvme", "type": "nvme"}]}}}},
         lambda s: [b.type for b in s.resource_qos_strategy.be_class.blkio_qos.blocks] == ["device", "nvme"]),
        # TotalNetworkBandwidth is a resource.Quantity: a negative one parses
        ({"systemStrategy": {"totalNetworkBandwidth": "-1M"}},
         lambda s: s.system_strategy.total_network_bandwidth == "-1M"),
    ],
)
def test_nodeslo_values_koordinator_accepts(spec: dict[str, Any], check: Any) -> None:
    assert check(spec_from_json(spec, origin="nodeslo/n").spec)


def test_io_values_the_kernel_refuses_are_accepted_and_left_out_with_a_note() -> None:
    # IOCfg has no validate: tags: koordinator accepts ioWeightPercent 0 and readIOPS -5; the kernel would
    # refuse both, so the block's other values (writeIOPS 300) are written and those two are named
    spec = {"resourceQOSStrategy": {"beClass": {"blkioQOS": {"enable": True, "blocks": [
        {"name": "/dev/vdb", "type": "device", "ioCfg": {"readIOPS": -5, "writeIOPS": 300, "ioWeightPercent": 0,
                                                         "readLatencyPercent": 101}}]}}}}
    devices = (BlockDevice("/dev/vdb", "device", devno="253:16"),)
    snap = spec_snapshot(spec, kernel=kernel(read=("pods", "blkio"), devices=devices,
                                             cgroup_files=frozenset({"blkio.cost.weight", "blkio.cost.qos"})))
    plan = BlkIO().plan(snap, frozenset())
    tier = "kubepods/besteffort"
    assert writes(plan, CgroupResource.BLKIO_WRITE_IOPS) == {tier: "253:16 300"}
    assert writes(plan, CgroupResource.BLKIO_READ_IOPS) == {}
    assert writes(plan, CgroupResource.BLKIO_COST_WEIGHT) == {tier: 100}  # the default, not 0
    assert writes(plan, CgroupResource.BLKIO_COST_QOS) == {"": "253:16 enable=1 ctrl=user rpct=95 rlat=3000 "
                                                               "wpct=95 wlat=3000"}
    assert "BE tier: /dev/vdb: readIOPS -5 is outside what the kernel takes (>= 0): not written" in plan.notes
    assert "BE tier: /dev/vdb: ioWeightPercent 0 is outside what the kernel takes ([1, 100]): not written" in plan.notes
    assert "BE /dev/vdb: readLatencyPercent 101 is outside what the kernel takes ([0, 100]): not written" in plan.notes


def test_a_block_of_an_unknown_type_is_skipped_with_a_reason(tmp_path: Any) -> None:
    device = resolve_block_device(str(tmp_path), "nvme0", "nvme")
    assert device.devno == "" and device.problem == "block type 'nvme' is not supported (koordlet skips it too)"


def test_an_empty_cpu_policy_applies_group_identity() -> None:
    # koordlet: policy nil, "" or groupIdentity -> the bvt rule applies the classes' groupIdentity (LS 2, BE -1)
    spec = spec_from_json({"resourceQOSStrategy": {"policies": {"cpuPolicy": ""},
                                                   "lsClass": {"cpuQOS": {"enable": True}},
                                                   "beClass": {"cpuQOS": {"enable": True}}}}, origin="n").spec
    rule = bvt_rule(spec)
    assert rule.pod_value("LS", "Burstable") == 2 and rule.pod_value("BE", "BestEffort") == -1


SYSCTL = SysctlFacts(mem_total_kib=16_000_000, values=MappingProxyType({
    "vm.min_free_kbytes": 67584, "vm.watermark_scale_factor": 10, "memcg_reaper.reap_background": None}))


@pytest.mark.parametrize(
    ("strategy", "min_free", "watermark", "note"),
    [
        # 16 000 000 KiB x 20000 / 10000 = 32 000 000 KiB: above koordlet's 10 GiB (10 485 760 KiB): not written
        ({"minFreeKbytesFactor": 20000, "watermarkScaleFactor": 150}, None, "150",
         "vm.min_free_kbytes 32000000"),
        # 16 000 000 x 6 / 10000 = 9600 KiB: below 10 MiB (10240 KiB)
        ({"minFreeKbytesFactor": 6, "watermarkScaleFactor": 150}, None, "150", "vm.min_free_kbytes 9600"),
        # 16 000 000 x 6554 / 10000 = 10 486 374 KiB: just above 10 GiB
        ({"minFreeKbytesFactor": 6554}, None, "150", "outside koordlet's range [10240, 10485760]"),
        # 16 000 000 x 6553 / 10000 = 10 484 800 KiB: inside; watermark 401 is above koordlet's 400
        ({"minFreeKbytesFactor": 6553, "watermarkScaleFactor": 401}, "10484800", None,
         "vm.watermark_scale_factor 401"),
        ({"minFreeKbytesFactor": 100, "watermarkScaleFactor": 400}, "160000", "400", None),
    ],
)
def test_system_config_writes_only_what_koordlet_would(strategy: dict[str, Any], min_free: str | None,
                                                       watermark: str | None, note: str | None) -> None:
    snap = spec_snapshot({"systemStrategy": strategy}, kernel=kernel(read=("sysctl",), sysctl=SYSCTL),
                         node=node(memory=16_000_000 * 1024))
    plan = SystemConfig().plan(snap, None)
    files = {f.path: f.value for f in plan.files}
    assert files.get("vm/min_free_kbytes") == min_free
    assert files.get("vm/watermark_scale_factor") == watermark
    if note is None:
        assert not [n for n in plan.notes if "koordlet's range" in n], plan.notes
    else:
        assert [n for n in plan.notes if note in n], plan.notes
