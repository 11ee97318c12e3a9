"""Host applications (NodeSLO `hostApplications`) in the reconciler's full passes: koordlet's host-app
reconciler (`runtimehooks/reconciler/host_app_reconciler.go`), which runs the host-app functions of its hook
plugins on the runtime-hook ticker and when the NodeSLO changes; here the same passes (periodic, rule changes).

The dispatcher asks the plugins (`HookDispatcher.decide_host_apps`: CPUSetAllocator's LS share pool); this
module turns each applied decision into cgroup writes at the application's cgroup (`hookserver.slo.host_apps`),
through the executor's cache like every other reconciler write. An application whose path cannot be named is a
pass error; one whose cgroup does not exist (not started yet) is a write that meets no cgroup: counted as
vanished, quietly, as for a pod that went.
"""

from __future__ import annotations

from collections.abc import Sequence

from hookserver.dispatch.result import HostAppDecision
from hookserver.errors import HookServerError
from hookserver.executor.plan import CgroupWrite, writes_for_resources
from hookserver.reconciler.report import PassReport
from hookserver.slo.host_apps import host_app_cgroup_dir
from hookserver.system.cgroupnames import CgroupDriver

__all__ = ["host_app_writes"]


def host_app_writes(
    decisions: Sequence[HostAppDecision], driver: CgroupDriver, report: PassReport
) -> list[CgroupWrite]:
    """The writes the plugins' applied decisions ask for; a not-applied `error:` decision and a path that
    cannot be named go to `report` as errors."""
    writes: list[CgroupWrite] = []
    for d in decisions:
        if not d.result.applied:
            if d.result.reason.startswith("error:"):
                report.error(f"host application {d.app.name}: {d.plugin}: {d.result.reason}")
            continue
        try:
            rel = host_app_cgroup_dir(d.app, driver)
        except (ValueError, HookServerError) as exc:
            report.error(f"host application {d.app.name}: cgroup not named: {exc}")
            continue
        writes += writes_for_resources(rel, d.result.resources, owner=d.plugin, reason=f"reconciler: {d.result.reason}")
    return writes
