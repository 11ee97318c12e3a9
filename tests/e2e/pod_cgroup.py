"""A pod cgroup in a private subtree of the real cgroup v1 hierarchy, for the e2e tests.

The e2e tests assert what the kernel accepted, so the pod cgroup must be real: `/<prefix>-<random>/<leaf>`
under each subsystem's hierarchy, removed afterwards. Without root or a writable hierarchy the test is
skipped with the reason, since no tmp_path tree can stand in for the kernel here.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cgroupchild import rmdir_patiently

__all__ = ["CGROUP_V1", "PodCgroup", "pod_cgroup_subtree", "unwritable_reason"]

CGROUP_V1 = Path("/sys/fs/cgroup")
# How long removal retries a cgroup the kernel still calls busy (its last task has just been killed).
_RMDIR_PATIENCE_S = 5.0


@dataclass(frozen=True, slots=True)
class PodCgroup:
    """`rel`: the cgroup parent to hand the agent ("/hookserver-…/podfeed"); `paths`: the directories made."""

    rel: str
    paths: tuple[Path, ...]


def unwritable_reason(subsystems: Sequence[str]) -> str:
    """Why these v1 hierarchies cannot take a test cgroup, or "" when they can."""
    if os.geteuid() != 0:
        return "needs root to create cgroups"
    for sub in subsystems:
        if not os.access(CGROUP_V1 / sub, os.W_OK):
            return f"needs a writable cgroup v1 {sub} hierarchy at {CGROUP_V1 / sub}"
    return ""


@contextlib.contextmanager
def pod_cgroup_subtree(
    subsystems: Sequence[str], *, prefix: str, leaf: str = "podfeed", optional: Sequence[str] = ()
) -> Iterator[PodCgroup]:
    """Make `/<prefix>-<random>/<leaf>` in each of `subsystems` (skipping the test unless all are writable) and
    in each of `optional` whose hierarchy is mounted (on hosts that mount cpu and cpuacct apart, CPU usage is
    read from cpuacct), then remove every level again, deepest first."""
    why = unwritable_reason(subsystems)
    if why:
        pytest.skip(why)
    top = f"{prefix}-{uuid.uuid4().hex[:8]}"
    rel = f"/{top}/{leaf.strip('/')}"
    made: list[Path] = []
    try:
        for sub in (*subsystems, *optional):
            hierarchy = CGROUP_V1 / sub
            if sub in optional and not hierarchy.is_dir():
                continue
            path = hierarchy / rel.lstrip("/")
            # exist_ok: co-mounted hierarchies (cpu,cpuacct) reach one directory through two names.
            path.mkdir(parents=True, exist_ok=True)
            made.append(path)
        yield PodCgroup(rel, tuple(made))
    finally:
        depth = len(Path(rel.lstrip("/")).parts)
        for path in made:
            # Up to the subtree's own top (`<hierarchy>/<prefix>-<random>`), never the hierarchy's root: the root
            # answers EBUSY, which rmdir_patiently waited out for 5 s a subsystem (10 s of each test's teardown).
            _remove_up_to(path, path.parents[depth - 2])


def _remove_up_to(path: Path, top: Path) -> None:
    """rmdir `path` and its parents up to `top`, waiting out EBUSY from tasks that are still leaving; a level
    that will not go is left (best effort: the test's own assertions have run)."""
    for level in (path, *path.parents):
        try:
            rmdir_patiently(level, _RMDIR_PATIENCE_S)
        except OSError:
            pass
        if level == top:
            return
