"""Short BE pod lifecycles through the real hook API (gRPC on a unix socket), standalone behind the proxy.

Each lifecycle is what a batch node does all day: the kubelet makes the pod cgroup, the proxy calls
PreRunPodSandbox and PreCreateContainer (the only hooked stages it is registered for: nothing ever says
the pod stopped), the pod ends and its cgroup goes. A reconciler pass runs every `pass_every` lifecycles
(the periodic pass) with the GC grace as given. `python -m tests.reconciler.churn N [--no-gc]` prints the
numbers for one run.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import tempfile
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import grpc
import psutil

from hookserver.api import runtime_hook_pb2 as pb
from hookserver.api import runtime_hook_pb2_grpc as pb_grpc
from hookserver.hooks.settings import HookServerSettings
from hookserver.reconciler.settings import ReconcilerSettings
from hookserver.dispatch import HookDispatcher
from hookserver.executor import CgroupExecutor, CgroupLayout
from hookserver.hooks import HookRegistry
from hookserver.hooks.plugins import BatchResourcePlugin
from hookserver.proxy import ProxyServer
from hookserver.reconciler import PodReconciler
from hookserver.store import StateStore, series_key
from hookserver.system import SystemRoots
from tests.executor.conftest import FakeClock, Tree

SPEC = json.dumps({"containers": {"main": {
    "requests": {"kubernetes.io/batch-cpu": "500", "kubernetes.io/batch-memory": "256Mi"},
    "limits": {"kubernetes.io/batch-cpu": "1000", "kubernetes.io/batch-memory": "256Mi"},
}}})
_FILES = {"cpu": {"cpu.shares": "2", "cpu.cfs_quota_us": "-1"}, "memory": {"memory.limit_in_bytes": "-1"}}


@dataclass
class ChurnResult:
    real: bool
    lifecycles: int
    rss_warm_mib: float
    rss_end_mib: float
    pods_end: int
    containers_end: int
    series_end: int
    cache_end: int
    collected: int
    max_pods: int

    @property
    def rss_growth_mib(self) -> float:
        return self.rss_end_mib - self.rss_warm_mib


def _rss_mib() -> float:
    gc.collect()
    return float(psutil.Process().memory_info().rss) / (1 << 20)


class _Cgroups:
    """Pod cgroups for the churn: a private subtree of the real v1 hierarchy (`real`), else a fixture tree."""

    def __init__(self, base: Path, *, real: bool) -> None:
        self.real = real
        self.top = f"hookserver-test-{uuid.uuid4().hex[:12]}" if real else ""
        self.root = "/sys/fs/cgroup" if real else str(base / "cg")
        self.prefix = f"/{self.top}/kubepods/besteffort" if real else "/kubepods/besteffort"
        if not real:
            Tree(Path(self.root), "v1", files_v1={k: dict(v) for k, v in _FILES.items()})

    def make(self, parent: str) -> None:
        for sub, files in _FILES.items():
            d = os.path.join(self.root, sub, parent.strip("/"))
            os.makedirs(d)
            if not self.real:
                for name, value in files.items():
                    fd = os.open(os.path.join(d, name), os.O_WRONLY | os.O_CREAT, 0o644)
                    os.write(fd, value.encode())
                    os.close(fd)

    def remove(self, parent: str) -> None:
        for sub, files in _FILES.items():
            d = os.path.join(self.root, sub, parent.strip("/"))
            if not self.real:
                for name in files:
                    os.unlink(os.path.join(d, name))
            os.rmdir(d)

    def close(self) -> None:
        if self.real:
            for sub in _FILES:
                for dirpath, _dirs, _files in sorted(
                    os.walk(os.path.join(self.root, sub, self.top)), key=lambda t: -t[0].count("/")
                ):
                    os.rmdir(dirpath)


def real_v1_usable() -> bool:
    return os.geteuid() == 0 and all(
        os.path.isfile(f"/sys/fs/cgroup/{sub}/cgroup.procs") and os.access(f"/sys/fs/cgroup/{sub}", os.W_OK)
        for sub in _FILES
    )


def churn(
    n: int, *, collect: bool = True, warmup: int = 1000, pass_every: int = 200, clients: int = 4,
    real: bool | None = None,
) -> ChurnResult:
    with tempfile.TemporaryDirectory(prefix="hs-churn-", dir="/tmp") as tmp:
        base = Path(tmp)
        tree = _Cgroups(base, real=real_v1_usable() if real is None else real)
        clock = FakeClock()
        store = StateStore(clock=clock, audit_capacity=4096)
        layout = CgroupLayout(version="v1", driver="cgroupfs", roots=SystemRoots(cgroup=tree.root))  # type: ignore[arg-type]
        executor = CgroupExecutor(layout, store=store, clock=clock)
        registry = HookRegistry([BatchResourcePlugin()])
        dispatcher = HookDispatcher(registry=registry, store=store, executor=executor)
        engine = PodReconciler(
            store=store, dispatcher=dispatcher, executor=executor, clock=clock,
            settings=ReconcilerSettings(gc_grace_s=10.0 if collect else 1e12),
        )
        settings = HookServerSettings(socket=str(base / "h.sock"), registration_dir=str(base / "reg"), max_workers=4)
        server = ProxyServer(settings, dispatcher=dispatcher, registry=registry)
        server.start()
        channel = grpc.insecure_channel(server.address)
        stub = pb_grpc.RuntimeHookServiceStub(channel)
        rss_warm = 0.0
        max_pods = 0
        pool = ThreadPoolExecutor(max_workers=clients, thread_name_prefix="churn-client")
        try:
            done = 0
            while done < warmup + n:
                if done == warmup:
                    rss_warm = _rss_mib()
                batch = min(pass_every, warmup + n - done)
                # `clients` proxies' worth of calls in flight, as on a busy node (pods start concurrently)
                list(pool.map(lambda i: _lifecycle(stub, tree, store, i), range(done, done + batch)))
                done += batch
                clock.now += 10.0  # one reconcile interval
                max_pods = max(max_pods, len(store.snapshot().pods))
                engine.run(trigger="periodic")
            clock.now += 10.0
            engine.run(trigger="periodic")
            snap = store.snapshot()
            return ChurnResult(
                real=tree.real, lifecycles=n, rss_warm_mib=rss_warm, rss_end_mib=_rss_mib(), pods_end=len(snap.pods),
                containers_end=len(snap.containers), series_end=len(store.series), cache_end=len(executor.cache),
                collected=engine.totals["collected"], max_pods=max_pods,
            )
        finally:
            pool.shutdown()
            channel.close()
            server.stop(grace_s=0.5)
            tree.close()


def _lifecycle(stub: pb_grpc.RuntimeHookServiceStub, tree: _Cgroups, store: StateStore, i: int) -> None:
    uid = str(uuid.uuid4())
    parent = f"{tree.prefix}/pod{uid}"
    tree.make(parent)
    meta = pb.PodSandboxMetadata(name=f"job-{i}", uid=uid, namespace="batch", attempt=0)
    labels = {"koordinator.sh/qosClass": "BE"}
    annotations = {"node.koordinator.sh/extended-resource-spec": SPEC}
    stub.PreRunPodSandboxHook(pb.PodSandboxHookRequest(
        pod_meta=meta, runtime_handler="runc", cgroup_parent=parent, labels=labels, annotations=annotations))
    stub.PreCreateContainerHook(pb.ContainerResourceHookRequest(
        pod_meta=meta, container_meta=pb.ContainerMetadata(name="main"), pod_cgroup_parent=parent,
        pod_labels=labels, pod_annotations=annotations,
        container_resources=pb.LinuxContainerResources(cpu_shares=2)))
    store.series.append(series_key("pod_cpu_usage", pod=uid), 0.5)  # what the collectors keep per pod
    tree.remove(parent)  # the pod ends: the kubelet removes its cgroup


def main(argv: list[str]) -> int:
    n = int(argv[0]) if argv else 10_000
    result = churn(n, collect="--no-gc" not in argv, real=False if "--fixture" in argv else None)
    print(result, f"rss growth {result.rss_growth_mib:.1f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
