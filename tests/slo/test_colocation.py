"""colocation-config: koordinator's defaults, one error per bad field, resolution for a node (first matching
nodeConfig, enable AND, the colocation-strategy annotation, the reclaim-ratio labels), Go-like key matching and
the NodeMetric spec koord-manager renders. Facts: /work/notes/koord-capacity-facts.md §1-2."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hookserver.errors import ConfigError
from hookserver.slo import parse_slo_configmap, parse_slo_document
from hookserver.slo.colocation import (
    ANNOTATION_COLOCATION_STRATEGY,
    COLOCATION_KEY,
    ColocationConfig,
    ColocationStrategy,
    ResolvedColocation,
    default_colocation,
    node_metric_spec,
    parse_colocation_config,
)

ANN = ANNOTATION_COLOCATION_STRATEGY
CPU_RATIO = "node.koordinator.sh/cpu-reclaim-ratio"
MEM_RATIO = "node.koordinator.sh/memory-reclaim-ratio"
MID_CPU_RATIO = "node.koordinator.sh/mid-static-cpu-reserved-ratio"
MID_MEM_RATIO = "node.koordinator.sh/mid-static-memory-reserved-ratio"

# DefaultColocationStrategy (pkg/util/sloconfig/colocation_config.go:49-81), facts §1.1.
KOORDINATOR_DEFAULTS: dict[str, Any] = {
    "enable": False,
    "metricAggregateDurationSeconds": 300,
    "metricReportIntervalSeconds": 60,
    "metricAggregatePolicy": {"durations": ["5m", "10m", "30m"]},
    "metricMemoryCollectPolicy": "usageWithoutPageCache",
    "cpuReclaimThresholdPercent": 60,
    "cpuCalculatePolicy": "usage",
    "memoryReclaimThresholdPercent": 65,
    "memoryCalculatePolicy": "usage",
    "degradeTimeMinutes": 15,
    "updateTimeThresholdSeconds": 300,
    "resourceDiffThreshold": 0.1,
    "midCPUThresholdPercent": 100,
    "midMemoryThresholdPercent": 100,
    "midUnallocatedPercent": 0,
    "midStaticCPUReservedPercent": 0,
    "midStaticMemoryReservedPercent": 0,
}


def parse(doc: dict[str, Any]) -> ColocationConfig:
    problems: list[str] = []
    config = parse_colocation_config(doc, origin="cm", problems=problems)
    assert not problems, problems
    assert config is not None
    return config


def problems_of(doc: Any) -> list[str]:
    problems: list[str] = []
    config = parse_colocation_config(doc, origin="cm", problems=problems)
    assert (config is None) == bool(problems)
    return problems


def selector(**labels: str) -> dict[str, Any]:
    return {"matchLabels": labels}


# -- defaults ----------------------------------------------------------------------------------------------


def test_every_default_is_koordinators() -> None:
    strategy = ColocationStrategy()
    assert strategy.to_json() == KOORDINATOR_DEFAULTS
    # koordinator leaves these nil: the dynamic mid mode applies and batch has no threshold cap.
    assert strategy.mid_reclaim_mode is None
    assert strategy.batch_cpu_threshold_percent is None and strategy.batch_memory_threshold_percent is None


@pytest.mark.parametrize("raw", ["", "  ", "{}", "null"])
def test_an_empty_key_is_the_full_default_config_colocation_off(raw: str) -> None:
    document = parse_slo_document({"kind": "ConfigMap", "data": {COLOCATION_KEY: raw}}, origin="cm")
    resolved = document.colocation({"any": "label"}, {})
    assert resolved.enabled is False
    assert resolved.strategy.to_json() == KOORDINATOR_DEFAULTS


def test_a_document_without_the_key_resolves_to_the_defaults() -> None:
    for doc in ({"kind": "ConfigMap", "data": {"resource-threshold-config": "{}"}},
                {"kind": "NodeSLO", "spec": {}}):
        resolved = parse_slo_document(doc, origin="x").colocation({}, {})
        assert resolved.enabled is False and resolved.strategy == ColocationStrategy()
    assert default_colocation().layers == ("default",) and default_colocation().notes == ()


def test_set_fields_keep_the_others_at_their_defaults() -> None:
    resolved = parse({"enable": True, "cpuReclaimThresholdPercent": 70, "batchCPUThresholdPercent": 80}).resolve({})
    expected = {**KOORDINATOR_DEFAULTS, "enable": True, "cpuReclaimThresholdPercent": 70,
                "batchCPUThresholdPercent": 80}
    assert resolved.enabled is True and resolved.strategy.to_json() == expected


# -- validation --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("doc", "path", "value"),
    [
        # koordinator types the policies and modes as strings: Go's encoding/json refuses anything else
        ({"cpuCalculatePolicy": 1}, "colocation-config.cpuCalculatePolicy", "1"),
        ({"memoryCalculatePolicy": ["usage"]}, "colocation-config.memoryCalculatePolicy", ""),
        ({"midReclaimMode": True}, "colocation-config.midReclaimMode", "True"),
        ({"metricMemoryCollectPolicy": ""}, "colocation-config.metricMemoryCollectPolicy", "''"),
        ({"cpuReclaimThresholdPercent": 2**63}, "colocation-config.cpuReclaimThresholdPercent", str(2**63)),
        ({"resourceDiffThreshold": 0}, "colocation-config.resourceDiffThreshold", "0"),
        ({"resourceDiffThreshold": 1.5}, "colocation-config.resourceDiffThreshold", "1.5"),
        ({"memoryReclaimThresholdPercent": -1}, "colocation-config.memoryReclaimThresholdPercent", "-1"),
        ({"cpuReclaimThresholdPercent": -1}, "colocation-config.cpuReclaimThresholdPercent", "-1"),
        ({"midCPUThresholdPercent": 101}, "colocation-config.midCPUThresholdPercent", "101"),
        ({"midMemoryThresholdPercent": -1}, "colocation-config.midMemoryThresholdPercent", "-1"),
        ({"midUnallocatedPercent": 150}, "colocation-config.midUnallocatedPercent", "150"),
        ({"midStaticCPUReservedPercent": -5}, "colocation-config.midStaticCPUReservedPercent", "-5"),
        ({"midStaticMemoryReservedPercent": 101}, "colocation-config.midStaticMemoryReservedPercent", "101"),
        ({"batchCPUThresholdPercent": -1}, "colocation-config.batchCPUThresholdPercent", "-1"),
        ({"metricAggregateDurationSeconds": 0}, "colocation-config.metricAggregateDurationSeconds", "0"),
        ({"metricReportIntervalSeconds": 0}, "colocation-config.metricReportIntervalSeconds", "0"),
        ({"degradeTimeMinutes": 0}, "colocation-config.degradeTimeMinutes", "0"),
        ({"updateTimeThresholdSeconds": -3}, "colocation-config.updateTimeThresholdSeconds", "-3"),
        ({"metricAggregatePolicy": {"durations": ["5m", "fivem"]}},
         "colocation-config.metricAggregatePolicy.durations[1]", "'fivem'"),
        ({"metricAggregatePolicy": {"durations": ["0s"]}},
         "colocation-config.metricAggregatePolicy.durations[0]", "'0s'"),
        ({"nodeConfigs": [{"name": "a", "nodeSelector": {}}]}, "colocation-config.nodeConfigs[0].nodeSelector", ""),
        ({"nodeConfigs": [{"name": "a", "cpuReclaimThresholdPercent": 50}]},
         "colocation-config.nodeConfigs[0].nodeSelector", ""),
        ({"nodeConfigs": [{"nodeSelector": {"matchExpressions": [{"key": "k", "operator": "In"}]}}]},
         "colocation-config.nodeConfigs[0].nodeSelector.matchExpressions[0]", ""),
        ({"nodeConfigs": [{"nodeSelector": selector(a="b"), "cpuReclaimThresholdPercent": -1}]},
         "colocation-config.nodeConfigs[0].cpuReclaimThresholdPercent", "-1"),
        ({"nodeConfigs": "all"}, "colocation-config.nodeConfigs", "str"),
        ({"nodeConfigs": {"nodeSelector": selector(a="b")}}, "colocation-config.nodeConfigs", "dict"),
        ({"nodeConfigs": {}}, "colocation-config.nodeConfigs", "dict"),
        ({"nodeConfigs": [7]}, "colocation-config.nodeConfigs[0]", "int"),
    ],
)
def test_one_clear_error_per_bad_field(doc: dict[str, Any], path: str, value: str) -> None:
    problems = problems_of(doc)
    assert len(problems) == 1, problems
    assert problems[0].startswith(path + ":"), problems
    assert value in problems[0].removeprefix(path), problems


@pytest.mark.parametrize(
    ("doc", "path"),
    [
        # Go's encoding/json refuses these types outright (koord-manager keeps its previous config then); a
        # string "true" must never switch colocation on here.
        ({"enable": "true"}, "colocation-config.enable"),
        ({"enable": 1}, "colocation-config.enable"),
        ({"cpuReclaimThresholdPercent": "60"}, "colocation-config.cpuReclaimThresholdPercent"),
        ({"cpuReclaimThresholdPercent": 60.5}, "colocation-config.cpuReclaimThresholdPercent"),
        ({"degradeTimeMinutes": True}, "colocation-config.degradeTimeMinutes"),
        ({"resourceDiffThreshold": "0.1"}, "colocation-config.resourceDiffThreshold"),
        ({"resourceDiffThreshold": True}, "colocation-config.resourceDiffThreshold"),
        ({"metricAggregatePolicy": {"durations": [300]}}, "colocation-config.metricAggregatePolicy.durations[0]"),
    ],
)
def test_wrong_json_types_are_refused_as_go_refuses_them(doc: dict[str, Any], path: str) -> None:
    problems = problems_of(doc)
    assert len(problems) == 1 and problems[0].startswith(path + ":"), problems


def test_integers_are_fine_where_go_has_a_float() -> None:
    assert parse({"resourceDiffThreshold": 1}).resolve({}).strategy.resource_diff_threshold == 1.0


def test_every_problem_of_the_document_is_reported_together() -> None:
    doc = {
        "cpuCalculatePolicy": 7,
        "resourceDiffThreshold": 0,
        "nodeConfigs": [
            {"name": "ok", "nodeSelector": selector(pool="a"), "midCPUThresholdPercent": 50},
            {"name": "no-selector", "enable": True},
            {"name": "bad", "nodeSelector": selector(pool="b"), "metricAggregatePolicy": {"durations": ["1x"]}},
        ],
    }
    problems = problems_of(doc)
    assert [p.split(": ")[0] for p in problems] == [
        "colocation-config.cpuCalculatePolicy", "colocation-config.resourceDiffThreshold",
        "colocation-config.nodeConfigs[1].nodeSelector",
        "colocation-config.nodeConfigs[2].metricAggregatePolicy.durations[0]",
    ], problems
    with pytest.raises(ConfigError) as info:
        parse_slo_configmap({COLOCATION_KEY: json.dumps(doc)}, origin="configmap koordinator-system/slo")
    message = str(info.value)
    assert message.startswith("configmap koordinator-system/slo: invalid SLO configuration: ")
    for problem in problems:
        assert problem in message


def test_a_colocation_problem_fails_the_whole_configmap_with_the_other_keys() -> None:
    data = {COLOCATION_KEY: json.dumps({"cpuReclaimThresholdPercent": -1}),
            "resource-threshold-config": json.dumps({"clusterStrategy": {"enable": "yes please"}}),
            "cpu-burst-config": "{}"}
    with pytest.raises(ConfigError) as info:
        parse_slo_configmap(data, origin="cm")
    assert "colocation-config.cpuReclaimThresholdPercent" in str(info.value)
    assert "resource-threshold-config.clusterStrategy.enable" in str(info.value)


def test_not_json_names_the_key() -> None:
    with pytest.raises(ConfigError, match=r"cm: invalid SLO configuration: colocation-config: not valid JSON"):
        parse_slo_configmap({COLOCATION_KEY: "{enable: true,"}, origin="cm")
    with pytest.raises(ConfigError, match=r"colocation-config: must be a JSON object, got list"):
        parse_slo_configmap({COLOCATION_KEY: "[1]"}, origin="cm")


# -- nodeConfigs -------------------------------------------------------------------------------------------


NODE_CONFIGS = {
    "enable": True,
    "cpuReclaimThresholdPercent": 60,
    "memoryReclaimThresholdPercent": 65,
    "nodeConfigs": [
        {"name": "gpu", "nodeSelector": selector(pool="gpu"), "cpuReclaimThresholdPercent": 40},
        {"name": "big", "nodeSelector": {"matchExpressions": [{"key": "size", "operator": "In",
                                                                "values": ["big"]}]},
         "cpuReclaimThresholdPercent": 80, "memoryReclaimThresholdPercent": 80},
        {"nodeSelector": selector(pool="gpu"), "memoryReclaimThresholdPercent": 10},
    ],
}


def test_the_first_matching_node_config_wins_over_the_cluster() -> None:
    config = parse(NODE_CONFIGS)
    plain = config.resolve({"pool": "cpu"})
    assert (plain.strategy.cpu_reclaim_threshold_percent, plain.strategy.memory_reclaim_threshold_percent) == (60, 65)
    assert plain.layers == ("cm: colocation-config cluster",)

    gpu = config.resolve({"pool": "gpu", "size": "big"})  # matches all three: the first one wins
    assert gpu.strategy.cpu_reclaim_threshold_percent == 40
    assert gpu.strategy.memory_reclaim_threshold_percent == 65  # not set by "gpu": the cluster's, not "big"'s
    assert gpu.layers == ("cm: colocation-config cluster", "colocation-config nodeConfigs[gpu]")

    big = config.resolve({"pool": "cpu", "size": "big"})
    assert (big.strategy.cpu_reclaim_threshold_percent, big.strategy.memory_reclaim_threshold_percent) == (80, 80)
    assert big.layers[-1] == "colocation-config nodeConfigs[big]"


def test_an_unnamed_node_config_is_named_by_its_index() -> None:
    config = parse({"nodeConfigs": [{"nodeSelector": selector(a="1")}, {"nodeSelector": selector(b="1")}]})
    assert config.resolve({"b": "1"}).layers[-1] == "colocation-config nodeConfigs[1]"


_PERCENT_FIELDS = ("cpuReclaimThresholdPercent", "memoryReclaimThresholdPercent", "midCPUThresholdPercent")
_partial = st.dictionaries(st.sampled_from(_PERCENT_FIELDS), st.integers(0, 100), max_size=3)
_pools = st.sampled_from(["a", "b", "c"])


@settings(max_examples=200, deadline=None)
@given(cluster=_partial, entries=st.lists(st.tuples(_pools, _partial), max_size=4), pool=_pools)
def test_merge_property_default_under_cluster_under_first_match(
    cluster: dict[str, int], entries: list[tuple[str, dict[str, int]]], pool: str
) -> None:
    doc = {**cluster, "nodeConfigs": [{"nodeSelector": selector(pool=p), **fields} for p, fields in entries]}
    resolved = parse(doc).resolve({"pool": pool})
    first = next((fields for p, fields in entries if p == pool), {})
    got = resolved.strategy.to_json()
    for wire in _PERCENT_FIELDS:
        assert got[wire] == first.get(wire, cluster.get(wire, KOORDINATOR_DEFAULTS[wire])), wire
    # fields nobody sets stay at koordinator's defaults
    assert got["degradeTimeMinutes"] == 15 and got["metricAggregatePolicy"] == {"durations": ["5m", "10m", "30m"]}
    matched = [i for i, (p, _) in enumerate(entries) if p == pool]
    assert len(resolved.layers) == (2 if matched else 1)
    if matched:
        assert resolved.layers[1] == f"colocation-config nodeConfigs[{matched[0]}]"


def test_a_node_configs_durations_replace_the_clusters_list() -> None:
    config = parse({"metricAggregatePolicy": {"durations": ["1m", "2m"]},
                    "nodeConfigs": [{"nodeSelector": selector(a="b"), "metricAggregatePolicy": {"durations": ["7m"]}}]})
    assert config.resolve({"a": "b"}).strategy.metric_aggregate_policy.durations == ("7m",)
    assert config.resolve({}).strategy.metric_aggregate_policy.durations == ("1m", "2m")


@pytest.mark.parametrize(
    ("cluster", "node", "enabled"),
    [
        (True, None, True),
        (True, True, True),
        (True, False, False),   # a nodeConfig can switch colocation off for its nodes
        (False, True, False),   # but cannot switch on what the cluster switches off
        (False, None, False),
        (None, True, False),    # the cluster's default is off
    ],
)
def test_enabled_is_the_cluster_and_the_node(cluster: bool | None, node: bool | None, enabled: bool) -> None:
    entry: dict[str, Any] = {"nodeSelector": selector(pool="x")}
    if node is not None:
        entry["enable"] = node
    doc: dict[str, Any] = {"nodeConfigs": [entry]}
    if cluster is not None:
        doc["enable"] = cluster
    resolved = parse(doc).resolve({"pool": "x"})
    assert resolved.enabled is enabled
    assert resolved.strategy.enable is (node if node is not None else bool(cluster))


# -- the node's annotation and labels ---------------------------------------------------------------------


def test_the_annotation_overrides_the_node_config() -> None:
    config = parse(NODE_CONFIGS)
    resolved = config.resolve({"pool": "gpu"}, {ANN: json.dumps({"cpuReclaimThresholdPercent": 25,
                                                                 "metricAggregatePolicy": {"durations": ["1m"]}})})
    assert resolved.strategy.cpu_reclaim_threshold_percent == 25
    assert resolved.strategy.memory_reclaim_threshold_percent == 65
    assert resolved.strategy.metric_aggregate_policy.durations == ("1m",)
    assert resolved.layers == ("cm: colocation-config cluster", "colocation-config nodeConfigs[gpu]",
                               f"node annotation {ANN}")
    assert resolved.notes == ()


def test_the_annotation_can_switch_a_node_off_but_not_on() -> None:
    on = parse({"enable": True})
    assert on.resolve({}, {ANN: '{"enable": false}'}).enabled is False
    off = parse({"enable": False})
    resolved = off.resolve({}, {ANN: '{"enable": true}'})
    assert resolved.enabled is False and resolved.strategy.enable is True


@pytest.mark.parametrize(
    ("raw", "note"),
    [
        ("{enable: true", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        ("null", "not a JSON object"),
        ('{"cpuReclaimThresholdPercent": -5}', "cpuReclaimThresholdPercent"),
        ('{"cpuCalculatePolicy": 3}', "cpuCalculatePolicy"),
        ('{"enable": "false"}', "enable"),
    ],
)
def test_a_bad_annotation_is_ignored_with_a_note(raw: str, note: str) -> None:
    config = parse({"enable": True, "cpuReclaimThresholdPercent": 55})
    resolved = config.resolve({}, {ANN: raw})
    assert resolved.enabled is True and resolved.strategy.cpu_reclaim_threshold_percent == 55
    assert resolved.layers == ("cm: colocation-config cluster",)
    (only,) = resolved.notes
    assert only.startswith(f"annotation {ANN} ignored") and note in only, only


def test_an_empty_annotation_is_no_annotation() -> None:
    resolved = parse({"enable": True}).resolve({}, {ANN: ""})
    assert resolved.notes == () and len(resolved.layers) == 1


@pytest.mark.parametrize(
    ("label", "text", "wire", "percent"),
    [
        (CPU_RATIO, "0.5", "cpuReclaimThresholdPercent", 50),
        (CPU_RATIO, "0.29", "cpuReclaimThresholdPercent", 28),  # Go: int64(0.29 * 100) == 28
        (CPU_RATIO, "0.57", "cpuReclaimThresholdPercent", 56),  # 56.99999999999999
        (CPU_RATIO, "1", "cpuReclaimThresholdPercent", 100),
        (CPU_RATIO, "0", "cpuReclaimThresholdPercent", 0),
        (MEM_RATIO, "0.7", "memoryReclaimThresholdPercent", 70),
        (MID_CPU_RATIO, "0.2", "midStaticCPUReservedPercent", 20),
        (MID_MEM_RATIO, "0.35", "midStaticMemoryReservedPercent", 35),
    ],
)
def test_ratio_labels_override_percents_like_go(label: str, text: str, wire: str, percent: int) -> None:
    config = parse({"enable": True, "nodeConfigs": [{"nodeSelector": selector(pool="x"), wire: 90}]})
    resolved = config.resolve({"pool": "x", label: text}, {ANN: json.dumps({wire: 91})})
    assert resolved.strategy.to_json()[wire] == percent
    assert resolved.layers[-1] == f"node label {label}={text}" and resolved.notes == ()


@pytest.mark.parametrize(
    ("text", "note"),
    [("half", "not a number"), ("0_5", "not a number"), ("-0.1", "must not be negative"),
     ("nan", "not a finite number"), ("inf", "not a finite number"), ("-Infinity", "not a finite number"),
     ("1e300", "out of range"), ("92233720368547758.08", "out of range")],
)
def test_a_bad_ratio_label_is_ignored_with_a_note_and_the_others_still_apply(text: str, note: str) -> None:
    config = parse({"enable": True, "cpuReclaimThresholdPercent": 55})
    resolved = config.resolve({CPU_RATIO: text, MEM_RATIO: "0.4", MID_CPU_RATIO: "0.1"})
    assert resolved.strategy.cpu_reclaim_threshold_percent == 55
    assert resolved.strategy.memory_reclaim_threshold_percent == 40
    assert resolved.strategy.mid_static_cpu_reserved_percent == 10
    (only,) = resolved.notes
    assert only.startswith(f"label {CPU_RATIO}={text!r} ignored") and note in only, only
    assert len(only) < 300, only  # a huge ratio is named, not printed as a 300-digit percent
    assert resolved.layers[1:] == (f"node label {MEM_RATIO}=0.4", f"node label {MID_CPU_RATIO}=0.1")


def test_labels_override_the_annotation_and_the_annotation_the_node_config() -> None:
    config = parse({"enable": True, "nodeConfigs": [{"nodeSelector": selector(pool="x"),
                                                     "cpuReclaimThresholdPercent": 30,
                                                     "memoryReclaimThresholdPercent": 30,
                                                     "midUnallocatedPercent": 30}]})
    resolved = config.resolve({"pool": "x", CPU_RATIO: "0.9"},
                              {ANN: json.dumps({"cpuReclaimThresholdPercent": 50, "memoryReclaimThresholdPercent": 50})})
    s = resolved.strategy
    assert (s.cpu_reclaim_threshold_percent, s.memory_reclaim_threshold_percent, s.mid_unallocated_percent) == (
        90, 50, 30)


# -- Go-like key matching ----------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["cpuReclaimThresholdPercent", "CPUReclaimThresholdPercent",
                                 "cpureclaimthresholdpercent", "CPURECLAIMTHRESHOLDPERCENT"])
def test_keys_match_case_insensitively_everywhere(key: str) -> None:
    config = parse({"Enable": True, key: 10, "NodeConfigs": [
        {"Name": "x", "NodeSelector": selector(pool="x"), key: 20, "MetricAggregatePolicy": {"Durations": ["2m"]}}]})
    assert config.resolve({}).strategy.cpu_reclaim_threshold_percent == 10
    on_x = config.resolve({"pool": "x"})
    assert on_x.enabled and on_x.strategy.cpu_reclaim_threshold_percent == 20
    assert on_x.strategy.metric_aggregate_policy.durations == ("2m",)
    assert on_x.layers[-1] == "colocation-config nodeConfigs[x]"
    # the profile keys are not strategy fields: nothing unknown leaks into the strategy
    assert set(on_x.strategy.to_json()) == set(KOORDINATOR_DEFAULTS)
    assert config.resolve({}, {ANN: json.dumps({key: 30})}).strategy.cpu_reclaim_threshold_percent == 30


def test_unknown_keys_are_kept_not_refused() -> None:
    """A newer koordinator field (or `extensions`) must not fail the document."""
    resolved = parse({"enable": True, "extensions": {"x": 1}, "someFutureField": 3}).resolve({})
    assert resolved.enabled and resolved.strategy.to_json()["someFutureField"] == 3


# -- the NodeMetric spec -----------------------------------------------------------------------------------


def test_node_metric_spec_renders_the_strategy_when_colocation_is_on() -> None:
    config = parse({"enable": True, "metricAggregateDurationSeconds": 120, "metricReportIntervalSeconds": 30,
                    "metricAggregatePolicy": {"durations": ["90s", "1h", "15m"]},
                    "metricMemoryCollectPolicy": "usageWithHotPageCache"})
    assert node_metric_spec(config.resolve({})) == {"metricCollectPolicy": {
        "aggregateDurationSeconds": 120, "reportIntervalSeconds": 30,
        "nodeAggregatePolicy": {"durations": ["1m30s", "1h0m0s", "15m0s"]},
        "nodeMemoryCollectPolicy": "usageWithHotPageCache"}}


DEFAULT_SPEC = {"metricCollectPolicy": {
    "aggregateDurationSeconds": 300, "reportIntervalSeconds": 60,
    "nodeAggregatePolicy": {"durations": ["5m0s", "10m0s", "30m0s"]},
    "nodeMemoryCollectPolicy": "usageWithoutPageCache"}}


def test_node_metric_spec_is_the_default_when_colocation_is_off_for_the_node() -> None:
    doc = {"enable": True, "metricReportIntervalSeconds": 30,
           "nodeConfigs": [{"nodeSelector": selector(pool="off"), "enable": False}]}
    config = parse(doc)
    assert node_metric_spec(config.resolve({}))["metricCollectPolicy"]["reportIntervalSeconds"] == 30
    assert node_metric_spec(config.resolve({"pool": "off"})) == DEFAULT_SPEC
    assert node_metric_spec(parse({**doc, "enable": False}).resolve({})) == DEFAULT_SPEC
    assert node_metric_spec(default_colocation()) == DEFAULT_SPEC


def test_describe_is_json_and_says_everything() -> None:
    resolved = parse(NODE_CONFIGS).resolve({"pool": "gpu", CPU_RATIO: "x"})
    described = json.loads(json.dumps(resolved.describe(), allow_nan=False))
    assert described["enabled"] is True and described["strategy"]["cpuReclaimThresholdPercent"] == 40
    assert described["layers"] == list(resolved.layers) and described["notes"] == list(resolved.notes)


def test_resolutions_compare_by_value() -> None:
    """SLOState publishes a colocation only when it changed: equal inputs give equal results."""
    config = parse(NODE_CONFIGS)
    a, b = config.resolve({"pool": "gpu"}), config.resolve({"pool": "gpu", "other": "label"})
    assert isinstance(a, ResolvedColocation) and a == b and a is not b
    assert a != config.resolve({"pool": "cpu"})
    assert a != config.resolve({"pool": "gpu"}, {ANN: "x"})  # the same strategy, but a note
