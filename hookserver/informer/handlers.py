"""Store-feeding handlers: what a list (replace) and each watch event (apply) do to the store.

One handler per resource. `replace` takes a full list and makes the store agree with it, skipping
(and counting) malformed items; `apply` takes one event and raises InputError for a malformed object,
which the reflector logs and skips. Handlers run in the reflector's thread; the store is thread-safe.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from pydantic import ValidationError

from hookserver.errors import ConfigError, InputError
from hookserver.informer.convert import POD_FIELDS_FROM_API, node_from_json, object_key, pod_from_json
from hookserver.informer.last_seen import LastSeen
from hookserver.informer.slo_state import SLOState
from hookserver.slo import NodeMetricSpec, SLODocument, spec_from_json
from hookserver.slo._base import canonical_json
from hookserver.slo.validation import problems_of
from hookserver.store.state import StateStore

__all__ = ["NodeHandler", "NodeMetricHandler", "NodeSLOHandler", "ObjectHandler", "OneObjectHandler", "PodHandler"]

log = logging.getLogger(__name__)


class ObjectHandler(Protocol):
    def replace(self, objects: Sequence[Any]) -> int:
        """Make the store agree with a full list. Returns how many malformed items were skipped."""
        ...

    def apply(self, event_type: str, obj: Mapping[str, Any]) -> None:
        """ADDED / MODIFIED / DELETED. Raises InputError for a malformed object."""
        ...

    def absent(self) -> None:
        """The resource is not served (CRD not installed): fall back to what applies without it."""
        ...

    def count(self) -> int: ...


def _name_of(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return name if isinstance(name, str) else ""


class PodHandler:
    """Pods of this node. Tracks which UIDs it put in the store, so a relist removes only those (a pod
    known only from a hook, not yet visible in the API, is left alone)."""

    def __init__(self, store: StateStore, *, source: str, clock: Callable[[], float] | None = None) -> None:
        self._store = store
        self._source = source
        self._clock = clock or store.clock
        self._known: set[str] = set()
        self._lock = threading.Lock()

    def replace(self, objects: Sequence[Any]) -> int:
        now = self._clock()
        records = []
        skipped = 0
        for index, obj in enumerate(objects):
            try:
                records.append(pod_from_json(obj, source=self._source, now=now))
            except InputError as exc:
                skipped += 1
                log.warning("%s list: skipping malformed pod #%d (%s): %s", self._source, index, _key(obj), exc)
        fresh = {r.uid for r in records}
        with self._lock:
            gone = self._known - fresh
            self._known = fresh
        for uid in gone:
            self._store.remove_pod(uid)
        for record in records:
            self._store.merge_pod(record, authoritative=POD_FIELDS_FROM_API)
        return skipped

    def apply(self, event_type: str, obj: Mapping[str, Any]) -> None:
        if event_type == "DELETED":
            uid = object_key(obj)
            if not uid or "/" in uid:
                raise InputError("DELETED event without metadata.uid", field="metadata.uid")
            with self._lock:
                self._known.discard(uid)
            self._store.remove_pod(uid)
            return
        record = pod_from_json(obj, source=self._source, now=self._clock())
        with self._lock:
            self._known.add(record.uid)
        self._store.merge_pod(record, authoritative=POD_FIELDS_FROM_API)

    def absent(self) -> None:
        self.replace(())

    def count(self) -> int:
        with self._lock:
            return len(self._known)

    def lists(self, uid: str) -> bool:
        """Whether this source's last list (and watch events since) includes the pod."""
        with self._lock:
            return uid in self._known


class NodeHandler:
    """The one Node named `node_name`; its labels and annotations also drive the ConfigMap's nodeSelector
    matching, the colocation-strategy annotation and the reclaim-ratio labels (SLOState)."""

    def __init__(self, store: StateStore, slo: SLOState, *, node_name: str, source: str) -> None:
        self._store = store
        self._slo = slo
        self._node_name = node_name
        self._source = source
        self._present = False

    def replace(self, objects: Sequence[Any]) -> int:
        skipped = 0
        for obj in objects:
            if isinstance(obj, Mapping) and _name_of(obj) == self._node_name:
                try:
                    self.apply("ADDED", obj)
                except InputError as exc:
                    skipped += 1
                    log.warning("node %s: skipping malformed object: %s", self._node_name, exc)
                return skipped
        self._present = False
        return skipped

    def apply(self, event_type: str, obj: Mapping[str, Any]) -> None:
        if _name_of(obj) != self._node_name:
            return
        if event_type == "DELETED":
            self._present = False
            return  # keep the last node we saw: hooks still need its annotations while it comes back
        node = node_from_json(obj, source=self._source, now=self._store.clock())
        self._store.set_node(node)
        self._slo.set_node_metadata(node.labels, node.annotations)
        self._present = True

    def absent(self) -> None:
        self._present = False

    def count(self) -> int:
        return int(self._present)


class OneObjectHandler:
    """One object the agent watches by name (NodeSLO and NodeMetric named after the node, the slo-controller-config
    ConfigMap): set it, or fall back when it is gone. Subclasses say which object is theirs (`_ours`), what it
    means (`_set`, which raises InputError for a malformed one) and what its absence means (`_clear`)."""

    def __init__(self, *, name: str) -> None:
        self._name = name
        self._present = False

    def _ours(self, obj: Any) -> bool:
        return isinstance(obj, Mapping) and _name_of(obj) == self._name

    def replace(self, objects: Sequence[Any]) -> int:
        for obj in objects:
            if self._ours(obj):
                try:
                    self.apply("ADDED", obj)
                except InputError:
                    return 1
                return 0
        self.absent()
        return 0

    def apply(self, event_type: str, obj: Mapping[str, Any]) -> None:
        if not self._ours(obj):
            return
        if event_type == "DELETED":
            self.absent()
            return
        self._present = True  # it exists, even when malformed (a NodeSLO object says koord-manager runs)
        self._set(obj)

    def absent(self) -> None:
        self._present = False
        self._clear()

    def count(self) -> int:
        return int(self._present)

    def _set(self, obj: Mapping[str, Any]) -> None:
        raise NotImplementedError

    def _clear(self) -> None:
        raise NotImplementedError


class NodeSLOHandler(OneObjectHandler):
    """The NodeSLO named after this node, laid over the defaults. No NodeSLO (or no CRD): the ConfigMap
    rendered for this node when it is known, else defaults (SLOState decides)."""

    def __init__(self, slo: SLOState, *, node_name: str) -> None:
        super().__init__(name=node_name)
        self._node_name = node_name
        self._slo = slo

    def _set(self, obj: Mapping[str, Any]) -> None:
        name = f"nodeslo/{self._node_name}"
        spec = obj.get("spec") or {}
        if not isinstance(spec, Mapping):
            self._slo.set_error(f"{name}: spec: must be an object, got {type(spec).__name__}")
            raise InputError(f"must be an object, got {type(spec).__name__}", field="spec")
        try:
            resolved = spec_from_json(spec, origin=name)
        except ConfigError as exc:
            self._slo.set_error(str(exc))
            raise InputError(str(exc), field="spec") from exc
        self._slo.set_document(SLODocument(origin=name, kind="nodeslo", spec=resolved), input_name=f"apiserver {name}")

    def _clear(self) -> None:
        self._slo.set_document(None, input_name=f"apiserver: no NodeSLO {self._node_name}")


class NodeMetricHandler(OneObjectHandler):
    """The NodeMetric spec (reporting cadence) into the store."""

    def __init__(self, store: StateStore, *, node_name: str, seen: LastSeen | None = None) -> None:
        super().__init__(name=node_name)
        self._store = store
        self._seen = seen

    def _set(self, obj: Mapping[str, Any]) -> None:
        if self._seen is not None:  # the status writer patches from this, without a GET of its own
            self._seen.record(obj)
        spec = obj.get("spec") or {}
        try:
            model = NodeMetricSpec.model_validate(canonical_json(NodeMetricSpec, spec))
        except ValidationError as exc:
            raise InputError("; ".join(problems_of(exc, "spec")), field="spec") from None
        if self._store.snapshot().node_metric == model:
            return  # a status update (our own report, every minute): the spec did not change, nothing to publish
        self._store.set_node_metric(model)

    def _clear(self) -> None:
        if self._seen is not None:
            self._seen.forget()
        self._store.set_node_metric(None)


def _key(obj: Any) -> str:
    if isinstance(obj, Mapping):
        meta = obj.get("metadata")
        if isinstance(meta, Mapping):
            return f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    return "?"
