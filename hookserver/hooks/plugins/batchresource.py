"""batchresource: cgroup values for best-effort pods from kubernetes.io/batch-cpu and batch-memory.

A BE pod that requests only extended resources is kube-QoS BestEffort, so the kubelet gives it
shares = 2, no quota and no memory limit. This hook computes what koordlet would (reference §4):
pod level from the sums over containers, container level from that container's entry.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from hookserver.hooks.context import ContainerRequest, PodRequest, QoSClass, Resources
from hookserver.hooks.outcome import HookResult
from hookserver.cgroupmath import (
    apply_quota_rule,
    milli_cpu_to_quota,
    milli_cpu_to_shares,
)
from hookserver.hooks.plugins.extended_resources import (
    ANNOTATION_EXTENDED_RESOURCE_SPEC,
    ContainerBatchResources,
    parse_extended_resource_spec,
)

__all__ = ["ANNOTATION_CPU_NORMALIZATION_RATIO", "BatchResourcePlugin", "QuotaRule", "quota_rule_from"]

ANNOTATION_CPU_NORMALIZATION_RATIO = "node.koordinator.sh/cpu-normalization-ratio"


class QuotaRule:
    """The inputs of the CFS-quota rule: NodeSLO's CPU-suppress policy and the node's normalization ratio."""

    __slots__ = ("cfs_quota_suppress", "normalization_ratio")

    def __init__(self, *, cfs_quota_suppress: bool = False, normalization_ratio: float | None = None) -> None:
        self.cfs_quota_suppress = cfs_quota_suppress
        self.normalization_ratio = normalization_ratio

    def apply(self, quota_us: int) -> int:
        return apply_quota_rule(
            quota_us, cfs_quota_suppress=self.cfs_quota_suppress, normalization_ratio=self.normalization_ratio
        )

    def describe(self) -> str:
        if self.cfs_quota_suppress:
            return "cfsQuota suppress on: quota unlimited"
        if self.normalization_ratio is not None and self.normalization_ratio > 1:
            return f"normalization ratio {self.normalization_ratio}"
        return "no quota rule"


def quota_rule_from(snapshot: Any) -> QuotaRule:
    """Read the rule from a store snapshot (NodeSLO and node annotations); missing parts mean defaults."""
    suppress = False
    slo = getattr(snapshot, "node_slo", None)
    threshold = getattr(slo, "resource_used_threshold_with_be", None)
    if threshold is not None and getattr(threshold, "enable", False):
        suppress = getattr(threshold, "cpu_suppress_policy", "cpuset") == "cfsQuota"
    ratio: float | None = None
    node = getattr(snapshot, "node", None)
    annotations = getattr(node, "annotations", None) or {}
    raw = annotations.get(ANNOTATION_CPU_NORMALIZATION_RATIO)
    if raw:
        try:
            ratio = float(raw)
        except ValueError:
            ratio = None
    return QuotaRule(cfs_quota_suppress=suppress, normalization_ratio=ratio)


class BatchResourcePlugin:
    name = "BatchResource"

    def pre_run_pod_sandbox(self, request: PodRequest, snapshot: Any) -> HookResult:
        if QoSClass.from_labels(request.labels) is not QoSClass.BE:
            return HookResult.skip("not a BE pod", qos_class=request.labels.get("koordinator.sh/qosClass", ""))
        spec = parse_extended_resource_spec(request.annotations)
        if not spec:
            return HookResult.skip(f"BE pod without {ANNOTATION_EXTENDED_RESOURCE_SPEC}")
        return _pod_result(list(spec.values()), quota_rule_from(snapshot))

    def pre_create_container(self, request: ContainerRequest, snapshot: Any) -> HookResult:
        return self._container(request, snapshot)

    def pre_update_container_resources(self, request: ContainerRequest, snapshot: Any) -> HookResult:
        return self._container(request, snapshot)

    def _container(self, request: ContainerRequest, snapshot: Any) -> HookResult:
        if QoSClass.from_labels(request.pod.labels) is not QoSClass.BE:
            return HookResult.skip("not a BE pod", qos_class=request.pod.labels.get("koordinator.sh/qosClass", ""))
        spec = parse_extended_resource_spec(request.pod.annotations)
        if spec is None:
            return HookResult.skip(f"BE pod without {ANNOTATION_EXTENDED_RESOURCE_SPEC}")
        entry = spec.get(request.name)
        if entry is None:
            return HookResult.skip(f"container {request.name!r} has no entry in the extended-resource spec")
        rule = quota_rule_from(snapshot)
        shares = milli_cpu_to_shares(entry.cpu_request_milli if entry.cpu_request_milli > 0 else 0)
        base_quota = milli_cpu_to_quota(entry.cpu_limit_milli if entry.cpu_limit_milli > 0 else 0)
        quota = rule.apply(base_quota)
        memory = entry.memory_limit_bytes if entry.memory_limit_bytes > 0 else -1
        reason = (
            f"BE container: shares from batch-cpu request {entry.cpu_request_milli}m -> {shares}; "
            f"quota from batch-cpu limit {entry.cpu_limit_milli}m -> {base_quota} ({rule.describe()}) -> {quota}; "
            f"memory from batch-memory limit -> {memory}"
        )
        return HookResult(
            resources=Resources(cpu_shares=shares, cpu_quota_us=quota, memory_limit_bytes=memory),
            reason=reason,
            inputs=MappingProxyType({f"container[{entry.name}]": entry.raw, "quota_rule": rule.describe()}),
        )


def _pod_result(containers: list[ContainerBatchResources], rule: QuotaRule) -> HookResult:
    request_sum = sum(c.cpu_request_milli for c in containers if c.cpu_request_milli > 0)
    shares = milli_cpu_to_shares(request_sum)
    if any(not c.has_limits or c.cpu_limit_milli <= 0 for c in containers):
        base_quota, quota_why = -1, "a container has no batch-cpu limit -> unlimited"
    else:
        limit_sum = sum(c.cpu_limit_milli for c in containers)
        base_quota, quota_why = milli_cpu_to_quota(limit_sum), f"sum of batch-cpu limits {limit_sum}m"
    quota = rule.apply(base_quota)
    if any(not c.has_limits or c.memory_limit_bytes <= 0 for c in containers):
        memory, memory_why = -1, "a container has no batch-memory limit -> unlimited"
    else:
        memory = sum(c.memory_limit_bytes for c in containers)
        memory_why = f"sum of batch-memory limits {memory}"
    reason = (
        f"BE pod: shares from sum of batch-cpu requests {request_sum}m -> {shares}; "
        f"quota from {quota_why} -> {base_quota} ({rule.describe()}) -> {quota}; memory from {memory_why}"
    )
    inputs = {f"container[{c.name}]": c.raw for c in containers}
    inputs["quota_rule"] = rule.describe()
    return HookResult(
        resources=Resources(cpu_shares=shares, cpu_quota_us=quota, memory_limit_bytes=memory),
        reason=reason,
        inputs=MappingProxyType(inputs),
    )
