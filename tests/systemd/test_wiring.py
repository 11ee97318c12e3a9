"""The daemon's choice: a keeper only under the systemd driver with a socket configured, attached to the executor;
and the status section in each case."""

from __future__ import annotations

from pathlib import Path

from hookserver.config import Settings
from hookserver.executor.settings import CgroupSettings
from hookserver.store.originals import NodeOriginals
from hookserver.system.cgroupnames import CgroupDriver
from hookserver.wiring.systemd import systemd_status, unit_property_keeper
from tests.executor.conftest import Tree, make_executor


def _settings(socket: str) -> Settings:
    return Settings(cgroup=CgroupSettings(systemd_socket=socket))


def test_only_the_systemd_driver_gets_a_keeper_and_the_executor_mirrors_into_it(v2tree: Tree, tmp_path: Path) -> None:
    originals = NodeOriginals("")
    cgroupfs, _ = make_executor(v2tree, driver="cgroupfs")
    assert unit_property_keeper(_settings("/run/systemd/private"), executor=cgroupfs, originals=originals) is None
    assert cgroupfs.mirror is None
    assert systemd_status(_settings("x"), None, driver=CgroupDriver.CGROUPFS)["mode"].startswith("not the cgroup driver")

    systemd, _ = make_executor(v2tree, driver="systemd")
    assert unit_property_keeper(_settings(""), executor=systemd, originals=originals) is None
    off = systemd_status(_settings(""), None, driver=CgroupDriver.SYSTEMD)["mode"]
    assert off.startswith("off (cgroup.systemd_socket is empty), values restored on reset within 10 s"), off

    keeper = unit_property_keeper(_settings(str(tmp_path / "none.sock")), executor=systemd, originals=originals)
    assert keeper is not None and systemd.mirror is keeper and keeper.fallback_s == 10
    assert systemd_status(_settings("x"), keeper, driver=CgroupDriver.SYSTEMD)["mode"] == (
        f"unit properties kept through {tmp_path / 'none.sock'}")
