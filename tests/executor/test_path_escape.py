"""Path traversal is refused before anything in the plan is written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hookserver.errors import PathEscapeError
from hookserver.executor import CgroupResource, CgroupWrite, ResourcePlan

from tests.executor.conftest import Tree, make_executor

POD = "/kubepods/besteffort/pod-1"
R = CgroupResource


def _plan_with(bad_dir: str) -> ResourcePlan:
    # valid writes first and last, so a lazy executor would already have written one
    return ResourcePlan(
        levels=(
            (CgroupWrite(POD, R.CPU_SHARES, 512), CgroupWrite(POD, R.MEMORY_LIMIT, 1 << 30)),
            (CgroupWrite(bad_dir, R.CPU_SHARES, 2),),
            (CgroupWrite(POD, R.CPU_CFS_QUOTA, 50000),),
        ),
        leveled=False,
    )


@pytest.mark.parametrize(
    "bad_dir",
    ["../../etc", "/kubepods/../../..", "kubepods/besteffort/pod-1/../../../../outside", "a\0b",
     "kubepods-besteffort-..slice", "/kubepods/./..", "x.slice:..:y"],
)
def test_traversal_refused_and_nothing_written(tmp_path: Path, v1tree: Tree, bad_dir: str) -> None:
    v1tree.cgroup(POD)
    outside = tmp_path / "outside"
    outside.mkdir()
    ex, store = make_executor(v1tree)
    before = v1tree.snapshot()
    with pytest.raises(PathEscapeError):
        ex.apply(_plan_with(bad_dir))
    assert v1tree.snapshot() == before
    assert list(outside.iterdir()) == []
    assert store.audit.writes() == []


def test_absolute_dir_stays_under_the_root(tmp_path: Path, v1tree: Tree) -> None:
    """A cgroup dir like /etc is taken relative to the hierarchy root, never as the host's /etc."""
    v1tree.cgroup("/etc")
    ex, _ = make_executor(v1tree)
    path = ex.resolve(CgroupWrite("/etc", R.CPU_SHARES, 512))
    assert path == str(v1tree.root.resolve() / "cpu" / "etc" / "cpu.shares")
    assert ex.apply(ResourcePlan.single([CgroupWrite("//etc", R.CPU_SHARES, 512)])).ok


def test_symlinked_dir_escaping_the_root_refused(tmp_path: Path, v1tree: Tree) -> None:
    v1tree.cgroup(POD)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "cpu.shares").write_text("1024\n")
    os.symlink(outside, v1tree.root / "cpu" / "kubepods" / "evil")
    ex, store = make_executor(v1tree)
    before = v1tree.snapshot()
    with pytest.raises(PathEscapeError, match="outside the cgroup root"):
        ex.apply(_plan_with("/kubepods/evil"))
    assert (outside / "cpu.shares").read_text() == "1024\n"
    assert v1tree.snapshot() == before and store.audit.writes() == []


def test_symlinked_hierarchy_root_is_fine_inside(tmp_path: Path, v1tree: Tree) -> None:
    """A symlink that stays inside the root is followed (cgroup v1's cpu -> cpu,cpuacct links)."""
    v1tree.cgroup(POD)
    os.symlink(v1tree.root / "cpu" / "kubepods", v1tree.root / "cpu" / "alias")
    ex, _ = make_executor(v1tree)
    assert ex.apply(ResourcePlan.single([CgroupWrite("/alias/besteffort/pod-1", R.CPU_SHARES, 4)])).ok
    assert v1tree.read(POD, "cpu.shares") == "4"


def test_symlinked_file_refused(tmp_path: Path, v1tree: Tree) -> None:
    v1tree.cgroup(POD)
    target = tmp_path / "victim"
    target.write_text("precious\n")
    shares = v1tree.path(POD, "cpu.shares")
    shares.unlink()
    os.symlink(target, shares)
    ex, _ = make_executor(v1tree)
    with pytest.raises(PathEscapeError, match="symlink"):
        ex.apply(ResourcePlan.single([CgroupWrite(POD, R.CPU_SHARES, 512)]))
    assert target.read_text() == "precious\n"


def test_container_id_traversal_refused_by_layout(v1tree: Tree) -> None:
    ex, _ = make_executor(v1tree)
    with pytest.raises(PathEscapeError):
        ex.layout.container_dir(POD, "containerd://../../../etc")
