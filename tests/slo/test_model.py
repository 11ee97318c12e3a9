"""The NodeSLO model: Koordinator's defaults, Go-like key matching, unknown fields, invalid values."""

from __future__ import annotations

import pytest

from hookserver.errors import ConfigError
from hookserver.slo import NodeSLOSpec, ResourceQOSStrategy, default_slo, parse_slo_document, spec_from_json


def test_defaults_are_koordinators() -> None:
    spec = NodeSLOSpec.model_validate({})
    t = spec.resource_used_threshold_with_be
    assert (t.enable, t.cpu_suppress_threshold_percent, t.cpu_suppress_policy) == (False, 65, "cpuset")
    assert (t.memory_evict_threshold_percent, t.cpu_evict_policy) == (70, "evictByRealLimit")
    assert t.memory_evict_lower_percent is None and t.effective_memory_evict_lower_percent() == 68
    q = spec.resource_qos_strategy
    assert (q.policies.cpu_policy, q.policies.net_qos_policy) == ("groupIdentity", "tc")
    gi = {name: getattr(q, name).cpu_qos.group_identity for name in ("lsr_class", "ls_class", "be_class",
                                                                      "system_class")}
    assert gi == {"lsr_class": 2, "ls_class": 2, "be_class": -1, "system_class": 0}
    assert q.ls_class.cpu_qos.core_expeller is True and q.be_class.cpu_qos.core_expeller is False
    assert (q.be_class.memory_qos.wmark_min_adj, q.ls_class.memory_qos.wmark_min_adj) == (50, -25)
    assert (q.be_class.memory_qos.wmark_ratio, q.be_class.memory_qos.wmark_scale_permill) == (95, 20)
    assert (q.be_class.resctrl_qos.cat_range_end_percent, q.ls_class.resctrl_qos.cat_range_end_percent) == (30, 100)
    assert all(not getattr(q, c).cpu_qos.enable and not getattr(q, c).memory_qos.enable
               and not getattr(q, c).resctrl_qos.enable and not getattr(q, c).blkio_qos.enable
               for c in ("lsr_class", "ls_class", "be_class", "system_class"))
    b = spec.cpu_burst_strategy
    assert (b.policy, b.cpu_burst_percent, b.cfs_quota_burst_percent, b.cfs_quota_burst_period_seconds,
            b.share_pool_threshold_percent) == ("none", 1000, 300, -1, 50)
    assert spec.system_strategy.total_network_bandwidth == "0"
    assert spec.host_applications == () and spec.extensions == {}
    assert q.for_class("LSE") is q.lsr_class and q.for_class("BE") is q.be_class and q.for_class("X") is None


def test_partial_class_keeps_its_own_defaults_and_camel_case_round_trips() -> None:
    spec = NodeSLOSpec.model_validate({"resourceQOSStrategy": {"beClass": {"memoryQOS": {"enable": True}}}})
    mem = spec.resource_qos_strategy.be_class.memory_qos
    assert mem.enable and mem.wmark_min_adj == 50 and mem.wmark_ratio == 95
    out = spec.to_json()
    assert out["resourceQOSStrategy"]["beClass"]["memoryQOS"]["wmarkMinAdj"] == 50
    assert NodeSLOSpec.model_validate(out) == spec
    # snake_case works too (populate_by_name), for Python callers
    assert NodeSLOSpec(resource_used_threshold_with_be={"enable": True}).resource_used_threshold_with_be.enable


def test_keys_match_case_insensitively_like_go() -> None:
    spec = NodeSLOSpec.model_validate({"resourceQOSStrategy": {"lsClass": {"cpuQoS": {"Enable": True}}},
                                       "ResourceUsedThresholdWithBE": {"CPUEvictTimeWindowSeconds": 60}})
    assert spec.resource_qos_strategy.ls_class.cpu_qos.enable
    assert spec.resource_qos_strategy.ls_class.cpu_qos.group_identity == 2
    assert spec.resource_used_threshold_with_be.cpu_evict_time_window_seconds == 60


def test_unknown_fields_are_kept_without_error() -> None:
    spec = NodeSLOSpec.model_validate({"futureStrategy": {"x": 1},
                                       "resourceUsedThresholdWithBE": {"newKnob": "v", "enable": True}})
    assert spec.model_extra == {"futureStrategy": {"x": 1}}
    out = spec.to_json()
    assert out["futureStrategy"] == {"x": 1} and out["resourceUsedThresholdWithBE"]["newKnob"] == "v"


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        ({"resourceUsedThresholdWithBE": {"cpuSuppressThresholdPercent": 101}},
         "spec.resourceUsedThresholdWithBE.cpuSuppressThresholdPercent"),
        ({"resourceUsedThresholdWithBE": {"cpuSuppressPolicy": 1}},
         "spec.resourceUsedThresholdWithBE.cpuSuppressPolicy"),
        ({"resourceUsedThresholdWithBE": {"memoryEvictThresholdPercent": 60, "memoryEvictLowerPercent": 65}},
         "memoryEvictLowerPercent (65) must not exceed"),
        ({"resourceQOSStrategy": {"beClass": {"cpuQOS": {"groupIdentity": 3}}}},
         "spec.resourceQOSStrategy.beClass.cpuQOS.groupIdentity"),
        ({"resourceQOSStrategy": {"lsClass": {"resctrlQOS": {"catRangeStartPercent": 80, "catRangeEndPercent": 20}}}},
         "spec.resourceQOSStrategy.lsClass.resctrlQOS"),
        ({"resourceQOSStrategy": {"beClass": {"blkioQOS": {"blocks": [{"name": "sda", "type": 7}]}}}},
         "spec.resourceQOSStrategy.beClass.blkioQOS.blocks[0].type"),
        ({"cpuBurstStrategy": {"cfsQuotaBurstPercent": 50}}, "spec.cpuBurstStrategy.cfsQuotaBurstPercent"),
        ({"systemStrategy": {"totalNetworkBandwidth": "10 Gbit"}}, "spec.systemStrategy.totalNetworkBandwidth"),
        ({"hostApplications": [{"name": "x", "cgroupPath": {"relativePath": "../../etc"}}]},
         "spec.hostApplications[0].cgroupPath.relativePath"),
        ({"hostApplications": [{"name": "a"}, {"name": "a"}]}, "duplicate host application name"),
        ({"resourceUsedThresholdWithBE": {"enable": "maybe"}}, "spec.resourceUsedThresholdWithBE.enable"),
    ],
)
def test_invalid_values_rejected_with_field_paths(spec: dict[str, object], path: str) -> None:
    with pytest.raises(ConfigError) as info:
        spec_from_json(spec, origin="nodeslo/n1")
    assert path in str(info.value) and str(info.value).startswith("nodeslo/n1:")


def test_spec_sources_name_only_the_parts_given() -> None:
    resolved = spec_from_json({"cpuBurstStrategy": {"policy": "auto"}}, origin="nodeslo/n1")
    assert resolved.sources["cpuBurstStrategy"] == "nodeslo/n1"
    assert resolved.sources["resourceQOSStrategy"] == "default"
    assert set(default_slo().sources.values()) == {"default"}


def test_documents_of_every_shape() -> None:
    nodeslo = parse_slo_document({"kind": "NodeSLO", "spec": {"resourceUsedThresholdWithBE": {"enable": True}}},
                                 origin="f")
    assert nodeslo.resolve({}).spec.resource_used_threshold_with_be.enable
    bare = parse_slo_document({"cpuBurstStrategy": {"policy": "auto"}}, origin="f")
    assert bare.resolve({}).spec.cpu_burst_strategy.policy == "auto"
    data_only = parse_slo_document({"cpu-burst-config": '{"clusterStrategy": {"policy": "auto"}}'}, origin="f")
    assert data_only.kind == "configmap" and data_only.resolve({}).spec.cpu_burst_strategy.policy == "auto"
    assert parse_slo_document(None, origin="f").resolve({}).spec == NodeSLOSpec.model_validate({})
    with pytest.raises(ConfigError, match="kind: expected ConfigMap or NodeSLO"):
        parse_slo_document({"kind": "Pod"}, origin="f")
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        parse_slo_document([1, 2], origin="f")


def test_resource_qos_strategy_alone_fills_every_class() -> None:
    strategy = ResourceQOSStrategy.model_validate({"lsrClass": None})
    assert strategy.lsr_class.cpu_qos.group_identity == 2 and strategy.system_class.cpu_qos.group_identity == 0
