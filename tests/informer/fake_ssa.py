"""A simplified but faithful model of the apiserver's field ownership (managedFields), for the HTTP fake.

What it keeps, per object: for each (manager, operation) the set of leaf paths it owns, where a leaf is
what server-side apply counts as one in an unstructured object (a scalar, a list, an empty object). What
it does, as kube-apiserver 1.20 does (checked against the real one, tests/kube/test_node_capacity_kube.py):
  * an apply (`application/apply-patch+yaml`) sets the leaves it carries; a leaf another manager owns
    whose value the apply would change is a conflict (409, the apiserver's Status shape with
    `FieldManagerConflict` causes) unless `force`, which takes it over; a leaf another manager owns with
    the same value becomes shared; leaves the applier owned before and omits now are removed unless
    another manager still owns them (objects left empty by that are removed too); the applier then owns
    exactly what it applied, and an entry that owns nothing is dropped;
  * an update (PUT, merge or JSON patch) gives its manager the leaves whose value it changed and takes
    them from every other manager; leaves it removed belong to nobody; a write that changes nothing
    changes no ownership;
  * `scope` says which part of the object a request may touch: the status subresource the status only,
    the main resource everything else but the server-owned metadata.
Not modelled: list-item keys (k:/v:), the "." marks of granular maps, apiVersion conversion.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "APPLY_PATCH", "JSON_PATCH", "MERGE_PATCH", "SERVER_META", "ApplyConflict", "BadPatch", "ManagedFields", "Path",
    "apply_config", "in_status", "json_patch", "merge_patch", "outside_status", "record_update", "updated_object",
]

Path = tuple[str, ...]
Scope = Callable[[Path], bool]
_MISSING = object()
# metadata the apiserver owns (stripped from ownership, as fieldmanager's stripMeta does)
SERVER_META = frozenset({"name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
                         "managedFields", "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds"})


def in_status(path: Path) -> bool:
    return bool(path) and path[0] == "status"


def outside_status(path: Path) -> bool:
    if not path or path[0] in ("status", "apiVersion", "kind"):
        return False
    return not (path[0] == "metadata" and (len(path) < 2 or path[1] in SERVER_META))


@dataclass
class _Entry:
    manager: str
    operation: str  # Apply | Update
    api_version: str
    time: str
    fields: set[Path] = field(default_factory=set)


class ApplyConflict(Exception):
    """Fields other managers own that an apply would change: (manager, operation, path) each."""

    def __init__(self, conflicts: tuple[tuple[str, str, Path], ...], api_version: str) -> None:
        super().__init__(conflicts)
        self.conflicts = conflicts
        self.api_version = api_version

    def status(self) -> dict[str, Any]:
        """The apiserver's 409 body (k8s.io/apiserver fieldmanager NewConflictError)."""
        who = [(_who(m, op, self.api_version), p) for m, op, p in self.conflicts]
        causes = [{"reason": "FieldManagerConflict", "message": f"conflict with {w}", "field": _dotted(p)}
                  for w, p in who]
        if len(who) == 1:
            message = f"conflict with {who[0][0]}: {_dotted(who[0][1])}"
        else:
            lines: list[str] = []
            for name in sorted({w for w, _p in who}):
                lines.append(f"conflicts with {name}:")
                lines.extend(f"- {_dotted(p)}" for w, p in who if w == name)
            message = "\n".join(lines)
        count = len(who)
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": f"Apply failed with {count} conflict{'s' if count > 1 else ''}: {message}",
                "reason": "Conflict", "details": {"causes": causes}, "code": 409}


def _who(manager: str, operation: str, api_version: str) -> str:
    quoted = json.dumps(manager)
    return f"{quoted} using {api_version}" if operation == "Update" else quoted


def _dotted(path: Path) -> str:
    return "".join(f".{p}" for p in path)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class ManagedFields:
    """The ownership table of one object."""

    def __init__(self) -> None:
        self._entries: dict[tuple[str, str], _Entry] = {}

    def __bool__(self) -> bool:
        return bool(self._entries)

    def owners(self, path: Path) -> list[str]:
        return sorted({e.manager for e in self._entries.values() if path in e.fields})

    def fields_of(self, manager: str, operation: str = "Apply") -> set[Path]:
        entry = self._entries.get((manager, operation))
        return set(entry.fields) if entry else set()

    def render(self) -> list[dict[str, Any]]:
        """metadata.managedFields in the apiserver's shape (fieldsV1 with `f:` keys, leaves `{}`)."""
        out = []
        for entry in self._entries.values():
            tree: dict[str, Any] = {}
            for path in sorted(entry.fields):
                node = tree
                for key in path:
                    node = node.setdefault(f"f:{key}", {})
            out.append({"manager": entry.manager, "operation": entry.operation, "apiVersion": entry.api_version,
                        "time": entry.time, "fieldsType": "FieldsV1", "fieldsV1": tree})
        return out

    @classmethod
    def parse(cls, entries: Any) -> ManagedFields:
        """From metadata.managedFields (what a test hands the fake); malformed entries are skipped."""
        table = cls()
        for raw in entries if isinstance(entries, list) else []:
            if not isinstance(raw, Mapping) or not isinstance(raw.get("manager"), str):
                continue
            fields = _fieldsv1_leaves(raw.get("fieldsV1"), ())
            op = str(raw.get("operation") or "Update")
            entry = _Entry(raw["manager"], op, str(raw.get("apiVersion") or "v1"), str(raw.get("time") or _now()),
                           fields)
            table._entries[(entry.manager, op)] = entry
        return table

    def keep_existing(self, obj: Mapping[str, Any]) -> None:
        """After a write the model did not see (a test's direct store): forget leaves that are gone."""
        for key, entry in list(self._entries.items()):
            entry.fields = {p for p in entry.fields if _get(obj, p) is not _MISSING}
            if not entry.fields:
                del self._entries[key]

    def _entry(self, manager: str, operation: str, api_version: str) -> _Entry:
        entry = self._entries.get((manager, operation))
        if entry is None:
            entry = self._entries[(manager, operation)] = _Entry(manager, operation, api_version, _now())
        return entry

    def _drop_empty(self) -> None:
        for key in [k for k, e in self._entries.items() if not e.fields]:
            del self._entries[key]


def _fieldsv1_leaves(tree: Any, prefix: Path) -> set[Path]:
    if not isinstance(tree, Mapping):
        return set()
    out: set[Path] = set()
    for key, child in tree.items():
        if not isinstance(key, str) or not key.startswith("f:"):
            continue
        path = (*prefix, key[2:])
        if isinstance(child, Mapping) and any(k != "." for k in child):
            out |= _fieldsv1_leaves(child, path)
        else:
            out.add(path)
    return out


def leaves(value: Any, prefix: Path = ()) -> dict[Path, Any]:
    if isinstance(value, Mapping) and value:
        out: dict[Path, Any] = {}
        for key, child in value.items():
            out.update(leaves(child, (*prefix, str(key))))
        return out
    return {prefix: value} if prefix else {}


def _get(obj: Any, path: Path) -> Any:
    for key in path:
        if not isinstance(obj, Mapping) or key not in obj:
            return _MISSING
        obj = obj[key]
    return obj


def _set(obj: dict[str, Any], path: Path, value: Any) -> None:
    node = obj
    for key in path[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            child = node[key] = {}
        node = child
    node[path[-1]] = copy.deepcopy(value)


def _remove(obj: dict[str, Any], path: Path) -> None:
    """Remove the leaf and the objects that it leaves empty."""
    chain: list[dict[str, Any]] = [obj]
    for key in path[:-1]:
        child = chain[-1].get(key)
        if not isinstance(child, dict):
            return
        chain.append(child)
    chain[-1].pop(path[-1], None)
    for depth in range(len(path) - 1, 0, -1):
        if chain[depth]:
            break
        chain[depth - 1].pop(path[depth - 1], None)


def _related(a: Path, b: Path) -> bool:
    short = min(len(a), len(b))
    return a[:short] == b[:short]


def apply_config(live: dict[str, Any] | None, config: Mapping[str, Any], table: ManagedFields, *, manager: str,
                 force: bool, scope: Scope, api_version: str) -> dict[str, Any]:
    """The object after `manager` applies `config` (mutating `table`), or ApplyConflict (table untouched)."""
    current = copy.deepcopy(live) if live is not None else {}
    applied = {p: v for p, v in leaves(config).items() if scope(p)}
    mine = table._entries.get((manager, "Apply"))
    before = set(mine.fields) if mine else set()
    others = [e for k, e in table._entries.items() if k != (manager, "Apply")]
    merged = copy.deepcopy(current)
    for path in sorted(before - set(applied), key=len, reverse=True):
        if not any(path in e.fields for e in others):
            _remove(merged, path)
    for path, value in applied.items():
        _set(merged, path, value)
    conflicts = [(e, q) for e in others for q in sorted(e.fields)
                 if any(_related(q, p) for p in applied) and _get(current, q) != _get(merged, q)]
    if conflicts and not force:
        raise ApplyConflict(tuple((e.manager, e.operation, q) for e, q in conflicts), api_version)
    for entry, path in conflicts:
        entry.fields.discard(path)
    if merged != current or set(applied) != before:
        entry = table._entry(manager, "Apply", api_version)
        entry.fields = set(applied)
        if merged != current:
            entry.time = _now()
    table._drop_empty()
    return merged


def record_update(old: Mapping[str, Any] | None, new: Mapping[str, Any], table: ManagedFields, *, manager: str,
                  scope: Scope, api_version: str) -> None:
    """An Update by `manager` turned `old` into `new`: it owns what it changed; what it removed is nobody's."""
    before = {p: v for p, v in leaves(old or {}).items() if scope(p)}
    after = {p: v for p, v in leaves(new).items() if scope(p)}
    changed = {p for p, v in after.items() if before.get(p, _MISSING) != v}
    removed = {p for p in before if p not in after}
    if not changed and not removed:
        return
    for entry in table._entries.values():
        entry.fields = {q for q in entry.fields
                        if not any(_related(q, p) for p in changed) and not any(_related(q, p) for p in removed)}
    if changed:
        entry = table._entry(manager, "Update", api_version)
        entry.fields |= changed
        entry.time = _now()
    table._drop_empty()


# -- update-style writes -----------------------------------------------------------------------------

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"


class BadPatch(ValueError):
    """The request cannot be applied (HTTP `code`)."""

    def __init__(self, message: str, code: int = 422) -> None:
        super().__init__(message)
        self.code = code


def updated_object(obj: Mapping[str, Any], *, method: str, content_type: str, body: Any,
                   subresource: str) -> dict[str, Any]:
    """The object after a PUT, merge patch or JSON patch of the main resource or the status subresource:
    the status subresource changes the status only, the main resource everything but the status and the
    server's metadata (as the registry's status strategies reset them)."""
    if method == "PUT":
        if not isinstance(body, dict):
            raise BadPatch("body must be an object", 400)
        full = copy.deepcopy(body)
    elif content_type == MERGE_PATCH:
        if not isinstance(body, dict):
            raise BadPatch("patch must be an object", 400)
        full = merge_patch(obj, body)
    elif content_type == JSON_PATCH:
        full = json_patch(obj, body)
    else:
        raise BadPatch(f"unsupported media type {content_type!r}", 415)
    result = copy.deepcopy(dict(obj))
    if subresource == "status":
        if "status" in full:
            result["status"] = full["status"]
        else:
            result.pop("status", None)
        return result
    for key, value in full.items():
        if key not in ("status", "apiVersion", "kind", "metadata"):
            result[key] = value
    for key in [k for k in result if k not in full and k not in ("status", "apiVersion", "kind", "metadata")]:
        del result[key]
    meta = {k: v for k, v in (full.get("metadata") or {}).items() if k not in SERVER_META}
    meta.update({k: v for k, v in (obj.get("metadata") or {}).items() if k in SERVER_META})
    result["metadata"] = meta
    return result


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def json_patch(target: Mapping[str, Any], ops: Any) -> dict[str, Any]:
    """RFC 6902 add / replace / remove / test on objects (what the tests use; no list indices)."""
    if not isinstance(ops, list):
        raise BadPatch("a JSON patch is a list of operations", 400)
    doc = copy.deepcopy(dict(target))
    for op in ops:
        if not isinstance(op, dict) or not isinstance(op.get("path"), str):
            raise BadPatch(f"bad operation {op!r}", 400)
        path = tuple(p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:])
        if not path:
            raise BadPatch("the root cannot be patched", 422)
        parent = _get(doc, path[:-1])
        if not isinstance(parent, dict):
            raise BadPatch(f"no object at {op['path']}", 422)
        kind = op.get("op")
        if kind in ("add", "replace"):
            if kind == "replace" and path[-1] not in parent:
                raise BadPatch(f"replace: {op['path']} does not exist", 422)
            parent[path[-1]] = copy.deepcopy(op.get("value"))
        elif kind == "remove":
            if path[-1] not in parent:
                raise BadPatch(f"remove: {op['path']} does not exist", 422)
            del parent[path[-1]]
        elif kind == "test":
            if parent.get(path[-1], _MISSING) != op.get("value"):
                raise BadPatch(f"test failed at {op['path']}", 422)
        else:
            raise BadPatch(f"unsupported op {kind!r}", 400)
    return doc
