"""The daemon registers the GroupIdentity hook where the kubelet's QoS cgroup has a CPU-priority file and its
reconciler would write (QoS on, not a dry run), so a new pod gets its priority at PreRunPodSandbox; with QoS off
the hook is not registered and writes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from hookserver.config import load_settings
from hookserver.daemon import Daemon


def _daemon(tmp_path: Path, *, qos: bool) -> Daemon:
    root = tmp_path / "cg"
    (root / "kubepods").mkdir(parents=True)
    (root / "kubepods" / "cpu.idle").write_text("0\n")  # a v2 kernel's file at the pods' parent
    settings = load_settings(overrides={
        "standalone": True, "state_dir": str(tmp_path / "state"),
        "hook": {"socket": str(tmp_path / "h.sock"), "registration_dir": str(tmp_path / "reg")},
        "debug": {"socket": str(tmp_path / "d.sock")}, "nri": {"enabled": False},
        "metrics": {"addr": "127.0.0.1:0"}, "cgroup": {"root": str(root), "version": "v2", "driver": "cgroupfs"},
        "qos": {"enabled": qos},
    }, environ={})
    return Daemon(settings)


@pytest.mark.parametrize(("qos", "registered"), [(True, True), (False, False)])
def test_the_group_identity_hook_follows_its_reconciler(tmp_path: Path, qos: bool, registered: bool) -> None:
    daemon = _daemon(tmp_path, qos=qos)
    assert ("GroupIdentity" in daemon.registry.plugins) is registered
