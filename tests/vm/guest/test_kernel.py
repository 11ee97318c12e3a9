"""What the VM tier's guest is: the kernel facts every other guest test relies on."""

from __future__ import annotations

import os
import subprocess

from tests.vm.guest.kubelet_slices import CGROUP
from tests.vm.guest.results import record


def test_the_guest_is_systemd_on_unified_cgroup_v2_with_the_kubelets_controllers() -> None:
    assert os.statvfs(CGROUP).f_fsid is not None
    mounts = [line.split() for line in open("/proc/mounts")]
    assert any(m[1] == str(CGROUP) and m[2] == "cgroup2" for m in mounts), mounts
    controllers = set((CGROUP / "cgroup.controllers").read_text().split())
    assert {"cpuset", "cpu", "io", "memory", "pids"} <= controllers
    assert (CGROUP / "cpu.pressure").exists() and (CGROUP / "memory.pressure").exists()
    version = subprocess.run(["systemctl", "--version"], capture_output=True, text=True, check=True).stdout
    record("systemd_version", version.split()[1])
    record("kernel", os.uname().release)
    assert int(version.split()[1]) >= 252
