"""Keeps this node's NodeMetric spec (the reporting cadence koord-manager renders from the colocation
config) in step where koord-manager does not run, and never rewrites what it owns where it does.

koord-manager creates `nodemetrics/<node>` and writes its spec; without it there is no object, and the
status writer has nothing to report into. `ensure(spec)` is a server-side apply of the object with our
own field manager and `force=false`: it creates the object when missing, changes the spec fields we
apply, removes those we applied before and no longer do (unless another manager owns them too), and
answers 409 naming the manager instead of changing a field another manager owns with another value.

An apply's answer cannot tell "changed" from "already so" (a no-op apply returns the object as it was),
so each call reads the object first: when we already own exactly the fields of `spec`, with its values,
the apply would be a no-op and is not sent (the steady state costs one GET); otherwise one apply follows,
and the spec before and after decide `updated` or `unchanged`. Transient failures are retried within each
request (see `ssa`); nothing here raises for an HTTP or transport failure.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from hookserver.informer.ssa import APPLY_PATCH, ApplyTransport, Reply, apply_conflicts, describe_failure
from hookserver.informer.ssa import is_apply_conflict, lookup, owned_leaves, resource_version, send, status_message
from hookserver.informer.ssa import value_leaves

__all__ = ["NodeMetricSpecWriter", "SpecDelivery"]

SLO_GROUP = "/apis/slo.koordinator.sh/v1alpha1"
API_VERSION = "slo.koordinator.sh/v1alpha1"


@dataclass(frozen=True, slots=True)
class SpecDelivery:
    """What one `ensure` did. `result`: created | updated | unchanged | conflict | not_found (the CRD is
    not installed) | forbidden | error. `attempts`: tries of the last request sent (the read when it
    decided, else the apply)."""

    result: str
    detail: str = ""
    attempts: int = 1
    conflicts: tuple[tuple[str, str], ...] = ()
    resource_version: str = ""


class NodeMetricSpecWriter:
    target = "apiserver"

    def __init__(
        self,
        transport: ApplyTransport,
        *,
        node_name: str,
        field_manager: str = "hookserver",
        timeout_s: float = 10.0,
        sleep: Callable[[float], None] = time.sleep,
        group_path: str = SLO_GROUP,
    ) -> None:
        self._transport = transport
        self._node_name = node_name
        self._path = f"{group_path}/nodemetrics/{node_name}"
        self._api_version = group_path.removeprefix("/apis/")
        self.where = self._path
        self.field_manager = field_manager
        self._timeout_s = timeout_s
        self._sleep = sleep

    def ensure(self, spec: Mapping[str, Any]) -> SpecDelivery:
        spec = _plain(spec)  # read-only views and tuples (store snapshots) as the JSON the server returns
        read = send(self._transport, "GET", self._path, timeout_s=self._timeout_s, sleep=self._sleep)
        current: Mapping[str, Any] | None = None
        if read.status == 200 and isinstance(read.body, Mapping):
            current = read.body
            if self._already_applied(current, spec):
                return SpecDelivery("unchanged", "", read.attempts, resource_version=resource_version(current))
        elif read.status != 404:  # 404: no object yet, or no CRD; the apply tells which
            return self._failure("GET", read, needs="get nodemetrics")
        body = {"apiVersion": self._api_version, "kind": "NodeMetric", "metadata": {"name": self._node_name},
                "spec": spec}
        params = {"fieldManager": self.field_manager, "force": "false"}
        reply = send(self._transport, "PATCH", self._path, body, timeout_s=self._timeout_s, sleep=self._sleep,
                     content_type=APPLY_PATCH, params=params)
        if reply.status in (200, 201):
            answer = reply.body
            if reply.status == 201:
                result = "created"
            elif current is not None and _spec(answer) == _spec(current):
                result = "unchanged"
            else:
                result = "updated"
            return SpecDelivery(result, "", reply.attempts, resource_version=resource_version(answer))
        if reply.status == 409 and is_apply_conflict(reply.body):
            conflicts = apply_conflicts(reply.body)
            detail = "; ".join(f"{m} owns {f}" for m, f in conflicts) or status_message(reply.body)
            return SpecDelivery("conflict", f"conflict: {detail}", reply.attempts, conflicts)
        return self._failure("PATCH", reply, needs="create and patch nodemetrics (server-side apply needs both)")

    def _already_applied(self, current: Mapping[str, Any], spec: Mapping[str, Any]) -> bool:
        """We own exactly the leaves of `spec` and each has its value: the apply would change nothing."""
        meta = current.get("metadata")
        entries = meta.get("managedFields") if isinstance(meta, Mapping) else None
        if not isinstance(entries, list):
            return False
        ours = [e for e in entries if isinstance(e, Mapping) and e.get("manager") == self.field_manager
                and e.get("operation") == "Apply"]
        if len(ours) != 1:
            return False
        owned = owned_leaves(ours[0].get("fieldsV1"))
        wanted = value_leaves({"spec": spec})
        if owned is None or owned != frozenset(wanted):
            return False
        return all(lookup(current, path) == (True, value) for path, value in wanted.items())

    def _failure(self, method: str, reply: Reply, *, needs: str) -> SpecDelivery:
        if reply.status == 404:
            return SpecDelivery("not_found", f"{self._path}: HTTP 404: the NodeMetric CRD "
                                f"({self._api_version} nodemetrics) is not installed", reply.attempts)
        if reply.status == 403:
            return SpecDelivery("forbidden", f"forbidden: the agent's ClusterRole must allow {needs} "
                                f"(deploy/hookserver.yaml): {status_message(reply.body)}", reply.attempts)
        return SpecDelivery("error", describe_failure(method, self._path, reply), reply.attempts)


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _spec(obj: Any) -> Any:
    return obj.get("spec") if isinstance(obj, Mapping) else None

