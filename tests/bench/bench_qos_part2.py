"""QoS part 2: one full QoS round for 200 pods with every reconciler (part 1's CPU suppress, CPU evict,
memory evict, and part 2's CPU burst, memory QoS, system config, blkio, resctrl), measured side by side:

* plan(): every reconciler's planner on one scripted 200-pod snapshot, state carried round to round
  (steady state; target: the whole round <= 10 ms), and part 2's planners alone;
* kernel facts: `KernelReader.read` (all part-2 gates on) over a 200-pod cgroup v1 fixture tree (the
  file reads a round adds);
* a runner round end to end on that fixture tree (snapshot, plans, cgroup and system-file executors).

Run alone: `python -m tests.bench qos_part2`.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from types import MappingProxyType
from typing import Any

from tests.bench.common import BenchRow, summarize

ROUNDS = 300
PODS = 200


def _spec() -> dict[str, Any]:
    return {
        "resourceUsedThresholdWithBE": {"enable": True},
        "cpuBurstStrategy": {"policy": "auto"},
        "systemStrategy": {"minFreeKbytesFactor": 100},
        "resourceQOSStrategy": {
            "lsClass": {"memoryQOS": {"enable": True, "minLimitPercent": 50, "lowLimitPercent": 80, "throttlingPercent": 80},
                        "resctrlQOS": {"enable": True}},
            "beClass": {"memoryQOS": {"enable": True}, "resctrlQOS": {"enable": True, "mbaPercent": 50},
                        "blkioQOS": {"enable": True, "blocks": [{"name": "/dev/vdb", "type": "device",
                                                                  "ioCfg": {"readBPS": 1 << 20, "writeIOPS": 500}}]}},
        },
    }


def _snapshot() -> Any:
    from qos.snapshot.kernel import BlockDevice, ResctrlFacts, SysctlFacts
    from qos.snapshot.model import BETier, NodeUsage
    from tests.qos.helpers import node, pod, topology
    from tests.qos.part2_helpers import container, kernel, pod_kernel, spec_snapshot

    pods = []
    pks = []
    for i in range(PODS):
        kind = "BE" if i % 5 == 0 or i % 5 == 1 else ("LSR" if i % 10 == 2 else "LS")
        name = f"{'be' if kind == 'BE' else 'ls'}{i}"
        cpuset = frozenset({i % 32}) if kind == "LSR" else frozenset()
        pods.append(pod(name, kind, cpu=0.3, mem=float(1 << 28), batch_milli=500, cpu_milli=500, cpuset=cpuset))
        cs = tuple(container(name, f"c{j}", cpu_limit_milli=1000, memory_request_bytes=1 << 28, memory_limit_bytes=1 << 29,
                             quota_us=100_000, burst_us=100_000, throttled_ratio=0.1 * (i % 3), cpu_usage_cores=0.4,
                             tasks=frozenset(range(1000 * i + 10 * j, 1000 * i + 10 * j + 5))) for j in range(2))
        pks.append(pod_kernel(name, *cs, quota_us=200_000, cpu_limit_milli=2000, memory_request_bytes=1 << 29,
                              memory_limit_bytes=1 << 30))
    tasks = {"LSR": frozenset(), "LS": frozenset(), "BE": frozenset()}
    for p, pk in zip(pods, pks):
        group = {"LSE": "LSR", "LSR": "LSR", "LS": "LS", "BE": "BE"}[p.qos]
        tasks[group] = tasks[group] | frozenset(t for c in pk.containers for t in c.tasks)
    resctrl = ResctrlFacts(root_exists=True, cat=True, mba=True, cbm_bits=20, num_closids=16, l3_domains=("0", "1"),
                           mb_domains=("0", "1"), groups=MappingProxyType({"LSR": "L3:0=fffff;1=fffff\nMB:0=100;1=100",
                                                                           "LS": "L3:0=fffff;1=fffff\nMB:0=100;1=100",
                                                                           "BE": "L3:0=3f;1=3f\nMB:0=50;1=50"}),
                           group_tasks=MappingProxyType(tasks))
    facts = kernel(*pks, read=("pods", "sysctl", "blkio", "resctrl"),
                   cgroup_files=frozenset({"cpu.cfs_burst_us", "memory.min", "memory.low", "memory.high"}),
                   sysctl=SysctlFacts(mem_total_kib=64_000_000, values=MappingProxyType({
                       "vm.min_free_kbytes": 640_000, "vm.watermark_scale_factor": 150, "memcg_reaper.reap_background": None})),
                   devices=(BlockDevice("/dev/vdb", "device", devno="253:16"),), resctrl=resctrl)
    tier = "kubepods/besteffort"
    return spec_snapshot(_spec(), pods=tuple(pods), node=node(cpu_milli=32_000, memory=64 << 30), topology=topology(32),
                         usage=NodeUsage(cpu_cores=8.0, memory_bytes=float(20 << 30)),
                         be_tier=BETier(dir=tier, cpuset=frozenset(range(32)), quota_us=-1, cpuset_levels=((tier,),)),
                         kernel=facts)


def _plans(reconcilers: list[Any], snap: Any) -> list[float]:
    from dataclasses import replace

    states = {r.name: r.initial_state(snap.now) for r in reconcilers}
    samples = []
    for i in range(ROUNDS):
        s = replace(snap, now=snap.now + i)
        t0 = time.perf_counter()
        for r in reconcilers:
            verdict = r.enabled(s)
            plan = r.plan(s, states[r.name]) if verdict.enabled else r.plan_disabled(s, states[r.name], verdict.reason)
            if plan.state is not None:
                states[r.name] = plan.state
        samples.append(time.perf_counter() - t0)
    return samples


def _fixture(root: Path) -> None:
    """A v1 tree with the kubelet layout for the 200 pods the stack registers."""
    for sub in ("cpu", "cpuset", "memory", "blkio"):
        (root / "cg" / sub / "kubepods" / "burstable").mkdir(parents=True)
        (root / "cg" / sub / "kubepods" / "besteffort").mkdir(parents=True)
    (root / "cg" / "cpu" / "kubepods" / "cpu.cfs_burst_us").write_text("0")
    for i in range(PODS):
        be = i % 5 in (0, 1)
        tier = "besteffort" if be else "burstable"
        for c in ("a", "b"):
            d = root / "cg" / "cpu" / "kubepods" / tier / f"podp{i}-0000-1111" / f"p{i}{c}"
            d.mkdir(parents=True)
            for name, value in (("cpu.cfs_quota_us", "100000"), ("cpu.cfs_period_us", "100000"),
                                ("cpu.cfs_burst_us", "100000"), ("tasks", "1\n2\n")):
                (d / name).write_text(value)
            (d.parent / "cpu.cfs_quota_us").write_text("200000")
            (d.parent / "cpu.cfs_period_us").write_text("100000")
    vm = root / "proc" / "sys" / "vm"
    vm.mkdir(parents=True)
    (vm / "min_free_kbytes").write_text("640000")
    (vm / "watermark_scale_factor").write_text("150")
    (root / "proc" / "meminfo").write_text("MemTotal: 64000000 kB\n")


def run() -> list[BenchRow]:
    from qos.registry import build_reconcilers
    from tests.qos.part2_stack import add_pod, build_stack

    snap = _snapshot()
    everyone = build_reconcilers()
    part2 = [r for r in everyone if r.name in ("CPUBurst", "MemoryQoS", "SystemConfig", "BlkIO", "Resctrl")]
    full = summarize(_plans(everyone, snap))
    only2 = summarize(_plans(part2, snap))
    rows = [
        BenchRow("qos-part2", f"plan round, all {len(everyone)} reconcilers, {PODS} pods p50",
                 f"{full['p50_ms']:.2f} ms", f"p99 {full['p99_ms']:.2f} ms; target <= 10 ms"),
        BenchRow("qos-part2", f"plan round, part 2 only ({len(part2)}), {PODS} pods p50",
                 f"{only2['p50_ms']:.2f} ms", f"p99 {only2['p99_ms']:.2f} ms"),
    ]
    with tempfile.TemporaryDirectory(prefix="bench-qos2-") as tmp:
        root = Path(tmp)
        _fixture(root)
        gates = {"CPUBurst": True, "CgroupReconcile": True, "SystemConfig": True, "BlkIOReconcile": True, "RdtResctrl": True}
        stack = build_stack(str(root / "cg"), *[type(r)() for r in part2], gates=gates, proc_root=str(root / "proc"),
                            sys_root=str(root / "sys"), spec=_spec())
        for i in range(PODS):
            kind = ("BestEffort", "BE") if i % 5 in (0, 1) else ("Burstable", "LS")
            add_pod(stack.store, f"p{i}", kube_qos=kind[0], qos=kind[1],
                    containers={c: ({"cpu": "500m", "memory": "256Mi"}, {"cpu": "1", "memory": "512Mi"}) for c in ("a", "b")})
        build = stack.runner.snapshots
        kernel = build.kernel  # type: ignore[attr-defined]
        read_samples, plain_samples = [], []
        for _ in range(60):  # side by side: with the kernel facts, and part 1's snapshot alone
            t0 = time.perf_counter()
            build.build()
            read_samples.append(time.perf_counter() - t0)
            build.kernel = None  # type: ignore[attr-defined]
            t0 = time.perf_counter()
            build.build()
            plain_samples.append(time.perf_counter() - t0)
            build.kernel = kernel  # type: ignore[attr-defined]
        stack.tick()  # first round writes; then steady state
        round_samples = []
        for _ in range(60):
            t0 = time.perf_counter()
            stack.tick()
            round_samples.append(time.perf_counter() - t0)
        r = summarize(read_samples)
        rp = summarize(plain_samples)
        rr = summarize(round_samples)
        rows.append(BenchRow("qos-part2", f"snapshot build without kernel facts, {PODS} pods p50",
                             f"{rp['p50_ms']:.2f} ms", f"p99 {rp['p99_ms']:.2f} ms (part 1's inputs only)"))
        rows.append(BenchRow("qos-part2", f"snapshot build incl. kernel facts, {PODS} pods (v1 fixture) p50",
                             f"{r['p50_ms']:.2f} ms", f"p99 {r['p99_ms']:.2f} ms; {os.cpu_count()} CPUs"))
        rows.append(BenchRow("qos-part2", f"runner round, part 2, {PODS} pods, steady (fixture) p50",
                             f"{rr['p50_ms']:.2f} ms", f"p99 {rr['p99_ms']:.2f} ms (snapshot + plans + executors)"))
    return rows
