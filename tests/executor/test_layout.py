"""Layout detection: v1 / v2 / hybrid from mounts or from the files of a fixture tree; driver auto-detection."""

from __future__ import annotations

from pathlib import Path

import pytest

from hookserver.executor.settings import CgroupSettings
from hookserver.errors import ConfigError
from hookserver.executor import CgroupDriver, CgroupLayout, CgroupVersion
from hookserver.system import SystemRoots

from tests.executor.conftest import Tree


def roots_for(tmp_path: Path, mounts: str | None = None) -> SystemRoots:
    proc = tmp_path / "proc"
    if mounts is not None:
        (proc / "self").mkdir(parents=True)
        (proc / "self" / "mounts").write_text(mounts)
    return SystemRoots(proc=str(proc), cgroup=str(tmp_path / "cg"))


def test_v1_tree_detected_by_files(tmp_path: Path, v1tree: Tree) -> None:
    layout = CgroupLayout.detect(CgroupSettings(root=str(v1tree.root)), roots_for(tmp_path))
    assert layout.version is CgroupVersion.V1
    assert not layout.writes_v2
    assert layout.hierarchy_root("cpu") == str(v1tree.root / "cpu")
    assert layout.hierarchy_root("memory") == str(v1tree.root / "memory")


def test_v2_tree_detected_by_cgroup_controllers(tmp_path: Path, v2tree: Tree) -> None:
    layout = CgroupLayout.detect(CgroupSettings(root=str(v2tree.root)), roots_for(tmp_path))
    assert layout.version is CgroupVersion.V2
    assert layout.writes_v2
    assert layout.hierarchy_root("cpu") == layout.hierarchy_root("memory") == str(v2tree.root)


def test_hybrid_tree_writes_v1(tmp_path: Path, v1tree: Tree) -> None:
    (v1tree.root / "unified").mkdir()
    (v1tree.root / "unified" / "cgroup.controllers").write_text("\n")
    layout = CgroupLayout.detect(CgroupSettings(root=str(v1tree.root)), roots_for(tmp_path))
    assert layout.version is CgroupVersion.HYBRID
    assert not layout.writes_v2
    assert layout.unified == str(v1tree.root / "unified")
    assert layout.describe()["writes"] == "v1"


def test_mounts_win_over_files_and_comounted_controllers(tmp_path: Path) -> None:
    root = tmp_path / "cg"
    (root / "cpu,cpuacct").mkdir(parents=True)
    mounts = (
        f"cgroup {root}/cpu,cpuacct cgroup rw,cpu,cpuacct 0 0\n"
        f"cgroup {root}/memory cgroup rw,memory 0 0\n"
        f"cgroup2 {root}/unified cgroup2 rw 0 0\n"
        "cgroup /elsewhere/cpu cgroup rw,cpu 0 0\n"
    )
    layout = CgroupLayout.detect(CgroupSettings(root=str(root)), roots_for(tmp_path, mounts))
    assert layout.version is CgroupVersion.HYBRID
    assert layout.hierarchy_root("cpu") == f"{root}/cpu,cpuacct"
    assert layout.hierarchy_root("cpuacct") == f"{root}/cpu,cpuacct"
    assert layout.unified == f"{root}/unified"


def test_pure_v2_mount(tmp_path: Path) -> None:
    root = tmp_path / "cg"
    root.mkdir()
    layout = CgroupLayout.detect(
        CgroupSettings(root=str(root)), roots_for(tmp_path, f"cgroup2 {root} cgroup2 rw 0 0\n")
    )
    assert layout.version is CgroupVersion.V2
    assert layout.hierarchy_root("memory") == str(root)


def test_version_override(tmp_path: Path, v1tree: Tree) -> None:
    layout = CgroupLayout.detect(CgroupSettings(root=str(v1tree.root), version="v2"), roots_for(tmp_path))
    assert layout.version is CgroupVersion.V2
    assert layout.hierarchy_root("cpu") == str(v1tree.root)


def test_empty_root_is_a_config_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / "cg").mkdir()
    with pytest.raises(ConfigError, match="cgroup.root"):
        CgroupLayout.detect(CgroupSettings(root=str(tmp_path / "cg")), roots_for(tmp_path))


@pytest.mark.parametrize(("present", "driver"), [("kubepods.slice", "systemd"), ("kubepods", "cgroupfs"), ("", "systemd")])
def test_driver_auto_detection(tmp_path: Path, v1tree: Tree, present: str, driver: str) -> None:
    if present:
        (v1tree.root / "cpu" / present).mkdir()
    layout = CgroupLayout.detect(CgroupSettings(root=str(v1tree.root)), roots_for(tmp_path))
    assert layout.driver is CgroupDriver(driver)


def test_driver_auto_detection_v2(tmp_path: Path, v2tree: Tree) -> None:
    (v2tree.root / "kubepods").mkdir()
    layout = CgroupLayout.detect(CgroupSettings(root=str(v2tree.root)), roots_for(tmp_path))
    assert layout.driver is CgroupDriver.CGROUPFS


def test_driver_override_wins(tmp_path: Path, v1tree: Tree) -> None:
    (v1tree.root / "cpu" / "kubepods.slice").mkdir()
    layout = CgroupLayout.detect(CgroupSettings(root=str(v1tree.root), driver="cgroupfs"), roots_for(tmp_path))
    assert layout.driver is CgroupDriver.CGROUPFS


def test_describe_is_complete(tmp_path: Path, v1tree: Tree) -> None:
    layout = CgroupLayout.detect(
        CgroupSettings(root=str(v1tree.root), runtime="cri-o"), roots_for(tmp_path)
    )
    info = layout.describe()
    assert info["version"] == "v1" and info["runtime"] == "cri-o" and info["cgroup_root"] == str(v1tree.root)
    assert set(info) >= {"version", "driver", "runtime", "roots", "hierarchies"}


def test_real_host_layout() -> None:
    import os

    if not os.path.isdir("/sys/fs/cgroup/cpu"):
        pytest.skip("host has no cgroup v1 cpu hierarchy at /sys/fs/cgroup/cpu")
    layout = CgroupLayout.detect(CgroupSettings(), SystemRoots())
    assert layout.version in (CgroupVersion.V1, CgroupVersion.HYBRID)
    assert os.path.isfile(os.path.join(layout.hierarchy_root("cpu"), "cpu.shares"))
