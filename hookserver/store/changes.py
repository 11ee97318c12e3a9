"""What counts as a pod change worth telling listeners about, and how two views of one pod merge.

Hooks, reconcilers and collectors re-plan when a pod's resources, QoS, priority, hook-relevant
annotations, phase or started containers change, not when its status heartbeat or managedFields move. The apiserver sends
a MODIFIED for every status update, so filtering here keeps listeners from re-planning on noise.

Several sources describe the same pod: the apiserver (spec, priority, phase), the kubelet, and the hook
front doors (sandbox id and cgroup parent, which only the runtime knows). `merge_pod_records` keeps
what the newer view does not know, so no source erases another's knowledge.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, Literal

from hookserver.store.records import PodRecord

__all__ = [
    "CHANGE_FIELDS",
    "LABEL_QOS_CLASS",
    "PodChange",
    "PodListener",
    "hook_annotations",
    "merge_pod_records",
    "pod_changed_fields",
]

LABEL_QOS_CLASS = "koordinator.sh/qosClass"
CHANGE_FIELDS = ("resources", "qos", "priority", "annotations", "phase", "containers")


@dataclass(frozen=True, slots=True)
class PodChange:
    kind: Literal["added", "updated", "deleted"]
    uid: str
    old: PodRecord | None
    new: PodRecord | None
    fields: frozenset[str]


# A listener is called synchronously, in the writer's thread, after the store lock is released.
PodListener = Callable[[PodChange], None]


def _is_hook_key(key: str) -> bool:
    domain, sep, _ = key.partition("/")
    return bool(sep) and (domain == "koordinator.sh" or domain.endswith(".koordinator.sh"))


def hook_annotations(annotations: Mapping[str, str]) -> dict[str, str]:
    """The annotations hooks and QoS read: every `*.koordinator.sh/*` key (extended-resource-spec, ...)."""
    return {k: v for k, v in annotations.items() if _is_hook_key(k)}


def pod_changed_fields(old: PodRecord, new: PodRecord) -> frozenset[str]:
    changed: set[str] = set()
    if (
        old.container_specs != new.container_specs
        or old.init_container_specs != new.init_container_specs
        or old.overhead != new.overhead
        or old.pod_level_requests != new.pod_level_requests
    ):
        changed.add("resources")
    if (
        old.labels.get(LABEL_QOS_CLASS) != new.labels.get(LABEL_QOS_CLASS)
        or old.qos_class != new.qos_class
        or old.kube_qos != new.kube_qos
    ):
        changed.add("qos")
    if old.priority != new.priority or old.priority_class != new.priority_class:
        changed.add("priority")
    if hook_annotations(old.annotations) != hook_annotations(new.annotations):
        changed.add("annotations")
    if old.phase != new.phase:
        changed.add("phase")
    if old.container_ids != new.container_ids:
        changed.add("containers")  # a container started or restarted: its cgroup is new
    return frozenset(changed)


def _empty(value: Any) -> bool:
    return value is None or value == "" or (isinstance(value, Mapping | tuple) and not value)


_KEEP_OLD_ALWAYS = frozenset({"first_seen"})
# Numbers where 0 means "this source does not know" (a hook or NRI pod copy has no creation time).
_ZERO_IS_UNKNOWN = frozenset({"created_at"})
_FIELD_NAMES = tuple(f.name for f in fields(PodRecord))


def merge_pod_records(
    old: PodRecord | None, new: PodRecord, *, authoritative: frozenset[str] = frozenset()
) -> PodRecord:
    """`new` over `old`: fields `new` leaves empty keep `old`'s value, unless named in `authoritative`
    (fields the new source owns, taken as given even when empty: an apiserver pod that lost its last
    annotation really has none)."""
    if old is None:
        return new
    changes: dict[str, Any] = {}
    for name in _FIELD_NAMES:
        if name in _KEEP_OLD_ALWAYS or name in authoritative:
            continue
        if _empty(getattr(new, name)) and not _empty(getattr(old, name)):
            changes[name] = getattr(old, name)
        elif name in _ZERO_IS_UNKNOWN and not getattr(new, name) and getattr(old, name):
            changes[name] = getattr(old, name)
    return replace(new, **changes) if changes else new


