"""The effective NodeSLO and colocation-config of this node: two inputs, resolved for the node's labels and
annotations, published to the store, plus the report `hookctl slo` prints.

Inputs change independently, so this keeps the last good document of each and re-resolves whenever any of
them moves:
  * the NodeSLO input: the NodeSLO object named after the node (cluster mode) or the `--slo-file` document
    (standalone: a NodeSLO, or the whole `slo-controller-config` ConfigMap);
  * the ConfigMap input (cluster mode): koordinator's `slo-controller-config` ConfigMap, watched by name;
  * the Node's labels (nodeSelector matching, ratio labels) and its `colocation-strategy` annotation.

The effective NodeSLO is the NodeSLO object when one exists (koord-manager rendered it from the ConfigMap),
else the ConfigMap rendered here for this node (a cluster without koord-manager still gets its
resource-threshold-config and the rest), else koordinator's defaults; `sources` says which per part.
The effective colocation comes from the ConfigMap input, or from the slo-file when that is a ConfigMap, else
the defaults (colocation off). Each is published only when it changed: the kubelet updates the Node every
10 s, and the capacity publisher and the hooks' memo must not be woken by an equal value.

An invalid new input is reported and the previous document stays in force: a typo in a ConfigMap must not
reset a node to defaults, nor switch its colocation off.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from hookserver.slo import ResolvedSLO, SLODocument, default_slo
from hookserver.slo.colocation import ANNOTATION_COLOCATION_STRATEGY, ResolvedColocation, default_colocation
from hookserver.store.state import StateStore

__all__ = ["SLOState"]

log = logging.getLogger(__name__)


class _Input:
    """One input: its last good document, what it is called, and the last error it reported."""

    __slots__ = ("document", "error", "error_at", "name")

    def __init__(self, name: str) -> None:
        self.document: SLODocument | None = None
        self.name = name
        self.error = ""
        self.error_at = 0.0

    def error_report(self) -> dict[str, Any]:
        return {"last_error": self.error, "last_error_at": self.error_at} if self.error else {}


class SLOState:
    def __init__(
        self, store: StateStore, *, node_labels: Mapping[str, str] | None = None,
        node_annotations: Mapping[str, str] | None = None,
    ) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._nodeslo = _Input("defaults")
        self._configmap = _Input("")  # "": no ConfigMap source has reported (standalone, or not listed yet)
        self._labels: Mapping[str, str] = MappingProxyType(dict(node_labels or {}))
        # Only this annotation matters here; keeping just it makes an unrelated annotation change free.
        self._strategy_annotation = (node_annotations or {}).get(ANNOTATION_COLOCATION_STRATEGY)
        self._resolved: ResolvedSLO = default_slo()
        self._colocation: ResolvedColocation = default_colocation()
        self._published = False
        self._updated_at = 0.0
        self._colocation_updated_at = 0.0

    # -- inputs ----------------------------------------------------------------------------------
    def publish_defaults(self) -> None:
        """Put the defaults in the store at start, so readers never see no NodeSLO or colocation at all."""
        with self._lock:
            self._publish_locked()

    def set_document(self, document: SLODocument | None, *, input_name: str) -> None:
        """A new NodeSLO input (None: there is no NodeSLO object, so the ConfigMap or the defaults apply)."""
        with self._lock:
            self._nodeslo.document = document
            self._nodeslo.name = input_name
            self._nodeslo.error = ""
            self._publish_locked()

    def set_error(self, message: str) -> None:
        """A new NodeSLO input was rejected: keep the previous one in force and say why."""
        with self._lock:
            self._nodeslo.error = message
            self._nodeslo.error_at = self._store.clock()
        log.warning("NodeSLO input rejected, keeping the previous one: %s", message)

    def set_configmap(self, document: SLODocument | None, *, input_name: str) -> None:
        """A new slo-controller-config ConfigMap (None: there is none, or it may not be read)."""
        with self._lock:
            self._configmap.document = document
            self._configmap.name = input_name
            self._configmap.error = ""
            self._publish_locked()

    def set_configmap_error(self, message: str, *, input_name: str) -> None:
        """A new ConfigMap was rejected: keep the previous one (NodeSLO and colocation) in force and say why."""
        with self._lock:
            self._configmap.error = message
            self._configmap.error_at = self._store.clock()
            if not self._configmap.name:
                self._configmap.name = input_name
        log.warning("slo-controller-config rejected, keeping the previous one: %s", message)

    def set_node_metadata(self, labels: Mapping[str, str], annotations: Mapping[str, str]) -> None:
        """The Node's labels and annotations, on every Node event. Nothing is resolved unless the labels or
        the colocation-strategy annotation changed (the kubelet's status updates change neither)."""
        annotation = annotations.get(ANNOTATION_COLOCATION_STRATEGY)
        with self._lock:
            if annotation == self._strategy_annotation and labels == self._labels:
                return
            self._labels = MappingProxyType(dict(labels))
            self._strategy_annotation = annotation
            self._publish_locked()

    # -- resolution ------------------------------------------------------------------------------
    def _publish_locked(self) -> None:
        nodeslo, configmap = self._nodeslo.document, self._configmap.document
        if nodeslo is not None:
            resolved = nodeslo.resolve(self._labels)
        elif configmap is not None:
            resolved = configmap.resolve(self._labels)
        else:
            resolved = default_slo()
        now = self._store.clock()
        if not self._published or resolved != self._resolved:
            self._resolved = resolved
            self._updated_at = now
            self._store.set_node_slo(resolved.spec, resolved.sources)
        source = self._colocation_source()
        annotations = {ANNOTATION_COLOCATION_STRATEGY: self._strategy_annotation} if self._strategy_annotation else {}
        colocation = source.colocation(self._labels, annotations) if source is not None else default_colocation()
        if not self._published or colocation != self._colocation:
            for note in colocation.notes:
                if note not in self._colocation.notes:  # once: a note already in force is not repeated
                    log.warning("colocation-config: %s", note)
            self._colocation = colocation
            self._colocation_updated_at = now
            self._store.set_colocation(colocation)
        self._published = True

    def _colocation_source(self) -> SLODocument | None:
        if self._configmap.document is not None:
            return self._configmap.document
        document = self._nodeslo.document
        return document if document is not None and document.configmap is not None else None

    def _colocation_input_locked(self) -> _Input | None:
        if self._configmap.document is not None or self._configmap.name:
            return self._configmap
        document = self._nodeslo.document
        if document is not None and document.configmap is not None:
            return self._nodeslo
        return None

    @property
    def resolved(self) -> ResolvedSLO:
        return self._resolved

    @property
    def colocation(self) -> ResolvedColocation:
        return self._colocation

    # -- report ----------------------------------------------------------------------------------
    def _nodeslo_input_locked(self) -> str:
        if self._nodeslo.document is None and self._configmap.document is not None:
            return f"{self._nodeslo.name}; rendered for this node from {self._configmap.name}"
        return self._nodeslo.name

    def report(self) -> dict[str, Any]:
        """For `hookctl slo`: the effective NodeSLO in camelCase and where each part came from, the
        ConfigMap input, and the effective colocation with the input it came from."""
        with self._lock:
            resolved, document, configmap = self._resolved, self._nodeslo.document, self._configmap.document
            out: dict[str, Any] = {
                "input": self._nodeslo_input_locked(),
                "document": document.describe() if document is not None else {"kind": "none"},
                "node_labels": dict(self._labels),
                "updated_at": self._updated_at,
                "sources": dict(resolved.sources),
                "effective": resolved.spec.to_json(),
                **self._nodeslo.error_report(),
            }
            if self._configmap.name:
                out["configmap"] = {
                    "input": self._configmap.name,
                    "document": configmap.describe() if configmap is not None else {"kind": "none"},
                    **self._configmap.error_report(),
                }
            colocation_input = self._colocation_input_locked()
            out["colocation"] = {
                "input": colocation_input.name if colocation_input is not None else "defaults",
                **self._colocation.describe(),
                "node_annotation": self._strategy_annotation,
                "updated_at": self._colocation_updated_at,
                **(colocation_input.error_report() if colocation_input is not None else {}),
            }
        return out
