"""Whether and how the agent keeps its cgroup values in systemd's unit properties (issue 40, "survive systemd").

Only under the systemd cgroup driver, and only while `cgroup.systemd_socket` names a socket (default systemd's
private one, what `systemctl` uses as root; "" turns the mirror off). Without a reachable systemd the keeper says
so in `hookctl status` and the reconciler's reactive path restores reset files within its interval.
"""

from __future__ import annotations

from typing import Any

from hookserver.config import Settings
from hookserver.executor.executor import CgroupExecutor
from hookserver.store.originals import NodeOriginals
from hookserver.system.cgroupnames import CgroupDriver
from hookserver.systemd import SystemdClient, UnitPropertyKeeper

__all__ = ["systemd_status", "unit_property_keeper"]


def unit_property_keeper(settings: Settings, *, executor: CgroupExecutor,
                         originals: NodeOriginals) -> UnitPropertyKeeper | None:
    """The keeper, attached to the executor (not started: `UnitPropertyKeeper.start` in the daemon's run), or
    None where there is no systemd to keep values in."""
    if executor.layout.driver is not CgroupDriver.SYSTEMD or not settings.cgroup.systemd_socket:
        return None
    keeper = UnitPropertyKeeper(
        SystemdClient(settings.cgroup.systemd_socket, timeout_s=settings.cgroup.systemd_timeout_s),
        originals=originals, fallback_s=settings.reconciler.interval_s,
    )
    executor.attach_mirror(keeper)
    return keeper


def systemd_status(settings: Settings, keeper: UnitPropertyKeeper | None, *, driver: CgroupDriver) -> dict[str, Any]:
    """`hookctl status`'s `systemd` section."""
    if keeper is not None:
        return keeper.status()
    if driver is not CgroupDriver.SYSTEMD:
        return {"mode": "not the cgroup driver (cgroupfs)"}
    return {"mode": f"off (cgroup.systemd_socket is empty), values restored on reset within "
                    f"{settings.reconciler.interval_s:g} s"}
