"""CPUSetAllocator's place in the agent: its knobs owned once beside CPU suppress and CPU burst, koordlet's
`--disable-unset-cpu-quota` mapped onto it, and the daemon handing it the node's CPUs."""

from __future__ import annotations

from pathlib import Path

import pytest

from hookserver.cli import serve
from hookserver.config import load_settings
from hookserver.errors import ConfigError
from hookserver.koordlet_compat.flags import split_koordlet_args
from qos.framework.knobs import KnobClaim, check_running_features
from qos.registry import build_reconcilers


def test_cpuset_knobs_have_one_owner() -> None:
    table = check_running_features(build_reconcilers(), ["batchresource", "CPUSetAllocator"])
    assert "cpuset.cpus at container level for LSR" in table["CPUSetAllocator"]
    assert "cpuset.cpus at container level for BE" in table["CPUSuppress"]
    assert "cpu.cfs_quota_us at pod level for LSE" in table["CPUSetAllocator"]

    class Pinner:
        name = "Pinner"
        knob_claims = (KnobClaim("cpuset.cpus", "container", "LS"),)

    with pytest.raises(ConfigError, match="cpuset.cpus at container level for LS is claimed by both"):
        check_running_features([Pinner()], ["CPUSetAllocator"])


@pytest.mark.parametrize("argv, want", [([], False), (["-disable-unset-cpu-quota"], True),
                                        (["--disable-unset-cpu-quota=false"], False)])
def test_koordlets_disable_unset_cpu_quota_is_mapped(argv: list[str], want: bool) -> None:
    parser = serve.build_parser()
    rest, used = split_koordlet_args(["serve", *argv], own_options=serve.own_long_options(parser))
    settings = serve.settings_from_args(parser.parse_args(rest), koordlet=used, koordlet_defaults=False)
    assert settings.hook.disable_unset_cpu_quota is want
    assert not used.ignored


def _fixture_sys(root: Path) -> None:
    base = root / "devices/system"
    (base / "cpu").mkdir(parents=True)
    (base / "cpu/online").write_text("0-3\n")
    for cpu in range(4):
        topo = base / f"cpu/cpu{cpu}/topology"
        topo.mkdir(parents=True)
        (topo / "core_id").write_text(f"{cpu // 2}\n")
        (topo / "physical_package_id").write_text("0\n")
    (base / "node/node0").mkdir(parents=True)
    (base / "node/node0/cpulist").write_text("0-3\n")


def test_the_daemon_hands_the_hook_the_node_cpus_and_the_quota_setting(tmp_path: Path) -> None:
    from hookserver.daemon import Daemon

    _fixture_sys(tmp_path / "sys")
    (tmp_path / "cg").mkdir()
    settings = load_settings(overrides={
        "standalone": True, "state_dir": str(tmp_path / "state"), "sys_root": str(tmp_path / "sys"),
        "hook": {"socket": str(tmp_path / "h.sock"), "registration_dir": str(tmp_path / "reg"),
                 "disable_unset_cpu_quota": True},
        "debug": {"socket": str(tmp_path / "d.sock")}, "nri": {"enabled": False},
        "metrics": {"addr": "127.0.0.1:0"}, "cgroup": {"root": str(tmp_path / "cg"), "version": "v2"},
    }, environ={})
    daemon = Daemon(settings)
    plugin = daemon.registry.plugins["CPUSetAllocator"]
    assert [c.cpu for c in plugin.cpus] == [0, 1, 2, 3]  # type: ignore[attr-defined]
    assert plugin.unset_cpu_quota is False  # type: ignore[attr-defined]
    assert "CPUSetAllocator" in daemon.knob_owners
    assert daemon.gates.values["CPUSetAllocator"].implemented
