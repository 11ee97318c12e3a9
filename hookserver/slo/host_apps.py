"""Where a NodeSLO host application's cgroup is: koordinator's `GetHostAppCgroupRelativePath`
(`pkg/koordlet/util/host_application.go`), one rule for every reader and writer of host-app cgroups.

* no `cgroupPath`: `host-latency-sensitive/<name>` for LSE, LSR and LS; `host-best-effort/<name>` for BE;
  `<name>` for any other class (SYSTEM), at the hierarchy root;
* a `cgroupPath`: `<base>/<parentDir>/<relativePath>`, base `CgroupRoot` (the hierarchy root, the default),
  `Kubepods`, `KubepodsBurstable` or `KubepodsBesteffort` (the kubelet's QoS dirs for this cgroup driver);
  empty parts are left out, nothing is filled in.

One deviation, on purpose: a path that comes out empty (a `cgroupPath` with every part empty) would be the
hierarchy root, which koordlet would write; here it is a `ValueError`, so no cpuset or bvt lands on the root.
"""

from __future__ import annotations

from hookserver.slo.model import HostApplicationSpec
from hookserver.system.cgroupnames import CgroupDriver, KubeQoS, normalize_cgroup_dir, qos_dir

__all__ = ["host_app_cgroup_dir"]

_DEFAULT_PARENT = {"LSE": "host-latency-sensitive", "LSR": "host-latency-sensitive", "LS": "host-latency-sensitive",
                   "BE": "host-best-effort"}
_BASE = {"Kubepods": KubeQoS.GUARANTEED, "KubepodsBurstable": KubeQoS.BURSTABLE,
         "KubepodsBesteffort": KubeQoS.BESTEFFORT}


def host_app_cgroup_dir(app: HostApplicationSpec, driver: CgroupDriver) -> str:
    """The application's cgroup, relative to each hierarchy root. Raises ValueError for an empty path and
    PathEscapeError for one that is not a safe cgroup path."""
    path = app.cgroup_path
    if path is None:
        parts = [_DEFAULT_PARENT.get(app.qos, ""), app.name]
    else:
        base = _BASE.get(path.base)
        parts = [qos_dir(driver, base) if base is not None else "", path.parent_dir, path.relative_path]
    rel = normalize_cgroup_dir("/".join(p.strip("/") for p in parts if p.strip("/")))
    if not rel:
        raise ValueError(f"host application {app.name!r}: cgroupPath names the hierarchy root")
    return rel
