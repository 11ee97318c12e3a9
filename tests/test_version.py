"""`hookserver --version` and `hookctl version`: the build's version and the protocols it speaks,
from the client alone when the server cannot be reached."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

from hookserver import __version__
from hookserver.debug import DebugServer
from hookserver.store import StateStore
from hookserver.version import HOOK_API, NRI_API, build_info, server_version

ROOT = Path(__file__).resolve().parents[1]


def test_version_matches_the_package_metadata_and_the_manifests_image_tag() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["version"] == __version__
    # `make image` tags hookserver:<__version__>; the manifests must run exactly that tag.
    for manifest in sorted((ROOT / "deploy").glob("hookserver*.yaml")):
        assert f"image: hookserver:{__version__}" in manifest.read_text(), manifest.name


def test_protocol_names_come_from_the_compiled_protos() -> None:
    assert HOOK_API == "runtime.v1alpha1"
    assert NRI_API == "nri.pkg.api.v1alpha1"
    info = build_info()
    assert info["version"] == __version__
    assert info["grpcio"] and info["protobuf"] and info["python"].startswith("CPython 3.")
    json.dumps(info, allow_nan=False)


def test_hookserver_dash_dash_version_prints_and_exits_zero() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "hookserver.cli.serve", "--version"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"hookserver {__version__}"
    assert any("runtime.v1alpha1.RuntimeHookService" in line for line in lines)
    assert any("nri.pkg.api.v1alpha1" in line for line in lines)


def _hookctl(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hookserver.cli.hookctl", *argv], capture_output=True, text=True, timeout=60
    )


def test_hookctl_version_shows_client_and_server(tmp_path: Path) -> None:
    nri = {"state": "ready", "runtime": {"name": "containerd", "version": "v1.7.13", "nri_version": "v0.4.0"}}
    server = DebugServer(
        str(tmp_path / "debug.sock"), store=StateStore(),
        providers={"version": lambda args: server_version(node="node-a", started_at=1.5, nri_status=nri)},
    )
    server.start()
    try:
        done = _hookctl("--socket", str(tmp_path / "debug.sock"), "version", "-o", "json")
        assert done.returncode == 0, done.stderr
        doc = json.loads(done.stdout)
        assert doc["client"]["version"] == __version__ and doc["client"]["hook_api"] == HOOK_API
        assert doc["server"]["version"] == __version__ and doc["server"]["node"] == "node-a"
        assert doc["server"]["nri_runtime"] == {
            "state": "ready", "name": "containerd", "version": "v1.7.13", "nri_version": "v0.4.0"
        }
        table = _hookctl("--socket", str(tmp_path / "debug.sock"), "version")
        assert table.returncode == 0
        assert "client:" in table.stdout and "server:" in table.stdout and "nri.pkg.api.v1alpha1" in table.stdout
    finally:
        server.stop(1.0)


def test_hookctl_version_without_a_server_still_prints_the_client_and_exits_one(tmp_path: Path) -> None:
    done = _hookctl("--socket", str(tmp_path / "absent.sock"), "--timeout", "1", "version", "-o", "json")
    assert done.returncode == 1
    doc = json.loads(done.stdout)
    assert doc["client"]["version"] == __version__ and "server" not in doc
    assert done.stderr.startswith("hookctl: error: server:") and len(done.stderr.strip().splitlines()) == 1


def test_server_version_with_nri_disabled() -> None:
    doc = server_version(node="n", started_at=0.0, nri_status=None)
    assert doc["nri_runtime"] == {"state": "disabled"}
