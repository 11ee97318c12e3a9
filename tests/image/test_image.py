"""The built container image (`make image`), checked from the artefacts themselves (`make image-test`).

Skipped unless HOOKSERVER_IMAGE_DIR names the build output (make image-test sets it), so `make test`
never waits on an image build. Each check reads the image the way a consumer would: skopeo reads the OCI
layout and both archives, umoci unpacks the layout into a runtime bundle, and the commands run inside
that bundle's rootfs (chroot, as the image's configured user). When containerd is installed, a private
containerd (own root, state and socket under the test's tmp dir) imports the oci-archive as
`ctr images import` on a node would.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hookserver import __version__

pytestmark = pytest.mark.image

IMAGE_DIR = os.environ.get("HOOKSERVER_IMAGE_DIR", "")
MAX_UNCOMPRESSED_BYTES = 200 * 1000 * 1000
ROOT = Path(__file__).resolve().parents[2]

if not IMAGE_DIR:
    pytest.skip("HOOKSERVER_IMAGE_DIR is not set: run `make image image-test`", allow_module_level=True)


def _run(*argv: str, timeout: float = 120, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, **kwargs)


@pytest.fixture(scope="module")
def summary() -> dict[str, Any]:
    path = Path(IMAGE_DIR) / "image.json"
    if not path.is_file():
        pytest.fail(f"{path} is missing: run `make image` first")
    doc: dict[str, Any] = json.loads(path.read_text())
    return doc


@pytest.fixture(scope="module")
def bundle(summary: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    if os.geteuid() != 0:
        pytest.skip("needs root to unpack the image and chroot into it")
    if shutil.which("umoci") is None:
        pytest.skip("umoci is missing (apt-get install umoci)")
    target = tmp_path_factory.mktemp("bundle") / "b"
    tag = summary["tag"].rpartition(":")[2]
    done = _run("umoci", "unpack", "--image", f"{summary['oci_layout']}:{tag}", str(target))
    assert done.returncode == 0, done.stderr
    return target


def _in_image(bundle: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """Run a command in the unpacked rootfs as the image's configured user, with the image's env."""
    process = json.loads((bundle / "config.json").read_text())["process"]
    user = f"{process['user']['uid']}:{process['user']['gid']}"
    env = dict(item.split("=", 1) for item in process["env"])
    return _run("chroot", f"--userspec={user}", str(bundle / "rootfs"), *argv, env=env)


def test_tag_is_the_version_and_the_manifests_use_it(summary: dict[str, Any]) -> None:
    assert summary["tag"] == f"hookserver:{__version__}"
    assert f"image: {summary['tag']}" in (ROOT / "deploy" / "hookserver.yaml").read_text()


def test_size_is_within_budget(summary: dict[str, Any]) -> None:
    print(f"image {summary['tag']}: {summary['uncompressed_bytes'] / 1e6:.1f} MB uncompressed, "
          f"{summary['compressed_bytes'] / 1e6:.1f} MB compressed")
    assert summary["uncompressed_bytes"] <= MAX_UNCOMPRESSED_BYTES


def test_skopeo_reads_the_layout_and_both_archives(summary: dict[str, Any]) -> None:
    if shutil.which("skopeo") is None:
        pytest.skip("skopeo is missing (apt-get install skopeo)")
    tag = summary["tag"].rpartition(":")[2]
    layout = json.loads(_run("skopeo", "inspect", f"oci:{summary['oci_layout']}:{tag}").stdout)
    assert layout["Digest"] == summary["manifest_digest"]
    oci_archive = json.loads(_run("skopeo", "inspect", f"oci-archive:{summary['oci_archive']}").stdout)
    assert oci_archive["Digest"] == summary["manifest_digest"]
    config = json.loads(_run("skopeo", "inspect", "--config", f"docker-archive:{summary['docker_archive']}").stdout)
    assert config["rootfs"]["diff_ids"] == [summary["layer_diff_id"]]
    assert config["config"]["User"] == "65532:65532"
    assert config["config"]["Entrypoint"] == ["/opt/hookserver/bin/hookserver"]


def test_runs_as_non_root_by_default(bundle: Path) -> None:
    done = _in_image(bundle, "/usr/bin/id", "-u")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "65532"


def test_hookserver_version_in_the_image(bundle: Path) -> None:
    done = _in_image(bundle, "/opt/hookserver/bin/hookserver", "--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == f"hookserver {__version__}"
    assert "runtime.v1alpha1" in done.stdout and "nri.pkg.api.v1alpha1" in done.stdout


def test_hookctl_help_and_version_without_a_server(bundle: Path) -> None:
    done = _in_image(bundle, "/opt/hookserver/bin/hookctl", "--help")
    assert done.returncode == 0, done.stderr
    assert "usage: hookctl" in done.stdout
    done = _in_image(bundle, "/opt/hookserver/bin/hookctl", "--socket", "/nonexistent.sock", "--timeout", "1", "version")
    assert done.returncode == 1
    assert f"version: {__version__}" in done.stdout and "hookctl: error: server:" in done.stderr


def test_the_image_answers_to_koordlets_entry_point(bundle: Path) -> None:
    """koordinator's chart runs `command: ["/koordlet"]` with koordlet's flags: /koordlet is hookserver serve."""
    from tests.koordlet_compat.test_chart_args import chart_args

    assert (bundle / "rootfs" / "koordlet").is_symlink()
    done = _in_image(bundle, "/koordlet", *chart_args(9316), "--help")  # the chart's flags parse, then usage
    assert done.returncode == 0, done.stderr
    assert "usage: hookserver serve" in done.stdout
    done = _in_image(bundle, "/koordlet", "-addr=:9316", "-bogus=1")
    assert done.returncode == 2
    assert done.stderr.strip() == "hookserver: flag provided but not defined: -bogus (neither a hookserver nor a koordlet flag)"


def test_every_module_imports_in_the_image(bundle: Path) -> None:
    """The strip step removes files (kubernetes/aio, test suites): nothing hookserver imports may go."""
    script = (
        "import importlib, pkgutil, hookserver, collectors, qos\n"
        "names = []\n"
        "for pkg in (hookserver, collectors, qos):\n"
        "    for mod in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'):\n"
        "        importlib.import_module(mod.name); names.append(mod.name)\n"
        "import kubernetes.client, kubernetes.config, yaml, pydantic, psutil, pynvml, prometheus_client\n"
        "print(len(names))\n"
    )
    done = _in_image(bundle, "/opt/hookserver/bin/python", "-c", script)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.strip()) > 50


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_the_agent_serves_from_the_image_as_root(bundle: Path, tmp_path: Path) -> None:
    """The DaemonSet's command (uid 0, as deploy/hookserver.yaml runs it) in the unpacked image, with a
    read-only root filesystem, a tmpfs /tmp (its emptyDir) and the host's /proc and /sys: ready, metrics,
    hookctl, clean SIGTERM."""
    rootfs = tmp_path / "ro-root"
    rootfs.mkdir()
    env = dict(item.split("=", 1) for item in json.loads((bundle / "config.json").read_text())["process"]["env"])
    port = _free_port()
    # unmounted in reverse order
    mounts = [rootfs, rootfs / "tmp", rootfs / "proc", rootfs / "sys"]
    assert _run("mount", "--bind", str(bundle / "rootfs"), str(rootfs)).returncode == 0
    try:
        assert _run("mount", "-o", "remount,bind,ro", str(rootfs)).returncode == 0
        assert _run("mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mounts[1])).returncode == 0
        assert _run("mount", "-t", "proc", "proc", str(mounts[2])).returncode == 0
        assert _run("mount", "--rbind", "/sys", str(mounts[3])).returncode == 0
        _run("mount", "--make-rslave", str(mounts[3]))
        assert _run("touch", str(rootfs / "opt" / "probe")).returncode != 0, "the root filesystem is writable"
        log = (tmp_path / "agent.log").open("wb")
        agent = subprocess.Popen(
            ["chroot", str(rootfs), "/opt/hookserver/bin/hookserver", "serve", "--standalone", "--no-nri",
             "--hook-socket", "/tmp/run/hook.sock", "--debug-socket", "/tmp/run/debug.sock",
             "--registration-dir", "/tmp/run/reg", "--state-dir", "/tmp/run/state",
             "--metrics-addr", f"127.0.0.1:{port}", "--node-name", "image-node"],
            env=env, stdout=log, stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 60
            ready = ""
            while time.monotonic() < deadline and agent.poll() is None:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as resp:
                        ready = resp.read().decode()
                        break
                except OSError:
                    time.sleep(0.2)
            assert ready.startswith("ready"), (tmp_path / "agent.log").read_text()[-3000:]
            deadline = time.monotonic() + 20
            metrics = ""
            while "koordlet_node_used_cpu_cores{" not in metrics and time.monotonic() < deadline:
                time.sleep(0.3)
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
                    metrics = resp.read().decode()
            assert 'koordlet_node_used_cpu_cores{node="image-node"}' in metrics
            done = _in_image_as_root(rootfs, env, "/opt/hookserver/bin/hookctl", "--socket", "/tmp/run/debug.sock",
                                     "version", "-o", "json")
            assert done.returncode == 0, done.stderr
            assert json.loads(done.stdout)["server"]["node"] == "image-node"
            agent.send_signal(signal.SIGTERM)
            assert agent.wait(timeout=30) == 0
        finally:
            if agent.poll() is None:
                agent.kill()
                agent.wait(timeout=10)
            log.close()
    finally:
        for mount in reversed(mounts):
            _run("umount", "-R", str(mount))


def _in_image_as_root(rootfs: Path, env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return _run("chroot", str(rootfs), *argv, env=env)


def test_podman_loads_both_archives(summary: dict[str, Any], tmp_path: Path) -> None:
    """`podman load` accepts the docker-archive and the oci-archive (in a private store). Running the image
    with podman is not tried: on this build machine root lacks CAP_SYS_RESOURCE and runc cannot set the
    container's rlimits, which is why the commands above run in the unpacked rootfs with chroot."""
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed (apt-get install podman)")
    if os.geteuid() != 0:
        pytest.skip("needs root for a private podman store")
    runroot = Path(f"/tmp/hs-podman-{os.getpid()}")  # podman refuses a runroot longer than 50 characters
    store = ["podman", "--root", str(tmp_path / "root"), "--runroot", str(runroot), "--storage-driver", "vfs"]
    try:
        for archive in (summary["docker_archive"], summary["oci_archive"]):
            done = _run(*store, "load", "-i", archive, timeout=300)
            assert done.returncode == 0, done.stderr
        inspected = json.loads(_run(*store, "image", "inspect", f"localhost/{summary['tag']}").stdout)
        assert inspected[0]["Config"]["User"] == "65532:65532"
        assert inspected[0]["Config"]["Entrypoint"] == ["/opt/hookserver/bin/hookserver"]
        assert inspected[0]["RootFS"]["Layers"] == [summary["layer_diff_id"]]
    finally:
        _run(*store, "rmi", "--all", "--force", timeout=120)
        shutil.rmtree(runroot, ignore_errors=True)


@pytest.fixture
def private_containerd(tmp_path: Path) -> Iterator[str]:
    if shutil.which("containerd") is None or shutil.which("ctr") is None:
        pytest.skip("containerd is not installed (apt-get install containerd)")
    if os.geteuid() != 0:
        pytest.skip("needs root to run a private containerd")
    base = Path("/tmp") / f"hookserver-image-test-{os.getpid()}"
    socket = base / "containerd.sock"
    config = base / "config.toml"
    base.mkdir(parents=True, exist_ok=True)
    # Content store only: no CRI, no snapshotter work beyond unpacking, nothing touches the host's containerd.
    config.write_text('version = 2\ndisabled_plugins = ["io.containerd.grpc.v1.cri"]\n')
    log = (tmp_path / "containerd.log").open("wb")
    proc = subprocess.Popen(
        ["containerd", "--config", str(config), "--root", str(base / "root"), "--state", str(base / "state"),
         "--address", str(socket)], stdout=log, stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        while _run("ctr", "--address", str(socket), "version", timeout=10).returncode != 0:
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"containerd did not start: {(tmp_path / 'containerd.log').read_text()[-2000:]}")
            time.sleep(0.2)
        yield str(socket)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        subprocess.run(["umount", "-R", str(base / "root")], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


def test_containerd_imports_the_oci_archive_under_the_manifests_name(
    summary: dict[str, Any], private_containerd: str
) -> None:
    done = _run("ctr", "--address", private_containerd, "-n", "hookserver-test", "images", "import",
                "--no-unpack", summary["oci_archive"])
    assert done.returncode == 0, done.stderr
    listed = _run("ctr", "--address", private_containerd, "-n", "hookserver-test", "images", "ls", "-q").stdout.split()
    # The kubelet resolves `image: hookserver:X` to docker.io/library/hookserver:X.
    assert f"docker.io/library/hookserver:{__version__}" in listed
