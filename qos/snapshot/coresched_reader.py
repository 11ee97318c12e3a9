"""CoreSched's kernel facts: whether this node can do core scheduling at all (asked once: a kernel does not
grow PR_SCHED_CORE while the agent runs), and the cookie of every process of every started container, read
from the container cgroup's `cgroup.procs` (koordlet reads the same file) and `prctl(PR_SCHED_CORE_GET)`.
Read only while the gate is on.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from types import MappingProxyType

from hookserver.system.coresched import CoreSchedKernel, LibcCoreSched, unavailable_reason
from qos.snapshot.kernel import CoreSchedFacts, PodKernel

__all__ = ["CoreSchedReader"]


class CoreSchedReader:
    def __init__(self, *, sys_root: str = "/sys", kernel: CoreSchedKernel | None = None) -> None:
        self.sys_root = sys_root
        self._kernel = kernel
        self._problem: str | None = None

    @property
    def kernel(self) -> CoreSchedKernel:
        if self._kernel is None:
            self._kernel = LibcCoreSched()
        return self._kernel

    def problem(self) -> str:
        if self._problem is None:
            self._problem = unavailable_reason(self.kernel, self.sys_root)
        return self._problem

    def read(self, pods: Mapping[str, PodKernel], cpu_root: str) -> CoreSchedFacts:
        problem = self.problem()
        if problem:
            return CoreSchedFacts(problem=problem)
        out: dict[str, tuple[tuple[int, int], ...]] = {}
        for pod in pods.values():
            for c in pod.containers:
                out[c.id] = tuple(self._cookies(os.path.join(cpu_root, c.dir, "cgroup.procs")))
        return CoreSchedFacts(processes=MappingProxyType(out))

    def _cookies(self, procs_file: str) -> list[tuple[int, int]]:
        try:
            with open(procs_file, "rb") as handle:
                pids = [int(t) for t in handle.read().split() if t.isdigit()]
        except OSError:
            return []
        found: list[tuple[int, int]] = []
        for pid in pids:
            try:
                found.append((pid, self.kernel.get(pid)))
            except OSError:
                continue  # exited (ESRCH) or not readable: left out, seen again next round
        return found
