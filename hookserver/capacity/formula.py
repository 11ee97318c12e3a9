"""koord-manager's batch and mid capacity formulas (noderesource `batchresource`, `midresource`), explained.

Pure: the node, its pods, the agent's usage and the prod-reclaimable figure in; four numbers and every term
out. Integers throughout (milli-cores, bytes) with Go's truncations, so `hookctl capacity` adds up exactly.

Batch (`CalculateBatchResourceByPolicy`), per resource:
  safety margin  = capacity x (100 - reclaimThresholdPercent) % (negative above 100: koordinator's webhook
                   asks only min=0, and operators use it to offer more than the margin leaves)
  reserved       = max(kubelet reserved (capacity - allocatable), node.koordinator.sh/reservation)
  system used    = systemUsage + usage of host applications above batch priority (koord-prod, koord-mid)
  HP pods        = Running/Pending (or, for pods the runtime reported without a phase, running) pods whose
                   priority class is not koord-batch or koord-free; their requests (k8s PodRequests), usage
                   (a pod without a sample counts at its request; an LSE pod's CPU counts at its request) and
                   per-pod max(usage, request); usage of pods the store does not list ("dangling") adds to
                   both usage sums unless it is batch or free
  usage            : max(capacity - margin - max(system used, reserved) - HP used, 0); also any policy
                     koord-manager does not know for the resource (`request` for CPU included)
  request (memory) : max(capacity - margin - reserved - HP requests, 0)
  maxUsageRequest  : max(capacity - margin - max(system used, reserved) - sum max(HP used, HP request), 0)
  then min(result, capacity x batch{CPU,Memory}ThresholdPercent %) when set; batch-cpu x the
  cpu-normalization ratio when it is above 1 (`MultiplyMilliQuant`, rounded up to a whole milli-core); minus
  koord-batch third-party allocations, floored at 0.

One deliberate difference: under maxUsageRequest a pod without a sample counts at its request (koord-manager's
node level leaves such a pod out of that sum, its NUMA level does not; the safe side offers less).

Mid (`midresource`): static mode = capacity x midStatic{CPU,Memory}ReservedPercent %; otherwise
min(prod reclaimable, capacity - node usage) + unallocated x midUnallocatedPercent %, where unallocated =
max(capacity - max(reserved, systemUsage + prod host applications) - requests of prod and no-priority pods, 0);
both capped at capacity x mid{CPU,Memory}ThresholdPercent %. mid-cpu is never normalized.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hookserver.capacity.inputs import NodeFacts, PodInput, UsageFacts
from hookserver.capacity.quantities import ZERO, Pair, scale
from hookserver.fastinit import fast_frozen_init
from hookserver.koord_resources import BATCH_CPU, BATCH_MEMORY, MID_CPU, MID_MEMORY
from hookserver.kubewire import memory_quantity
from hookserver.slo.colocation import ColocationStrategy

__all__ = ["CapacityResult", "PodLine", "ResourceOutcome", "Term", "compute_capacity", "node_value"]

_RUNNING_PHASES = frozenset({"Running", "Pending", ""})
_NOT_HP = frozenset({"koord-batch", "koord-free"})
_NOT_MID_HP = frozenset({"koord-mid", "koord-batch", "koord-free"})
# Host applications counted into system usage: default priority above koord-batch's 5500 (batch formula),
# above koord-mid's 7500 (mid formula).
_HOST_APP_ABOVE_BATCH = frozenset({"koord-prod", "koord-mid"})
_HOST_APP_PROD = frozenset({"koord-prod"})


@dataclass(frozen=True, slots=True)
class Term:
    """One named number of a formula, in the resource's unit (milli-cores or bytes), and where it came from."""

    name: str
    value: int
    how: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "how": self.how}


@dataclass(frozen=True, slots=True)
class ResourceOutcome:
    resource: str
    value: int  # what goes on the Node: milli-cores for *-cpu, bytes for *-memory
    internal: int  # before the normalization ratio and third-party allocations (koord-manager's gauge)
    policy: str
    terms: tuple[Term, ...]
    formula: str

    def as_dict(self) -> dict[str, Any]:
        return {"resource": self.resource, "value": self.value, "internal": self.internal, "policy": self.policy,
                "formula": self.formula, "terms": [t.as_dict() for t in self.terms]}


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class PodLine:
    """How one pod entered the sums."""

    key: str
    uid: str
    priority_class: str
    qos: str
    phase: str
    counted_as: str  # usage | request:no-sample | lse:cpu-at-request | dangling | skipped:<why>
    request: Pair
    usage: Pair | None
    usage_set_by: str  # window | fast | ""
    used: Pair  # what it added to HP used
    max_used_request: Pair  # what it added to sum max(used, request)

    def as_dict(self) -> dict[str, Any]:
        return {
            "pod": self.key, "uid": self.uid, "priority_class": self.priority_class, "qos": self.qos,
            "phase": self.phase, "counted_as": self.counted_as, "request": self.request.as_dict(),
            "usage": self.usage.as_dict() if self.usage is not None else None, "usage_set_by": self.usage_set_by,
            "used": self.used.as_dict(), "max_used_request": self.max_used_request.as_dict(),
        }


@dataclass(frozen=True, slots=True)
class CapacityResult:
    resources: tuple[ResourceOutcome, ...]
    pods: tuple[PodLine, ...]
    sums: Mapping[str, Pair] = field(default_factory=dict)
    system_used: Pair = ZERO  # the batch formula's system used (the NUMA-level formula splits it over the zones)

    def value(self, resource: str) -> int:
        for outcome in self.resources:
            if outcome.resource == resource:
                return outcome.value
        raise KeyError(resource)

    def values(self) -> dict[str, int]:
        return {o.resource: o.value for o in self.resources}

    def node_values(self) -> dict[str, str]:
        """The quantities to write into status.capacity/allocatable, as koord-manager formats them."""
        return {o.resource: node_value(o.resource, o.value) for o in self.resources}


def node_value(resource: str, value: int) -> str:
    """batch-cpu / mid-cpu: an integer count of milli-cores ("1500"); memory: bytes, BinarySI ("8Gi")."""
    return memory_quantity(value) if resource in (BATCH_MEMORY, MID_MEMORY) else str(int(value))


def _cpu(pair: Pair) -> int:
    return pair.cpu


def _memory(pair: Pair) -> int:
    return pair.memory


def _percent(pct: int) -> float:
    return float(pct) / 100.0


def _host_apps(usage: UsageFacts, classes: frozenset[str]) -> Pair:
    total = ZERO
    for app in usage.host_apps:
        if app.priority_class in classes:
            total = total + app.usage.effective
    return total


def _batch_system_used(usage: UsageFacts) -> Pair:
    """The batch formula's system used: system usage plus host applications above koord-batch. The NUMA-level
    formula (numa_formula.py) splits this same figure over the zones, so the result keeps it."""
    system = usage.system.effective if usage.system is not None else ZERO
    return system + _host_apps(usage, _HOST_APP_ABOVE_BATCH)


def _pod_lines(pods: Sequence[PodInput], dangling: Iterable[PodInput]) -> tuple[list[PodLine], Pair, Pair, Pair]:
    """Per pod, and the sums HP request, HP used, sum of max(used, request). Runs once per pod per tick: sums
    are kept in plain integers and a pod's own Pair objects are reused, not rebuilt."""
    lines: list[PodLine] = []
    append = lines.append
    req_c = req_m = used_c = used_m = max_c = max_m = 0
    for pod in pods:
        window = pod.usage
        usage = window.effective if window is not None else None
        set_by = window.set_by if window is not None else ""
        request = pod.request
        if pod.phase not in _RUNNING_PHASES:
            if usage is not None and pod.priority_class not in _NOT_HP:
                # koord-manager lists Running/Pending pods only: a finished pod's usage is a dangling metric
                used_c, used_m, max_c, max_m = used_c + usage.cpu, used_m + usage.memory, max_c + usage.cpu, \
                    max_m + usage.memory
                append(PodLine(pod.key, pod.uid, pod.priority_class, pod.qos, pod.phase,
                               f"dangling:phase {pod.phase}", request, usage, set_by, usage, usage))
            else:
                append(PodLine(pod.key, pod.uid, pod.priority_class, pod.qos, pod.phase,
                               f"skipped:phase {pod.phase}", request, usage, set_by, ZERO, ZERO))
            continue
        if pod.priority_class in _NOT_HP:
            append(PodLine(pod.key, pod.uid, pod.priority_class, pod.qos, pod.phase,
                           _SKIPPED.get(pod.priority_class) or f"skipped:{pod.priority_class}", request, usage,
                           set_by, ZERO, ZERO))
            continue
        req_c += request.cpu
        req_m += request.memory
        if usage is None:
            used, most, how = request, request, "request:no-sample"
        elif pod.qos == "LSE":
            used, most, how = Pair(request.cpu, usage.memory), _larger(usage, request), "lse:cpu-at-request"
        else:
            used, most, how = usage, _larger(usage, request), "usage"
        used_c += used.cpu
        used_m += used.memory
        max_c += most.cpu
        max_m += most.memory
        append(PodLine(pod.key, pod.uid, pod.priority_class, pod.qos, pod.phase, how, request, usage, set_by, used,
                       most))
    for pod in dangling:
        usage = pod.usage.effective if pod.usage is not None else ZERO
        set_by = pod.usage.set_by if pod.usage is not None else ""
        if pod.priority_class in _NOT_HP:
            append(PodLine(pod.key, pod.uid, pod.priority_class, pod.qos, pod.phase,
                           f"skipped:dangling {pod.priority_class}", ZERO, usage, set_by, ZERO, ZERO))
            continue
        used_c, used_m, max_c, max_m = used_c + usage.cpu, used_m + usage.memory, max_c + usage.cpu, max_m + usage.memory
        append(PodLine(pod.key, pod.uid, pod.priority_class, pod.qos, pod.phase, "dangling", ZERO, usage, set_by,
                       usage, usage))
    return lines, Pair(req_c, req_m), Pair(used_c, used_m), Pair(max_c, max_m)


_SKIPPED = {name: f"skipped:{name}" for name in _NOT_HP}


def _larger(a: Pair, b: Pair) -> Pair:
    """max per resource, reusing an argument when it is the larger in both."""
    if a.cpu >= b.cpu and a.memory >= b.memory:
        return a
    if b.cpu >= a.cpu and b.memory >= a.memory:
        return b
    return Pair(max(a.cpu, b.cpu), max(a.memory, b.memory))


def _cpu_ratio_up(milli: int, ratio: float) -> int:
    """koord-manager's batch-cpu normalization: `MultiplyMilliQuant` on a quantity whose *value* is `milli`,
    then a quantity that is not a whole number becomes its (rounded-up) Value()."""
    scaled_milli = int(float(milli * 1000) * ratio)
    return math.ceil(scaled_milli / 1000) if scaled_milli % 1000 else scaled_milli // 1000


def _batch(strategy: ColocationStrategy, node: NodeFacts, usage: UsageFacts, hp_request: Pair, hp_used: Pair,
           hp_max: Pair) -> tuple[ResourceOutcome, ResourceOutcome]:
    cap = node.capacity
    margin = cap.scaled(_percent(100 - strategy.cpu_reclaim_threshold_percent),
                        _percent(100 - strategy.memory_reclaim_threshold_percent))
    reserved = node.reserved
    system = usage.system.effective if usage.system is not None else ZERO
    apps = _host_apps(usage, _HOST_APP_ABOVE_BATCH)
    system_used = _batch_system_used(usage)
    floor = system_used.max(reserved)
    by_usage = (cap - margin - floor - hp_used).clamp0()
    by_request = (cap - margin - reserved - hp_request).clamp0()
    by_max = (cap - margin - floor - hp_max).clamp0()
    outcomes = []
    for resource, get, pct, policy, thr in (
        (BATCH_CPU, _cpu, strategy.cpu_reclaim_threshold_percent, strategy.batch_cpu_policy(),
         strategy.batch_cpu_threshold_percent),
        (BATCH_MEMORY, _memory, strategy.memory_reclaim_threshold_percent,
         strategy.batch_memory_policy(), strategy.batch_memory_threshold_percent),
    ):
        unit = "m" if resource == BATCH_CPU else "B"
        terms = [
            Term("capacity", get(cap), "status.capacity"),
            Term("safety margin", get(margin), f"capacity x (100 - reclaimThresholdPercent {pct}) %"),
            Term("kubelet reserved", get(node.kubelet_reserved), "capacity - allocatable"),
        ]
        if node.annotation_reserved is not None:
            terms.append(Term("annotation reserved", get(node.annotation_reserved), "node.koordinator.sh/reservation"))
        terms.append(Term("reserved", get(reserved), "max(kubelet reserved, annotation reserved)"))
        if policy == "request":
            terms.append(Term("HP requests", get(hp_request), "Running/Pending pods not koord-batch/koord-free"))
            value = get(by_request)
            text = f"max({get(cap)} - {get(margin)} - {get(reserved)} - {get(hp_request)}, 0) = {value}{unit}"
        else:
            terms.append(Term("system usage", get(system), _usage_how(usage.system, usage)))
            terms.append(Term("host apps above batch", get(apps), "koord-prod and koord-mid host applications"))
            terms.append(Term("max(system used, reserved)", get(floor), ""))
            if policy == "maxUsageRequest":
                terms.append(Term("HP sum max(used, request)", get(hp_max), "per pod; dangling pods at usage"))
                value = get(by_max)
                hp_term = get(hp_max)
            else:
                terms.append(Term("HP used", get(hp_used), "usage; no sample: request; LSE CPU: request; dangling"))
                value = get(by_usage)
                hp_term = get(hp_used)
            text = f"max({get(cap)} - {get(margin)} - {get(floor)} - {hp_term}, 0) = {value}{unit}"
        if thr is not None:
            cap_value = scale(get(cap), _percent(thr))
            terms.append(Term("threshold cap", cap_value, f"capacity x batchThresholdPercent {thr} %"))
            if cap_value < value:
                value = cap_value
                text += f"; capped at {value}{unit}"
        internal = value
        if resource == BATCH_CPU:
            ratio = node.cpu_normalization_ratio
            if ratio is not None and ratio > 1.0:
                value = _cpu_ratio_up(value, ratio)
                terms.append(Term("normalized", value, f"x cpu-normalization-ratio {ratio:g}"))
                text += f"; x {ratio:g} = {value}"
        tp = get(node.third_party_batch)
        if tp:
            value = max(value - tp, 0)
            terms.append(Term("third-party allocations", tp, "node.koordinator.sh/thirdPartyAllocations koord-batch"))
            text += f"; - {tp} = {value}"
        outcomes.append(ResourceOutcome(resource, value, internal, policy, tuple(terms), text))
    return outcomes[0], outcomes[1]


def _usage_how(value: Any, usage: UsageFacts) -> str:
    if value is None:
        return "no sample"
    if usage.fast_window_s > 0:
        return (f"max(avg {usage.window_s:g} s, avg {usage.fast_window_s:g} s); set by the "
                f"{'fast' if value.set_by == 'fast' else 'report'} window")
    return f"avg {usage.window_s:g} s"


def _mid(strategy: ColocationStrategy, node: NodeFacts, usage: UsageFacts, pods: Sequence[PodInput],
         prod_reclaimable: Pair | None) -> tuple[ResourceOutcome, ResourceOutcome]:
    cap = node.capacity
    limit = cap.scaled(_percent(strategy.mid_cpu_threshold_percent), _percent(strategy.mid_memory_threshold_percent))
    outcomes = []
    if strategy.mid_reclaim_mode == "static":
        static = cap.scaled(_percent(strategy.mid_static_cpu_reserved_percent),
                            _percent(strategy.mid_static_memory_reserved_percent))
        result = static.min(limit)
        for resource, get, static_pct in ((MID_CPU, _cpu, strategy.mid_static_cpu_reserved_percent),
                                          (MID_MEMORY, _memory, strategy.mid_static_memory_reserved_percent)):
            terms: tuple[Term, ...] = (
                     Term("capacity", get(cap), "status.capacity"),
                     Term("static", get(static), f"capacity x midStaticReservedPercent {static_pct} %"),
                     Term("threshold cap", get(limit), "capacity x midThresholdPercent %"))
            outcomes.append(ResourceOutcome(resource, get(result), get(result), "static", terms,
                                            f"min({get(static)}, {get(limit)}) = {get(result)}"))
        return outcomes[0], outcomes[1]
    prod = prod_reclaimable if prod_reclaimable is not None else ZERO
    node_usage = usage.node.effective if usage.node is not None else None
    unused = (cap - node_usage) if node_usage is not None else ZERO
    base = prod.min(unused).clamp0()
    system = usage.system.effective if usage.system is not None else ZERO
    reserved = node.reserved.max(system + _host_apps(usage, _HOST_APP_PROD))
    req_c = req_m = 0
    for pod in pods:
        if pod.phase in _RUNNING_PHASES and pod.priority_class not in _NOT_MID_HP:
            req_c += pod.request.cpu
            req_m += pod.request.memory
    requests = Pair(req_c, req_m)
    unallocated = (cap - reserved - requests).clamp0()
    share = _percent(strategy.mid_unallocated_percent)
    extra = unallocated.scaled(share, share)
    result = (base + extra).min(limit)
    for resource, get in ((MID_CPU, _cpu), (MID_MEMORY, _memory)):
        terms = (
            Term("prod reclaimable", get(prod), "predictor (NodeMetric prodReclaimableMetric)"
                 if prod_reclaimable is not None else "none reported: 0"),
            Term("node unused", get(unused), f"capacity - node usage ({_usage_how(usage.node, usage)})"
                 if node_usage is not None else "no node usage: 0"),
            Term("reserved for mid", get(reserved), "max(reserved, systemUsage + prod host applications)"),
            Term("prod/none requests", get(requests), "Running/Pending pods not koord-mid/batch/free"),
            Term("unallocated", get(unallocated), "max(capacity - reserved - requests, 0)"),
            Term("unallocated share", get(extra), f"unallocated x midUnallocatedPercent {strategy.mid_unallocated_percent} %"),
            Term("threshold cap", get(limit), "capacity x midThresholdPercent %"),
        )
        text = f"min(min({get(prod)}, {get(unused)}) + {get(extra)}, {get(limit)}) = {get(result)}"
        outcomes.append(ResourceOutcome(resource, get(result), get(result), "dynamic", terms, text))
    return outcomes[0], outcomes[1]


def compute_capacity(
    strategy: ColocationStrategy,
    node: NodeFacts,
    pods: Sequence[PodInput],
    usage: UsageFacts,
    *,
    prod_reclaimable: Pair | None,
) -> CapacityResult:
    """batch-cpu, batch-memory, mid-cpu, mid-memory for this node, with every term."""
    lines, hp_request, hp_used, hp_max = _pod_lines(pods, usage.dangling)
    batch_cpu, batch_memory = _batch(strategy, node, usage, hp_request, hp_used, hp_max)
    mid_cpu, mid_memory = _mid(strategy, node, usage, pods, prod_reclaimable)
    sums = {"hp_request": hp_request, "hp_used": hp_used, "hp_max_used_request": hp_max}
    return CapacityResult(resources=(batch_cpu, batch_memory, mid_cpu, mid_memory), pods=tuple(lines), sums=sums,
                          system_used=_batch_system_used(usage))
