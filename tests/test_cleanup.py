"""`hookserver cleanup`: restores sysctls, the BE tier's quota and cpuset (and the BE cgroups below) and
removes resctrl groups the agent created, from the originals in the state dir; refuses while the agent's
socket answers unless --force. Driven through the real CLI entry point on fixture trees."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from hookserver.cli.serve import main
from hookserver.store.originals import ORIGINALS_FILE


@pytest.fixture
def node(tmp_path: Path) -> Path:
    """A node the agent changed: sysctl raised, BE tier quota and cpusets narrowed, a resctrl group made."""
    proc = tmp_path / "proc" / "sys" / "vm"
    proc.mkdir(parents=True)
    (proc / "min_free_kbytes").write_text("160000")
    cg = tmp_path / "cg"
    tier_cpu = cg / "cpu" / "kubepods" / "besteffort"
    tier_cpu.mkdir(parents=True)
    (tier_cpu / "cpu.cfs_quota_us").write_text("2000")
    (cg / "memory").mkdir()
    tier_set = cg / "cpuset" / "kubepods" / "besteffort"
    for d in (tier_set, tier_set / "podx", tier_set / "podx" / "ctr"):
        d.mkdir(parents=True)
        (d / "cpuset.cpus").write_text("0-1")
    reaper = tmp_path / "sys" / "kernel" / "mm" / "memcg_reaper"
    reaper.mkdir(parents=True)
    (reaper / "reap_background").write_text("1")
    (tmp_path / "sys" / "fs" / "resctrl" / "BE").mkdir(parents=True)
    (tmp_path / "sys" / "fs" / "resctrl" / "LS").mkdir(parents=True)
    state = tmp_path / "state"
    state.mkdir()
    (state / ORIGINALS_FILE).write_text(json.dumps({
        "sysctl": {"vm.min_free_kbytes": "67584", "memcg_reaper.reap_background": "0"},
        "cgroup": {"cpu:kubepods/besteffort/cpu.cfs_quota_us": "-1", "cpuset:kubepods/besteffort/cpuset.cpus": "0-7"},
        "resctrl_groups": {"BE": "created"},
    }))
    return tmp_path


def _argv(base: Path, *extra: str) -> list[str]:
    return ["cleanup", "--state-dir", str(base / "state"), "--proc-root", str(base / "proc"), "--sys-root", str(base / "sys"),
            "--cgroup-root", str(base / "cg"), "--cgroup-driver", "cgroupfs", "--hook-socket", str(base / "h.sock"),
            "--debug-socket", str(base / "d.sock"), *extra]


@pytest.fixture
def live_socket(node: Path) -> Iterator[Path]:
    path = node / "d.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)
    try:
        yield path
    finally:
        server.close()


def test_cleanup_restores_everything_and_says_what(node: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_argv(node)) == 0
    out = capsys.readouterr().out
    assert (node / "proc" / "sys" / "vm" / "min_free_kbytes").read_text() == "67584"
    assert (node / "sys" / "kernel" / "mm" / "memcg_reaper" / "reap_background").read_text() == "0"
    assert (node / "cg" / "cpu" / "kubepods" / "besteffort" / "cpu.cfs_quota_us").read_text() == "-1"
    tier = node / "cg" / "cpuset" / "kubepods" / "besteffort"
    assert [(d / "cpuset.cpus").read_text() for d in (tier, tier / "podx", tier / "podx" / "ctr")] == ["0-7"] * 3
    assert not (node / "sys" / "fs" / "resctrl" / "BE").exists()
    assert (node / "sys" / "fs" / "resctrl" / "LS").is_dir()  # not ours: left alone
    assert "restored  sysctl vm.min_free_kbytes = 67584 (was 160000)" in out
    assert "resctrl group BE removed" in out and "cpu.cfs_quota_us = -1" in out and "cpuset.cpus = 0-7" in out
    saved = json.loads((node / "state" / ORIGINALS_FILE).read_text())
    assert saved == {"sysctl": {}, "cgroup": {}, "resctrl_groups": {}, "oom_score_adj": {}, "resctrl_pod_groups": {},
                     "tc": {}, "systemd_units": {}}
    assert main(_argv(node)) == 0  # a second run has nothing left
    assert "nothing to restore" in capsys.readouterr().out


def test_cleanup_refuses_while_the_agent_runs_unless_forced(
    node: Path, live_socket: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_argv(node)) == 2
    assert "the agent is running" in capsys.readouterr().err
    assert (node / "proc" / "sys" / "vm" / "min_free_kbytes").read_text() == "160000"  # nothing touched
    assert main(_argv(node, "--force")) == 0
    assert (node / "proc" / "sys" / "vm" / "min_free_kbytes").read_text() == "67584"


def test_a_failed_restore_stays_recorded_and_exits_1(node: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (node / "proc" / "sys" / "vm" / "min_free_kbytes").unlink()  # the file is gone: cannot restore
    assert main(_argv(node)) == 1
    assert "FAILED    sysctl vm.min_free_kbytes" in capsys.readouterr().out
    assert json.loads((node / "state" / ORIGINALS_FILE).read_text())["sysctl"] == {"vm.min_free_kbytes": "67584"}
    assert (node / "sys" / "kernel" / "mm" / "memcg_reaper" / "reap_background").read_text() == "0"  # the rest went on


def test_cleanup_with_a_corrupt_state_file_warns_and_restores_nothing(node: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (node / "state" / ORIGINALS_FILE).write_text("{broken")
    assert main(_argv(node)) == 0
    out = capsys.readouterr().out
    assert "WARNING" in out and "unreadable" in out
    assert (node / "proc" / "sys" / "vm" / "min_free_kbytes").read_text() == "160000"


def test_cleanup_takes_every_serve_flag() -> None:
    """`cleanup` reads its settings with serve's code, so it must know every serve flag: the reconciler's
    flags were added after cleanup copied serve's, and every cleanup died with an AttributeError."""
    from hookserver.cli.serve import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    serve, cleanup = sub.choices["serve"], sub.choices["cleanup"]  # type: ignore[attr-defined]
    serve_dests = {a.dest for a in serve._actions} - {"help"}
    assert serve_dests <= {a.dest for a in cleanup._actions}
    args = parser.parse_args(["cleanup"])
    assert args.reconcile_interval is None and args.no_reconciler is False


def test_cleanup_removes_the_standalone_capacity_offer(node: Path, capsys: pytest.CaptureFixture[str]) -> None:
    offer = node / "state" / "capacity.json"
    offer.write_text('{"status": {"allocatable": {"kubernetes.io/batch-cpu": "4000"}}}')
    assert main(_argv(node)) == 0
    assert not offer.exists()
    assert f"withdrawn batch/mid capacity: removed {offer}" in capsys.readouterr().out
    assert main(_argv(node)) == 0  # nothing left: not an error the second time


def test_cleanup_withdraws_the_offer_from_the_node_and_leaves_other_writers_fields(
    node: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from hookserver.informer import NodeCapacityWriter
    from hookserver.informer.transport import ApiClientTransport, load_client_configuration
    from tests.informer.fake_apiserver import FakeApiServer, make_node

    fake = FakeApiServer(token="t").start()
    try:
        kubeconfig = fake.kubeconfig(str(node / "kubeconfig"))
        fake.apply("nodes", make_node("node-a"))
        transport = ApiClientTransport(load_client_configuration(kubeconfig))
        put = NodeCapacityWriter(transport, node_name="node-a").apply(
            {"kubernetes.io/batch-cpu": "4000", "kubernetes.io/batch-memory": "8Gi"})
        transport.close()
        assert put.result == "ok"
        fake.update_as("koordinator-manager", "nodes", "node-a", {"status": {"allocatable": {"kubernetes.io/mid-cpu": "500"}}})
        assert main(_argv(node, "--kubeconfig", kubeconfig, "--node-name", "node-a")) == 0
        allocatable = (fake.get("nodes", "node-a") or {})["status"]["allocatable"]
        assert "kubernetes.io/batch-cpu" not in allocatable and "kubernetes.io/batch-memory" not in allocatable
        assert allocatable["kubernetes.io/mid-cpu"] == "500"  # koord-manager's, not ours
        out = capsys.readouterr().out
        assert "withdrawn batch/mid capacity of node node-a (field manager hookserver)" in out
        assert "kubernetes.io/mid-cpu=500" in out
        fake.kill()  # the apiserver is gone: a clear FAILED line and exit 1, the rest of the cleanup done
        assert main(_argv(node, "--kubeconfig", kubeconfig, "--node-name", "node-a")) == 1
        assert "FAILED    batch/mid capacity of node node-a: error" in capsys.readouterr().out
    finally:
        fake.kill()


def test_cleanup_gives_systemd_units_the_kubelets_values_back(
    node: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under the systemd driver the agent kept its values in the units' properties: cleanup hands each unit
    the value recorded before the agent's first change (else the next daemon-reload re-applies the agent's)."""
    from hookserver.systemd.wire import Variant
    from tests.systemd.fake_systemd import FakeSystemd

    path = node / "state" / ORIGINALS_FILE
    doc = json.loads(path.read_text())
    doc["systemd_units"] = {"kubepods-besteffort.slice/AllowedCPUs": '["AllowedCPUs", "ay", ""]',
                            "kubepods-besteffort-podx.slice/CPUWeight": '["CPUWeight", "t", 1]'}
    path.write_text(json.dumps(doc))
    sock = Path(f"/tmp/fsd-cleanup-{os.getpid()}.sock")
    sock.unlink(missing_ok=True)
    monkeypatch.setenv("HOOKSERVER_CGROUP__SYSTEMD_SOCKET", str(sock))
    assert main(_argv(node)) == 1  # no systemd yet: said, and everything stays recorded
    assert "FAILED    systemd unit properties (2 kept)" in capsys.readouterr().out
    fake = FakeSystemd(sock)
    try:
        assert main(_argv(node)) == 0
    finally:
        fake.close()
        sock.unlink(missing_ok=True)
    out = capsys.readouterr().out
    assert "restored  systemd kubepods-besteffort-podx.slice/CPUWeight" in out
    assert sorted((c.body[0], tuple(c.body[2])) for c in fake.calls) == [
        ("kubepods-besteffort-podx.slice", (("CPUWeight", Variant("t", 1)),)),
        ("kubepods-besteffort.slice", (("AllowedCPUs", Variant("ay", b"")),)),
    ]
    assert json.loads(path.read_text())["systemd_units"] == {}
