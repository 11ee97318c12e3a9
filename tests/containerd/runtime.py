"""A private containerd with NRI on this host: Debian's containerd 1.7 (CRI + NRI), runc, a busybox image.

The kube-e2e harness's containerd is Debian 12's 1.6, which has no NRI. Debian 13 packages containerd 1.7.24,
whose binaries run on Debian 12's glibc; `fetch_containerd` gets that package through apt (`tests.apt_suite`:
the host's own archive and keyring, a private apt state) and unpacks it under `build/containerd-nri/` once.
`Containerd` runs it with its own config, root, state and sockets in a temporary directory (never
/etc/containerd or /run/containerd/containerd.sock), NRI enabled on its own socket, the CRI plugin serving
host-network pods with the busybox image as the sandbox image, and the cgroupfs driver.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import signal
import subprocess
import tarfile
import time
from pathlib import Path

from tests.apt_suite import AptSuiteError, download
from tests.cgroupchild import rmdir_patiently
from tests.sockets import accepts

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / "build" / "containerd-nri"
SUITE = "trixie"
IMAGE = "localhost/hookserver-e2e-busybox:latest"
CGROUP_PARENT = "hookserver-ctd-e2e"  # the tier's pods live under /<this> in every hierarchy (cgroupfs driver)
_APPLETS = ("sh", "sleep", "cat", "env", "ls", "true")


class ContainerdUnavailable(RuntimeError):
    """Why the containerd tier cannot run here (the tests skip with this message)."""


def _version(binary: Path) -> tuple[int, int]:
    out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, check=False).stdout
    try:
        major, minor = out.split()[2].split(".")[:2]
        return int(major), int(minor)
    except (IndexError, ValueError):
        return (0, 0)


def fetch_containerd(cache: Path = CACHE) -> Path:
    """The `usr/bin` directory of an unpacked containerd >= 1.7 (fetched through apt on first use)."""
    bin_dir = cache / "root" / "usr" / "bin"
    if (bin_dir / "containerd").exists() and _version(bin_dir / "containerd") >= (1, 7):
        return bin_dir
    if os.geteuid() != 0:
        raise ContainerdUnavailable("fetching containerd through apt needs root")
    try:
        debs = [d for d in download(SUITE, ["containerd"], cache / "debs") if d.name.startswith("containerd_")]
    except (AptSuiteError, OSError) as exc:
        raise ContainerdUnavailable(f"containerd 1.7 from Debian {SUITE} could not be fetched: {exc}") from exc
    if not debs:
        raise ContainerdUnavailable(f"apt-get download gave no containerd package from {SUITE}")
    shutil.rmtree(cache / "root", ignore_errors=True)
    subprocess.run(["dpkg-deb", "-x", str(debs[-1]), str(cache / "root")], check=True)
    if _version(bin_dir / "containerd") < (1, 7):
        raise ContainerdUnavailable(f"{bin_dir / 'containerd'} does not run or is older than 1.7")
    return bin_dir


def host_tool(path: str, package: str) -> str:
    """A host binary from the host's own suite, installed with apt-get where missing (a fresh machine)."""
    if not Path(path).exists():
        if os.geteuid() != 0:
            raise ContainerdUnavailable(f"{path} is missing and installing {package} needs root")
        done = subprocess.run(["apt-get", "install", "-y", "-q", package], capture_output=True, text=True)
        if done.returncode != 0 or not Path(path).exists():
            raise ContainerdUnavailable(f"apt-get install {package} failed: {done.stderr.strip()[-300:]}")
    return path


def _tarinfo(name: str, **fields: object) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.mtime = 1700000000
    for key, value in fields.items():
        setattr(info, key, value)
    return info


def _tar(entries: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in entries:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def busybox_image(busybox: Path, out: Path) -> Path:
    """An OCI image-layout tar: static busybox and a few applets, `sleep infinity` as its command (also the
    sandbox image), named `IMAGE` for `ctr images import`."""
    binary = busybox.read_bytes()
    layer = _tar(
        [(_tarinfo(d + "/", type=tarfile.DIRTYPE, mode=0o755), None) for d in ("bin", "dev", "proc", "sys", "tmp")]
        + [(_tarinfo("bin/busybox", mode=0o755), binary)]
        + [(_tarinfo("bin/" + a, type=tarfile.SYMTYPE, linkname="busybox", mode=0o777), None) for a in _APPLETS]
    )

    def digest(blob: bytes) -> str:
        return "sha256:" + hashlib.sha256(blob).hexdigest()

    def dumps(doc: object) -> bytes:
        return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()

    config = dumps({
        "architecture": "amd64", "os": "linux",
        "config": {"Env": ["PATH=/bin"], "Cmd": ["/bin/sleep", "infinity"], "WorkingDir": "/"},
        "rootfs": {"type": "layers", "diff_ids": [digest(layer)]},
    })
    manifest = dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": digest(config),
                   "size": len(config)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": digest(layer),
                    "size": len(layer)}],
    })
    index = dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": digest(manifest),
                       "size": len(manifest), "platform": {"architecture": "amd64", "os": "linux"},
                       "annotations": {"io.containerd.image.name": IMAGE,
                                       "org.opencontainers.image.ref.name": "latest"}}],
    })
    blobs = [(_tarinfo("blobs/sha256/" + digest(b)[7:], mode=0o644), b) for b in (layer, config, manifest)]
    out.write_bytes(_tar(
        [(_tarinfo("blobs/", type=tarfile.DIRTYPE, mode=0o755), None),
         (_tarinfo("blobs/sha256/", type=tarfile.DIRTYPE, mode=0o755), None), *blobs,
         (_tarinfo("oci-layout", mode=0o644), dumps({"imageLayoutVersion": "1.0.0"})),
         (_tarinfo("index.json", mode=0o644), index)]
    ))
    return out


def _config(home: Path, nri_socket: Path, *, systemd_cgroup: bool = False) -> str:
    return f"""version = 2
root = "{home / 'root'}"
state = "{home / 'state'}"
[grpc]
  address = "{home / 'containerd.sock'}"
[ttrpc]
  address = "{home / 'containerd.sock.ttrpc'}"
[debug]
  level = "info"
[plugins."io.containerd.nri.v1.nri"]
  disable = false
  disable_connections = false
  socket_path = "{nri_socket}"
  plugin_path = "{home / 'nri-plugins'}"
  plugin_config_path = "{home / 'nri-conf'}"
  plugin_registration_timeout = "5s"
  plugin_request_timeout = "2s"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{IMAGE}"
  enable_selinux = false
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "native"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = {"true" if systemd_cgroup else "false"}
        BinaryName = "{host_tool('/usr/sbin/runc', 'runc')}"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{home / 'cni-bin'}"
    conf_dir = "{home / 'cni-conf'}"
"""



def remove_cgroup_tree(name: str, timeout_s: float = 10.0) -> None:
    """Kill what is left in `/<name>` of every hierarchy (a sandbox whose shim is gone keeps running, reparented)
    and remove the directories, deepest first."""
    trees = [h / name for h in Path("/sys/fs/cgroup").iterdir() if (h / name).is_dir()]
    for tree in trees:
        for procs in tree.rglob("cgroup.procs"):
            for pid in procs.read_text().split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
    for tree in trees:
        for sub in sorted((p for p in tree.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
            rmdir_patiently(sub, timeout_s)
        rmdir_patiently(tree, timeout_s)


class Containerd:
    """One containerd process (start with `start`, always `stop`): `cri_socket`, `nri_socket`, `log`."""

    def __init__(self, home: Path, *, bin_dir: Path | None = None, busybox: Path | None = None,
                 systemd_cgroup: bool = False) -> None:
        """`bin_dir`/`busybox`: a containerd and a static busybox already at hand (the VM tier's guest has
        both and no apt); otherwise fetched. `systemd_cgroup`: runc's systemd driver (pod slices and
        `cri-containerd-<id>.scope` units) instead of cgroupfs."""
        self.home = home
        self.bin_dir = bin_dir or fetch_containerd()
        self.busybox = busybox or Path(host_tool("/bin/busybox", "busybox-static"))
        self.systemd_cgroup = systemd_cgroup
        self.cri_socket = home / "containerd.sock"
        self.nri_socket = home / "nri.sock"
        self.log = home / "containerd.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self._made_shim_dir = not Path("/run/containerd/s").exists()

    def version(self) -> str:
        return subprocess.run([str(self.bin_dir / "containerd"), "--version"], capture_output=True, text=True,
                              check=False).stdout.strip()

    def start(self, timeout_s: float = 30.0, *, import_image: bool = True) -> None:
        for sub in ("nri-plugins", "nri-conf", "cni-bin", "cni-conf"):
            (self.home / sub).mkdir(parents=True, exist_ok=True)
        config = self.home / "config.toml"
        config.write_text(_config(self.home, self.nri_socket, systemd_cgroup=self.systemd_cgroup))
        env = dict(os.environ, PATH=f"{self.bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}")
        with open(self.log, "ab") as log:
            self._proc = subprocess.Popen([str(self.bin_dir / "containerd"), "--config", str(config)],
                                          stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                                          start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while not (accepts(self.cri_socket) and self.nri_socket.exists()):
            if self._proc.poll() is not None or time.monotonic() > deadline:
                raise ContainerdUnavailable(f"containerd did not start:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.1)
        if import_image:
            self.ctr("images", "import", str(busybox_image(self.busybox, self.home / "busybox.oci.tar")))

    def restart(self, timeout_s: float = 30.0) -> None:
        """Stop containerd alone (SIGTERM; its shims and containers keep running, as on a node's upgrade) and start
        it again on the same root and state."""
        assert self._proc is not None
        self._proc.send_signal(signal.SIGTERM)
        self._proc.wait(timeout=15)
        self.cri_socket.unlink(missing_ok=True)
        self.nri_socket.unlink(missing_ok=True)
        self.start(timeout_s, import_image=False)

    def ctr(self, *argv: str) -> str:
        done = subprocess.run([str(self.bin_dir / "ctr"), "--address", str(self.cri_socket), "-n", "k8s.io", *argv],
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"ctr {' '.join(argv)}: {done.stderr.strip()}")
        return done.stdout

    def stop(self) -> None:
        """Stop containerd and every shim it started, and unmount what they left under its home."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        shim = str(self.bin_dir / "containerd-shim-runc-v2")
        for pid_dir in Path("/proc").glob("[0-9]*"):
            try:
                if os.readlink(pid_dir / "exe") == shim:
                    os.kill(int(pid_dir.name), signal.SIGKILL)
            except (OSError, ValueError):
                continue
        mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
        for mount in sorted((m for m in mounts if m.startswith(str(self.home))), key=len, reverse=True):
            subprocess.run(["umount", "-l", mount], check=False, capture_output=True)
        if self._made_shim_dir:
            shutil.rmtree("/run/containerd/s", ignore_errors=True)
