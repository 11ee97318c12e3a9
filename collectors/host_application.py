"""host_application: CPU and memory of the host applications NodeSLO names (`spec.hostApplications`).

Each application's cgroup is `<base>/<parentDir>/<relativePath>`, with base `CgroupRoot` (the hierarchy
root), `Kubepods`, `KubepodsBurstable` or `KubepodsBesteffort` (the kubelet's QoS directories). Missing
parts default to: base CgroupRoot, parentDir `host-latency-sensitive/` (BE: `host-best-effort/`),
relativePath = the application's name. NodeSLO reaches us as whatever the informer stored (a dict from
JSON or a model object), so fields are looked up by camelCase key or snake_case attribute.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hookserver.errors import HookServerError, SystemFileError
from hookserver.system.cgroupnames import CgroupDriver, KubeQoS, normalize_cgroup_dir, qos_dir
from hookserver.store.timeseries import Labels, make_labels
from hookserver.system.cgroupstats import CgroupStatReader

from collectors.base import BaseCollector, CycleContext

__all__ = ["HostApp", "HostApplicationCollector", "host_applications"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class HostApp:
    name: str
    qos: str
    priority: str
    rel_dir: str
    labels: Labels


def _field(obj: Any, camel: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, Mapping):
        return obj.get(camel)
    snake = "".join(f"_{ch.lower()}" if ch.isupper() else ch for ch in camel)
    return getattr(obj, snake, getattr(obj, camel, None))


def _base_dir(base: str, driver: CgroupDriver) -> str:
    if base in ("", "CgroupRoot"):
        return ""
    if base == "Kubepods":
        return qos_dir(driver, KubeQoS.GUARANTEED)
    if base == "KubepodsBurstable":
        return qos_dir(driver, KubeQoS.BURSTABLE)
    if base == "KubepodsBesteffort":
        return qos_dir(driver, KubeQoS.BESTEFFORT)
    raise HookServerError(f"unknown cgroupPath.base {base!r}")


def host_applications(node_slo: Any, driver: CgroupDriver) -> tuple[list[HostApp], list[str]]:
    """The host applications of a NodeSLO (spec or whole object), and a problem per entry we had to skip."""
    spec = _field(node_slo, "spec") or node_slo
    raw = _field(spec, "hostApplications") or []
    apps: list[HostApp] = []
    problems: list[str] = []
    for index, entry in enumerate(raw if isinstance(raw, list | tuple) else []):
        name = str(_field(entry, "name") or "")
        where = f"hostApplications[{index}]"
        if not name:
            problems.append(f"{where}: no name")
            continue
        qos = str(_field(entry, "qos") or "LS")
        priority = str(_field(entry, "priority") or _field(entry, "priorityClass") or "")
        path = _field(entry, "cgroupPath")
        base = str(_field(path, "base") or "CgroupRoot")
        default_parent = "host-best-effort/" if qos == "BE" else "host-latency-sensitive/"
        parent = str(_field(path, "parentDir") or default_parent)
        relative = str(_field(path, "relativePath") or name)
        try:
            rel = normalize_cgroup_dir("/".join(p for p in (_base_dir(base, driver), parent, relative) if p))
        except HookServerError as exc:
            problems.append(f"{where} ({name}): {exc}")
            continue
        apps.append(HostApp(name, qos, priority, rel, make_labels(app=name, qos=qos, priority=priority)))
    return apps, problems


class HostApplicationCollector(BaseCollector):
    name = "host_application"

    def __init__(self, reader: CgroupStatReader, driver: CgroupDriver) -> None:
        self.reader = reader
        self.driver = driver
        self._prev: dict[str, tuple[float, int]] = {}
        self._slo_seen: Any = None
        self._apps: list[HostApp] = []

    def _refresh(self, node_slo: Any) -> None:
        if node_slo is self._slo_seen:
            return
        self._slo_seen = node_slo
        self._apps, problems = host_applications(node_slo, self.driver)
        for problem in problems:
            log.warning("NodeSLO host application skipped: %s", problem)

    def collect(self, ctx: CycleContext) -> None:
        self._refresh(ctx.snapshot.node_slo)
        seen: dict[str, tuple[float, int]] = {}
        cpu_total = 0.0
        mem_total = 0.0
        for app in self._apps:
            try:
                usage = self.reader.cpu_usage_ns(app.rel_dir)
                mem = self.reader.memory(app.rel_dir)
            except SystemFileError as exc:
                ctx.note_error(f"host application {app.name}: {exc}")
                continue
            if usage is None and mem is None:
                ctx.missing += 1
                continue
            if usage is not None:
                seen[app.rel_dir] = (ctx.mono, usage)
                prev = self._prev.get(app.rel_dir)
                if prev is not None and ctx.mono > prev[0] and usage >= prev[1]:
                    cores = (usage - prev[1]) / ((ctx.mono - prev[0]) * 1e9)
                    ctx.emit("host_app_cpu_usage", app.labels, cores)
                    cpu_total += cores
            if mem is not None:
                ctx.emit("host_app_memory_usage", app.labels, float(mem.without_cache))
                mem_total += mem.without_cache
        self._prev = seen
        ctx.shared.host_apps_cpu = cpu_total
        ctx.shared.host_apps_memory = mem_total
        ctx.shared.host_apps_at = ctx.now
