"""The daemon: builds the one store and starts every front door and loop, each named and owned here.

Startup order follows koordlet's: executor, then the hook servers, then the background loops, and the
runtime-proxy registration file last (the proxy server writes it once it listens). Shutdown: stop
event, stop accepting hooks (the registration file goes first, so the proxy stops calling us), give
the loops a grace period, cancel what is left, report.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any

from prometheus_client import CollectorRegistry

from collectors import CollectorScheduler, build_collectors, query_report, top_report
from hookserver import __version__
from hookserver.aio.tasks import RootTasks
from hookserver.config import Settings
from hookserver.debug import DebugServer
from hookserver.dispatch import HookDispatcher
from hookserver.executor import build_executor
from hookserver.hooks import BreakerSettings, FailurePolicy, HookRegistry
from hookserver.hooks.plugins import default_plugins
from hookserver.informer import Informer, build_informer
from hookserver.nri import NriPlugin
from hookserver.observability import HealthState, MetricsHttpServer
from hookserver.observability.metrics import HookMetrics
from hookserver.proxy import ProxyServer
from hookserver.store import StateStore
from hookserver.system import SystemRoots

__all__ = ["Daemon"]

log = logging.getLogger(__name__)

SHUTDOWN_GRACE_S = 5.0


class Daemon:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.started_at = time.time()
        self.roots = SystemRoots(proc=settings.proc_root, sys=settings.sys_root, cgroup=settings.cgroup.root)
        self.store = StateStore()
        self.prometheus = CollectorRegistry(auto_describe=True)
        self.metrics = HookMetrics(self.prometheus)
        self.health = HealthState(required=("proxy", "debug"))
        self.executor = build_executor(settings.cgroup, store=self.store, roots=self.roots, metrics=self.metrics)
        self.registry = HookRegistry(default_plugins())  # type: ignore[arg-type]
        self.registry.disable(settings.hook.disable_stages)
        self.policy = FailurePolicy(settings.hook.failure_policy)
        hook = settings.hook
        self.dispatcher = HookDispatcher(
            registry=self.registry, store=self.store, executor=self.executor, policy=self.policy, metrics=self.metrics,
            breaker_settings=BreakerSettings(
                budget_s=hook.hook_budget_ms / 1000, trip_after=hook.breaker_trip_after,
                stuck_s=hook.breaker_stuck_ms / 1000, cool_down_s=hook.breaker_cool_down_s,
                max_cool_down_s=max(300.0, hook.breaker_cool_down_s),
            ),
        )
        self.proxy = ProxyServer(settings.hook, dispatcher=self.dispatcher, registry=self.registry)
        self.nri: NriPlugin | None = None
        if settings.nri.enabled:
            self.nri = NriPlugin(
                settings.nri, dispatcher=self.dispatcher, store=self.store, registry=self.registry,
                failure_policy=self.policy,
            )
        self.informer: Informer = build_informer(settings, store=self.store, registry=self.prometheus)
        self.collectors: CollectorScheduler = build_collectors(
            settings, store=self.store, roots=self.roots, registry=self.prometheus
        )
        providers: dict[str, Any] = {
            "slo": lambda args: self.informer.slo_report(),
            "top": lambda args: top_report(self.store, window_s=float(args.get("window_seconds") or 300.0)),
            "metrics": lambda args: query_report(self.store, str(args.get("query", ""))),
        }
        if self.nri is not None:
            nri = self.nri
            providers["nri"] = lambda args: nri.status()
        self.debug = DebugServer(settings.debug.socket, store=self.store, providers=providers, info=self.info)
        self.http = MetricsHttpServer(settings.metrics.addr, self.prometheus, self.health)

    def info(self) -> dict[str, Any]:
        """Extra fields for `hookctl status`."""
        s = self.settings
        return {
            "version": __version__,
            "pid": os.getpid(),
            "uptime_s": round(time.time() - self.started_at, 1),
            "node": s.node_name,
            "mode": "standalone" if s.standalone else "cluster",
            "failure_policy": self.policy.value,
            "hook_socket": s.hook.socket,
            "stages": self.registry.stage_names(),
            "plugins": sorted(self.registry.plugins),
            "metrics_port": self.http.port,
            "cgroup": self.executor.layout.describe(),
            "nri": self.nri.status() if self.nri is not None else {"state": "disabled"},
            "hook_breakers": self.dispatcher.breaker_status(),
            "informer": self.informer.status(),
            "collectors": self.collectors.status(),
        }

    async def run(self, stop: asyncio.Event) -> int:
        """Serve until `stop` is set. Returns the exit code: 0 on a clean stop, 1 if a root task died."""
        tasks = RootTasks(stop)
        self.health.attach_loop(asyncio.get_running_loop())
        try:
            self.http.start()
            self.health.set_ready("proxy", False, "starting")
            await asyncio.to_thread(self.proxy.start)
            self.health.set_ready("proxy", True)
            await asyncio.to_thread(self.debug.start)
            self.health.set_ready("debug", True)
            if self.nri is not None:
                tasks.spawn("nri", self.nri.run(stop))
            tasks.spawn("informer", self.informer.run(stop))
            tasks.spawn("collectors", self.collectors.run(stop))
            log.info(
                "hookserver %s serving: hooks on %s (%s), debug on %s, metrics on port %s, nri %s",
                __version__, self.proxy.address, ",".join(self.registry.stage_names()), self.debug.address,
                self.http.port, self.settings.nri.socket if self.nri is not None else "disabled",
            )
            await stop.wait()
        finally:
            log.info("shutting down")
            self.health.set_ready("proxy", False, "shutting down")
            await asyncio.to_thread(self.proxy.stop, 2.0)
            stop.set()
            await tasks.shutdown(SHUTDOWN_GRACE_S)
            await asyncio.to_thread(self.debug.stop, 1.0)
            self.http.stop()
        if tasks.failed:
            log.error("stopped because: %s", "; ".join(f"{k}: {v}" for k, v in tasks.failed.items()))
            return 1
        return 0
