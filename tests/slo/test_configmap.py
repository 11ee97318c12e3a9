"""The slo-controller-config ConfigMap: the full example, node-strategy merging (hypothesis), errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hookserver.errors import ConfigError
from hookserver.slo import class_defaults, parse_slo_configmap, read_slo_file

EXAMPLE = Path(__file__).with_name("slo-controller-config.yaml")
ANOLIS = {"kubernetes.io/kernel": "anolis"}


def test_full_example_on_a_plain_node_and_on_an_anolis_node() -> None:
    document = read_slo_file(str(EXAMPLE))
    assert document.kind == "configmap"
    assert document.describe()["ignored_keys"] == {}
    assert document.describe()["colocation_config"] is True

    plain = document.resolve({"kubernetes.io/kernel": "centos"})
    t = plain.spec.resource_used_threshold_with_be
    assert (t.enable, t.memory_evict_lower_percent, t.cpu_evict_be_usage_threshold_percent) == (False, 65, 90)
    assert (t.cpu_evict_be_satisfaction_lower_percent, t.cpu_evict_be_satisfaction_upper_percent) == (60, 90)
    assert plain.spec.resource_qos_strategy.be_class.memory_qos.wmark_ratio == 95
    assert plain.spec.cpu_burst_strategy.policy == "none"
    assert plain.spec.system_strategy.watermark_scale_factor == 150
    (app,) = plain.spec.host_applications
    assert (app.name, app.qos, app.cgroup_path.parent_dir if app.cgroup_path else "") == (
        "nginx", "LS", "host-latency-sensitive/")
    origin = f"file {EXAMPLE}"
    assert plain.sources["resourceUsedThresholdWithBE"] == f"{origin}: resource-threshold-config clusterStrategy"
    assert plain.sources["extensions"] == "default"

    anolis = document.resolve(ANOLIS)
    assert anolis.spec.resource_used_threshold_with_be.cpu_evict_be_usage_threshold_percent == 80
    assert anolis.spec.resource_used_threshold_with_be.memory_evict_lower_percent == 65  # from the cluster
    be = anolis.spec.resource_qos_strategy.be_class
    assert be.memory_qos.wmark_ratio == 90 and be.memory_qos.wmark_min_adj == 50 and be.cpu_qos.group_identity == -1
    burst = anolis.spec.cpu_burst_strategy
    assert (burst.policy, burst.cfs_quota_burst_percent, burst.cpu_burst_percent) == ("cfsQuotaBurstOnly", 400, 1000)
    assert anolis.sources["cpuBurstStrategy"] == f"{origin}: cpu-burst-config nodeStrategies[anolis]"


def _cm(key: str, doc: Any) -> dict[str, Any]:
    return {key: json.dumps(doc)}


def test_errors_name_key_and_path_and_cover_unmatched_node_strategies() -> None:
    data = {
        **_cm("resource-threshold-config", {"clusterStrategy": {"enable": True}, "nodeStrategies": [
            {"name": "x", "nodeSelector": {"matchLabels": {"never": "matches"}}, "cpuSuppressPolicy": 5}]}),
        **_cm("cpu-burst-config", {"clusterStrategy": {"sharePoolThresholdPercent": -1}}),
        "system-config": "{not json",
    }
    with pytest.raises(ConfigError) as info:
        parse_slo_configmap(data, origin="configmap ns/cm")
    message = str(info.value)
    assert message.startswith("configmap ns/cm: invalid SLO configuration")
    assert "resource-threshold-config.nodeStrategies[0].cpuSuppressPolicy" in message
    assert "cpu-burst-config.clusterStrategy.sharePoolThresholdPercent" in message
    assert "system-config: not valid JSON" in message


def test_bad_selectors_are_rejected_and_empty_selectors_never_match() -> None:
    bad = _cm("cpu-burst-config", {"nodeStrategies": [
        {"nodeSelector": {"matchExpressions": [{"key": "k", "operator": "In", "values": []}]}, "policy": "auto"}]})
    with pytest.raises(ConfigError, match=r"cpu-burst-config.nodeStrategies\[0\].nodeSelector.matchExpressions\[0\]"):
        parse_slo_configmap(bad, origin="o")
    empty = parse_slo_configmap(_cm("cpu-burst-config", {"nodeStrategies": [{"nodeSelector": {}, "policy": "auto"}]}),
                                origin="o")
    assert empty.resolve({"any": "label"}).spec.cpu_burst_strategy.policy == "none"


def test_unknown_keys_and_fields_are_ignored_or_kept() -> None:
    cm = parse_slo_configmap({"my-extension-config": "{}", **_cm("system-config", {
        "clusterStrategy": {"minFreeKbytesFactor": 200, "someNewKnob": 1}})}, origin="o")
    spec = cm.resolve({}).spec
    assert spec.system_strategy.min_free_kbytes_factor == 200
    assert spec.system_strategy.model_extra == {"someNewKnob": 1}
    assert cm.ignored == {"my-extension-config": "unknown key"}


# -- hypothesis: cluster strategy + node strategies by selector ------------------------------------
KEYS = ("zone", "pool", "kernel")
VALUES = ("a", "b")
labels_st = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=3)
expression_st = st.one_of(
    st.builds(lambda k, vs, op: {"key": k, "operator": op, "values": vs},
              st.sampled_from(KEYS), st.lists(st.sampled_from(VALUES), min_size=1, max_size=2, unique=True),
              st.sampled_from(["In", "NotIn"])),
    st.builds(lambda k, op: {"key": k, "operator": op}, st.sampled_from(KEYS),
              st.sampled_from(["Exists", "DoesNotExist"])),
)
selector_st = st.fixed_dictionaries({}, optional={"matchLabels": labels_st,
                                                  "matchExpressions": st.lists(expression_st, max_size=2)})
threshold_st = st.fixed_dictionaries({}, optional={
    "enable": st.booleans(),
    "cpuSuppressThresholdPercent": st.integers(0, 100),
    "cpuSuppressPolicy": st.sampled_from(["cpuset", "cfsQuota"]),
    "memoryEvictThresholdPercent": st.integers(0, 100),
    "cpuEvictTimeWindowSeconds": st.integers(0, 600),
})
memory_st = st.fixed_dictionaries({}, optional={
    "enable": st.booleans(), "minLimitPercent": st.integers(0, 100), "wmarkRatio": st.integers(0, 100),
    "wmarkMinAdj": st.integers(-25, 50)})
qos_st = st.fixed_dictionaries({}, optional={
    c: st.fixed_dictionaries({}, optional={"memoryQOS": memory_st}) for c in ("lsClass", "beClass")})


def _oracle_matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    if not selector.get("matchLabels") and not selector.get("matchExpressions"):
        return False  # Koordinator skips empty selectors
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op = expr["key"], expr["operator"]
        ok = {"In": key in labels and labels[key] in expr.get("values", []),
              "NotIn": key not in labels or labels[key] not in expr.get("values", []),
              "Exists": key in labels, "DoesNotExist": key not in labels}[op]
        if not ok:
            return False
    return True


def _winner(nodes: list[dict[str, Any]], labels: dict[str, str]) -> int | None:
    return next((i for i, n in enumerate(nodes) if _oracle_matches(n["nodeSelector"], labels)), None)


@settings(max_examples=200, deadline=None)
@given(cluster=threshold_st,
       nodes=st.lists(st.tuples(selector_st, threshold_st), max_size=4),
       labels=labels_st)
def test_threshold_merge_matches_oracle(cluster: dict[str, Any], nodes: list[tuple[dict[str, Any], dict[str, Any]]],
                                        labels: dict[str, str]) -> None:
    node_docs = [{"name": f"n{i}", "nodeSelector": sel, **body} for i, (sel, body) in enumerate(nodes)]
    cm = parse_slo_configmap(_cm("resource-threshold-config", {"clusterStrategy": cluster,
                                                               "nodeStrategies": node_docs}), origin="o")
    resolved = cm.resolve(labels)
    winner = _winner(node_docs, labels)
    expected = {"enable": False, "cpuSuppressThresholdPercent": 65, "cpuSuppressPolicy": "cpuset",
                "memoryEvictThresholdPercent": 70, "cpuEvictTimeWindowSeconds": None}
    expected.update(cluster)
    if winner is not None:
        expected.update(nodes[winner][1])
    got = resolved.spec.resource_used_threshold_with_be.model_dump(by_alias=True)
    assert {k: got[k] for k in expected} == expected
    where = f"nodeStrategies[n{winner}]" if winner is not None else "clusterStrategy"
    assert resolved.sources["resourceUsedThresholdWithBE"] == f"o: resource-threshold-config {where}"


@settings(max_examples=150, deadline=None)
@given(cluster=qos_st, nodes=st.lists(st.tuples(selector_st, qos_st), max_size=3), labels=labels_st)
def test_nested_qos_merge_matches_oracle(cluster: dict[str, Any], nodes: list[tuple[dict[str, Any], dict[str, Any]]],
                                         labels: dict[str, str]) -> None:
    node_docs = [{"name": f"n{i}", "nodeSelector": sel, **body} for i, (sel, body) in enumerate(nodes)]
    cm = parse_slo_configmap(_cm("resource-qos-config", {"clusterStrategy": cluster, "nodeStrategies": node_docs}),
                             origin="o")
    spec = cm.resolve(labels).spec.resource_qos_strategy
    winner = _winner(node_docs, labels)
    for wire, attr in (("lsClass", "ls_class"), ("beClass", "be_class")):
        expected = dict(class_defaults(wire)["memoryQOS"])
        expected.update((cluster.get(wire) or {}).get("memoryQOS") or {})
        if winner is not None:
            expected.update((nodes[winner][1].get(wire) or {}).get("memoryQOS") or {})
        got = getattr(spec, attr).memory_qos.model_dump(by_alias=True)
        assert {k: got[k] for k in expected} == expected
