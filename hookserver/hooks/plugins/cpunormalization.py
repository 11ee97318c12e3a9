"""CPUNormalization: LS pods' CFS quota scaled by the node's `node.koordinator.sh/cpu-normalization-ratio`.

koordlet's hook (`pkg/koordlet/runtimehooks/hooks/cpunormalization`): on a node whose CPUs are faster than the
cluster's base, koord-manager sets the ratio (> 1) and scales the node's allocatable up; every CPU-share pod
(koordinator class LS, or no class and no cpuset) then gets quota = ceil(limit quota / ratio), the rule the batch
quota already follows (`hookserver.cgroupmath.apply_quota_rule`), so a pod gets the same real CPU time on any node.
A ratio of 1 or less writes the unscaled quota (undoing an earlier scale); a node without the annotation is left
alone; a container or pod without a CPU limit has no quota to scale.

Only once the pod runs, and only from the reconciler (koordinator#2694): at PreRunPodSandbox a smaller pod quota
than its containers' unscaled quotas makes the runtime's container quota write fail (`invalid argument`), so the
proxy and NRI creations are left to the kubelet's values and the reconciler scales a running pod as one leveled
plan (containers shrink before their pod). The quota comes from the pod spec's limits, as koordlet's reconciler
builds it.

CPU burst also owns LS quota (koordinator#2306): while the CPUBurst gate is on, this hook stands down (the daemon
builds it disabled) and says so, as koordinator#3176 proposes, so the two never fight over one file; CPU burst then
applies the ratio itself (its base quota is this hook's normalized quota: qos.cpu.burst), so the pods are still
normalized with both gates on.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from hookserver.cgroupmath import apply_quota_rule, milli_cpu_to_quota
from hookserver.errors import QuantityError
from hookserver.hooks.context import ContainerRequest, PodRequest, QoSClass, RequestSource, Resources
from hookserver.hooks.outcome import HookResult
from hookserver.quantity import parse_quantity
from hookserver.store.records import PodRecord
from hookserver.topology import ResourceStatusError, pod_cpuset
from hookserver.view import NodeView

__all__ = ["CPUNormalizationPlugin"]

_OFF = HookResult.skip("feature gate CPUNormalization is off, or CPUBurst owns LS quota and normalizes it "
                       "(koordinator#2306)")
_NOT_RUNNING = HookResult.skip("scaled only once the pod runs, by the reconciler (koordinator#2694)")
_NO_RATIO = HookResult.skip("the node has no cpu-normalization-ratio")


class CPUNormalizationPlugin:
    name = "CPUNormalization"
    feature_gate = "CPUNormalization"
    pure_decision = False  # reads the pod's phase and spec from the store

    def __init__(self, *, enabled: bool = False) -> None:
        self.enabled = enabled

    def pre_run_pod_sandbox(self, request: PodRequest, view: NodeView) -> HookResult:
        gate = self._gate(request, view)
        if isinstance(gate, HookResult):
            return gate
        record, ratio = gate
        limits = [_limit_milli(spec[1]) for spec in record.container_specs.values()]
        if not limits or any(m <= 0 for m in limits):
            return HookResult.skip("a container has no CPU limit: the pod has no quota to scale")
        return _scaled(sum(limits), ratio, f"pod: sum of container CPU limits {sum(limits)}m")

    def pre_update_container_resources(self, request: ContainerRequest, view: NodeView) -> HookResult:
        gate = self._gate(request.pod, view)
        if isinstance(gate, HookResult):
            return gate
        record, ratio = gate
        spec = record.container_specs.get(request.name)
        milli = _limit_milli(spec[1]) if spec is not None else 0
        if milli <= 0:
            return HookResult.skip(f"container {request.name!r} has no CPU limit: no quota to scale")
        return _scaled(milli, ratio, f"container {request.name}: CPU limit {milli}m")

    def _gate(self, pod: PodRequest, view: NodeView) -> HookResult | tuple[PodRecord, float]:
        if not self.enabled:
            return _OFF
        if pod.source is not RequestSource.RECONCILER:
            return _NOT_RUNNING
        record = view.pod(pod.uid)
        if record is None or record.phase != "Running":
            return _NOT_RUNNING
        qos = QoSClass.from_labels(pod.labels)
        if qos not in (QoSClass.LS, QoSClass.NONE):
            return HookResult.skip(f"{qos.value} pod: only CPU-share pods (LS, or no class) are normalized")
        try:
            bound = pod_cpuset(pod.annotations)
        except ResourceStatusError:
            bound = None
        if qos is QoSClass.NONE and bound:
            return HookResult.skip("cpuset pod: not a CPU-share pod")
        ratio = view.cpu_normalization_ratio
        if ratio is None:
            return _NO_RATIO
        return record, ratio


def _limit_milli(limits: Mapping[str, str]) -> int:
    raw = limits.get("cpu")
    if not raw:
        return 0
    try:
        return parse_quantity(raw).milli_value()
    except QuantityError:
        return 0


def _scaled(milli: int, ratio: float, what: str) -> HookResult:
    base = milli_cpu_to_quota(milli)
    quota = apply_quota_rule(base, cfs_quota_suppress=False, normalization_ratio=ratio)
    how = f"ceil({base} / {ratio})" if ratio > 1 else f"{base} (ratio {ratio} <= 1: unscaled)"
    return HookResult(
        resources=Resources(cpu_quota_us=quota),
        reason=f"CPU normalization: {what} -> quota {how} = {quota}",
        inputs=MappingProxyType({"cpu-normalization-ratio": str(ratio)}),
    )
