"""`build_collectors`: the one place that turns settings into a wired scheduler.

It picks the cgroup version and driver (from settings, or from the tree when `auto`), builds the stat
reader, the target resolver and each collector, sizes the time-series store, and registers the Prometheus
exporter into the registry it is given (never the global one).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from prometheus_client import CollectorRegistry

from hookserver.system.cgroupnames import ContainerRuntime
from hookserver.store.state import StateStore
from hookserver.system.cgroupstats import CgroupStatReader, detect_cgroup_version
from hookserver.system.roots import SystemRoots

from collectors.base import Collector
from collectors.be_resource import BEResourceCollector
from collectors.export import StoreExporter
from collectors.gpu import GpuCollector
from collectors.hami_vgpu import HamiVgpuCollector
from collectors.host_application import HostApplicationCollector
from collectors.node_info import NodeInfoCollector
from collectors.node_resource import NodeResourceCollector
from collectors.numa_resource import NumaResourceCollector
from collectors.nvml import NvmlApi, PynvmlApi
from collectors.page_cache import PageCacheCollector
from collectors.pod_resource import PodResourceCollector
from collectors.pod_throttled import PodThrottledCollector
from collectors.psi import PSICollector
from collectors.scheduler import CollectorScheduler
from collectors.settings import CollectorSettings
from collectors.system_resource import SystemResourceCollector
from collectors.targets import TargetResolver, detect_driver

__all__ = ["build_collectors"]


class _CgroupSettingsLike(Protocol):
    @property
    def version(self) -> str: ...

    @property
    def driver(self) -> str: ...

    @property
    def runtime(self) -> str: ...


class SettingsLike(Protocol):
    """The part of `hookserver.config.Settings` we read. A Protocol, not an import: the config imports
    `collectors.settings`, and the collectors layer must not import the config back."""

    @property
    def node_name(self) -> str: ...

    @property
    def cgroup(self) -> _CgroupSettingsLike: ...

    @property
    def collectors(self) -> CollectorSettings: ...


def build_collectors(
    settings: SettingsLike,
    *,
    store: StateStore,
    roots: SystemRoots,
    registry: CollectorRegistry | None,
    clock: Callable[[], float] = time.time,
    monotonic: Callable[[], float] = time.monotonic,
    nvml: NvmlApi | None = None,
) -> CollectorScheduler:
    """Wire every collector from `settings.collectors`; `await scheduler.run(stop)` starts them."""
    cs = settings.collectors
    store.series.configure(retention_s=cs.retention_s, max_series=cs.max_series)
    version = detect_cgroup_version(roots, settings.cgroup.version)
    reader = CgroupStatReader(roots, version)
    driver = detect_driver(settings.cgroup.driver, reader.exists)
    resolver = TargetResolver(
        driver=driver, runtime=ContainerRuntime(settings.cgroup.runtime), exists=reader.exists, containers=cs.containers
    )
    usage_interval = cs.system_resource.interval_s
    collectors: list[Collector] = [
        NodeInfoCollector(roots),
        NodeResourceCollector(roots),
        PodResourceCollector(reader, containers=cs.containers),
        HostApplicationCollector(reader, driver),
        PodThrottledCollector(reader, containers=cs.containers),
        BEResourceCollector(reader),
        SystemResourceCollector(max_age_s=max(2.5 * usage_interval, 2.0)),
        NumaResourceCollector(roots, reader, max_age_s=max(2.5 * usage_interval, 2.0)),
        PageCacheCollector(roots, reader),
        PSICollector(roots, reader, cgroup_windows=cs.psi_cgroup_windows, containers=cs.psi_containers),
        GpuCollector(roots, nvml if nvml is not None else PynvmlApi(roots)),
        HamiVgpuCollector(cs.hami_vgpu_dir, inventory=store.series.get_static),
    ]
    scheduler = CollectorScheduler(
        collectors,
        settings=cs,
        store=store,
        resolver=resolver,
        node_name=settings.node_name,
        clock=clock,
        monotonic=monotonic,
        registry=registry,
        info={"cgroup_version": f"v{int(version)}", "cgroup_driver": driver.value},
        on_cycle=reader.new_cycle,
        on_close=reader.close,
    )
    if registry is not None:
        registry.register(StoreExporter(store, node_name=settings.node_name, states=scheduler.states, stale_factor=3.0))
    return scheduler
