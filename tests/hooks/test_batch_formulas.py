"""The batchresource formula table, including the reference §8 cases (#696, #1222, #2384)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hookserver.hooks import ContainerRequest, HookRegistry, PodRequest, Stage, run_stage
from hookserver.hooks.plugins import BatchResourcePlugin
from hookserver.cgroupmath import (
    milli_cpu_to_quota,
    milli_cpu_to_shares,
    shares_to_weight,
    weight_to_shares,
)
from hookserver.slo import NodeSLOSpec
from hookserver.store import NodeRecord, StateStore
from hookserver.view import NodeView
from tests.reference_example import SPEC_KEY as SPEC
from tests.reference_example import WORKED_SPEC_JSON

BE = {"koordinator.sh/qosClass": "BE"}


def spec(containers: dict[str, dict[str, dict[str, str]]]) -> dict[str, str]:
    return {SPEC: json.dumps({"containers": containers})}


WORKED = {SPEC: WORKED_SPEC_JSON}


@pytest.mark.parametrize(
    ("milli", "shares", "quota"),
    [
        (-5, 2, -1),
        (0, 2, -1),
        (1, 2, 1000),  # #696: quota floor 1000
        (8, 8, 1000),  # #2384: batch-cpu "8" is 8 milli-cores, not 8 cores
        (9, 9, 1000),
        (10, 10, 1000),
        (11, 11, 1100),
        (500, 512, 50000),
        (1000, 1024, 100000),
        (1500, 1536, 150000),
        (256000, 262144, 25600000),
        (300000, 262144, 30000000),  # shares clamp at 262144
    ],
)
def test_formula_table(milli: int, shares: int, quota: int) -> None:
    assert milli_cpu_to_shares(milli) == shares
    assert milli_cpu_to_quota(milli) == quota


@given(st.integers(min_value=-10**6, max_value=10**9))
def test_shares_and_quota_bounds(milli: int) -> None:
    shares = milli_cpu_to_shares(milli)
    quota = milli_cpu_to_quota(milli)
    assert 2 <= shares <= 262144
    assert quota == -1 or quota >= 1000
    assert (quota == -1) == (milli <= 0)


@given(st.integers(min_value=2, max_value=262144))
def test_weight_in_range_and_roundtrip_close(shares: int) -> None:
    weight = shares_to_weight(shares)
    assert 1 <= weight <= 10000
    # The inverse lands within one weight step of the original shares.
    assert abs(weight_to_shares(weight) - shares) <= 262142 // 9999 + 1


def run(stage: Stage, request: PodRequest | ContainerRequest, store: StateStore | None = None):  # type: ignore[no-untyped-def]
    registry = HookRegistry([BatchResourcePlugin()])
    return run_stage(registry, stage, request, NodeView.of((store or StateStore()).snapshot()))


def pod(annotations: dict[str, str], labels: dict[str, str] | None = None) -> PodRequest:
    return PodRequest("ns", "p", "uid-1", labels=BE if labels is None else labels, annotations=annotations)


def test_reference_worked_example_pod_and_containers() -> None:
    out = run(Stage.PRE_RUN_POD_SANDBOX, pod(WORKED))
    assert (out.resources.cpu_shares, out.resources.cpu_quota_us, out.resources.memory_limit_bytes) == (
        2048,
        300000,
        3221225472,
    )
    a = run(Stage.PRE_CREATE_CONTAINER, ContainerRequest(pod=pod(WORKED), name="a")).resources
    b = run(Stage.PRE_UPDATE_CONTAINER_RESOURCES, ContainerRequest(pod=pod(WORKED), name="b")).resources
    assert (a.cpu_shares, a.cpu_quota_us, a.memory_limit_bytes) == (512, 100000, 1073741824)
    assert (b.cpu_shares, b.cpu_quota_us, b.memory_limit_bytes) == (1536, 200000, 2147483648)
    assert [shares_to_weight(x) for x in (2048, 512, 1536)] == [79, 20, 59]


def test_pod_unlimited_when_a_container_lacks_limits_1222() -> None:
    annotations = spec(
        {
            "a": {"requests": {"kubernetes.io/batch-cpu": "500"}, "limits": {"kubernetes.io/batch-cpu": "1000"}},
            "b": {"requests": {"kubernetes.io/batch-cpu": "500"}},
        }
    )
    res = run(Stage.PRE_RUN_POD_SANDBOX, pod(annotations)).resources
    assert res.cpu_shares == 1024
    assert res.cpu_quota_us == -1
    assert res.memory_limit_bytes == -1


def test_pod_memory_unlimited_but_quota_set_when_only_memory_missing() -> None:
    annotations = spec({"a": {"limits": {"kubernetes.io/batch-cpu": "2"}}})
    res = run(Stage.PRE_RUN_POD_SANDBOX, pod(annotations)).resources
    assert res.cpu_shares == 2  # no requests at all
    assert res.cpu_quota_us == 1000  # 2 milli-cores hits the floor (#696)
    assert res.memory_limit_bytes == -1


def test_container_absent_from_spec_is_left_alone() -> None:
    out = run(Stage.PRE_CREATE_CONTAINER, ContainerRequest(pod=pod(WORKED), name="init"))
    assert out.resources.is_empty()
    assert "no entry" in out.outcomes[0].result.reason  # type: ignore[union-attr]


@pytest.mark.parametrize("labels", [{}, {"koordinator.sh/qosClass": "LS"}, {"koordinator.sh/qosClass": "LSR"}])
def test_non_be_pods_are_not_touched(labels: dict[str, str]) -> None:
    out = run(Stage.PRE_RUN_POD_SANDBOX, pod(WORKED, labels))
    assert out.resources.is_empty()
    assert not out.failed


def test_unknown_qos_class_is_an_error_naming_the_label() -> None:
    out = run(Stage.PRE_RUN_POD_SANDBOX, pod(WORKED, {"koordinator.sh/qosClass": "GOLD"}))
    assert out.failed
    err = out.first_error
    assert err is not None and "GOLD" in err.error and "qosClass" in err.error_field


def test_cfs_quota_suppress_makes_quota_unlimited() -> None:
    store = StateStore()
    store.set_node_slo(NodeSLOSpec.model_validate(
        {"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressPolicy": "cfsQuota"}}
    ))
    res = run(Stage.PRE_RUN_POD_SANDBOX, pod(WORKED), store).resources
    assert res.cpu_quota_us == -1
    assert res.cpu_shares == 2048


def test_cfs_quota_policy_with_threshold_strategies_off_keeps_the_quota() -> None:
    """The same rule as the CPU suppress reconciler: no suppress (enable false) means real pod quotas."""
    from hookserver.slo.model import NodeSLOSpec

    store = StateStore()
    store.set_node_slo(NodeSLOSpec.model_validate(
        {"resourceUsedThresholdWithBE": {"enable": False, "cpuSuppressPolicy": "cfsQuota"}}
    ))
    res = run(Stage.PRE_RUN_POD_SANDBOX, pod(WORKED), store).resources
    assert res.cpu_quota_us == 300000


def test_normalization_ratio_scales_quota_up() -> None:
    store = StateStore()
    store.set_node(NodeRecord(name="n", annotations={"node.koordinator.sh/cpu-normalization-ratio": "1.5"}))
    res = run(Stage.PRE_CREATE_CONTAINER, ContainerRequest(pod=pod(WORKED), name="a"), store).resources
    assert res.cpu_quota_us == 66667  # ceil(100000 / 1.5)


@pytest.mark.parametrize(
    ("annotation", "needle"),
    [
        ("{not json", "not valid JSON"),
        ("[]", "JSON object"),
        ('{"containers": []}', "containers"),
        ('{"containers": {"a": {"limits": {"kubernetes.io/batch-cpu": "-1"}}}}', "negative"),
        ('{"containers": {"a": {"limits": {"kubernetes.io/batch-cpu": "1.2.3"}}}}', "quantity"),
        ('{"containers": {"a": {"limits": {"kubernetes.io/batch-memory": true}}}}', "boolean"),
        ('{"containers": {"a": {"requests": "1"}}}', "requests"),
    ],
)
def test_malformed_annotations_fail_with_a_named_field(annotation: str, needle: str) -> None:
    out = run(Stage.PRE_RUN_POD_SANDBOX, pod({SPEC: annotation}))
    assert out.failed
    err = out.first_error
    assert err is not None
    assert needle in err.error
    assert err.error_field.startswith(f"annotations[{SPEC}]")


def test_memoized_decisions_never_cache_errors_or_ignore_a_rule_change() -> None:
    bad = pod({SPEC: '{"containers": {"a": {"limits": {"kubernetes.io/batch-cpu": "-5"}}}}'})
    for _ in range(2):
        assert run(Stage.PRE_CREATE_CONTAINER, ContainerRequest(pod=bad, name="a")).failed
    first = run(Stage.PRE_CREATE_CONTAINER, ContainerRequest(pod=pod(WORKED), name="a")).resources
    again = run(Stage.PRE_CREATE_CONTAINER, ContainerRequest(pod=pod(WORKED), name="a")).resources
    assert first == again and first.cpu_quota_us == 100000
    store = StateStore()
    store.set_node(NodeRecord(name="n", annotations={"node.koordinator.sh/cpu-normalization-ratio": "2"}))
    scaled = run(Stage.PRE_CREATE_CONTAINER, ContainerRequest(pod=pod(WORKED), name="a"), store).resources
    assert scaled.cpu_quota_us == 50000  # the same annotation under a new rule is decided again


@pytest.mark.parametrize(
    ("annotation", "path"),
    [
        ('{"containers": {"a": "x"}}', ".containers[a]"),
        ('{"containers": {"a": {"requests": "1"}}}', ".containers[a].requests"),
        ('{"containers": {"a": {"limits": ["1"]}}}', ".containers[a].limits"),
        ('{"containers": {"a": {"limits": {"kubernetes.io/batch-cpu": "-1"}}}}', ".containers[a].limits[kubernetes.io/batch-cpu]"),
        ('{"containers": {"b": {"requests": {"koordinator.sh/batch-memory": "x"}}}}',
         ".containers[b].requests[koordinator.sh/batch-memory]"),
    ],
)
def test_spec_errors_name_the_exact_json_path(annotation: str, path: str) -> None:
    """The path is spelled out only on an error now; it must read exactly as it did."""
    err = run(Stage.PRE_RUN_POD_SANDBOX, pod({SPEC: annotation})).first_error
    assert err is not None and err.error_field == f"annotations[{SPEC}]{path}"


def test_decision_inputs_are_each_entry_as_canonical_json() -> None:
    """The audit's inputs (encoded when read, no longer at parse time): every container entry as compact
    JSON with sorted keys, and the quota rule, at pod and container level."""
    entries = {
        "a": {"requests": {"kubernetes.io/batch-cpu": "500"}, "limits": {"kubernetes.io/batch-memory": "1Gi", "kubernetes.io/batch-cpu": "1000"}},
        "b": {"limits": {"kubernetes.io/batch-cpu": "250"}, "requests": {}},
    }
    canonical = {f"container[{name}]": json.dumps(e, sort_keys=True, separators=(",", ":")) for name, e in entries.items()}
    pod_out = run(Stage.PRE_RUN_POD_SANDBOX, pod(spec(entries))).outcomes[0].result
    ctr_out = run(Stage.PRE_CREATE_CONTAINER, ContainerRequest(pod=pod(spec(entries)), name="b")).outcomes[0].result
    assert pod_out is not None and ctr_out is not None
    assert dict(pod_out.inputs) == {**canonical, "quota_rule": "no quota rule"}
    assert dict(ctr_out.inputs) == {"container[b]": canonical["container[b]"], "quota_rule": "no quota rule"}
    assert pod_out.inputs["container[a]"] == canonical["container[a]"] and len(ctr_out.inputs) == 2
