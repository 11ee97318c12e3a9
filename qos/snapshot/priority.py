"""Koordinator's pod priority, as the v1.7/v1.8 eviction modes read it (apis/extension/priority*.go, evict.go).

* The priority class: the `koordinator.sh/priority-class` label when it names a class, else the band
  spec.priority falls in (koord-prod 9000-9999, koord-mid 7000-7999, koord-batch 5000-5999, koord-free
  3000-3999), else the QoS class's default (LSE/LSR/LS/SYSTEM: prod, BE: batch).
* The priority value: spec.priority when set and not 0, else the class's default (9500, 7500, 5500, 3500, 0).
  So a BE pod without a priority counts as 5500, and an LS pod without one as 9500 (never evicted by a
  threshold below the prod band).
* The sub-priority: the `koordinator.sh/priority` label (an integer), else the priority value.
* A pod may be evicted by a priority-threshold mode only with the label `koordinator.sh/eviction-enabled:
  "true"`: the owner opts in, so an operator's threshold alone never exposes a pod.

The class also says which resource a pod's requests count under: Batch pods request `kubernetes.io/batch-*`,
Mid pods `kubernetes.io/mid-*` (koordinator's webhook rewrites their cpu/memory requests so).
"""

from __future__ import annotations

from qos.snapshot.model import LABEL_EVICTION_ENABLED, PodFacts

__all__ = [
    "BATCH",
    "BATCH_CPU",
    "BATCH_MEMORY",
    "class_resource",
    "FREE",
    "LABEL_PRIORITY",
    "LABEL_PRIORITY_CLASS",
    "MID",
    "MID_CPU",
    "MID_MEMORY",
    "MID_VALUE_MAX",
    "PROD",
    "REQUEST_RESOURCES",
    "eviction_enabled",
    "label_priority",
    "priority_class",
    "priority_value",
    "request_resource",
]

PROD, MID, BATCH, FREE, NONE = "koord-prod", "koord-mid", "koord-batch", "koord-free", ""
LABEL_PRIORITY_CLASS = "koordinator.sh/priority-class"
LABEL_PRIORITY = "koordinator.sh/priority"
BATCH_CPU, BATCH_MEMORY = "kubernetes.io/batch-cpu", "kubernetes.io/batch-memory"
MID_CPU, MID_MEMORY = "kubernetes.io/mid-cpu", "kubernetes.io/mid-memory"
# Every resource whose requests a pod's facts carry (PodFacts.requests).
REQUEST_RESOURCES = ("cpu", "memory", BATCH_CPU, BATCH_MEMORY, MID_CPU, MID_MEMORY)
MID_VALUE_MAX = 7999

_BANDS = ((PROD, 9000, 9999), (MID, 7000, 7999), (BATCH, 5000, 5999), (FREE, 3000, 3999))
_DEFAULTS = {PROD: 9500, MID: 7500, BATCH: 5500, FREE: 3500, NONE: 0}
_BY_CLASS = {BATCH: {"cpu": BATCH_CPU, "memory": BATCH_MEMORY}, MID: {"cpu": MID_CPU, "memory": MID_MEMORY}}


def _raw_class(pod: PodFacts) -> str:
    label = pod.labels.get(LABEL_PRIORITY_CLASS)
    if label is not None:
        return label if label in _DEFAULTS and label else NONE
    if pod.priority is None:
        return NONE
    for name, low, high in _BANDS:
        if low <= pod.priority <= high:
            return name
    return NONE


def priority_class(pod: PodFacts) -> str:
    """koordlet's GetPodPriorityClassWithDefault."""
    raw = _raw_class(pod)
    if raw:
        return raw
    if pod.qos in ("SYSTEM", "LSE", "LSR", "LS"):
        return PROD
    if pod.qos == "BE":
        return BATCH
    return NONE


def priority_value(pod: PodFacts) -> int:
    """koordlet's GetPodPriorityValueWithDefault."""
    if pod.priority is not None and pod.priority != 0:
        return pod.priority
    return _DEFAULTS[priority_class(pod)]


def label_priority(pod: PodFacts) -> int:
    """The `koordinator.sh/priority` label, the tie-break after spec.priority; the priority value without it."""
    raw = pod.labels.get(LABEL_PRIORITY)
    if raw is not None:
        try:
            return int(raw.strip())
        except ValueError:
            pass
    return priority_value(pod)


def eviction_enabled(pod: PodFacts) -> bool:
    return pod.labels.get(LABEL_EVICTION_ENABLED) == "true"


def request_resource(pod: PodFacts, resource: str) -> str:
    """The resource a pod's `resource` ("cpu" or "memory") request counts under: batch-* for Batch pods,
    mid-* for Mid pods, the resource itself for the others."""
    return _BY_CLASS.get(priority_class(pod), {}).get(resource, resource)


def class_resource(priority_class_name: str, resource: str) -> str:
    """The resource pods of a class request for `resource` (koordinator's ResourceNameMap)."""
    return _BY_CLASS.get(priority_class_name, {}).get(resource, resource)
