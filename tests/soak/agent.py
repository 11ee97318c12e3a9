"""The agent under soak: a `hookserver serve --standalone` subprocess with the fault shim loaded, its process
samples (RSS, fds, threads from /proc) and its /metrics.

Why a subprocess and not an in-process daemon: kill -9 and fd/thread counts only mean something for a real
process, and the shim must be loaded before hookserver imports anything.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hookserver.debug.client import DebugClient
from hookserver.errors import HookServerError
from tests.sockets import accepts

__all__ = ["Agent", "AgentPaths", "Sample", "free_port", "metric_sum", "parse_metrics"]

ROOT = Path(__file__).resolve().parents[2]
SHIM = Path(__file__).resolve().parent / "shim"

# Fast rounds so a ten-minute campaign sees hundreds of checkpoint, NodeMetric and capacity writes.
FAST_ENV = {
    "HOOKSERVER_NRI__BACKOFF_INITIAL_S": "0.05",
    "HOOKSERVER_NRI__BACKOFF_MAX_S": "1.0",
    "HOOKSERVER_PREDICTOR__TRAINING_INTERVAL_S": "0.5",
    "HOOKSERVER_PREDICTOR__CHECKPOINT_ROUND_S": "0.5",
    "HOOKSERVER_PREDICTOR__CHECKPOINT_INTERVAL_S": "0",
    "HOOKSERVER_PREDICTOR__MIN_REPORT_INTERVAL_S": "1",
    "HOOKSERVER_PREDICTOR__DEFAULT_REPORT_INTERVAL_S": "1",
    "HOOKSERVER_CAPACITY__INTERVAL_S": "1",
    "HOOKSERVER_CAPACITY__WARMUP_S": "0",
    "HOOKSERVER_RECONCILER__INTERVAL_S": "1",
    # Pods whose cgroup is gone are forgotten after 5 s, not 60: the store's pod count then follows the live
    # pods (300 synced + 40 churned) instead of the last minute's churn rate, so growth in it means a leak.
    "HOOKSERVER_RECONCILER__GC_GRACE_S": "5",
}


@dataclass(frozen=True, slots=True)
class AgentPaths:
    """Everything one campaign's agent reads and writes outside the cgroup tree."""

    base: Path

    @property
    def state(self) -> Path:
        return self.base / "state"

    @property
    def hook_socket(self) -> Path:
        return self.base / "hook.sock"

    @property
    def debug_socket(self) -> Path:
        return self.base / "debug.sock"

    @property
    def nri_socket(self) -> Path:
        return self.base / "nri.sock"

    @property
    def registration(self) -> Path:
        return self.base / "reg" / "hookserver.json"

    @property
    def control(self) -> Path:
        return self.base / "faults.json"

    @property
    def writes(self) -> Path:
        return self.base / "writes.log"

    @property
    def injected(self) -> Path:
        return self.base / "injected.log"


@dataclass(frozen=True, slots=True)
class Sample:
    at: float
    pid: int
    rss_kib: int
    fds: int
    threads: int
    series: int = 0  # lines of /metrics
    pods: int = 0  # the store's pods and containers (hookctl status)
    containers: int = 0
    audit: int = 0  # the audit's rings: hook calls, decisions, writes


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])



def parse_metrics(text: str) -> dict[str, float]:
    """`name{labels}` -> value for every sample line (the text exposition format)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        key, _, value = line.rpartition(" ")
        try:
            out[key] = float(value)
        except ValueError:
            continue
    return out


@dataclass
class Agent:
    paths: AgentPaths
    standalone: bool = True
    extra_args: tuple[str, ...] = ()
    extra_env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None
    port: int = 0
    starts: int = 0

    def start(self, *, timeout: float = 30.0) -> float:
        """Start and wait until the hook socket answers; returns the seconds it took."""
        self.paths.base.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        env = dict(os.environ, PYTHONPATH=f"{SHIM}:{ROOT}", SOAK_FAULTS=str(self.paths.control),
                   SOAK_WRITES=str(self.paths.writes), SOAK_INJECTED=str(self.paths.injected), **FAST_ENV,
                   **self.extra_env)
        args = [
            sys.executable, "-m", "hookserver.cli.serve", "serve", *(["--standalone"] if self.standalone else []),
            "--hook-socket", str(self.paths.hook_socket), "--debug-socket", str(self.paths.debug_socket),
            "--registration-dir", str(self.paths.registration.parent), "--metrics-addr", f"127.0.0.1:{self.port}",
            "--state-dir", str(self.paths.state), "--node-name", "soak-node", "--log-level", "WARNING",
            # The cgroup root is the host's: QoS reconcilers plan and audit, but never touch a kubepods tier
            # that a kubelet on this (shared) machine may have made. Pod values are written as usual.
            "--qos-dry-run",
            *self.extra_args,
        ]
        log = open(self.paths.base / "agent.log", "ab")  # noqa: SIM115 - the child keeps it
        started = time.monotonic()
        try:
            self.proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        finally:
            log.close()
        self.starts += 1
        while not accepts(self.paths.hook_socket) or not self.paths.registration.exists():
            if self.proc.poll() is not None:
                raise RuntimeError(f"agent exited {self.proc.returncode}: see {self.paths.base / 'agent.log'}")
            if time.monotonic() - started > timeout:
                self.kill()
                raise RuntimeError(f"agent not ready in {timeout} s: see {self.paths.base / 'agent.log'}")
            time.sleep(0.02)
        return time.monotonic() - started

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self) -> int:
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()
                return -9
        return self.proc.returncode

    def sample(self) -> Sample | None:
        if not self.alive or self.proc is None:
            return None
        pid = self.proc.pid
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            fds = len(os.listdir(f"/proc/{pid}/fd"))
        except OSError:
            return None
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        rss = int(fields.get("VmRSS", "0 kB").split()[0])
        threads = int(fields.get("Threads", "0").strip())
        series = len(self.metrics())
        store = self.store_status()
        def count(key: str) -> int:
            value = store.get(key, 0)
            return value if isinstance(value, int) else 0

        return Sample(time.monotonic(), pid, rss, fds, threads, series, count("pods"), count("containers"),
                      count("recent_hook_calls") + count("recent_decisions") + count("recent_writes"))

    def status(self) -> dict[str, Any]:
        """`hookctl status` as a document (through the debug socket, as hookctl asks); {} when it does not answer."""
        try:
            with DebugClient(str(self.paths.debug_socket), timeout_s=5.0) as client:
                doc = json.loads(client.status())
        except (HookServerError, ValueError, OSError):
            return {}
        return doc if isinstance(doc, dict) else {}

    def knows_pod(self, name: str) -> bool:
        """Whether the agent's store has a pod of this name (`hookctl pods`, asked over the debug socket)."""
        try:
            with DebugClient(str(self.paths.debug_socket), timeout_s=5.0) as client:
                return name in client.pods()
        except (HookServerError, OSError):
            return False

    def store_status(self) -> dict[str, object]:
        """The store part of `hookctl status`."""
        found = _find(self.status(), "pods")
        return found if found is not None else {}

    def informer_settled(self) -> str:
        """"" when the informer has synced and every source is fresh (its watch open); else what is not."""
        informer = self.status().get("informer")
        if not isinstance(informer, dict):
            return "no informer status"
        if not informer.get("synced"):
            return "not synced yet"
        stale = [str(s.get("resource", "?")) for s in informer.get("sources") or [] if isinstance(s, dict) and s.get("stale")]
        return f"stale: {', '.join(stale)}" if stale else ""

    def wait_informer_settled(self, timeout: float) -> str:
        """Wait until `informer_settled()` says ""; returns what was still not settled at the timeout."""
        deadline = time.monotonic() + timeout
        while True:
            why = self.informer_settled()
            if not why or time.monotonic() > deadline:
                return why
            time.sleep(0.2)

    def metrics(self, *, timeout: float = 5.0) -> dict[str, float]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=timeout) as resp:
                return parse_metrics(resp.read().decode())
        except OSError:
            return {}


def metric_sum(metrics: dict[str, float], name: str, *, having: str = "") -> float:
    """The sum of every series of `name` (any labels), optionally only those whose labels contain `having`."""
    return sum(v for k, v in metrics.items() if k.split("{", 1)[0] == name and having in k)


def _find(tree: Any, key: str) -> dict[str, object] | None:
    """The first mapping in a decoded JSON tree that holds `key` with an integer value."""
    if isinstance(tree, dict):
        if isinstance(tree.get(key), int):
            return tree
        for value in tree.values():
            found = _find(value, key)
            if found is not None:
                return found
    elif isinstance(tree, list):
        for value in tree:
            found = _find(value, key)
            if found is not None:
                return found
    return None
