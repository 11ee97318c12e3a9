"""host_application: CPU and memory of the host applications NodeSLO names (`spec.hostApplications`).

Each application's cgroup is koordinator's `GetHostAppCgroupRelativePath`, the one rule in
`hookserver.slo.host_apps` that the reconciler writes host applications' cpusets by: without `cgroupPath`,
`host-latency-sensitive/<name>` (LSE/LSR/LS) or `host-best-effort/<name>` (BE); with one,
`<base>/<parentDir>/<relativePath>` and nothing filled in. NodeSLO reaches us as whatever the informer stored (a
dict from JSON or a model object), so fields are looked up by camelCase key or snake_case attribute and the entry
is validated as the NodeSLO model would.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from hookserver.errors import HookServerError, SystemFileError
from hookserver.slo import HostApplicationSpec
from hookserver.slo.host_apps import host_app_cgroup_dir
from hookserver.system.cgroupnames import CgroupDriver
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


def _spec(entry: Any) -> HostApplicationSpec:
    """The entry as the NodeSLO model reads it (a dict from JSON, the model itself, or an object with its fields)."""
    if isinstance(entry, HostApplicationSpec):
        return entry
    path = _field(entry, "cgroupPath")
    raw: dict[str, Any] = {k: v for k, v in (("name", _field(entry, "name")), ("qos", _field(entry, "qos")))
                           if v is not None}
    if path is not None:
        raw["cgroupPath"] = {k: v for k in ("base", "parentDir", "relativePath")
                             if (v := _field(path, k)) is not None}
    return HostApplicationSpec.model_validate(raw)


def host_applications(node_slo: Any, driver: CgroupDriver) -> tuple[list[HostApp], list[str]]:
    """The host applications of a NodeSLO (spec or whole object), and a problem per entry we had to skip."""
    spec = _field(node_slo, "spec") or node_slo
    raw = _field(spec, "hostApplications") or []
    apps: list[HostApp] = []
    problems: list[str] = []
    for index, entry in enumerate(raw if isinstance(raw, list | tuple) else []):
        where = f"hostApplications[{index}]"
        try:
            app = _spec(entry)
            rel = host_app_cgroup_dir(app, driver)
        except (ValidationError, ValueError, HookServerError) as exc:
            name = _field(entry, "name")
            problems.append(f"{where}{f' ({name})' if name else ''}: {exc}")
            continue
        priority = str(_field(entry, "priority") or _field(entry, "priorityClass") or "")
        apps.append(HostApp(app.name, app.qos, priority, rel, make_labels(app=app.name, qos=app.qos, priority=priority)))
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
