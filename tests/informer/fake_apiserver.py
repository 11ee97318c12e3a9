"""An HTTP fake of kube-apiserver's list and watch wire format, for informer tests. Not an apiserver.

It serves, from memory, on 127.0.0.1 (port 0 by default) over plain HTTP/1.1:
  * GET <collection>            -> a JSON List with `metadata.resourceVersion` (the current global rv);
  * GET <collection>?watch=1    -> a chunked stream of one JSON event per line: ADDED / MODIFIED /
    DELETED from the given resourceVersion on, BOOKMARK every `bookmark_interval_s` when the client sent
    allowWatchBookmarks=true, and `ERROR` carrying a 410 Expired Status when that version was compacted;
    resourceVersion "" or "0" starts with a synthetic ADDED per current object, like the real server;
  * fieldSelector `a.b=v`, `a.b==v`, `a.b!=v`, comma-joined; an object that stops (starts) matching
    during a watch is sent as DELETED (ADDED), as the watch cache does;
  * timeoutSeconds ends a watch cleanly; a bearer token is required when `token` is set (401 otherwise);
  * collections: pods and configmaps (also /api/v1/namespaces/<ns>/<kind>), nodes, and the Koordinator CRDs
    nodeslos / nodemetrics under /apis/slo.koordinator.sh/v1alpha1 (each can be "uninstalled": 404, or
    `forbid`den: 403 on list and watch, as without an RBAC grant).
  * for cluster-scoped kinds, GET <collection>/<name> (one object), and PUT or PATCH of <collection>/<name>
    and <collection>/<name>/status (the status subresource changes the status only, the main resource all
    but the status): `application/merge-patch+json` (RFC 7386; a `metadata.resourceVersion` that is not the
    current one gives 409 Conflict, like the real optimistic-concurrency check), `application/json-patch+json`,
    and server-side apply (`application/apply-patch+yaml` with `fieldManager` and `force`; it creates a
    missing object through the main resource, not through status). Field ownership follows the model in
    fake_ssa.py and is served as `metadata.managedFields` (apiserver fieldsV1 shape) in GET, list and watch;
    an update's manager is its `fieldManager` or else its User-Agent before "/", and `apply_as` /
    `update_as` write as another manager (koordinator-manager) without HTTP. A write that changes nothing
    keeps its resourceVersion and sends no event. `fail_next_patches(n, code, body=...)` makes the next n
    writes fail with that status (conflict and outage tests); `patches` records merge patches of status,
    `writes` every write (content type, query, manager, body). An unserved (uninstalled) resource answers
    writes with the real server's plain-text "404 page not found".
Writes, for the evictor: `GET /apis/policy` (discovery; `policy_versions` says which are served), `GET` of
one pod, `POST pods/<name>/eviction` (policy/v1 and policy/v1beta1 bodies, a UID precondition, HTTP 429 while
`pdb_refusals[ns/name]` > 0, then the pod gets a deletionTimestamp as a real apiserver gives a pod bound to a
node), and `POST namespaces/<ns>/events` (kept in `events`).
`quiet(True)` holds every watch open silently (no event, no bookmark: a healthy watch of a quiet resource
on kube-apiserver 1.20, which sends nothing until timeoutSeconds), new requests are served as usual;
`black_hole(True)` holds every byte: open watches send nothing and do not end, new connections are accepted
and their requests never answered (a dead route or load balancer: no RST, no FIN); `black_hole(False)` drops
the held requests' connections and serves again.
`kill()` drops the listener and every open connection mid-stream; `restart()` serves again on the same
port with the same data, so tests can change objects while it is down and check the client catches up.
Cost witnesses: `connections` counts accepted TCP connections (a watch that ends at timeoutSeconds leaves its
connection open for the next request, as kube-apiserver does), `accept_encodings` records every GET's
Accept-Encoding and lists above `gzip_min_bytes` (128 KiB, the real threshold) are gzipped when it offers gzip
(`gzipped` counts them), `GET /version` answers, and `throttle_next(n, retry_after_s=...)` answers the next n GETs
under a path with 429 and a Retry-After.
`FakeKubelet` serves the kubelet's `/pods` (a PodList) with the same token check.
"""

from __future__ import annotations

import copy
import gzip
import json
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.informer.fake_ssa import (
    APPLY_PATCH,
    JSON_PATCH,
    MERGE_PATCH,
    ApplyConflict,
    BadPatch,
    ManagedFields,
    apply_config,
    in_status,
    outside_status,
    record_update,
    updated_object,
)

__all__ = ["COLLECTIONS", "FakeApiServer", "FakeKubelet", "Write", "make_node", "make_nodeslo", "make_pod"]

SLO = "/apis/slo.koordinator.sh/v1alpha1"
# kind -> (collection path, object kind, apiVersion, namespaced)
COLLECTIONS: Mapping[str, tuple[str, str, str, bool]] = {
    "pods": ("/api/v1/pods", "Pod", "v1", True),
    "nodes": ("/api/v1/nodes", "Node", "v1", False),
    "nodeslos": (f"{SLO}/nodeslos", "NodeSLO", "slo.koordinator.sh/v1alpha1", False),
    "nodemetrics": (f"{SLO}/nodemetrics", "NodeMetric", "slo.koordinator.sh/v1alpha1", False),
    "configmaps": ("/api/v1/configmaps", "ConfigMap", "v1", True),
}


def make_pod(name: str, *, node: str = "node-a", namespace: str = "default", uid: str = "", qos: str = "",
             cpu: str = "100m", memory: str = "64Mi", annotations: Mapping[str, str] | None = None,
             priority: int | None = None, phase: str = "Running") -> dict[str, Any]:
    labels = {"app": name}
    if qos:
        labels["koordinator.sh/qosClass"] = qos
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": uid or str(uuid.uuid4()), "labels": labels,
                     "annotations": dict(annotations or {})},
        "spec": {"nodeName": node, "containers": [
            {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu, "memory": memory},
                                                              "limits": {"cpu": cpu, "memory": memory}}}]},
        "status": {"phase": phase, "qosClass": "Guaranteed"},
    }
    if priority is not None:
        pod["spec"]["priority"] = priority
    return pod


def make_node(name: str = "node-a", *, labels: Mapping[str, str] | None = None,
              annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "uid": str(uuid.uuid4()), "labels": dict(labels or {}),
                     "annotations": dict(annotations or {})},
        "status": {"capacity": {"cpu": "8", "memory": "32Gi"}, "allocatable": {"cpu": "7800m", "memory": "30Gi"}},
    }


def make_nodeslo(name: str = "node-a", spec: Mapping[str, Any] | None = None) -> dict[str, Any]:
    return {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeSLO",
            "metadata": {"name": name, "uid": str(uuid.uuid4())}, "spec": dict(spec or {})}


@dataclass(frozen=True)
class Write:
    """One PUT or PATCH the fake answered (or failed on purpose)."""

    method: str
    kind: str
    name: str
    subresource: str
    content_type: str
    query: dict[str, str]
    manager: str
    body: Any


class _NotFound(Exception):
    pass


_REASONS = {400: "BadRequest", 403: "Forbidden", 404: "NotFound", 409: "Conflict", 415: "UnsupportedMediaType",
            422: "Invalid", 429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable"}


@dataclass
class _Event:
    rv: int
    kind: str
    type: str
    old: dict[str, Any] | None
    new: dict[str, Any]


def _field(obj: Mapping[str, Any], path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return "" if value is None else str(value)


def _selector(text: str) -> Callable[[Mapping[str, Any]], bool]:
    terms: list[tuple[str, str, bool]] = []
    for term in filter(None, text.split(",")):
        if "!=" in term:
            key, value = term.split("!=", 1)
            terms.append((key, value, False))
        else:
            key, value = term.replace("==", "=").split("=", 1)
            terms.append((key, value, True))
    return lambda obj: all((_field(obj, k) == v) is eq for k, v, eq in terms)


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"


class FakeApiServer:
    def __init__(self, *, token: str = "", bookmark_interval_s: float = 0.0) -> None:
        self.token = token
        self.bookmark_interval_s = bookmark_interval_s
        self._cond = threading.Condition()
        self._rv = 100
        self._compacted_rv = 0
        self._objects: dict[str, dict[str, dict[str, Any]]] = {k: {} for k in COLLECTIONS}
        self._history: list[_Event] = []
        self._uninstalled: set[str] = set()
        self._forbidden: set[str] = set()  # kinds answered 403 Forbidden (an RBAC grant missing)
        self._raw: dict[str, list[tuple[int, bytes]]] = {k: [] for k in COLLECTIONS}
        self._raw_seq = 0
        self._epoch = 0  # bumped by kill(): every open watch of an older epoch ends abruptly
        self._quiet = False
        self._black_hole = False
        self.held_requests = 0  # requests read but never answered while black-holed
        self._expire_epoch: dict[str, int] = {k: 0 for k in COLLECTIONS}
        self._end_epoch = 0
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.patches: list[tuple[str, str, Any]] = []
        self._patch_failures: list[tuple[int, Any]] = []
        self._managed: dict[str, dict[str, ManagedFields]] = {k: {} for k in COLLECTIONS}
        self.writes: list[Write] = []
        self.policy_versions: list[str] = ["policy/v1", "policy/v1beta1"]
        self.pdb_refusals: dict[str, int] = {}
        self.pdb_retry_after_s = 10  # the apiserver's retryAfterSeconds on a PDB refusal
        self.pdb_retry_after_header: str | None = None  # a Retry-After header on the refusal (None: none)
        self.pdb_plain_refusal = False  # the 429 as a proxy answers it: text, no Status body
        # pod exec: (namespace, pod, container, command) -> (stdout, stderr, exit status); None: not served
        self.exec_run: Callable[[str, str, str, list[str]], tuple[bytes, bytes, int]] | None = None
        # pods/proxy: (namespace, pod, port, path, query) -> (HTTP status, body); with it and no exec_run, an
        # exec answers 500 "error dialing backend" as an apiserver that cannot reach the kubelet does
        self.proxy_run: Callable[[str, str, int, str, dict[str, str]], tuple[int, str]] | None = None
        self.evictions: list[dict[str, Any]] = []
        self.eviction_posts: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []
        self.posts: list[str] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._sockets: set[socket.socket] = set()
        self.port = 0
        self.connections = 0  # TCP connections accepted: each would be a TLS handshake on a real apiserver
        self.accept_encodings: list[str] = []  # the Accept-Encoding of every GET
        self.gzip_min_bytes = 128 << 10  # kube-apiserver gzips a response above 128 KiB when the client accepts it
        self.gzipped = 0  # responses sent gzipped
        self._throttle: list[tuple[str, float, int]] = []  # (path prefix, Retry-After, 429 or 503) of GETs
        self.throttled: list[tuple[float, str]] = []  # (monotonic time, path) of every 429 sent

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> FakeApiServer:
        server = ThreadingHTTPServer(("127.0.0.1", self.port), _handler_for(self))
        server.daemon_threads = True
        self.port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def kill(self) -> None:
        """The server dies: the listener closes and every open stream is cut without a final chunk."""
        server, self._server = self._server, None
        if server is None:
            return
        with self._cond:
            self._epoch += 1
            sockets = list(self._sockets)
            self._cond.notify_all()
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        server.shutdown()
        server.server_close()

    def restart(self) -> None:
        self.kill()
        self.start()

    def throttle_next(self, n: int, *, retry_after_s: float, path_prefix: str = "/") -> None:
        """Answer the next `n` GETs under `path_prefix` (lists and watches) with 429 and this Retry-After, as
        kube-apiserver does while its max-in-flight is full or a restarted one is still loading a cache."""
        with self._cond:
            self._throttle.extend([(path_prefix, retry_after_s, 429)] * n)

    def unavailable_next(self, n: int, *, path_prefix: str = "/") -> None:
        """Answer the next `n` GETs under `path_prefix` with 503 and no Retry-After, as a restarted kube-apiserver
        answers a custom resource's requests until that CRD's handler is ready."""
        with self._cond:
            self._throttle.extend([(path_prefix, 0.0, 503)] * n)

    def _throttled(self, path: str) -> tuple[float, int] | None:
        with self._cond:
            for i, (prefix, retry_after, code) in enumerate(self._throttle):
                if path.startswith(prefix):
                    del self._throttle[i]
                    self.throttled.append((time.monotonic(), path))
                    return retry_after, code
        return None

    def paths_requested(self, path: str) -> int:
        return sum(1 for p, _q in self.requests if p == path)

    def quiet(self, on: bool) -> None:
        """Open and new watches send nothing (events are delivered once quiet ends)."""
        with self._cond:
            self._quiet = on
            self._cond.notify_all()

    def black_hole(self, on: bool) -> None:
        """Hold every byte in both directions, as a dead route does; off serves again."""
        with self._cond:
            self._black_hole = on
            self._cond.notify_all()

    def _held(self) -> bool:
        """In a handler thread: while black-holed, wait; True when the request must go unanswered (the
        hole was there when it came), which then drops the connection."""
        with self._cond:
            if not self._black_hole:
                return False
            self.held_requests += 1
            epoch = self._epoch
            while self._black_hole and self._epoch == epoch:
                self._cond.wait(timeout=0.5)
            return True

    stop = kill

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def kubeconfig(self, path: str) -> str:
        user: dict[str, Any] = {"token": self.token} if self.token else {}
        doc = {
            "apiVersion": "v1", "kind": "Config", "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": user}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
        }
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(doc, handle)
        return path

    # -- state -----------------------------------------------------------------------------------
    @property
    def resource_version(self) -> int:
        return self._rv

    def _record(self, kind: str, type_: str, old: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
        self._rv += 1
        new["metadata"]["resourceVersion"] = str(self._rv)
        self._history.append(_Event(self._rv, kind, type_, copy.deepcopy(old), copy.deepcopy(new)))
        self._cond.notify_all()
        return new

    def apply(self, kind: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Create or replace (by namespace/name): the test's own hand, not a server-side apply (that is
        `apply_as`). Returns the stored copy with its resourceVersion. Field ownership is kept for the
        leaves still there, or taken from `metadata.managedFields` when the object carries them."""
        new = copy.deepcopy(dict(obj))
        with self._cond:
            key = _key(new)
            old = self._objects[kind].get(key)
            given = new.get("metadata", {}).get("managedFields")
            table = ManagedFields.parse(given) if given is not None else self._managed[kind].get(key, ManagedFields())
            table.keep_existing(new)
            self._managed[kind][key] = table
            if table:
                new["metadata"]["managedFields"] = table.render()
            self._objects[kind][key] = new
            return self._record(kind, "MODIFIED" if old else "ADDED", old, new)

    def delete(self, kind: str, name: str, namespace: str = "") -> None:
        with self._cond:
            self._managed[kind].pop(f"{namespace}/{name}", None)
            old = self._objects[kind].pop(f"{namespace}/{name}")
            gone = copy.deepcopy(old)
            self._record(kind, "DELETED", old, gone)

    def compact(self) -> None:
        """Forget history: a watch from any version before now gets 410 Expired."""
        with self._cond:
            self._history.clear()
            self._compacted_rv = self._rv

    def expire_watches(self, kind: str) -> None:
        """Send ERROR 410 to every open watch of `kind` (the watch cache lost its window)."""
        with self._cond:
            self._expire_epoch[kind] += 1
            self._compacted_rv = self._rv
            self._history.clear()
            self._cond.notify_all()

    def end_watches(self) -> None:
        """End every open watch cleanly (the last chunk, as a shutting-down kube-apiserver ends them), long before
        its timeoutSeconds."""
        with self._cond:
            self._end_epoch += 1
            self._cond.notify_all()

    def inject_raw(self, kind: str, line: bytes) -> None:
        """Send `line` verbatim to every open watch of `kind` (malformed input tests)."""
        with self._cond:
            self._raw_seq += 1
            self._raw[kind].append((self._raw_seq, line))
            self._cond.notify_all()

    def uninstall(self, kind: str) -> None:
        self._uninstalled.add(kind)

    def install(self, kind: str) -> None:
        self._uninstalled.discard(kind)

    def forbid(self, kind: str, forbidden: bool = True) -> None:
        """List and watch of `kind` answer 403 Forbidden, as the authorizer does without a grant."""
        if forbidden:
            self._forbidden.add(kind)
        else:
            self._forbidden.discard(kind)

    def fail_next_patches(self, count: int, code: int = 409, *, body: Any = None) -> None:
        """The next `count` writes (PATCH of any type, PUT) answer `code`, with `body` when given (a Status
        dict, or a str sent as it is: malformed-answer tests)."""
        with self._cond:
            self._patch_failures = [(code, body)] * count

    def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any] | None:
        with self._cond:
            obj = self._objects[kind].get(f"{namespace}/{name}")
            return copy.deepcopy(obj) if obj is not None else None

    def apply_as(self, manager: str, kind: str, name: str, config: Mapping[str, Any], *, subresource: str = "",
                 force: bool = False) -> tuple[int, Any]:
        """A server-side apply by another field manager (koord-manager, a second agent), as over HTTP."""
        return self._write(kind, name, subresource, method="PATCH", content_type=APPLY_PATCH,
                           body=copy.deepcopy(dict(config)), manager=manager, force=force)

    def update_as(self, manager: str, kind: str, name: str, patch: Mapping[str, Any], *,
                  subresource: str = "status") -> tuple[int, Any]:
        """A JSON merge patch by another field manager (koord-manager updates the Node's status this way)."""
        return self._write(kind, name, subresource, method="PATCH", content_type=MERGE_PATCH,
                           body=copy.deepcopy(dict(patch)), manager=manager)

    def managed_fields(self, kind: str, name: str) -> ManagedFields:
        with self._cond:
            return self._managed[kind].get(f"/{name}") or ManagedFields()

    def _write(self, kind: str, name: str, subresource: str, *, method: str, content_type: str, body: Any,
               manager: str, force: bool = False, query: Mapping[str, str] | None = None) -> tuple[int, Any]:
        """PUT or PATCH (apply, merge, JSON) of a cluster-scoped object or its status, with field ownership."""
        with self._cond:
            self.writes.append(Write(method, kind, name, subresource, content_type, dict(query or {}), manager,
                                     copy.deepcopy(body)))
            if subresource == "status" and content_type == MERGE_PATCH:
                self.patches.append((kind, name, copy.deepcopy(body)))
            if self._patch_failures:
                code, failure = self._patch_failures.pop(0)
                return code, failure if failure is not None else _status(code, _REASONS.get(code, "Error"),
                                                                          f"injected {code}")
            key = f"/{name}"
            obj = self._objects[kind].get(key)
            _, obj_kind, api_version, _ = COLLECTIONS[kind]
            table = self._managed[kind].setdefault(key, ManagedFields())
            scope = in_status if subresource == "status" else outside_status
            try:
                if content_type == APPLY_PATCH and method == "PATCH":
                    new = self._applied(kind, name, obj, body, table, manager=manager, force=force, scope=scope)
                else:
                    if obj is None:
                        return 404, _status(404, "NotFound", f'{kind} "{name}" not found')
                    want_rv = (body.get("metadata") or {}).get("resourceVersion") if isinstance(body, dict) else None
                    if want_rv and want_rv != obj["metadata"].get("resourceVersion"):
                        return 409, _status(409, "Conflict", f'Operation cannot be fulfilled on {kind} "{name}": '
                                            "the object has been modified; please apply your changes to the latest "
                                            "version")
                    new = updated_object(obj, method=method, content_type=content_type, body=body,
                                         subresource=subresource)
                    if subresource == "status" and not new.get("status", True):
                        new.pop("status")
                    record_update(obj, new, table, manager=manager, scope=scope, api_version=api_version)
            except ApplyConflict as exc:
                return 409, exc.status()
            except _NotFound as exc:
                return 404, _status(404, "NotFound", str(exc))
            except BadPatch as exc:
                return exc.code, _status(exc.code, _REASONS.get(exc.code, "Invalid"), str(exc))
            if table:
                new.setdefault("metadata", {})["managedFields"] = table.render()
            else:
                new.get("metadata", {}).pop("managedFields", None)
            if obj is None:
                self._objects[kind][key] = new
                return 201, copy.deepcopy(self._record(kind, "ADDED", None, new))
            if new == obj:
                return 200, copy.deepcopy(obj)  # a no-op is not written: same resourceVersion, no event
            self._objects[kind][key] = new
            return 200, copy.deepcopy(self._record(kind, "MODIFIED", obj, new))

    def _applied(self, kind: str, name: str, obj: dict[str, Any] | None, config: Any, table: ManagedFields, *,
                 manager: str, force: bool, scope: Callable[[tuple[str, ...]], bool]) -> dict[str, Any]:
        _, obj_kind, api_version, _ = COLLECTIONS[kind]
        if not isinstance(config, dict):
            raise BadPatch("an apply configuration must be an object", 400)
        if config.get("apiVersion") != api_version or config.get("kind") != obj_kind:
            raise BadPatch(f"apply of {config.get('apiVersion')}/{config.get('kind')} to {kind}", 400)
        if (config.get("metadata") or {}).get("name") != name:
            raise BadPatch(f"the name of the object ({(config.get('metadata') or {}).get('name')}) does not match "
                           f"the name on the URL ({name})", 400)
        if obj is None and scope is in_status:
            raise _NotFound(f'{kind} "{name}" not found')
        merged = apply_config(obj, config, table, manager=manager, force=force, scope=scope, api_version=api_version)
        if obj is None:
            merged.update(apiVersion=api_version, kind=obj_kind)
            merged.setdefault("metadata", {}).update(
                name=name, uid=str(uuid.uuid4()), creationTimestamp=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        return merged

    def _count(self, kind: str, watch: bool) -> int:
        path = COLLECTIONS[kind][0]
        return sum(1 for p, q in self.requests if p == path and (q.get("watch") in ("1", "true")) is watch)

    def watch_count(self, kind: str) -> int:
        return self._count(kind, True)

    def list_count(self, kind: str) -> int:
        return self._count(kind, False)


class FakeKubelet:
    """The kubelet's `/pods`: a PodList of whatever `pods` holds; bearer token checked when set."""

    def __init__(self, *, token: str = "") -> None:
        self.token = token
        self.pods: list[dict[str, Any]] = []
        self.fail_with: int = 0
        self.requests = 0
        self._server: ThreadingHTTPServer | None = None
        self.port = 0

    def start(self) -> FakeKubelet:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                outer.requests += 1
                if outer.token and self.headers.get("Authorization") != f"Bearer {outer.token}":
                    return _send_json(self, 401, _status(401, "Unauthorized", "bad token"))
                if outer.fail_with:
                    return _send_json(self, outer.fail_with, _status(outer.fail_with, "Fail", "injected"))
                if urlsplit(self.path).path != "/pods":
                    return _send_json(self, 404, _status(404, "NotFound", self.path))
                _send_json(self, 200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": outer.pods})

        server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        server.daemon_threads = True
        self.port = server.server_address[1]
        self._server = server
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}


def _send_text(handler: BaseHTTPRequestHandler, code: int, text: str | bytes,
               headers: Mapping[str, str] | None = None) -> None:
    data = text.encode() if isinstance(text, str) else text
    handler.send_response(code)
    handler.send_header("Content-Type", "text/plain; charset=utf-8")
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def _send_json(handler: BaseHTTPRequestHandler, code: int, body: Any, headers: Mapping[str, str] | None = None) -> None:
    data = json.dumps(body).encode()
    handler.send_response(code)
    handler.send_header("Content-Type", "application/json")
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def _object_route(path: str) -> tuple[str, str, str] | None:
    """(kind, name, subresource) for `<collection>/<name>[/status]` of a cluster-scoped kind."""
    for kind, (collection, _k, _v, namespaced) in COLLECTIONS.items():
        if namespaced or not path.startswith(collection + "/"):
            continue
        rest = path[len(collection) + 1:].split("/")
        if len(rest) == 1 and rest[0]:
            return kind, rest[0], ""
        if len(rest) == 2 and rest[0] and rest[1] == "status":
            return kind, rest[0], "status"
    return None


def _route(path: str) -> tuple[str, str] | None:
    """(kind, namespace) for a collection path, or None."""
    for kind, (collection, _k, _v, namespaced) in COLLECTIONS.items():
        if path == collection:
            return kind, ""
        if namespaced:
            prefix, _, resource = collection.rpartition("/")
            parts = path.split("/")
            if path.startswith(f"{prefix}/namespaces/") and len(parts) == 6 and parts[5] == resource:
                return kind, parts[4]
    return None


def _handler_for(fake: FakeApiServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def setup(self) -> None:
            super().setup()
            with fake._cond:
                fake.connections += 1
                fake._sockets.add(self.connection)  # kill() cuts keep-alive connections too, not only watches

        def finish(self) -> None:
            with fake._cond:
                fake._sockets.discard(self.connection)
            try:
                super().finish()
            except OSError:
                pass
        def _authorized(self) -> bool:
            if fake.token and self.headers.get("Authorization") != f"Bearer {fake.token}":
                _send_json(self, 401, _status(401, "Unauthorized", "Unauthorized"))
                return False
            return True

        def do_POST(self) -> None:
            url = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            fake.posts.append(url.path)
            if not self._authorized():
                return
            try:
                body = json.loads(raw or b"null")
            except ValueError:
                return _send_json(self, 400, _status(400, "BadRequest", "body is not JSON"))
            parts = url.path.split("/")
            if len(parts) == 8 and parts[1:4] == ["api", "v1", "namespaces"] and parts[5] == "pods" and parts[7] == "eviction":
                return self._evict(parts[4], parts[6], body)
            if len(parts) == 6 and parts[1:4] == ["api", "v1", "namespaces"] and parts[5] == "events":
                if not isinstance(body, dict) or body.get("kind") != "Event":
                    return _send_json(self, 400, _status(400, "BadRequest", "not an Event"))
                with fake._cond:
                    fake.events.append(copy.deepcopy(body))
                return _send_json(self, 201, body)
            return _send_json(self, 404, _status(404, "NotFound", f"the server could not find {url.path}"))

        def _evict(self, namespace: str, name: str, body: Any) -> None:
            key = f"{namespace}/{name}"
            version = body.get("apiVersion") if isinstance(body, dict) else None
            if version not in fake.policy_versions or not isinstance(body, dict) or body.get("kind") != "Eviction":
                return _send_json(self, 400, _status(400, "BadRequest", f"unsupported eviction {version!r}"))
            with fake._cond:
                fake.eviction_posts.append(copy.deepcopy(body))
                pod = fake._objects["pods"].get(key)
                if pod is None:
                    return _send_json(self, 404, _status(404, "NotFound", f'pods "{name}" not found'))
                uid = ((body.get("deleteOptions") or {}).get("preconditions") or {}).get("uid")
                if uid and uid != pod["metadata"].get("uid"):
                    return _send_json(self, 409, _status(409, "Conflict", "Precondition failed: UID in precondition"))
                if fake.pdb_refusals.get(key, 0) > 0:
                    fake.pdb_refusals[key] -= 1
                    refusal = _status(429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption budget.")
                    # as the apiserver (registry/core/pod/storage/eviction.go): retry after 10 s, cause DisruptionBudget
                    refusal["details"] = {"causes": [{"type": "DisruptionBudget", "message": "The disruption budget "
                                                      "needs 1 healthy pods and has 1 currently"}],
                                          "retryAfterSeconds": fake.pdb_retry_after_s}
                    extra = {} if fake.pdb_retry_after_header is None else {"Retry-After": fake.pdb_retry_after_header}
                    if fake.pdb_plain_refusal:
                        return _send_text(self, 429, "Too many requests, please try again later.\n", extra)
                    return _send_json(self, 429, refusal, extra)
                fake.evictions.append({"pod": key, "apiVersion": version, "body": copy.deepcopy(body)})
                old = copy.deepcopy(pod)
                pod["metadata"]["deletionTimestamp"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                self_rv = fake._record("pods", "MODIFIED", old, pod)
            _send_json(self, 201, {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201,
                                   "metadata": {"resourceVersion": self_rv["metadata"]["resourceVersion"]}})

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            if fake._held():
                self.close_connection = True
                return
            fake.requests.append((url.path, query))
            fake.accept_encodings.append(self.headers.get("Accept-Encoding") or "")
            if fake.token and self.headers.get("Authorization") != f"Bearer {fake.token}":
                return _send_json(self, 401, _status(401, "Unauthorized", "Unauthorized"))
            if fake.exec_run is not None or fake.proxy_run is not None:  # the kubectl plugin's tests
                from tests.kubectl.fake_exec import exec_path, proxy_path, serve_exec, serve_proxy

                target = exec_path(url.path)
                if target is not None:
                    return serve_exec(self, *target, parse_qs(url.query), fake.exec_run)
                proxied = proxy_path(url.path)
                if proxied is not None and fake.proxy_run is not None:
                    return serve_proxy(self, *proxied, query, fake.proxy_run)
            throttled = fake._throttled(url.path)
            if throttled is not None:
                retry_after, code = throttled
                status = _status(429, "TooManyRequests", "the server is loading its caches") if code == 429 else \
                    _status(503, "ServiceUnavailable", "the server is currently unable to handle the request")
                data = json.dumps(status).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                if code == 429:
                    self.send_header("Retry-After", f"{retry_after:g}")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            if url.path == "/version":
                return _send_json(self, 200, {"major": "1", "minor": "20", "gitVersion": "v1.20.2-fake"})
            one = _object_route(url.path)
            if one is not None and one[0] not in fake._uninstalled:
                obj = fake.get(one[0], one[1])
                if obj is None:
                    return _send_json(self, 404, _status(404, "NotFound", f'{one[0]} "{one[1]}" not found'))
                return _send_json(self, 200, obj)
            if not self._authorized():
                return
            if url.path == "/apis/policy":
                versions = [{"groupVersion": v, "version": v.split("/")[1]} for v in fake.policy_versions]
                return _send_json(self, 200, {"kind": "APIGroup", "apiVersion": "v1", "name": "policy",
                                              "versions": versions, "preferredVersion": versions[0] if versions else {}})
            parts = url.path.split("/")
            if len(parts) == 7 and parts[1:4] == ["api", "v1", "namespaces"] and parts[5] == "pods":
                with fake._cond:
                    pod = copy.deepcopy(fake._objects["pods"].get(f"{parts[4]}/{parts[6]}"))
                if pod is None:
                    return _send_json(self, 404, _status(404, "NotFound", f'pods "{parts[6]}" not found'))
                return _send_json(self, 200, pod)
            route = _route(url.path)
            if route is None or route[0] in fake._uninstalled:
                return _send_json(self, 404, _status(404, "NotFound", f"the server could not find {url.path}"))
            kind, namespace = route
            if kind in fake._forbidden:
                return _send_json(self, 403, _status(403, "Forbidden", f"{kind} is forbidden: no RBAC grant"))
            selector = _selector(query.get("fieldSelector", ""))
            if namespace:
                inner = selector
                selector = lambda o: _field(o, "metadata.namespace") == namespace and inner(o)  # noqa: E731
            if query.get("watch") in ("1", "true"):
                return self._watch(kind, selector, query)
            with fake._cond:
                items = [copy.deepcopy(o) for o in fake._objects[kind].values() if selector(o)]
                rv = fake._rv
            _, obj_kind, api_version, _ = COLLECTIONS[kind]
            body = {"kind": f"{obj_kind}List", "apiVersion": api_version, "metadata": {"resourceVersion": str(rv)},
                    "items": items}
            data = json.dumps(body).encode()
            if "gzip" in (self.headers.get("Accept-Encoding") or "") and len(data) > fake.gzip_min_bytes:
                fake.gzipped += 1
                data = gzip.compress(data)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Encoding", "gzip")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            _send_json(self, 200, body)

        def do_PATCH(self) -> None:
            self._write("PATCH")

        def do_PUT(self) -> None:
            self._write("PUT")

        def _write(self, method: str) -> None:
            url = urlsplit(self.path)
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            fake.requests.append((url.path, {"method": method}))
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            if fake.token and self.headers.get("Authorization") != f"Bearer {fake.token}":
                return _send_json(self, 401, _status(401, "Unauthorized", "Unauthorized"))
            one = _object_route(url.path)
            if one is None or one[0] in fake._uninstalled:
                return _send_text(self, 404, "404 page not found\n")  # what kube-apiserver says for an unserved resource
            content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
            if method == "PUT":
                content_type = content_type or "application/json"
            elif content_type not in (APPLY_PATCH, MERGE_PATCH, JSON_PATCH):
                return _send_json(self, 415, _status(415, "UnsupportedMediaType",
                                                     f"the body of the request was in an unknown format: {content_type}"))
            try:
                decoded = json.loads(body)  # an apply body is YAML; the clients under test send JSON, which is YAML
            except ValueError:
                return _send_json(self, 400, _status(400, "BadRequest", "body is not JSON"))
            manager = query.get("fieldManager") or (self.headers.get("User-Agent") or "unknown").split("/")[0]
            force = query.get("force") == "true"
            if content_type == APPLY_PATCH and not query.get("fieldManager"):
                return _send_json(self, 422, _status(422, "Invalid", "PatchOptions.meta.k8s.io \"\" is invalid: "
                                                     "fieldManager: Required value: is required for apply patch"))
            code, answer = fake._write(one[0], one[1], one[2], method=method, content_type=content_type, body=decoded,
                                       manager=manager, force=force, query=query)
            if isinstance(answer, (str, bytes)):
                return _send_text(self, code, answer)
            _send_json(self, code, answer)

        def _chunk(self, payload: dict[str, Any] | bytes) -> None:
            data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            data += b"\n"
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def _watch(self, kind: str, selector: Callable[[Mapping[str, Any]], bool], query: dict[str, str]) -> None:
            _, obj_kind, api_version, _ = COLLECTIONS[kind]
            timeout = float(query.get("timeoutSeconds", "0") or 0)
            deadline = time.monotonic() + timeout if timeout else float("inf")
            bookmarks = query.get("allowWatchBookmarks") == "true" and fake.bookmark_interval_s > 0
            rv_text = query.get("resourceVersion", "")
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            fake._sockets.add(self.connection)
            clean = False
            try:
                with fake._cond:
                    epoch = fake._epoch
                    expire_epoch = fake._expire_epoch[kind]
                    end_epoch = fake._end_epoch
                    raw_seen = fake._raw_seq
                    pending: list[dict[str, Any] | bytes] = []
                    if rv_text in ("", "0"):
                        since = fake._rv
                        pending = [{"type": "ADDED", "object": copy.deepcopy(o)}
                                   for o in fake._objects[kind].values() if selector(o)]
                    else:
                        since = int(rv_text)
                        if since < fake._compacted_rv:
                            pending = [{"type": "ERROR", "object": _status(
                                410, "Expired", f"too old resource version: {since} ({fake._compacted_rv})")}]
                            deadline = 0.0
                for item in pending:
                    self._chunk(item)
                next_bookmark = time.monotonic() + fake.bookmark_interval_s
                while time.monotonic() < deadline or fake._black_hole:
                    out: list[dict[str, Any] | bytes] = []
                    with fake._cond:
                        if fake._epoch != epoch:
                            return  # killed: drop the connection mid-stream
                        if fake._black_hole or fake._quiet:
                            fake._cond.wait(timeout=0.05)
                            next_bookmark = time.monotonic() + fake.bookmark_interval_s
                            continue
                        if fake._expire_epoch[kind] != expire_epoch:
                            out.append({"type": "ERROR", "object": _status(410, "Expired", "watch expired")})
                            deadline = 0.0
                        if fake._end_epoch != end_epoch:
                            deadline = 0.0
                        for seq, line in fake._raw[kind]:
                            if seq > raw_seen:
                                out.append(line)
                                raw_seen = seq
                        for event in fake._history:
                            if event.rv <= since or event.kind != kind:
                                continue
                            since = event.rv
                            was = event.old is not None and selector(event.old)
                            now = selector(event.new)
                            if event.type == "DELETED":
                                typ = "DELETED" if was else ""
                            elif now and was:
                                typ = "MODIFIED"
                            elif now:
                                typ = "ADDED"
                            else:
                                typ = "DELETED" if was else ""
                            if typ:
                                out.append({"type": typ, "object": copy.deepcopy(event.new)})
                        since = max(since, fake._rv)  # every event up to now was examined
                        if not out:
                            wait = min(deadline, next_bookmark if bookmarks else deadline) - time.monotonic()
                            fake._cond.wait(timeout=max(0.0, min(wait, 1.0)))
                            if fake._epoch != epoch:
                                return
                    for item in out:
                        self._chunk(item)
                    if bookmarks and time.monotonic() >= next_bookmark:
                        self._chunk({"type": "BOOKMARK", "object": {"kind": obj_kind, "apiVersion": api_version,
                                                                     "metadata": {"resourceVersion": str(since)}}})
                        next_bookmark = time.monotonic() + fake.bookmark_interval_s
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
                clean = True
            except (BrokenPipeError, ConnectionResetError, OSError):
                return
            finally:
                # A watch that ended at timeoutSeconds leaves its connection open for the next request, as
                # kube-apiserver does; a killed or broken one is closed.
                if not clean:
                    fake._sockets.discard(self.connection)
                self.close_connection = not clean

    return Handler
