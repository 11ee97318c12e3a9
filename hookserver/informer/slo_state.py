"""The effective NodeSLO: one input document (NodeSLO object, ConfigMap file or nothing) resolved for the
node's labels and published to the store, plus the report `hookctl slo` prints.

Inputs change independently (the NodeSLO watch, the file poller, the Node's labels), so this keeps the
last good document and re-resolves whenever any of them moves. An invalid new input is reported and
the previous effective NodeSLO stays in force: a typo in a ConfigMap must not reset a node to defaults.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from hookserver.slo import ResolvedSLO, SLODocument, default_slo
from hookserver.store.state import StateStore

__all__ = ["SLOState"]

log = logging.getLogger(__name__)


class SLOState:
    def __init__(self, store: StateStore, *, node_labels: Mapping[str, str] | None = None) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._document: SLODocument | None = None
        self._labels: Mapping[str, str] = MappingProxyType(dict(node_labels or {}))
        self._resolved: ResolvedSLO = default_slo()
        self._error = ""
        self._error_at = 0.0
        self._updated_at = 0.0
        self._input = "defaults"

    def publish_defaults(self) -> None:
        """Put the defaults in the store at start, so readers never see no NodeSLO at all."""
        with self._lock:
            self._publish_locked()

    def set_document(self, document: SLODocument | None, *, input_name: str) -> None:
        """A new input (None: the input says there is no NodeSLO, so defaults apply)."""
        with self._lock:
            self._document = document
            self._input = input_name
            self._error = ""
            self._publish_locked()

    def set_error(self, message: str) -> None:
        """A new input was rejected: keep the previous effective NodeSLO and say why."""
        with self._lock:
            self._error = message
            self._error_at = self._store.clock()
        log.warning("NodeSLO input rejected, keeping the previous one: %s", message)

    def set_node_labels(self, labels: Mapping[str, str]) -> None:
        with self._lock:
            if dict(labels) == dict(self._labels):
                return
            self._labels = MappingProxyType(dict(labels))
            if self._document is not None and self._document.configmap is not None:
                self._publish_locked()

    def _publish_locked(self) -> None:
        document = self._document
        resolved = document.resolve(self._labels) if document is not None else default_slo()
        self._resolved = resolved
        self._updated_at = self._store.clock()
        self._store.set_node_slo(resolved.spec, resolved.sources)

    @property
    def resolved(self) -> ResolvedSLO:
        return self._resolved

    def report(self) -> dict[str, Any]:
        """For `hookctl slo`: the effective NodeSLO in camelCase and where each part came from."""
        with self._lock:
            resolved, document = self._resolved, self._document
            out: dict[str, Any] = {
                "input": self._input,
                "document": document.describe() if document is not None else {"kind": "none"},
                "node_labels": dict(self._labels),
                "updated_at": self._updated_at,
                "sources": dict(resolved.sources),
                "effective": resolved.spec.to_json(),
            }
            if self._error:
                out["last_error"] = self._error
                out["last_error_at"] = self._error_at
        return out
