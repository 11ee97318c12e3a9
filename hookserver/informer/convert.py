"""Kubernetes JSON objects (as the apiserver and the kubelet serve them) into store records.

Hand-written, not pydantic: this runs once per watch event and must stay in the tens of microseconds.
Anything malformed raises InputError naming the field, and the caller logs and skips that one object.
Quantities are checked with the exact parser, so a garbage request never reaches a hook.
metadata.managedFields is read for one thing only (who owns the batch/mid resources in the Node's status),
and its malformed entries are skipped, never raised: they are bookkeeping, not the node's state.
"""

from __future__ import annotations

import datetime
import functools
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from hookserver.errors import InputError, QuantityError
from hookserver.koord_resources import PUBLISHED_RESOURCES
from hookserver.quantity import parse_quantity
from hookserver.store.records import NodeRecord, PodRecord

__all__ = ["POD_FIELDS_FROM_API", "node_from_json", "object_key", "pod_from_json", "resource_version_of"]

_EMPTY: Mapping[str, str] = MappingProxyType({})
_NO_OWNERS: Mapping[str, tuple[str, ...]] = MappingProxyType({})
_PUBLISHED_KEYS = tuple((name, f"f:{name}") for name in PUBLISHED_RESOURCES)

# Fields an apiserver/kubelet pod copy owns: taken as given even when empty. sandbox_id and cgroup_parent
# are the runtime's (learned from hooks and NRI) and are kept when the API copy has none.
POD_FIELDS_FROM_API = frozenset({
    "labels", "annotations", "qos_class", "kube_qos", "priority", "priority_class", "phase", "node_name",
    "runtime_class", "container_specs", "resource_version", "source", "updated_at", "namespace", "name",
    "created_at",
    "deletion_timestamp",
    "container_ids",
    "init_container_specs",
    "overhead",
    "pod_level_requests",
})


def _mapping(obj: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    value = obj.get(key)
    if value is None:
        return _EMPTY
    if value.__class__ is dict:  # what json.loads gives: skip the slower ABC check
        return value
    if not isinstance(value, Mapping):
        raise InputError(f"must be an object, got {type(value).__name__}", field=f"{where}.{key}")
    return value


def _str_map(obj: Mapping[str, Any], key: str, where: str) -> Mapping[str, str]:
    value = _mapping(obj, key, where)
    if not value:
        return _EMPTY
    for k, v in value.items():
        if not isinstance(v, str):
            raise InputError(f"value must be a string, got {type(v).__name__}", field=f"{where}.{key}[{k}]")
    return MappingProxyType(dict(value))


def _str(obj: Mapping[str, Any], key: str, where: str, *, required: bool = False) -> str:
    value = obj.get(key)
    if value is None or value == "":
        if required:
            raise InputError("is required", field=f"{where}.{key}")
        return ""
    if not isinstance(value, str):
        raise InputError(f"must be a string, got {type(value).__name__}", field=f"{where}.{key}")
    return value


def _quantities(obj: Mapping[str, Any], key: str, where: str) -> Mapping[str, str]:
    values = _mapping(obj, key, where)
    if not values:
        return _EMPTY
    out: dict[str, str] = {}
    for name, raw in values.items():
        text = str(raw) if isinstance(raw, (int, float)) and not isinstance(raw, bool) else raw
        if not isinstance(text, str):
            raise InputError(f"must be a quantity string, got {type(raw).__name__}", field=f"{where}.{key}[{name}]")
        problem = _quantity_problem(text)
        if problem:
            raise InputError(problem, field=f"{where}.{key}[{name}]")
        out[str(name)] = text
    return MappingProxyType(out)


@functools.lru_cache(maxsize=4096)
def _quantity_problem(text: str) -> str:
    """"" when `text` parses. Cached: a node's pods repeat a few dozen quantity strings, and the exact
    parser costs more than the rest of a watch event's conversion."""
    try:
        parse_quantity(text)
    except QuantityError as exc:
        return str(exc)
    return ""


def resource_version_of(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    if isinstance(meta, Mapping):
        rv = meta.get("resourceVersion")
        if isinstance(rv, str):
            return rv
    return ""


def object_key(obj: Mapping[str, Any]) -> str:
    """uid if present, else namespace/name: what a DELETED event needs to find the object."""
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return ""
    uid = meta.get("uid")
    if isinstance(uid, str) and uid:
        return uid
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def pod_from_json(obj: Any, *, source: str, now: float) -> PodRecord:
    if not isinstance(obj, Mapping):
        raise InputError(f"pod must be an object, got {type(obj).__name__}", field="pod")
    meta = _mapping(obj, "metadata", "pod")
    spec = _mapping(obj, "spec", "pod")
    status = _mapping(obj, "status", "pod")
    uid = _str(meta, "uid", "metadata", required=True)
    namespace = _str(meta, "namespace", "metadata", required=True)
    name = _str(meta, "name", "metadata", required=True)
    labels = _str_map(meta, "labels", "metadata")
    priority = spec.get("priority")
    if priority is not None and (not isinstance(priority, int) or isinstance(priority, bool)):
        raise InputError(f"must be an integer, got {priority!r}", field="spec.priority")
    containers = spec.get("containers") or []
    if not isinstance(containers, list):
        raise InputError(f"must be a list, got {type(containers).__name__}", field="spec.containers")
    specs: dict[str, tuple[Mapping[str, str], Mapping[str, str]]] = {}
    for index, container in enumerate(containers):
        where = f"spec.containers[{index}]"
        if not isinstance(container, Mapping):
            raise InputError(f"must be an object, got {type(container).__name__}", field=where)
        cname = _str(container, "name", where, required=True)
        resources = _mapping(container, "resources", where)
        specs[cname] = (
            _quantities(resources, "requests", f"{where}.resources"),
            _quantities(resources, "limits", f"{where}.resources"),
        )
    init_specs = _init_containers(spec)
    return PodRecord(
        uid=uid,
        namespace=namespace,
        name=name,
        labels=labels,
        annotations=_str_map(meta, "annotations", "metadata"),
        qos_class=labels.get("koordinator.sh/qosClass", ""),
        kube_qos=_str(status, "qosClass", "status"),
        priority=priority,
        priority_class=_str(spec, "priorityClassName", "spec"),
        phase=_str(status, "phase", "status"),
        node_name=_str(spec, "nodeName", "spec"),
        runtime_class=_str(spec, "runtimeClassName", "spec"),
        source=source,
        updated_at=now,
        container_specs=MappingProxyType(specs),
        resource_version=_str(meta, "resourceVersion", "metadata"),
        created_at=_timestamp(meta, "creationTimestamp", "metadata"),
        deletion_timestamp=_str(meta, "deletionTimestamp", "metadata"),
        container_ids=_container_ids(status),
        init_container_specs=init_specs,
        overhead=_quantities(spec, "overhead", "spec"),
        pod_level_requests=_quantities(_mapping(spec, "resources", "spec"), "requests", "spec.resources"),
    )


def _init_containers(spec: Mapping[str, Any]) -> tuple[tuple[str, Mapping[str, str], bool], ...]:
    """(name, requests, sidecar) per init container, in spec order; a sidecar has restartPolicy Always."""
    raw = spec.get("initContainers")
    if not raw:
        return ()
    if not isinstance(raw, list):
        raise InputError(f"must be a list, got {type(raw).__name__}", field="spec.initContainers")
    out = []
    for index, container in enumerate(raw):
        where = f"spec.initContainers[{index}]"
        if not isinstance(container, Mapping):
            raise InputError(f"must be an object, got {type(container).__name__}", field=where)
        resources = _mapping(container, "resources", where)
        out.append((_str(container, "name", where, required=True),
                    _quantities(resources, "requests", f"{where}.resources"),
                    container.get("restartPolicy") == "Always"))
    return tuple(out)


def _timestamp(obj: Mapping[str, Any], key: str, where: str) -> float:
    """Unix seconds of an RFC 3339 `metav1.Time` ("2024-05-01T10:00:00Z"); 0 when absent."""
    text = _str(obj, key, where)
    if not text:
        return 0.0
    return _parse_time(text, f"{where}.{key}")


@functools.lru_cache(maxsize=4096)
def _parse_time(text: str, where: str) -> float:
    try:
        moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InputError(f"not an RFC 3339 time: {text[:64]!r}", field=where) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.timestamp()


def _container_ids(status: Mapping[str, Any]) -> Mapping[str, str]:
    """Started containers (init containers included) by name: those whose status carries a containerID."""
    out: dict[str, str] = {}
    for key in ("initContainerStatuses", "containerStatuses"):
        statuses = status.get(key)
        if statuses is None:
            continue
        if not isinstance(statuses, list):
            raise InputError(f"must be a list, got {type(statuses).__name__}", field=f"status.{key}")
        for index, entry in enumerate(statuses):
            where = f"status.{key}[{index}]"
            if not isinstance(entry, Mapping):
                raise InputError(f"must be an object, got {type(entry).__name__}", field=where)
            cid = _str(entry, "containerID", where)
            if cid:
                out[_str(entry, "name", where, required=True)] = cid
    return MappingProxyType(out) if out else _EMPTY


def node_from_json(obj: Any, *, source: str, now: float) -> NodeRecord:
    if not isinstance(obj, Mapping):
        raise InputError(f"node must be an object, got {type(obj).__name__}", field="node")
    meta = _mapping(obj, "metadata", "node")
    status = _mapping(obj, "status", "node")
    return NodeRecord(
        name=_str(meta, "name", "metadata", required=True),
        labels=_str_map(meta, "labels", "metadata"),
        annotations=_str_map(meta, "annotations", "metadata"),
        capacity=_quantities(status, "capacity", "status"),
        allocatable=_quantities(status, "allocatable", "status"),
        source=source,
        updated_at=now,
        published_owners=_published_owners(meta.get("managedFields")),
        resource_version=_str(meta, "resourceVersion", "metadata"),
        uid=_str(meta, "uid", "metadata"),
    )


def _is_map(value: Any) -> bool:
    return value.__class__ is dict or isinstance(value, Mapping)  # json.loads gives dicts: skip the ABC check


def _published_owners(entries: Any) -> Mapping[str, tuple[str, ...]]:
    """For each of PUBLISHED_RESOURCES some manager owns in status.capacity or status.allocatable (the
    union of both), the managers that do, sorted. How the capacity publisher sees koord-manager or a
    second agent from the watch, before it writes. Malformed entries are skipped."""
    if not entries or not isinstance(entries, list):
        return _NO_OWNERS
    owners: dict[str, set[str]] = {}
    for entry in entries:
        if not _is_map(entry):
            continue
        manager = entry.get("manager")
        fields = entry.get("fieldsV1")
        if not isinstance(manager, str) or not manager or not _is_map(fields):
            continue
        status = fields.get("f:status")
        if not _is_map(status):
            continue
        for key in ("f:capacity", "f:allocatable"):
            owned = status.get(key)
            if not owned or not _is_map(owned):
                continue
            for name, field_key in _PUBLISHED_KEYS:
                if field_key in owned:
                    owners.setdefault(name, set()).add(manager)
    if not owners:
        return _NO_OWNERS
    return MappingProxyType({name: tuple(sorted(owners[name])) for name in PUBLISHED_RESOURCES if name in owners})
