"""Where a node-level document goes (the NodeResourceTopology report, the Device report): a sink the publisher
hands the document to, and what the delivery came to. The apiserver's sinks are the informer's server-side-apply
writers; this module holds the contract and the local one (standalone, or the feature's gate off), which writes
the document to the state dir atomically.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from hookserver.system.atomicfile import write_json_atomically

__all__ = ["Delivery", "DocumentDelivery", "DocumentSink", "LocalDelivery", "LocalDocumentSink"]


class Delivery(Protocol):
    """`result`: ok | conflict | crd_missing | not_found | forbidden | error, with a detail for the log."""

    @property
    def result(self) -> str: ...

    @property
    def detail(self) -> str: ...


class DocumentSink(Protocol):
    target: str  # "apiserver" | "file"
    where: str

    def apply(self, document: Mapping[str, Any]) -> Delivery: ...


@dataclass(frozen=True, slots=True)
class LocalDelivery:
    result: str
    detail: str = ""


class LocalDocumentSink:
    """The document goes to a file only (`where`), written atomically; a failed write is an `error` delivery."""

    target = "file"

    def __init__(self, path: str) -> None:
        self.where = path

    def apply(self, document: Mapping[str, Any]) -> Delivery:
        problem = write_json_atomically(self.where, document, indent=1, sort_keys=False)
        return LocalDelivery("error", problem) if problem else LocalDelivery("ok")



class DocumentDelivery:
    """One node document's way out, the same for every such document: to its sink only when its text changed
    since the sink last accepted it; a copy in `document_path` when the sink is the apiserver (written when its
    text changed, a failed write logged once); and the delivery's state logged when it changes, not at every
    tick (a missing CRD is one warning, its recovery one line). "unchanged" counts as "ok"; "waiting" (before
    the informer's first sync) is quiet."""

    def __init__(self, sink: DocumentSink, *, what: str, logger: logging.Logger, document_path: str = "",
                 clock: Callable[[], float] = time.time) -> None:
        self.sink = sink
        self.what = what
        self._log = logger
        self._document_path = document_path
        self._clock = clock
        self._sent = ""  # the text the sink last accepted
        self._filed = ""  # the text in document_path
        self._file_problem = ""
        self._state = ("", "")
        self.writes = 0
        self.last_result = "pending"
        self.last_detail = ""
        self.last_write_at = 0.0

    def deliver(self, document: Mapping[str, Any], text: str) -> str:
        """Hand `document` (whose canonical text is `text`) on if it changed; returns the result."""
        if self._document_path and self.sink.target != "file" and text != self._filed:
            problem = write_json_atomically(self._document_path, document, indent=1, sort_keys=False)
            if not problem:
                self._filed = text
            elif problem != self._file_problem:
                self._log.warning("%s: cannot keep %s: %s", self.what, self._document_path, problem)
            self._file_problem = problem
        if text == self._sent:
            return self.record("unchanged", "")
        delivery = self.sink.apply(document)
        if delivery.result == "ok":
            self._sent = text
            self.writes += 1
            self.last_write_at = self._clock()
        return self.record(delivery.result, delivery.detail)

    def record(self, result: str, detail: str) -> str:
        self.last_result, self.last_detail = result, detail
        shown = "ok" if result == "unchanged" else result
        state = (shown, detail if result not in ("ok", "unchanged") else "")
        if state != self._state:
            previous = self._state[0]
            self._state = state
            if result in ("ok", "unchanged"):
                if previous and previous not in ("ok", "waiting"):
                    self._log.info("%s: delivered again (%s)", self.what, self.sink.where)
            elif result != "waiting":
                self._log.warning("%s not delivered (%s): %s", self.what, result, detail)
        return result

    def view(self) -> dict[str, Any]:
        """The delivery's part of `hookctl topology` / `hookctl devices`."""
        return {"target": self.sink.target, "where": self.sink.where, "last_result": self.last_result,
                "last_detail": self.last_detail, "writes": self.writes, "last_write_at": self.last_write_at}
