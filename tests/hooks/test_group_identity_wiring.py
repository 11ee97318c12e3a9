"""The daemon registers the GroupIdentity hook where the kubelet's QoS cgroup has a CPU-priority file and its
reconciler would write (QoS on, not a dry run), so a new pod gets its priority at PreRunPodSandbox; with QoS off
the hook is not registered and writes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from hookserver.daemon import Daemon
from tests.readiness import daemon_settings


def _daemon(tmp_path: Path, *, qos: bool) -> Daemon:
    root = tmp_path / "cg"
    (root / "kubepods").mkdir(parents=True)
    (root / "kubepods" / "cpu.idle").write_text("0\n")  # a v2 kernel's file at the pods' parent
    return Daemon(daemon_settings(tmp_path, "n", standalone=True, qos={"enabled": qos},
                                  cgroup={"root": str(root), "version": "v2", "driver": "cgroupfs"}))


@pytest.mark.parametrize(("qos", "registered"), [(True, True), (False, False)])
def test_the_group_identity_hook_follows_its_reconciler(tmp_path: Path, qos: bool, registered: bool) -> None:
    daemon = _daemon(tmp_path, qos=qos)
    assert ("GroupIdentity" in daemon.registry.plugins) is registered
