"""Fixture cgroup trees (plain files under tmp_path) and executors pointed at them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from hookserver.executor import CgroupExecutor, CgroupLayout
from hookserver.store import StateStore
from hookserver.system import SystemRoots

V1_FILES = {
    "cpu": {"cpu.shares": "1024", "cpu.cfs_quota_us": "-1", "cpu.cfs_period_us": "100000", "cpu.cfs_burst_us": "0",
            "cpu.idle": "0"},
    "memory": {"memory.limit_in_bytes": "9223372036854771712"},
    "cpuset": {"cpuset.cpus": "", "cpuset.mems": ""},
    "blkio": {"blkio.weight": "100"},
}
V2_FILES = {
    "cpu.weight": "100", "cpu.max": "max 100000", "cpu.max.burst": "0", "cpu.idle": "0",
    "memory.max": "max", "memory.min": "0", "memory.low": "0", "memory.high": "max",
    "cpuset.cpus": "", "cpuset.mems": "", "io.weight": "default 100",
}


@dataclass
class Tree:
    """A fixture cgroup root. `cgroup(rel)` creates a cgroup dir with default files in every hierarchy."""

    root: Path
    version: str  # v1 | v2
    files_v1: dict[str, dict[str, str]] = field(default_factory=lambda: {k: dict(v) for k, v in V1_FILES.items()})

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        if self.version == "v2":
            (self.root / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
        else:
            for sub in self.files_v1:
                (self.root / sub).mkdir(exist_ok=True)

    def cgroup(self, rel: str, **overrides: str) -> None:
        rel = rel.strip("/")
        if self.version == "v2":
            d = self.root / rel
            d.mkdir(parents=True, exist_ok=True)
            for name, value in V2_FILES.items():
                (d / name).write_text(overrides.get(name, value) + "\n")
            return
        for sub, files in self.files_v1.items():
            d = self.root / sub / rel
            d.mkdir(parents=True, exist_ok=True)
            for name, value in files.items():
                (d / name).write_text(overrides.get(name, value) + "\n")

    def path(self, rel: str, name: str) -> Path:
        if self.version == "v2":
            return self.root / rel.strip("/") / name
        sub = name.split(".")[0]
        return self.root / sub / rel.strip("/") / name

    def read(self, rel: str, name: str) -> str:
        return self.path(rel, name).read_text().strip()

    def snapshot(self) -> dict[str, str]:
        """Every file's content, to prove that nothing changed."""
        return {str(p): p.read_text() for p in sorted(self.root.rglob("*")) if p.is_file()}


class FakeClock:
    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def make_executor(
    tree: Tree, *, driver: str = "cgroupfs", clock: Callable[[], float] | None = None, force: float = 60.0, **kw: object
) -> tuple[CgroupExecutor, StateStore]:
    roots = SystemRoots(proc=str(tree.root / "no-proc"), cgroup=str(tree.root))
    layout = CgroupLayout(version=tree.version, driver=driver, roots=roots)  # type: ignore[arg-type]
    store = StateStore()
    executor = CgroupExecutor(
        layout, store=store, clock=clock or FakeClock(), force_update_seconds=force, **kw  # type: ignore[arg-type]
    )
    return executor, store


@pytest.fixture
def v1tree(tmp_path: Path) -> Tree:
    return Tree(tmp_path / "cg", "v1")


@pytest.fixture
def v2tree(tmp_path: Path) -> Tree:
    return Tree(tmp_path / "cg", "v2")
