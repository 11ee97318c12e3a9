"""Load test: N simulated nodes' informers and NodeMetric reporters in one process against a real kube-apiserver.

`make loadtest NODES=200` (or `python -m tests.bench.apiserver_load --nodes 200`). Each simulated node runs the
agent's own apiserver code, unchanged: `build_informer` (pods by spec.nodeName, its Node, NodeSLO, NodeMetric and
the slo-controller-config ConfigMap by name, each list+watch) over its own `ApiClientTransport` (its own connection
pool, as on a real node), and a `NodeMetricStatusWriter` fed by that informer that reports every
`--report-interval-s` (koordlet's default is 60 s) at a random phase. The Node objects, one NodeMetric per node and
`--pods-per-node` pods bound to each node (they never run: no kubelet) are created through the API first.

Phases, each reported as tables:
  * first sync: time until every node listed everything (the first-list spread is part of it);
  * rest (`--rest-s`): requests per node per minute by verb and resource (client side, exact; and the
    apiserver's own `apiserver_request_total` as the witness), bytes on the wire (the TLS sockets' kernel counters,
    `ss`), connections opened (every TCP connect urllib3 makes, each a TLS handshake), watches open
    (`apiserver_registered_watchers`), lists the apiserver sent to etcd;
  * restart (`--restart`, only with the tool's own apiserver): the apiserver alone is stopped and started again,
    etcd stays: requests per second, the fraction of nodes that listed in each second, and the time until every
    node is fresh again (its informer synced: every watch open on a fresh list or a resumed resourceVersion);
  * lists that could bypass the watch cache: any list without a resourceVersion, or with a limit and a
    resourceVersion other than 0 (what kube-apiserver up to 1.30 sends to etcd).
The apiserver is `--kubeconfig` or HOOKSERVER_E2E_KUBECONFIG when given (no restart then: it may be shared), else
the tool's own kube-apiserver and etcd on 127.0.0.1:6543 (etcd 23890/23900), from the kube-e2e harness's binaries
and certificates (/tmp/kube-e2e, built from ../shared/tools/kube-e2e when missing), with a fresh data directory,
stopped and removed at the end: its restarts disturb nobody sharing the harness's apiserver, and nobody's restarts
disturb the measurement. Never the harness's kubelet. Objects are created with a per-run prefix and deleted at the
end (`--keep` keeps them).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import collections
import contextlib
import datetime
import inspect
import json
import logging
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from prometheus_client import CollectorRegistry


def _measure_another_tree() -> None:
    """HOOKSERVER_LOADTEST_TREE=<a directory holding another version's `hookserver/`> measures that version with
    this tool (the "before" numbers): its package is found first, ahead of this checkout's editable install."""
    tree = os.environ.get("HOOKSERVER_LOADTEST_TREE", "")
    if not tree:
        return
    import importlib.machinery

    class _Tree(importlib.machinery.PathFinder):
        @classmethod
        def find_spec(cls, fullname: str, path: Any = None, target: Any = None) -> Any:
            if fullname != "hookserver":
                return None
            return importlib.machinery.PathFinder.find_spec(fullname, [tree], target)

    sys.meta_path.insert(0, _Tree)


_measure_another_tree()

from hookserver.config import Settings
from hookserver.errors import InformerError
from hookserver.informer import InformerSettings, build_informer
from hookserver.informer.nodemetric_status import NodeMetricStatusWriter
from hookserver.informer.transport import ApiClientTransport, load_client_configuration
from hookserver.store import StateStore
from tests.kube.kubehttp import KubeHttp

REPO = Path(__file__).resolve().parents[2]
CRD_DIR = REPO / "tests" / "kube" / "crds"
SLO_API = "/apis/slo.koordinator.sh/v1alpha1"
KUBE_E2E = Path(os.environ.get("KUBE_E2E", "/tmp/kube-e2e"))
TOOLS = Path(os.environ.get("HOOKSERVER_E2E_TOOLS", str(REPO.parent / "shared" / "tools" / "kube-e2e")))
NAMESPACE = "hookserver-loadtest"
AUDIT_NODE_TAG = "loadtest-node/"
# The private apiserver's audit policy: every list (the relists the restart table counts, seen by the apiserver
# itself), metadata only, once the response is complete; nothing else (the audit log costs the apiserver CPU).
AUDIT_POLICY = {"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "omitStages": ["RequestReceived"],
                "rules": [{"level": "Metadata", "verbs": ["list"]}, {"level": "None"}]}

log = logging.getLogger("loadtest")


# -- client-side witness -----------------------------------------------------------------------------------------
@dataclass
class Ledger:
    """Every request the simulated agents sent: (monotonic time, node, verb, resource, query), and how each was
    answered (`statuses`, by row index: the HTTP status, 0 when no answer came: refused, reset, timed out)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    rows: list[tuple[float, str, str, str, dict[str, str]]] = field(default_factory=list)
    statuses: dict[int, int] = field(default_factory=dict)

    def add(self, node: str, verb: str, resource: str, query: Mapping[str, str]) -> int:
        with self.lock:
            self.rows.append((time.monotonic(), node, verb, resource, dict(query)))
            return len(self.rows) - 1

    def answered(self, row: int, status: int) -> None:
        with self.lock:
            self.statuses[row] = status

    def between(self, start: float, end: float) -> list[tuple[float, str, str, str, dict[str, str]]]:
        with self.lock:
            return [r for r in self.rows if start <= r[0] < end]


_COLLECTIONS = frozenset({"pods", "nodes", "nodeslos", "nodemetrics", "configmaps"})


def _resource(path: str) -> str:
    parts = [p for p in path.split("/") if p]
    if parts and parts[0] == "version":
        return "version"
    # /api/v1/namespaces/<ns>/<res>[/<name>[/<sub>]] or /apis/<g>/<v>/<res>[/<name>[/<sub>]]
    rest = parts[2:] if parts[:1] == ["api"] else parts[3:]
    if rest[:1] == ["namespaces"] and len(rest) >= 3:
        rest = rest[2:]
    if len(rest) >= 3:
        return f"{rest[0]}/{rest[2]}"
    return rest[0] if rest else path


class CountingTransport(ApiClientTransport):
    """The agent's transport, counting what it sends by verb (as the apiserver names them) and resource."""

    def __init__(self, *args: Any, node: str, ledger: Ledger, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._node = node
        self._ledger = ledger
        # The apiserver's audit log names the simulated node by its user agent (the agent's own, plus the node):
        # the configmap is listed by the same name from every node, so the URL alone cannot say whose list it is.
        api = getattr(self, "_api", None)
        if api is not None:
            api.user_agent = f"{api.user_agent} {AUDIT_NODE_TAG}{node}"

    def _get(self, path: str, params: Mapping[str, str], read_timeout_s: float) -> Any:
        collection = path.rsplit("/", 1)[-1] in _COLLECTIONS
        verb = "WATCH" if params.get("watch") else ("LIST" if collection else "GET")
        row = self._ledger.add(self._node, verb, _resource(path), params)
        try:
            response = super()._get(path, params, read_timeout_s)
        except InformerError as exc:
            self._ledger.answered(row, exc.status)
            raise
        self._ledger.answered(row, int(getattr(response, "status", 200)))
        return response

    def open_watch(self, path: str, params: Mapping[str, str], **kwargs: Any) -> Any:
        return _LedgerStream(super().open_watch(path, params, **kwargs), self._ledger, self._node, _resource(path))

    def _send(self, method: str, path: str, body: Any, **kwargs: Any) -> Any:
        row = self._ledger.add(self._node, method, _resource(path), {})
        try:
            response = super()._send(method, path, body, **kwargs)
        except InformerError as exc:
            self._ledger.answered(row, exc.status)
            raise
        self._ledger.answered(row, int(getattr(response, "status", 200)))
        return response


class _LedgerStream:
    """A watch stream that enters in the ledger what ends it: "GONE" for an ERROR event with code 410 (the moment
    the apiserver told this node to relist), "ENDED" when the server closed it (the apiserver shutting down, or a
    custom resource's storage torn down)."""

    def __init__(self, stream: Any, ledger: Ledger, node: str, resource: str) -> None:
        self._stream, self._ledger, self._node, self._resource = stream, ledger, node, resource

    def lines(self) -> Iterator[bytes]:
        for line in self._stream.lines():
            if line.startswith(b'{"type":"ERROR"') and b'"code":410' in line:
                self._ledger.add(self._node, "GONE", self._resource, {})
            yield line
        self._ledger.add(self._node, "ENDED", self._resource, {})

    def close(self) -> None:
        self._stream.close()


# -- apiserver-side witness --------------------------------------------------------------------------------------
_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)')


def scrape(kube: KubeHttp) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """The apiserver's /metrics, the series the tables use."""
    reply = kube.request("GET", "/metrics", timeout=30)
    text = reply.body if isinstance(reply.body, str) else ""
    wanted = ("apiserver_request_total", "apiserver_registered_watchers", "apiserver_longrunning_gauge",
              "apiserver_response_sizes_sum", "apiserver_watch_events_sizes_sum", "etcd_request_duration_seconds_count")
    out: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for line in text.splitlines():
        if not line.startswith(wanted):
            continue
        match = _SAMPLE.match(line)
        if not match:
            continue
        labels = frozenset(re.findall(r'(\w+)="([^"]*)"', match.group(2) or ""))
        with contextlib.suppress(ValueError):
            out[(match.group(1), labels)] = float(match.group(3))
    return out


def by(metrics: Mapping[tuple[str, frozenset[tuple[str, str]]], float], name: str, *keys: str,
       where: Mapping[str, str] | None = None) -> dict[tuple[str, ...], float]:
    totals: dict[tuple[str, ...], float] = collections.defaultdict(float)
    for (metric, labels), value in metrics.items():
        if metric != name:
            continue
        d = dict(labels)
        if where and any(d.get(k) != v for k, v in where.items()):
            continue
        totals[tuple(d.get(k, "") for k in keys)] += value
    return dict(totals)


def delta(after: Mapping[Any, float], before: Mapping[Any, float]) -> dict[Any, float]:
    return {k: v - before.get(k, 0.0) for k, v in after.items() if v - before.get(k, 0.0)}


def wire_bytes(port: int) -> tuple[int, int, int]:
    """(sockets, bytes sent, bytes received) over this process's established TCP sockets to the apiserver's
    port, from the kernel's own counters (`ss -tin`): what crosses the wire, TLS included."""
    try:
        text = subprocess.run(["ss", "-tinpH", "state", "established", f"( dport = :{port} )"],
                              capture_output=True, text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return 0, 0, 0
    pid = f"pid={os.getpid()},"
    sockets = sent = received = 0
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if pid not in line:
            continue
        sockets += 1
        info = lines[i + 1] if i + 1 < len(lines) else ""
        sent += int(m.group(1)) if (m := re.search(r"bytes_sent:(\d+)", info + line)) else 0
        received += int(m.group(1)) if (m := re.search(r"bytes_received:(\d+)", info + line)) else 0
    return sockets, sent, received


def audit_lists(path: Path) -> list[tuple[float, str, str, int]]:
    """The simulated nodes' lists as the apiserver's audit log records them: (wall time the apiserver received the
    request, node, request URI, HTTP status). The apiserver's own view of who listed when, beside the client's."""
    out: list[tuple[float, str, str, int]] = []
    with contextlib.suppress(OSError), open(path, encoding="utf-8", errors="replace") as lines:
        for line in lines:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            agent = str(event.get("userAgent", ""))
            if event.get("verb") != "list" or AUDIT_NODE_TAG not in agent:
                continue
            node = agent.split(AUDIT_NODE_TAG, 1)[1].split()[0]
            with contextlib.suppress(ValueError, TypeError):
                received = datetime.datetime.fromisoformat(
                    str(event["requestReceivedTimestamp"]).replace("Z", "+00:00")).timestamp()
                status = int((event.get("responseStatus") or {}).get("code") or 0)
                out.append((received, node, str(event.get("requestURI", "")), status))
    return out


# -- the harness ---------------------------------------------------------------------------------------------------
class PrivateApiserver:
    """A kube-apiserver and etcd of this load test's own, from the kube-e2e harness's binaries and certificates, on
    other ports (6543; etcd 23890/23900) and a fresh data directory: restarting it disturbs nobody who shares the
    harness's apiserver on 6443, and nobody else's restarts disturb the measurement. Stopped and wiped at the end."""

    def __init__(self, port: int = 6543, etcd_port: int = 23890) -> None:
        self.port = port
        self.etcd_client = f"http://127.0.0.1:{etcd_port}"
        self.etcd_peer = f"http://127.0.0.1:{etcd_port + 10}"
        self.dir = Path(tempfile.mkdtemp(prefix="hookserver-loadtest-"))
        self.etcd: subprocess.Popen[bytes] | None = None
        self.apiserver: subprocess.Popen[bytes] | None = None
        self.kubeconfig = str(self.dir / "kubeconfig")
        self.audit_log = self.dir / "audit.log"

    def _need(self) -> tuple[Path, Path]:
        binary, pki = KUBE_E2E / "bin" / "kube-apiserver", KUBE_E2E / "pki"
        if not binary.is_file() or not (pki / "apiserver.crt").is_file():
            build = TOOLS / "build.sh"
            if not build.is_file():
                raise SystemExit(f"no kube-apiserver in {binary} and no kube-e2e harness at {TOOLS}: set "
                                 "HOOKSERVER_E2E_KUBECONFIG or build the harness (see its README)")
            subprocess.run([str(build)], check=True)
            subprocess.run([str(TOOLS / "start-apiserver.sh")], check=True)  # generates the certificates once
            subprocess.run([str(TOOLS / "stop-apiserver.sh")], check=False)
        return binary, pki

    def start(self) -> str:
        binary, pki = self._need()
        token = "hookserver-loadtest-" + uuid.uuid4().hex
        (self.dir / "tokens.csv").write_text(f'{token},loadtest-admin,loadtest-admin,"system:masters"\n')
        self.etcd = subprocess.Popen(
            ["/usr/bin/etcd", "--name", "loadtest", "--data-dir", str(self.dir / "etcd"),
             "--listen-client-urls", self.etcd_client, "--advertise-client-urls", self.etcd_client,
             "--listen-peer-urls", self.etcd_peer, "--initial-advertise-peer-urls", self.etcd_peer,
             "--initial-cluster", f"loadtest={self.etcd_peer}", "--logger", "zap", "--log-outputs", "stderr"],
            stdout=subprocess.DEVNULL, stderr=open(self.dir / "etcd.log", "wb"), start_new_session=True)
        (self.dir / "audit-policy.yaml").write_text(yaml.safe_dump(AUDIT_POLICY))
        self.start_apiserver(binary, pki)
        ca = base64.b64encode((pki / "ca.crt").read_bytes()).decode()
        Path(self.kubeconfig).write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "lt",
            "clusters": [{"name": "lt", "cluster": {"server": f"https://127.0.0.1:{self.port}",
                                                     "certificate-authority-data": ca}}],
            "users": [{"name": "lt", "user": {"token": token}}],
            "contexts": [{"name": "lt", "context": {"cluster": "lt", "user": "lt"}}]}))
        self.wait_ready()
        return self.kubeconfig

    def start_apiserver(self, binary: Path | None = None, pki: Path | None = None) -> None:
        binary, pki = (binary, pki) if binary and pki else self._need()
        self.apiserver = subprocess.Popen(
            [str(binary), "--bind-address", "127.0.0.1", "--secure-port", str(self.port),
             "--advertise-address", "127.0.0.1", "--endpoint-reconciler-type", "none", "--insecure-port", "0",
             "--etcd-servers", self.etcd_client, "--tls-cert-file", str(pki / "apiserver.crt"),
             "--tls-private-key-file", str(pki / "apiserver.key"), "--client-ca-file", str(pki / "ca.crt"),
             "--service-account-issuer", "https://kubernetes.default.svc",
             "--service-account-key-file", str(pki / "sa.pub"), "--service-account-signing-key-file", str(pki / "sa.key"),
             "--authorization-mode", "RBAC", "--token-auth-file", str(self.dir / "tokens.csv"),
             "--service-cluster-ip-range", "10.0.0.0/24", "--disable-admission-plugins", "ServiceAccount",
             "--audit-policy-file", str(self.dir / "audit-policy.yaml"), "--audit-log-path", str(self.audit_log),
             "--audit-log-maxsize", "0"],
            stdout=subprocess.DEVNULL, stderr=open(self.dir / "apiserver.log", "ab"), start_new_session=True)

    def wait_ready(self, timeout_s: float = 90) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if Path(self.kubeconfig).is_file():
                with contextlib.suppress(OSError):
                    if KubeHttp.from_kubeconfig(self.kubeconfig).request("GET", "/readyz", timeout=2).status == 200:
                        return
            if self.apiserver is not None and self.apiserver.poll() is not None:
                raise SystemExit(f"kube-apiserver exited; see {self.dir / 'apiserver.log'}")
            time.sleep(0.1)
        raise SystemExit(f"kube-apiserver not ready after {timeout_s:g} s; see {self.dir / 'apiserver.log'}")

    def running(self) -> bool:
        return self.apiserver is not None and self.apiserver.poll() is None

    def stop_apiserver(self) -> None:
        """The apiserver only (etcd keeps the data), as an apiserver restart in a cluster: SIGTERM, then SIGKILL."""
        if self.apiserver is None:
            return
        self.apiserver.terminate()
        try:
            self.apiserver.wait(15)
        except subprocess.TimeoutExpired:
            self.apiserver.kill()
            self.apiserver.wait(10)

    def restart_apiserver(self) -> float:
        """Start it again; returns when it first answered a request (monotonic), which comes seconds before /readyz
        (its post-start hooks), and agents are served from then on."""
        self.start_apiserver()
        kube = KubeHttp.from_kubeconfig(self.kubeconfig)
        while True:
            with contextlib.suppress(OSError):
                kube.request("GET", "/version", timeout=1)
                serving = time.monotonic()
                break
            if self.apiserver is not None and self.apiserver.poll() is not None:
                raise SystemExit(f"kube-apiserver exited; see {self.dir / 'apiserver.log'}")
            time.sleep(0.05)
        self.wait_ready()
        return serving

    def close(self) -> None:
        self.stop_apiserver()
        if self.etcd is not None:
            self.etcd.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.etcd.wait(15)
        shutil.rmtree(self.dir, ignore_errors=True)


# -- the cluster's objects -----------------------------------------------------------------------------------------
def ensure_crds(kube: KubeHttp) -> None:
    base = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    for path in sorted(CRD_DIR.glob("slo.koordinator.sh_*.yaml")):
        wanted = yaml.safe_load(path.read_text())
        if kube.get(f"{base}/{wanted['metadata']['name']}").status == 404:
            kube.must(kube.post(base, wanted), f"create CRD {wanted['metadata']['name']}")
    deadline = time.monotonic() + 60
    while not kube.get(f"{SLO_API}/nodemetrics").ok:
        if time.monotonic() > deadline:
            raise SystemExit("the NodeMetric CRD is not served after 60 s")
        time.sleep(0.2)


def create_objects(kube: KubeHttp, prefix: str, nodes: list[str], pods_per_node: int) -> None:
    kube.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})

    def one_node(node: str) -> None:
        kube.must(kube.post("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": node, "labels": {"hookserver-loadtest": prefix}}}), f"node {node}")
        kube.must(kube.post(f"{SLO_API}/nodemetrics", {
            "apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric",
            "metadata": {"name": node, "labels": {"hookserver-loadtest": prefix}},
            "spec": {"metricCollectPolicy": {"aggregateDurationSeconds": 300, "reportIntervalSeconds": 60}}}),
            f"nodemetric {node}")
        for i in range(pods_per_node):
            kube.must(kube.post(f"/api/v1/namespaces/{NAMESPACE}/pods", {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"{node}-p{i}", "labels": {"hookserver-loadtest": prefix},
                             "annotations": {"koordinator.sh/qosClass": "BE" if i % 2 else "LS"}},
                "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox", "resources": {
                    "requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "200m", "memory": "128Mi"}}}]},
            }), f"pod {node}-p{i}")

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one_node, nodes))


def delete_objects(kube: KubeHttp, prefix: str) -> None:
    selector = f"hookserver-loadtest={prefix}"
    for path in (f"/api/v1/namespaces/{NAMESPACE}/pods", "/api/v1/nodes", f"{SLO_API}/nodemetrics"):
        kube.request("DELETE", path, query={"labelSelector": selector, "gracePeriodSeconds": "0"}, timeout=120)


def status_document(node: str, pods_per_node: int, n: int) -> dict[str, Any]:
    """A NodeMetric status of the size koordlet reports: node usage, one entry per pod, reclaimable."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    usage = {"resources": {"cpu": f"{1000 + n % 7 * 10}m", "memory": f"{2048 + n % 5}Mi"}}
    return {
        "updateTime": now,
        "nodeMetric": {"nodeUsage": usage, "aggregatedNodeUsages": [{"duration": "5m0s", "usages": {"p50": usage}}]},
        "podsMetric": [{"name": f"{node}-p{i}", "namespace": NAMESPACE, "priority": "koord-prod",
                        "podUsage": {"resources": {"cpu": f"{10 + (n + i) % 9}m", "memory": "32Mi"}}}
                       for i in range(pods_per_node)],
        "prodReclaimableMetric": {"resource": {"resources": {"cpu": "1500m", "memory": "1Gi"}}},
    }


# -- the simulated nodes -------------------------------------------------------------------------------------------
@dataclass
class SimNode:
    name: str
    informer: Any
    transport: CountingTransport
    writer: NodeMetricStatusWriter
    fresh_since: float = 0.0  # monotonic time the node last became fresh (0: not fresh now)
    reports: collections.Counter[str] = field(default_factory=collections.Counter)


def build_node(name: str, kubeconfig: str, informer_settings: InformerSettings, ledger: Ledger) -> SimNode:
    settings = Settings(node_name=name, kubeconfig=kubeconfig, informer=informer_settings)
    kwargs: dict[str, Any] = {
        "connect_timeout_s": informer_settings.connect_timeout_s, "max_event_bytes": informer_settings.max_event_bytes,
        "keepalive": (informer_settings.tcp_keepalive_idle_s, informer_settings.tcp_keepalive_interval_s,
                      informer_settings.tcp_keepalive_count),
    }
    # The same tool measures an older hookserver (PYTHONPATH=<its tree>) for the "before" numbers: pass only
    # what that version's classes take.
    if "pool_maxsize" in inspect.signature(ApiClientTransport.__init__).parameters:
        kwargs["pool_maxsize"] = informer_settings.pool_maxsize
    transport = CountingTransport(load_client_configuration(kubeconfig), node=name, ledger=ledger, **kwargs)
    informer = build_informer(settings, store=StateStore(), registry=CollectorRegistry(), transport=transport)
    seen = getattr(informer, "nodemetric_seen", None)
    writer = NodeMetricStatusWriter(transport, node_name=name, **({"seen": seen} if seen is not None else {}))
    return SimNode(name, informer, transport, writer)


_CONNECTS = [0]
_CONNECTS_LOCK = threading.Lock()
_CONNECTS_BY: list[tuple[float, str]] = []


def count_connects() -> None:
    """Count every TCP connect urllib3 makes in this process (each one a TLS handshake with an https apiserver):
    its own `num_connections` counts connection objects, and a pooled object whose socket was closed reconnects
    under the same object. A measurement hook of this tool only, for whichever hookserver version it runs."""
    import urllib3.connection

    original = urllib3.connection.HTTPConnection._new_conn

    def _new_conn(self: Any) -> Any:
        sock = original(self)
        with _CONNECTS_LOCK:
            _CONNECTS[0] += 1
            # which thread connected: a reflector's ("informer-pods_0") or a writer's (asyncio's to_thread)
            _CONNECTS_BY.append((time.monotonic(), threading.current_thread().name.rsplit("_", 1)[0]))
        return sock

    urllib3.connection.HTTPConnection._new_conn = _new_conn  # type: ignore[method-assign]


def connects() -> int:
    with _CONNECTS_LOCK:
        return _CONNECTS[0]


async def report_loop(node: SimNode, interval_s: float, pods_per_node: int, stop: asyncio.Event) -> None:
    """The reporter's apiserver side: a status every interval at this node's random phase."""
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=random.random() * interval_s)
    n = 0
    while not stop.is_set():
        if node.informer.first_sync_done():
            result = await asyncio.to_thread(node.writer.deliver, status_document(node.name, pods_per_node, n))
            node.reports[result.result] += 1
            n += 1
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=interval_s)


async def lag_loop(stop: asyncio.Event, lags: list[tuple[float, float]], period_s: float = 0.1) -> None:
    """The load generator's own lateness: how much later than asked a 0.1 s sleep of this process's event loop
    returns. The simulated nodes share one process and two CPUs with the apiserver, so a stall here (the apiserver
    loading its caches, 2,500 threads handling a wave of 410s) delays every node's timers at once and bunches
    relists that the agents spread: a real node's agent stalls alone."""
    while not stop.is_set():
        started = time.monotonic()
        await asyncio.sleep(period_s)
        now = time.monotonic()
        lags.append((now, now - started - period_s))


async def freshness_loop(nodes: list[SimNode], stop: asyncio.Event, period_s: float = 0.2) -> None:
    while not stop.is_set():
        now = time.monotonic()
        for node in nodes:
            synced = node.informer.synced()
            if synced and not node.fresh_since:
                node.fresh_since = now
            elif not synced:
                node.fresh_since = 0.0
        await asyncio.sleep(period_s)


# -- tables --------------------------------------------------------------------------------------------------------
def table(title: str, header: list[str], rows: list[list[Any]]) -> str:
    cells = [header] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = [f"\n{title}", "| " + " | ".join(h.ljust(w) for h, w in zip(header, widths)) + " |",
             "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    lines += ["| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |" for row in cells[1:]]
    return "\n".join(lines)


def _p99_max(values: list[float]) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    return f"{ordered[int(0.99 * (len(ordered) - 1))]:.2f} s, {ordered[-1]:.2f} s"


def _late_lists(lists: list[tuple[float, str, str, str, dict[str, str]]], settings: Any
                ) -> tuple[int, list[tuple[float, str, str, str, dict[str, str]]],
                           list[tuple[float, str, str, str, dict[str, str]]]]:
    """(how many lists were sent more than 0.5 s after their node's relist point, the others, every list moved to
    the point it was sent for: the agents' schedule without the generator's lag), or (-1, all, all) for a version
    without points on the clock. Monotonic ledger times are put on the wall clock the points use."""
    try:
        from hookserver.informer.spread import phase_of
    except ImportError:
        return -1, list(lists), list(lists)
    window = float(getattr(settings, "relist_spread_s", 0) or 0)
    if window <= 0:
        return -1, list(lists), list(lists)
    wall = time.time() - time.monotonic()
    on_time, scheduled = [], []
    for r in lists:
        lag = (r[0] + wall - phase_of(r[1]) * window + window / 2) % window - window / 2
        if abs(lag) <= 0.5:
            on_time.append(r)
        scheduled.append((r[0] - lag, *r[1:]))
    return len(lists) - len(on_time), on_time, scheduled


def cache_bypassing(query: Mapping[str, str]) -> bool:
    rv = query.get("resourceVersion")
    if "continue" in query:
        return False
    return rv in (None, "") or (rv != "0" and bool(query.get("limit")))


@contextlib.contextmanager
def quiet_logs() -> Iterator[None]:
    logging.getLogger("hookserver").setLevel(logging.ERROR)
    logging.getLogger("urllib3").setLevel(logging.ERROR)
    yield


async def run(args: argparse.Namespace) -> int:
    harness: PrivateApiserver | None = None
    kubeconfig = args.kubeconfig or os.environ.get("HOOKSERVER_E2E_KUBECONFIG", "")
    if not kubeconfig:
        harness = PrivateApiserver()
        print(f"starting a private kube-apiserver on 127.0.0.1:{harness.port} ({harness.dir})", flush=True)
        kubeconfig = await asyncio.to_thread(harness.start)
    kube = KubeHttp.from_kubeconfig(kubeconfig)
    port = int(kube.server.rsplit(":", 1)[1]) if kube.server.count(":") == 2 else 443
    version = kube.must(kube.get("/version"), "GET /version")
    out: list[str] = [f"# hookserver apiserver load test: {args.nodes} nodes x {args.pods_per_node} pods, "
                      f"apiserver {version.get('gitVersion')} at {kube.server}, report every {args.report_interval_s:g} s"]
    prefix = f"lt{uuid.uuid4().hex[:5]}"
    names = [f"{prefix}-n{i:04d}" for i in range(args.nodes)]
    ensure_crds(kube)
    started = time.monotonic()
    create_objects(kube, prefix, names, args.pods_per_node)
    out.append(f"created {len(names)} nodes, {len(names)} NodeMetrics and {len(names) * args.pods_per_node} pods "
               f"in {time.monotonic() - started:.1f} s")
    print(out[-1], flush=True)

    overrides = json.loads(args.informer) if args.informer else {}
    informer_settings = InformerSettings(source="apiserver", **overrides)
    ledger = Ledger()
    nodes = [build_node(name, kubeconfig, informer_settings, ledger) for name in names]
    stop = asyncio.Event()
    tasks = [asyncio.create_task(n.informer.run(stop)) for n in nodes]
    tasks += [asyncio.create_task(report_loop(n, args.report_interval_s, args.pods_per_node, stop)) for n in nodes]
    tasks.append(asyncio.create_task(freshness_loop(nodes, stop)))
    lags: list[tuple[float, float]] = []
    tasks.append(asyncio.create_task(lag_loop(stop, lags)))
    exit_code = 0
    try:
        # -- first sync
        t0 = time.monotonic()
        while not all(n.informer.synced() for n in nodes):
            if time.monotonic() - t0 > 300:
                raise SystemExit("not every node synced within 300 s")
            await asyncio.sleep(0.2)
        out.append(f"first sync of every node: {time.monotonic() - t0:.1f} s "
                   f"(first_list_spread_s {getattr(informer_settings, 'first_list_spread_s', 0):g})")
        print(out[-1], flush=True)
        # Steady state begins once every node has reported once: a node's first report opens the writer's
        # connection (its watches hold the others), and with reports at a random phase of the interval that first
        # connect fell inside the rest window for most nodes (at 500 nodes all 313 connects at rest came from the
        # writers' threads), which is start-up, not rest.
        while not all(n.reports for n in nodes):
            if time.monotonic() - t0 > 300 + args.report_interval_s:
                raise SystemExit("not every node reported within the report interval after its first sync")
            await asyncio.sleep(0.5)
        await asyncio.sleep(args.settle_s)

        # -- rest
        m0, c0, w0, r0 = scrape(kube), connects(), wire_bytes(port), \
            time.monotonic()
        print(f"rest phase: {args.rest_s:g} s", flush=True)
        await asyncio.sleep(args.rest_s)
        m1, c1, w1, r1 = scrape(kube), connects(), wire_bytes(port), \
            time.monotonic()
        with _CONNECTS_LOCK:
            connected_by = collections.Counter(who for t, who in _CONNECTS_BY if r0 <= t < r1)
        minutes = (r1 - r0) / 60
        per_node_min = 1 / (args.nodes * minutes)
        client = collections.Counter((verb, res) for _t, _n, verb, res, _q in ledger.between(r0, r1))
        server = delta(by(m1, "apiserver_request_total", "verb", "resource", "subresource"),
                       by(m0, "apiserver_request_total", "verb", "resource", "subresource"))
        rows = []
        for (verb, res), count in sorted(client.items()):
            resource, _, sub = res.partition("/")
            api = sum(v for (sv, sr, ss), v in server.items() if sv == verb and sr == resource and ss == sub)
            rows.append([verb, res, count, f"{count * per_node_min:.3f}", int(api)])
        total = sum(client.values())
        rows.append(["all", "", total, f"{total * per_node_min:.3f}", int(sum(server.values()))])
        out.append(table(f"Rest: {args.rest_s:g} s, {args.nodes} nodes: requests (client side; apiserver_request_total "
                         "in the last column, which also counts anyone else's requests)",
                         ["verb", "resource", "requests", "per node per minute", "apiserver saw"], rows))
        watchers = by(m1, "apiserver_registered_watchers", "kind")
        longrunning = by(m1, "apiserver_longrunning_gauge", "verb", where={"verb": "WATCH"})
        sent, received = w1[1] - w0[1], w1[2] - w0[2]
        resp = delta(by(m1, "apiserver_response_sizes_sum", "verb", "resource"),
                     by(m0, "apiserver_response_sizes_sum", "verb", "resource"))
        watch_bytes = delta(by(m1, "apiserver_watch_events_sizes_sum", "kind"),
                            by(m0, "apiserver_watch_events_sizes_sum", "kind"))
        etcd_lists = delta(by(m1, "etcd_request_duration_seconds_count", "type", where={"operation": "list"}),
                           by(m0, "etcd_request_duration_seconds_count", "type", where={"operation": "list"}))
        out.append(table(
            "Rest: connections and bytes", ["what", "total", "per node per minute"],
            [["connections opened (TCP connect + TLS handshake)", c1 - c0, f"{(c1 - c0) * per_node_min:.3f}"],
             ["... by the thread that opened them", ", ".join(f"{k}: {v}" for k, v in connected_by.most_common()) or "-",
              ""],
             ["connections open now (ss)", w1[0], f"{w1[0] / args.nodes:.1f} per node"],
             ["watches open (apiserver_longrunning_gauge WATCH)", int(sum(longrunning.values())), ""],
             ["registered watchers (apiserver)", int(sum(watchers.values())), ""],
             ["bytes sent on the wire (TLS, ss)", sent, f"{sent * per_node_min:.0f}"],
             ["bytes received on the wire (TLS, ss)", received, f"{received * per_node_min:.0f}"],
             ["response bytes, non-watch (apiserver_response_sizes)", int(sum(resp.values())),
              f"{sum(resp.values()) * per_node_min:.0f}"],
             ["watch event bytes (apiserver_watch_events_sizes)", int(sum(watch_bytes.values())),
              f"{sum(watch_bytes.values()) * per_node_min:.0f}"],
             ["lists the apiserver sent to etcd (etcd_request_duration_seconds, list)", int(sum(etcd_lists.values())),
              ""]]))
        print("\n".join(out[-2:]), flush=True)

        # -- restart
        if args.restart:
            if harness is None:
                out.append("restart: skipped (only the load test's own apiserver is restarted: run without "
                           "HOOKSERVER_E2E_KUBECONFIG/--kubeconfig)")
            else:
                print("restart: stopping the apiserver", flush=True)
                before_lists = len([r for r in ledger.rows if r[2] == "LIST"])
                down_at = time.monotonic()
                ledger.add("-", "STOP", "-", {})
                await asyncio.to_thread(harness.stop_apiserver)
                await asyncio.sleep(args.outage_s)
                ready_at = await asyncio.to_thread(harness.restart_apiserver)  # "ready": answering again
                wall_offset = time.time() - time.monotonic()  # for the audit log's wall-clock times
                readyz_at = time.monotonic()
                print(f"restart: apiserver answering {ready_at - down_at:.1f} s after the stop, /readyz "
                      f"{readyz_at - ready_at:.1f} s later", flush=True)
                deadline = ready_at + args.restart_window_s
                while time.monotonic() < deadline:
                    if all(n.fresh_since for n in nodes) and \
                            time.monotonic() - max(n.fresh_since for n in nodes) > 10:
                        break
                    await asyncio.sleep(0.5)
                end = time.monotonic()
                # The tool's own /version poll runs in this process beside the simulated nodes' threads and can be
                # seconds late on a loaded machine: the apiserver answered no later than the first list it received
                # (its audit log), so "answering again" is the earlier of the two.
                audited = [a for a in audit_lists(harness.audit_log) if a[0] - wall_offset >= down_at]
                polled_at = ready_at
                if audited:
                    ready_at = min(ready_at, min(a[0] for a in audited) - wall_offset)
                ready_wall = ready_at + wall_offset
                with ledger.lock:
                    ledger.rows.append((ready_at, "-", "SERVING", "-", {}))
                print(f"restart: apiserver answering {ready_at - down_at:.1f} s after the stop "
                      f"({polled_at - ready_at:.1f} s before the tool's poll saw it)", flush=True)
                rows_restart = ledger.between(down_at, end)
                per_second: dict[int, collections.Counter[str]] = collections.defaultdict(collections.Counter)
                listing: dict[int, set[str]] = collections.defaultdict(set)
                for t, node, verb, _res, _q in rows_restart:
                    if verb in ("GONE", "ENDED", "STOP", "SERVING"):
                        continue
                    second = int(t - ready_at) if t >= ready_at else -1 - int(ready_at - t)
                    per_second[second][verb] += 1
                    if verb == "LIST":
                        listing[second].add(node)
                lists = [r for r in rows_restart if r[2] == "LIST"]
                # The apiserver's own view: the lists its audit log received, per node and second.
                audit_listing: dict[int, set[str]] = collections.defaultdict(set)
                audit_codes: collections.Counter[int] = collections.Counter()
                for wall, node, _uri, code in audited:
                    offset = wall - ready_wall
                    second = int(offset) if offset >= 0 else -1 - int(-offset)
                    audit_listing[second].add(node)
                    audit_codes[code] += 1
                with ledger.lock:
                    answers = collections.Counter(
                        (r[2], ledger.statuses.get(i, -1)) for i, r in enumerate(ledger.rows)
                        if down_at <= r[0] < end and r[2] in ("LIST", "WATCH"))
                # the restarted apiserver's counters start at 0: everything since it came up (its watch caches'
                # own initial lists included: one per resource type)
                after = scrape(kube)
                etcd_after = by(after, "etcd_request_duration_seconds_count", "type", where={"operation": "list"})
                agent_types = ("core.Pod", "core.Node", "core.ConfigMap", "unstructured")  # CRs are unstructured
                etcd_agent = {k: v for k, v in etcd_after.items() if any(t in k[0] for t in agent_types)}
                relisted = {r[1] for r in lists}
                unfresh = [n.name for n in nodes if not n.fresh_since]
                fresh_after = [n.fresh_since - ready_at for n in nodes if n.fresh_since]
                table_rows = []
                lag_by_second: dict[int, float] = collections.defaultdict(float)
                for t, lag in list(lags):
                    if down_at <= t < end:
                        second = int(t - ready_at) if t >= ready_at else -1 - int(ready_at - t)
                        lag_by_second[second] = max(lag_by_second[second], lag)
                # Lists sent late by the generator: more than 0.5 s after the node's relist point, where the agent's
                # schedule (spread.py, when the measured version has one) put them.
                late_lists, on_time, scheduled = _late_lists(lists, informer_settings)
                on_time_listing: dict[int, set[str]] = collections.defaultdict(set)
                for t, node, _verb, _res, _q in on_time:
                    on_time_listing[int(t - ready_at) if t >= ready_at else -1 - int(ready_at - t)].add(node)
                scheduled_listing: dict[int, set[str]] = collections.defaultdict(set)
                for t, node, _verb, _res, _q in scheduled:
                    scheduled_listing[int(t - ready_at) if t >= ready_at else -1 - int(ready_at - t)].add(node)
                for second in sorted(set(per_second) | set(audit_listing)):
                    verbs = per_second[second]
                    table_rows.append([second, sum(verbs.values()), verbs.get("LIST", 0), verbs.get("WATCH", 0),
                                       verbs.get("PATCH", 0) + verbs.get("GET", 0), len(listing[second]),
                                       f"{100 * len(listing[second]) / args.nodes:.1f} %",
                                       len(audit_listing[second]),
                                       f"{100 * len(audit_listing[second]) / args.nodes:.1f} %",
                                       f"{lag_by_second.get(second, 0.0):.2f}"])
                out.append(table(
                    f"Restart: apiserver stopped at -{ready_at - down_at:.1f} s, answering again at 0 s, /readyz ok at "
                    f"{readyz_at - ready_at:.1f} s (client-side requests per second; negative seconds: while it was "
                    "down)",
                    ["second", "requests", "LIST", "WATCH", "GET+PATCH", "nodes listing", "of the nodes",
                     "nodes listing (audit)", "of the nodes (audit)", "generator lag (s, max)"], table_rows))
                worst = max((len(s) for s in listing.values()), default=0)
                worst_audit = max((len(s) for s in audit_listing.values()), default=0)
                out.append(table("Restart: summary", ["what", "value"], [
                    ["lists sent (since the stop)", len(lists)],
                    ["nodes that relisted", f"{len(relisted)} of {args.nodes}"],
                    ["most nodes listing in one second (client: sent)", f"{worst} ({100 * worst / args.nodes:.1f} %)"],
                    ["most nodes listing in one second (apiserver audit log: received)",
                     f"{worst_audit} ({100 * worst_audit / args.nodes:.1f} %)"],
                    ["lists in the audit log by status", ", ".join(f"{k}: {v}" for k, v in sorted(audit_codes.items()))],
                    ["client's lists and watch opens by answer (0: no answer)",
                     ", ".join(f"{verb} {code}: {n}" for (verb, code), n in sorted(answers.items()))],
                    ["every node fresh again after the apiserver answered",
                     f"{max(fresh_after):.1f} s" if fresh_after and not unfresh else f"NO: {len(unfresh)} not fresh"],
                    ["median node fresh after the apiserver answered", f"{sorted(fresh_after)[len(fresh_after) // 2]:.1f} s"
                     if fresh_after else "-"],
                    ["load generator: event-loop lag during the restart (p99, max)",
                     _p99_max([lag for t, lag in list(lags) if down_at <= t < end])],
                    ["lists sent > 0.5 s after the node's relist point (the generator late)",
                     f"{late_lists} of {len(lists)}" if late_lists >= 0 else "- (this version has no relist points)"],
                    ["most nodes listing in one second, lists sent on time only",
                     (lambda w: f"{w} ({100 * w / args.nodes:.1f} %)")(
                         max((len(v) for v in on_time_listing.values()), default=0)) if late_lists >= 0 else "-"],
                    ["most nodes listing in one second at their relist points (the agents' schedule, the lag taken out)",
                     (lambda w: f"{w} ({100 * w / args.nodes:.1f} %)")(
                         max((len(v) for v in scheduled_listing.values()), default=0)) if late_lists >= 0 else "-"],
                    ["lists before the restart (first sync)", before_lists],
                    ["etcd lists of the agents' resource types since the restart (apiserver metrics)",
                     ", ".join(f"{k[0]}: {int(v)}" for k, v in sorted(etcd_agent.items())) or "0"],
                ]))
                print("\n".join(out[-2:]), flush=True)
                if unfresh:
                    exit_code = 1
        bypass = [r for r in ledger.rows if r[2] == "LIST" and cache_bypassing(r[4])]
        out.append(f"\nlists that could bypass the watch cache: {len(bypass)} of "
                   f"{sum(1 for r in ledger.rows if r[2] == 'LIST')}"
                   + (f" (e.g. {bypass[0][3]} {bypass[0][4]})" if bypass else ""))
        reports: collections.Counter[str] = collections.Counter()
        for n in nodes:
            reports.update(n.reports)
        out.append(f"NodeMetric reports: {dict(reports)}; GETs of a NodeMetric: "
                   f"{sum(1 for r in ledger.rows if r[2] == 'GET' and r[3] == 'nodemetrics')}")
        print("\n".join(out[-2:]), flush=True)
    finally:
        stop.set()
        await asyncio.wait(tasks, timeout=30)
        for n in nodes:
            n.transport.close()
        if not args.keep:
            print("deleting the load test's objects", flush=True)
            with contextlib.suppress(Exception):
                delete_objects(KubeHttp.from_kubeconfig(kubeconfig), prefix)
        if harness is not None:
            harness.close()
    if args.output:
        Path(args.output).write_text("\n".join(out) + "\n")
    if args.ledger:
        Path(args.ledger).write_text(json.dumps([[t, n, v, r, q, ledger.statuses.get(i)]
                                                 for i, (t, n, v, r, q) in enumerate(ledger.rows)]))
    return exit_code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.apiserver_load", description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=50)
    parser.add_argument("--pods-per-node", type=int, default=10)
    parser.add_argument("--rest-s", type=float, default=180.0)
    parser.add_argument("--settle-s", type=float, default=10.0, help="after the first sync, before measuring")
    parser.add_argument("--report-interval-s", type=float, default=60.0)
    parser.add_argument("--restart", action="store_true", help="restart the kube-e2e apiserver and measure")
    parser.add_argument("--outage-s", type=float, default=5.0, help="how long the apiserver stays down")
    parser.add_argument("--restart-window-s", type=float, default=150.0)
    parser.add_argument("--kubeconfig", default="")
    parser.add_argument("--informer", default="", help='InformerSettings overrides as JSON, e.g. {"relist_spread_s": 40}')
    parser.add_argument("--output", default="", help="also write the tables to this file")
    parser.add_argument("--keep", action="store_true", help="keep the Node, NodeMetric and Pod objects")
    parser.add_argument("--ledger", default="", help="write every request (time, node, verb, resource, query) as JSON")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    count_connects()
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # stopped: still delete what it created
    with quiet_logs():
        return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
