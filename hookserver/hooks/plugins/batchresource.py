"""batchresource: cgroup values for best-effort pods from kubernetes.io/batch-cpu and batch-memory.

A BE pod that requests only extended resources is kube-QoS BestEffort, so the kubelet gives it
shares = 2, no quota and no memory limit. This hook computes what koordlet would (reference §4):
pod level from the sums over containers, container level from that container's entry.

The decision is a pure function of (annotation text, container name, quota rule), and a pod's
annotation is the same on every call for that pod (often for a whole workload), so decisions are
memoized: on the hot path a repeat call costs a dictionary lookup, not a JSON and quantity parse.
Errors are never cached (an exception does not enter an lru_cache).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator, Mapping
from types import MappingProxyType

from hookserver.cgroupmath import apply_quota_rule, milli_cpu_to_quota, milli_cpu_to_shares
from hookserver.hooks.context import LABEL_QOS_CLASS, ContainerRequest, PodRequest, QoSClass, Resources
from hookserver.hooks.outcome import HookResult
from hookserver.slo.threshold import ResourceThresholdStrategy
from hookserver.extended_resource_spec import (
    ANNOTATION_EXTENDED_RESOURCE_SPEC,
    ContainerBatchResources,
    parse_spec_text,
)
from hookserver.view import ANNOTATION_CPU_NORMALIZATION_RATIO, NodeView

__all__ = ["ANNOTATION_CPU_NORMALIZATION_RATIO", "BatchResourcePlugin", "QuotaRule", "quota_rule_from"]

# Texts longer than this are decided without the cache, which bounds it at 1024 x 16 KiB.
_CACHED_TEXT_BYTES = 16 * 1024
_NO_SPEC = HookResult.skip(f"BE pod without {ANNOTATION_EXTENDED_RESOURCE_SPEC}")
_GATE_OFF = HookResult.skip("feature gate BatchResource is off")
_NO_ENVS: Mapping[str, str] = MappingProxyType({})


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


def quota_rule_from(view: NodeView) -> QuotaRule:
    """The rule from the effective NodeSLO (BE CPU suppress by cfsQuota) and the node's normalization ratio."""
    suppress, ratio = _rule_inputs(view)
    return QuotaRule(cfs_quota_suppress=suppress, normalization_ratio=ratio)


def _rule_inputs(view: NodeView) -> tuple[bool, float | None]:
    # The same rule the CPU suppress reconciler follows (hookserver.slo.threshold), read from the store.
    threshold = view.node_slo.resource_used_threshold_with_be
    return threshold.suppress_policy_in_effect() == "cfsQuota", view.cpu_normalization_ratio


class BatchResourcePlugin:
    """koordlet's BatchResource runtime hook. With its gate off (`BatchResource=false`) it stays registered, so
    the stages it subscribes to (proxy registration, NRI event mask) do not change with the gate, and answers
    every call with no values: requests pass through untouched, and the audit says why."""

    name = "BatchResource"
    # koordlet's runtime-hook gate (pkg/koordlet/runtimehooks/config.go), on by default there.
    feature_gate = "BatchResource"
    # Decided from the pod's labels and spec annotation, the container's name, and the quota rule (NodeSLO,
    # the node's normalization ratio): never other pods, the container's id, annotations or env.
    pure_decision = True

    def __init__(self, *, enabled: bool = True) -> None:
        self.enabled = enabled

    def pre_run_pod_sandbox(self, request: PodRequest, view: NodeView) -> HookResult:
        if not self.enabled:
            return _GATE_OFF
        text = _be_spec_text(request.labels, request.annotations)
        if isinstance(text, HookResult):
            return text
        suppress, ratio = _rule_inputs(view)
        decide = _pod_decision_cached if len(text) <= _CACHED_TEXT_BYTES else _pod_decision
        return _idle_aware(decide(text, suppress, ratio), view)

    def pre_create_container(self, request: ContainerRequest, view: NodeView) -> HookResult:
        return self._container(request, view)

    def pre_update_container_resources(self, request: ContainerRequest, view: NodeView) -> HookResult:
        return self._container(request, view)

    def _container(self, request: ContainerRequest, view: NodeView) -> HookResult:
        if not self.enabled:
            return _GATE_OFF
        text = _be_spec_text(request.pod.labels, request.pod.annotations)
        if isinstance(text, HookResult):
            return text
        suppress, ratio = _rule_inputs(view)
        decide = _container_decision_cached if len(text) <= _CACHED_TEXT_BYTES else _container_decision
        return _idle_aware(decide(text, request.name, suppress, ratio), view)


def _idle_aware(result: HookResult, view: NodeView) -> HookResult:
    """While the NodeSLO chooses BE cpu.idle (GroupIdentity sets it on BE pods), BE shares are left alone: the
    kernel refuses cpu.shares on an idle group (koordinator#2732), and an idle group's weight is not used."""
    if not result.applied or result.resources.cpu_shares is None or not view.node_slo.resource_qos_strategy.be_sched_idle():
        return result
    return HookResult(
        resources=dataclasses.replace(result.resources, cpu_shares=None), envs=result.envs,
        reason=result.reason + "; shares left alone: BE cpu.idle chosen (cpuPolicy coreSched, schedIdle 1)",
        inputs=result.inputs,
    )


def _be_spec_text(labels: Mapping[str, str], annotations: Mapping[str, str]) -> str | HookResult:
    """The annotation text of a BE pod, or the skip result that says why there is nothing to do."""
    if QoSClass.from_labels(labels) is not QoSClass.BE:
        return _not_be(labels.get(LABEL_QOS_CLASS, ""))
    text = annotations.get(ANNOTATION_EXTENDED_RESOURCE_SPEC)
    if text is None:
        return _NO_SPEC
    return str(text)


@functools.lru_cache(maxsize=16)
def _not_be(qos_class: str) -> HookResult:
    return HookResult.skip("not a BE pod", qos_class=qos_class)


@functools.lru_cache(maxsize=256)
def _parsed(text: str) -> Mapping[str, ContainerBatchResources]:
    """A pod's spec, parsed once for its containers' decisions and its own (each decision is cached on its
    own key, so without this a pod's text was parsed once per container and once more for the pod; a cold
    NRI Synchronize spent most of its hook time there). Errors are not cached: each caller raises afresh."""
    return MappingProxyType(parse_spec_text(text))


def _container_decision(text: str, container: str, suppress: bool, ratio: float | None) -> HookResult:
    entry = (_parsed(text) if len(text) <= _CACHED_TEXT_BYTES else parse_spec_text(text)).get(container)
    if entry is None:
        return HookResult.skip(f"container {container!r} has no entry in the extended-resource spec")
    rule, described = _rule(suppress, ratio)
    shares = milli_cpu_to_shares(entry.cpu_request_milli if entry.cpu_request_milli > 0 else 0)
    base_quota = milli_cpu_to_quota(entry.cpu_limit_milli if entry.cpu_limit_milli > 0 else 0)
    quota = rule.apply(base_quota)
    memory = entry.memory_limit_bytes if entry.memory_limit_bytes > 0 else -1
    reason = (
        f"BE container: shares from batch-cpu request {entry.cpu_request_milli}m -> {shares}; "
        f"quota from batch-cpu limit {entry.cpu_limit_milli}m -> {base_quota} ({described}) -> {quota}; "
        f"memory from batch-memory limit -> {memory}"
    )
    # (resources, envs, applied, reason, inputs) and (shares, quota, period, memory): positional, the cheapest
    # calls (a cold Synchronize makes one decision a container).
    return HookResult(Resources(shares, quota, None, memory), _NO_ENVS, True, reason, SpecInputs((entry,), described))


@functools.lru_cache(maxsize=64)
def _rule(suppress: bool, ratio: float | None) -> tuple[QuotaRule, str]:
    """The rule for these inputs and its description, built once per rule, not once per decision (a cold
    Synchronize makes a decision for every distinct spec on the node)."""
    rule = QuotaRule(cfs_quota_suppress=suppress, normalization_ratio=ratio)
    return rule, rule.describe()


def _pod_decision(text: str, suppress: bool, ratio: float | None) -> HookResult:
    containers = list((_parsed(text) if len(text) <= _CACHED_TEXT_BYTES else parse_spec_text(text)).values())
    if not containers:
        return HookResult.skip("the extended-resource spec lists no container")
    return _pod_result(containers, *_rule(suppress, ratio))


_container_decision_cached = functools.lru_cache(maxsize=1024)(_container_decision)
_pod_decision_cached = functools.lru_cache(maxsize=1024)(_pod_decision)


def _pod_result(containers: list[ContainerBatchResources], rule: QuotaRule, described: str) -> HookResult:
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
        f"quota from {quota_why} -> {base_quota} ({described}) -> {quota}; memory from {memory_why}"
    )
    return HookResult(
        Resources(shares, quota, None, memory), _NO_ENVS, True, reason, SpecInputs(tuple(containers), described)
    )


class SpecInputs(Mapping[str, str]):
    """A decision's inputs: `container[<name>]` -> that container's spec entry as JSON, and `quota_rule`.

    Read only when someone looks at the audit, so the JSON is encoded then, once, not for every decision:
    a cold Synchronize decides every container of the node before it can answer, and encoding the entries
    there was a sixth of its hook time. Built twice by two racing readers, it is the same mapping.
    """

    __slots__ = ("_entries", "_map", "_rule")

    def __init__(self, entries: tuple[ContainerBatchResources, ...], rule: str) -> None:
        self._entries = entries
        self._rule = rule
        self._map: dict[str, str] | None = None

    def _built(self) -> dict[str, str]:
        built = self._map
        if built is None:
            built = {f"container[{entry.name}]": entry.raw for entry in self._entries}
            built["quota_rule"] = self._rule
            self._map = built
        return built

    def __getitem__(self, key: str) -> str:
        return self._built()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._built())

    def __len__(self) -> int:
        return len(self._built())

    def __repr__(self) -> str:
        return f"SpecInputs({self._built()!r})"
