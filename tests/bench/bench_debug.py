"""Debug API cost: hookctl round trips over the unix socket on a full store, and what a client
hammering `explain` does to the hook hot path running beside it (the audit lock is shared)."""

from __future__ import annotations

import json
import tempfile
import threading
import time
from pathlib import Path

from hookserver.debug import DebugClient, DebugServer
from hookserver.dispatch import HookDispatcher
from hookserver.executor.plan import ApplyReport, ResourcePlan
from hookserver.hooks import ContainerRequest, HookRegistry, PodRequest, Stage
from hookserver.hooks.plugins import BatchResourcePlugin
from hookserver.store import StateStore, WriteRecord
from tests.bench.common import BenchRow, summarize

_PODS = 500
_SPEC = json.dumps(
    {"containers": {"main": {"requests": {"kubernetes.io/batch-cpu": "500"}, "limits": {"kubernetes.io/batch-cpu": "1000"}}}}
)


class _NullExecutor:
    def apply(self, plan: ResourcePlan) -> ApplyReport:
        return ApplyReport()


def _pod(i: int) -> PodRequest:
    return PodRequest(
        "bench", f"pod-{i}", f"uid-{i:05d}", labels={"koordinator.sh/qosClass": "BE"},
        annotations={"node.koordinator.sh/extended-resource-spec": _SPEC},
        cgroup_parent=f"/kubepods/besteffort/poduid-{i:05d}",
    )


def _fill() -> tuple[StateStore, HookDispatcher]:
    store = StateStore()
    dispatcher = HookDispatcher(registry=HookRegistry([BatchResourcePlugin()]), store=store, executor=_NullExecutor())
    for i in range(_PODS):
        pod = _pod(i)
        dispatcher.dispatch_pod(Stage.PRE_RUN_POD_SANDBOX, pod, door="proxy", rpc="PreRunPodSandboxHook")
        dispatcher.dispatch_container(Stage.PRE_CREATE_CONTAINER, ContainerRequest(pod, "main"), door="proxy", rpc="PreCreateContainerHook")
        for f in ("cpu.shares", "cpu.cfs_quota_us", "memory.limit_in_bytes", "cpu.cfs_period_us"):
            store.audit.record_write(WriteRecord(store.clock(), f"/sys/fs/cgroup/cpu/kubepods/besteffort/poduid-{i:05d}/{f}", "1", True))
    return store, dispatcher


def _time_calls(call: object, n: int) -> list[float]:
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        call()  # type: ignore[operator]
        samples.append(time.perf_counter() - t0)
    return samples


def _dispatch_latency(dispatcher: HookDispatcher, n: int) -> list[float]:
    pod = _pod(_PODS - 1)
    container = ContainerRequest(pod, "main")
    return _time_calls(
        lambda: dispatcher.dispatch_container(Stage.PRE_CREATE_CONTAINER, container, door="proxy", rpc="bench"), n
    )


def run() -> list[BenchRow]:
    store, dispatcher = _fill()
    rows: list[BenchRow] = []
    with tempfile.TemporaryDirectory() as tmp:
        server = DebugServer(str(Path(tmp) / "debug.sock"), store=store)
        server.start()
        try:
            with DebugClient(server.socket_path) as client:
                for name, call, n in (
                    ("status", client.status, 200),
                    ("pods (500)", client.pods, 100),
                    ("explain (4096-entry audit)", lambda: client.explain("bench", "pod-250"), 200),
                    ("events --limit 50", lambda: client.events(limit=50), 200),
                ):
                    call()
                    s = summarize(_time_calls(call, n))
                    rows.append(BenchRow("debug", f"hookctl {name}", f"{s['p50_ms']:.2f} ms", f"p99 {s['p99_ms']:.2f} ms"))
            quiet = summarize(_dispatch_latency(dispatcher, 3000))
            stop = threading.Event()

            calls = [0]

            def hammer() -> None:
                # The pod the hot path is dispatching, so explain always has fresh decisions to show.
                with DebugClient(server.socket_path) as c:
                    while not stop.is_set():
                        c.explain("bench", f"pod-{_PODS - 1}")
                        calls[0] += 1

            thread = threading.Thread(target=hammer, daemon=True)
            thread.start()
            busy = summarize(_dispatch_latency(dispatcher, 3000))
            stop.set()
            thread.join(10)
        finally:
            server.stop(0.5)
    rows.append(BenchRow("debug", "dispatch_container, debug idle", f"{quiet['p50_ms']:.3f} ms", f"p99 {quiet['p99_ms']:.3f} ms"))
    rows.append(
        BenchRow(
            "debug", "dispatch_container, explain in a loop", f"{busy['p50_ms']:.3f} ms",
            f"p99 {busy['p99_ms']:.3f} ms; {calls[0]} explains meanwhile",
        )
    )
    return rows
