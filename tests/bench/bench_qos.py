"""QoS benchmarks (issue 9). Targets: one full QoS round (every reconciler's plan()) at 200 pods <= 10 ms;
the agent's CPU with QoS on at 200 pods <= 5 % of one core, collectors included.

* plan round: CPU suppress, CPU evict and memory evict planning on one scripted 200-pod snapshot (64 CPUs,
  67 BE pods with a container each), in the steady state (suppress target unchanged) and when both
  evictors fire (every BE pod ordered). Also the snapshot build (store + series + BE tier files) at 200 pods.
* agent CPU: a real `hookserver serve --standalone` against a fixture host (/proc, /sys and a cgroup v1 tree
  of 200 pods), pods fed through the hook socket; CPU time of the process over a window, with QoS on
  (all three gates, suppress enabled) and off, side by side in one run.

`python -m tests.bench qos` runs only this module; BENCH_QOS_AGENT_S sets the agent window (20 s).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import grpc
import psutil

from hookserver.api import runtime_hook_pb2 as pb
from hookserver.api import runtime_hook_pb2_grpc as pb_grpc
from hookserver.slo.model import NodeSLOSpec
from hookserver.store.timeseries import series_key
from hookserver.system.cgroupnames import CgroupDriver
from hookserver.system.cpulist import parse_cpu_list
from qos.eviction.cpu import CPUEvict
from qos.cpu.suppress import CPUSuppress
from qos.eviction.memory import EvictState, MemoryEvict
from qos.snapshot.builder import CgroupView, SnapshotBuilder
from qos.snapshot.model import BEStats, BETier, NodeUsage, QoSSnapshot
from tests.bench.common import BenchRow, stop_process, summarize
from tests.collectors.fakehost import FakeHost, make_pod
from tests.qos.helpers import node, pod, snapshot, topology

PODS = 200
ROOT = Path(__file__).resolve().parents[2]
SLO = {"resourceUsedThresholdWithBE": {
    "enable": True, "cpuSuppressPolicy": "cpuset", "cpuEvictBESatisfactionLowerPercent": 60,
    "cpuEvictBESatisfactionUpperPercent": 80, "cpuEvictTimeWindowSeconds": 60,
}}


def _snapshot(*, firing: bool) -> QoSSnapshot:
    pods = []
    tier = "kubepods/besteffort"
    be_dirs, ctr_dirs = [], []
    for i in range(PODS):
        be = i % 3 == 0
        name = f"p{i:03d}"
        pods.append(pod(name, "BE" if be else "LS", cpu=0.05 + (i % 7) * 0.01, mem=(64 + i) * 2**20,
                        priority=i % 5, batch_milli=1000 if be else 0, cpu_milli=0 if be else 500))
        if be:
            be_dirs.append(f"{tier}/pod{name}")
            ctr_dirs.append(f"{tier}/pod{name}/ctr{name}")
    memory = 256 * 2**30
    usage = NodeUsage(cpu_cores=20.0, memory_bytes=(0.9 if firing else 0.5) * memory)
    be = BEStats(60, 900 if firing else 200, 67_000, 1000, 60, 950 if firing else 200, 67_000, 1000)
    return snapshot(
        slo=NodeSLOSpec.model_validate(SLO), node=node(cpu_milli=64_000, memory=memory), pods=tuple(pods), usage=usage,
        be=be, topology=topology(64, sockets=2),
        be_tier=BETier(tier, frozenset(range(64)), -1, cpuset_levels=((tier,), tuple(be_dirs), tuple(ctr_dirs))),
    )


def _plan_rows() -> list[BenchRow]:
    rows: list[BenchRow] = []
    reconcilers = (CPUSuppress(), CPUEvict(), MemoryEvict())
    for firing in (False, True):
        snap = _snapshot(firing=firing)
        states = {r.name: r.initial_state(0.0) for r in reconcilers}
        states["CPUEvict"] = states["MemoryEvict"] = EvictState(0.0)
        # Steady state: last round's suppress target is what the tier holds (only new directories are written).
        first = reconcilers[0].plan(snap, states["CPUSuppress"])
        states["CPUSuppress"] = first.state
        assert snap.be_tier is not None
        snap = replace(snap, be_tier=replace(snap.be_tier, cpuset=parse_cpu_list(str(first.numbers["cpuset"]))))
        samples: list[float] = []
        evictions = writes = 0
        for _ in range(300):
            t0 = time.perf_counter()
            plans = [r.plan(snap, states[r.name]) for r in reconcilers]
            samples.append(time.perf_counter() - t0)
            evictions = sum(len(p.evictions) for p in plans)
            writes = sum(p.write_count() for p in plans)
        s = summarize(samples[20:])
        label = "evictors firing" if firing else "steady"
        rows.append(BenchRow("qos", f"round plan() x3, {PODS} pods, {label}",
                             f"{s['p50_ms']:.3f} ms p50", f"p99 {s['p99_ms']:.3f} ms; {writes} writes, "
                             f"{evictions} eviction candidates; target <= 10 ms"))
    return rows


def _host(base: Path, pods: int) -> tuple[FakeHost, list[tuple[str, str, bool]]]:
    host = FakeHost(base, version=1)
    host.set_proc_stat(user=1000, system=100, idle=5000, ncpu=8)
    host.set_meminfo(total_kb=32 << 20, free_kb=20 << 20, available_kb=24 << 20)
    host.set_topology([(c, c % 4, 0, 0, 0) for c in range(8)], {0: (32 << 20, 20 << 20)})
    for tier in ("kubepods", "kubepods/besteffort", "kubepods/burstable"):
        host.set_cpu_limit(tier, quota_us=-1, cpus="0-7")
        host.set_cpu_usage(tier, 10**9)
        host.write_raw("cpu", tier, "cpu.shares", "1024\n")
    out = []
    for i in range(pods):
        be = i % 3 == 0
        uid = f"0000{i:04d}-aaaa-bbbb-cccc-dddddddddddd"
        rel = f"kubepods/{'besteffort' if be else 'burstable'}/pod{uid}"
        host.set_cpu_usage(rel, 10**9 + i, nr_periods=100, nr_throttled=i % 7)
        host.set_memory(rel, active_anon=1 << 20, inactive_anon=1 << 19, active_file=1 << 22, inactive_file=1 << 21)
        host.set_cpu_limit(rel, quota_us=-1, cpus="0-7")
        host.write_raw("cpu", rel, "cpu.shares", "2\n")
        out.append((uid, rel, be))
    return host, out


def _snapshot_build_row() -> list[BenchRow]:
    from hookserver.store import StateStore

    with tempfile.TemporaryDirectory(prefix="hs-bench-qos-") as tmp:
        host, pods = _host(Path(tmp), PODS)
        store = StateStore()
        now = store.clock()
        store.set_node_slo(NodeSLOSpec.model_validate(SLO))
        for uid, rel, be in pods:
            store.upsert_pod(make_pod(uid, cgroup_parent="/" + rel, qos_class="BE" if be else "LS",
                                      batch_cpu={"app": "1000"} if be else None))
            store.series.append(series_key("pod_cpu_usage", pod=uid), 0.1, ts=now)
            store.series.append(series_key("pod_memory_usage", pod=uid), 1e8, ts=now)
        for t in range(60):
            for metric in ("be_cpu_usage", "be_cpu_request", "be_cpu_real_limit"):
                store.series.append(series_key(metric), 1.0, ts=now - 60 + t)
        view = CgroupView(hierarchy_root=lambda sub: str(host.cgroup / sub), v2=False, driver=CgroupDriver.CGROUPFS)
        builder = SnapshotBuilder(store, cgroups=view)
        samples = []
        for _ in range(100):
            t0 = time.perf_counter()
            builder.build()
            samples.append(time.perf_counter() - t0)
    s = summarize(samples[10:])
    return [BenchRow("qos", f"snapshot build, {PODS} pods (store, series, BE tier files)",
                     f"{s['p50_ms']:.3f} ms p50", f"p99 {s['p99_ms']:.3f} ms")]


class _Ticker:
    """Moves the fixture's counters every 0.5 s (node /proc/stat, every pod's cpuacct.usage), so the agent's
    collectors see usage and its reconcilers do their real work, not the "no sample" shortcut."""

    def __init__(self, host: FakeHost, pods: list[tuple[str, str, bool]]) -> None:
        import threading

        self.host, self.pods = host, pods
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="bench-ticker", daemon=True)

    def _run(self) -> None:
        step = 0
        while not self.stop.wait(0.5):
            step += 1
            self.host.set_proc_stat(user=1000 + 300 * step, system=100 + 40 * step, idle=5000 + 60 * step, ncpu=8)
            for i, (_uid, rel, _be) in enumerate(self.pods):
                self.host.set_cpu_usage(rel, 10**9 + i + step * (5 + i % 7) * 10**6, nr_periods=100 + step,
                                        nr_throttled=i % 7)

    def __enter__(self) -> _Ticker:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(5)


def _feed(socket: Path, pods: list[tuple[str, str, bool]]) -> None:
    stub = pb_grpc.RuntimeHookServiceStub(grpc.insecure_channel(f"unix://{socket}"))
    for i, (uid, rel, be) in enumerate(pods):
        labels = {"koordinator.sh/qosClass": "BE" if be else "LS"}
        stub.PreRunPodSandboxHook(pb.PodSandboxHookRequest(
            pod_meta=pb.PodSandboxMetadata(name=f"p{i:03d}", namespace="bench", uid=uid), labels=labels,
            cgroup_parent="/" + rel), timeout=10)


def _agent_cpu(tmp: Path, *, qos: bool, window_s: float) -> tuple[float, str]:
    host, pods = _host(tmp / "host", PODS)
    slo = tmp / "slo.yaml"
    slo.write_text("resourceUsedThresholdWithBE:\n  enable: true\n  cpuSuppressPolicy: cpuset\n"
                   "  cpuEvictBESatisfactionLowerPercent: 60\n  cpuEvictBESatisfactionUpperPercent: 80\n")
    config = tmp / "config.yaml"
    config.write_text(f"qos:\n  enabled: {'true' if qos else 'false'}\n")
    sock, debug = tmp / "hook.sock", tmp / "debug.sock"
    log = open(tmp / "agent.log", "ab")  # noqa: SIM115 - closed below
    args = [
        sys.executable, "-m", "hookserver.cli.serve", "serve", "--standalone", "--no-nri", "--config", str(config),
        "--hook-socket", str(sock), "--debug-socket", str(debug), "--registration-dir", str(tmp / "reg"),
        "--metrics-addr", "127.0.0.1:0", "--state-dir", str(tmp / "state"), "--node-name", "bench-node",
        "--cgroup-root", str(host.cgroup), "--cgroup-driver", "cgroupfs", "--proc-root", str(host.proc),
        "--sys-root", str(host.sys), "--slo-file", str(slo), "--log-level", "WARNING",
        "--feature-gates", "BEMemoryEvict=true,BECPUEvict=true",
    ]
    proc = subprocess.Popen(args, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while not (tmp / "reg" / "hookserver.json").exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"agent did not start: {(tmp / 'agent.log').read_text()[-2000:]}")
            time.sleep(0.05)
        _feed(sock, pods)
        with _Ticker(host, pods):
            time.sleep(5.0)  # warm-up: every collector and reconciler has run a few rounds
            p = psutil.Process(proc.pid)
            before, t0 = p.cpu_times(), time.monotonic()
            time.sleep(window_s)
            after, t1 = p.cpu_times(), time.monotonic()
        used = (after.user - before.user) + (after.system - before.system)
        rss = p.memory_info().rss
        return 100.0 * used / (t1 - t0), f"rss {rss / 2**20:.0f} MiB"
    finally:
        stop_process(proc, grace_s=20)
        log.close()


def _agent_rows() -> list[BenchRow]:
    window = float(os.environ.get("BENCH_QOS_AGENT_S", "20"))
    results = {}
    for qos in (True, False):
        with tempfile.TemporaryDirectory(prefix="hs-bench-agent-") as tmp:
            results[qos] = _agent_cpu(Path(tmp), qos=qos, window_s=window)
    on, off = results[True][0], results[False][0]
    return [
        BenchRow("qos", f"agent CPU, QoS on, {PODS} pods, {window:.0f} s", f"{on:.2f} % of a core",
                 f"collectors included; {results[True][1]}; target <= 5 %"),
        BenchRow("qos", f"agent CPU, QoS off, {PODS} pods, {window:.0f} s", f"{off:.2f} % of a core",
                 f"{results[False][1]}; QoS adds {on - off:+.2f} points (ratio {on / off if off else float('nan'):.2f})"),
    ]


def run() -> list[BenchRow]:
    return _plan_rows() + _snapshot_build_row() + _agent_rows()
