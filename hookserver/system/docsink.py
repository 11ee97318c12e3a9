"""Where a node-level document goes (the NodeResourceTopology report, the Device report): a sink the publisher
hands the document to, and what the delivery came to. The apiserver's sinks are the informer's server-side-apply
writers; this module holds the contract and the local one (standalone, or the feature's gate off), which writes
the document to the state dir atomically.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from hookserver.system.atomicfile import write_json_atomically

__all__ = ["Delivery", "DocumentSink", "LocalDelivery", "LocalDocumentSink", "log_delivery"]


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


def log_delivery(
    state: tuple[str, str], result: str, detail: str, *, what: str, where: str, logger: logging.Logger
) -> tuple[str, str]:
    """Log a document's delivery when its state changes, not at every tick (a missing CRD is one warning, its
    recovery one line); returns the new state. "unchanged" counts as "ok"; "waiting" (before the first sync) is
    quiet."""
    shown = "ok" if result == "unchanged" else result
    new = (shown, detail if result not in ("ok", "unchanged") else "")
    if new == state:
        return state
    previous = state[0]
    if result in ("ok", "unchanged"):
        if previous and previous not in ("ok", "waiting"):
            logger.info("%s: delivered again (%s)", what, where)
    elif result != "waiting":
        logger.warning("%s not delivered (%s): %s", what, result, detail)
    return new
