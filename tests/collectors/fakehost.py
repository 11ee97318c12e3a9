"""A scripted host under tmp_path: /proc, /sys and a cgroup v1 or v2 tree whose counters tests move forward.

Every setter writes the files in the kernel's own format, so the collectors under test read exactly what
they would read on a node. Counters are absolute (what the kernel shows), so a test states two readings and
the rate it expects from them.
"""

from __future__ import annotations

import os

from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from collectors import CollectorScheduler, CollectorSettings, build_collectors
from collectors.nvml import NvmlApi
from hookserver.config import Settings
from hookserver.executor.settings import CgroupSettings
from hookserver.store.records import ContainerRecord, PodRecord
from hookserver.store.state import StateStore
from hookserver.system.roots import SystemRoots

__all__ = ["FakeClock", "FakeHost", "make_container", "make_pod", "make_scheduler"]


class FakeClock:
    """Wall and monotonic time a test moves by hand."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.wall = start
        self.mono = 1000.0

    def time(self) -> float:
        return self.wall

    def monotonic(self) -> float:
        return self.mono

    def advance(self, seconds: float) -> None:
        self.wall += seconds
        self.mono += seconds


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


class FakeHost:
    def __init__(self, base: Path, *, version: int = 1) -> None:
        self.base = base
        self.version = version
        self.proc = base / "proc"
        self.sys = base / "sys"
        self.cgroup = base / "cgroup"
        for d in (self.proc, self.sys, self.cgroup):
            d.mkdir(parents=True, exist_ok=True)
        if version == 2:
            _write(self.cgroup / "cgroup.controllers", "cpuset cpu io memory pids\n")
        else:
            for controller in ("cpu", "cpuacct", "memory", "cpuset"):
                (self.cgroup / controller).mkdir(exist_ok=True)

    @property
    def roots(self) -> SystemRoots:
        return SystemRoots(proc=str(self.proc), sys=str(self.sys), cgroup=str(self.cgroup))

    # -- /proc -----------------------------------------------------------------------------------
    def set_proc_stat(
        self, *, user: int, system: int, idle: int, nice: int = 0, iowait: int = 0, irq: int = 0, softirq: int = 0,
        steal: int = 0, guest: int = 0, ncpu: int = 4,
    ) -> None:
        agg = f"cpu  {user} {nice} {system} {idle} {iowait} {irq} {softirq} {steal} {guest} 0\n"
        per = "".join(f"cpu{i} 0 0 0 0 0 0 0 0 0 0\n" for i in range(ncpu))
        _write(self.proc / "stat", agg + per + "intr 1 0\nctxt 10\nbtime 1\nprocesses 5\n")

    def set_meminfo(self, *, total_kb: int, free_kb: int, available_kb: int | None, buffers_kb: int = 0, cached_kb: int = 0) -> None:
        lines = [f"MemTotal:       {total_kb} kB", f"MemFree:        {free_kb} kB"]
        if available_kb is not None:
            lines.append(f"MemAvailable:   {available_kb} kB")
        lines += [f"Buffers:        {buffers_kb} kB", f"Cached:         {cached_kb} kB", "SwapCached:            0 kB",
                  "HugePages_Total:       0"]
        _write(self.proc / "meminfo", "\n".join(lines) + "\n")

    def set_pressure(self, resource: str, some: tuple[float, float, float, int], full: tuple[float, float, float, int] | None) -> None:
        _write(self.proc / "pressure" / resource, _psi_text(some, full))

    def set_pid_cgroup(self, pid: int, path: str) -> None:
        if self.version == 2:
            text = f"0::{path}\n"
        else:
            text = f"12:memory:{path}\n4:cpu:{path}\n3:cpuacct:{path}\n1:name=systemd:/system.slice\n"
        _write(self.proc / str(pid) / "cgroup", text)

    # -- cgroups ---------------------------------------------------------------------------------
    def _dir(self, controller: str, rel: str) -> Path:
        rel = rel.strip("/")
        base = self.cgroup if self.version == 2 else self.cgroup / controller
        return base / rel if rel else base

    def mkcgroup(self, rel: str) -> None:
        for controller in (("",) if self.version == 2 else ("cpu", "cpuacct", "memory", "cpuset")):
            self._dir(controller, rel).mkdir(parents=True, exist_ok=True)

    def set_cpu_usage(self, rel: str, ns: int, *, nr_periods: int = 0, nr_throttled: int = 0) -> None:
        """Cumulative CPU time and CFS counters (v2: both in cpu.stat; v1: cpuacct.usage and cpu.stat)."""
        self.mkcgroup(rel)
        if self.version == 2:
            _write(
                self._dir("", rel) / "cpu.stat",
                f"usage_usec {ns // 1000}\nuser_usec {ns // 2000}\nsystem_usec {ns // 2000}\n"
                f"nr_periods {nr_periods}\nnr_throttled {nr_throttled}\nthrottled_usec {nr_throttled * 100}\n",
            )
        else:
            _write(self._dir("cpuacct", rel) / "cpuacct.usage", f"{ns}\n")
            _write(
                self._dir("cpu", rel) / "cpu.stat",
                f"nr_periods {nr_periods}\nnr_throttled {nr_throttled}\nthrottled_time {nr_throttled * 100_000}\n",
            )

    def set_memory(
        self, rel: str, *, active_anon: int, inactive_anon: int, unevictable: int = 0, active_file: int = 0,
        inactive_file: int = 0, current: int | None = None,
    ) -> None:
        self.mkcgroup(rel)
        files = active_file + inactive_file
        if self.version == 2:
            _write(
                self._dir("", rel) / "memory.stat",
                # The kernel's order: the LRU counters are consecutive, inactive before active.
                f"anon {active_anon + inactive_anon}\nfile {files}\nkernel 4096\ninactive_anon {inactive_anon}\n"
                f"active_anon {active_anon}\ninactive_file {inactive_file}\nactive_file {active_file}\n"
                f"unevictable {unevictable}\n",
            )
            if current is not None:
                _write(self._dir("", rel) / "memory.current", f"{current}\n")
        else:
            own = "cache 0\nrss 0\nactive_anon 0\ninactive_anon 0\n"
            _write(
                self._dir("memory", rel) / "memory.stat",
                own + f"total_cache {files}\ntotal_rss {active_anon + inactive_anon}\n"
                f"total_active_anon {active_anon}\ntotal_inactive_anon {inactive_anon}\n"
                f"total_active_file {active_file}\ntotal_inactive_file {inactive_file}\ntotal_unevictable {unevictable}\n",
            )
            # The same counters in pages, as the kernel's memory.numa_stat gives them (one NUMA node). Only
            # when every value is whole pages (as the kernel's are): otherwise the file is left out, and
            # the reader falls back to memory.stat, as on a kernel without CONFIG_NUMA.
            page = os.sysconf("SC_PAGE_SIZE")
            numa = self._dir("memory", rel) / "memory.numa_stat"
            if any(v % page for v in (active_anon, inactive_anon, unevictable, active_file, inactive_file)):
                numa.unlink(missing_ok=True)
                return
            anon, file_pages, unev = (active_anon + inactive_anon) // page, files // page, unevictable // page
            lines = [("total", anon + file_pages + unev), ("file", file_pages), ("anon", anon), ("unevictable", unev)]
            _write(
                numa,
                "".join(f"{k}=0 N0=0\n" for k, _ in lines) + "".join(f"hierarchical_{k}={v} N0={v}\n" for k, v in lines),
            )

    def set_cpu_limit(self, rel: str, *, quota_us: int, period_us: int = 100_000, cpus: str = "") -> None:
        self.mkcgroup(rel)
        if self.version == 2:
            quota = "max" if quota_us < 0 else str(quota_us)
            _write(self._dir("", rel) / "cpu.max", f"{quota} {period_us}\n")
            _write(self._dir("", rel) / "cpuset.cpus.effective", f"{cpus}\n")
        else:
            _write(self._dir("cpu", rel) / "cpu.cfs_quota_us", f"{quota_us}\n")
            _write(self._dir("cpu", rel) / "cpu.cfs_period_us", f"{period_us}\n")
            _write(self._dir("cpuset", rel) / "cpuset.cpus", f"{cpus}\n")

    def set_cgroup_pressure(self, rel: str, resource: str, some: tuple[float, float, float, int], full: tuple[float, float, float, int] | None) -> None:
        self.mkcgroup(rel)
        _write(self._dir("", rel) / f"{resource}.pressure", _psi_text(some, full))

    def write_raw(self, controller: str, rel: str, name: str, text: str) -> None:
        self.mkcgroup(rel)
        _write(self._dir(controller, rel) / name, text)

    def remove_cgroup(self, rel: str) -> None:
        import shutil

        for controller in (("",) if self.version == 2 else ("cpu", "cpuacct", "memory", "cpuset")):
            shutil.rmtree(self._dir(controller, rel), ignore_errors=True)

    # -- sysfs -----------------------------------------------------------------------------------
    def set_topology(self, cpus: list[tuple[int, int, int, int, int]], numa_mem_kb: dict[int, tuple[int, int]]) -> None:
        """cpus: (cpu, core, socket, numa node, l3 id); numa_mem_kb: node -> (MemTotal, MemFree)."""
        base = self.sys / "devices" / "system"
        _write(base / "cpu" / "online", ",".join(str(c[0]) for c in cpus) + "\n")
        for cpu, core, socket, _node, l3 in cpus:
            d = base / "cpu" / f"cpu{cpu}"
            _write(d / "topology" / "core_id", f"{core}\n")
            _write(d / "topology" / "physical_package_id", f"{socket}\n")
            _write(d / "cache" / "index0" / "level", "1\n")
            _write(d / "cache" / "index3" / "level", "3\n")
            _write(d / "cache" / "index3" / "id", f"{l3}\n")
        for node in sorted({c[3] for c in cpus}):
            members = [str(c[0]) for c in cpus if c[3] == node]
            _write(base / "node" / f"node{node}" / "cpulist", ",".join(members) + "\n")
        for node, (total, free) in numa_mem_kb.items():
            _write(
                base / "node" / f"node{node}" / "meminfo",
                f"Node {node} MemTotal:       {total} kB\nNode {node} MemFree:        {free} kB\n"
                f"Node {node} MemUsed:        {total - free} kB\n",
            )


def _psi_text(some: tuple[float, float, float, int], full: tuple[float, float, float, int] | None) -> str:
    text = f"some avg10={some[0]:.2f} avg60={some[1]:.2f} avg300={some[2]:.2f} total={some[3]}\n"
    if full is not None:
        text += f"full avg10={full[0]:.2f} avg60={full[1]:.2f} avg300={full[2]:.2f} total={full[3]}\n"
    return text


def make_pod(
    uid: str, *, name: str = "", namespace: str = "default", cgroup_parent: str = "", qos_class: str = "",
    kube_qos: str = "", priority_class: str = "", batch_cpu: dict[str, str] | None = None,
) -> PodRecord:
    specs: dict[str, tuple[dict[str, str], dict[str, str]]] = {
        c: ({"kubernetes.io/batch-cpu": v}, {}) for c, v in (batch_cpu or {}).items()
    }
    return PodRecord(
        uid=uid, namespace=namespace, name=name or f"pod-{uid[:6]}", cgroup_parent=cgroup_parent, qos_class=qos_class,
        kube_qos=kube_qos, priority_class=priority_class, container_specs=specs,
    )


def make_container(cid: str, pod_uid: str, *, name: str = "app", cgroup_parent: str = "") -> ContainerRecord:
    return ContainerRecord(id=cid, pod_uid=pod_uid, name=name, cgroup_parent=cgroup_parent)


def make_scheduler(
    host: FakeHost,
    clock: FakeClock,
    store: StateStore,
    *,
    registry: CollectorRegistry | None = None,
    nvml: NvmlApi | None = None,
    driver: str = "cgroupfs",
    **collector_settings: Any,
) -> CollectorScheduler:
    """A scheduler over the fake host; GPU is off unless a fake NVML is given."""
    overrides: dict[str, Any] = {"gpu": {"enabled": nvml is not None}}
    overrides.update(collector_settings)
    settings = Settings(
        node_name="node-1",
        cgroup=CgroupSettings(root=str(host.cgroup), driver=driver, version=f"v{host.version}"),  # type: ignore[arg-type]
        collectors=CollectorSettings.model_validate(overrides),
    )
    return build_collectors(
        settings, store=store, roots=host.roots, registry=registry, clock=clock.time, monotonic=clock.monotonic, nvml=nvml
    )
