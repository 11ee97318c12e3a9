"""A Daemon built for tests (no NRI, sockets and cgroup root under tmp_path), and one /readyz read.

Shared by the fake-apiserver tests (tests/informer/test_first_sync.py) and the real-apiserver tier
(tests/kube/test_readiness_kube.py), so both probe the same daemon the same way.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from hookserver.config import Settings, load_settings


def daemon_settings(tmp_path: Path, node: str, **overrides: Any) -> Settings:
    """Settings for a Daemon whose state, sockets and (empty) cgroup tree live under `tmp_path`."""
    for sub in ("cpu", "memory", "cpuset"):
        (tmp_path / "cg" / sub).mkdir(parents=True, exist_ok=True)
    values: dict[str, Any] = {
        "node_name": node, "state_dir": str(tmp_path / "state"), "hook": {"socket": str(tmp_path / "h.sock")},
        "debug": {"socket": str(tmp_path / "d.sock")}, "nri": {"enabled": False},
        "cgroup": {"root": str(tmp_path / "cg")}, "metrics": {"addr": "127.0.0.1:0"},
    }
    values.update(overrides)
    return load_settings(overrides=values, environ={})


def readyz(port: int) -> tuple[int, list[str]]:
    """GET /readyz on the daemon's metrics port: the status and the body's lines (one per check)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as resp:
            return resp.status, resp.read().decode().splitlines()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode().splitlines()
