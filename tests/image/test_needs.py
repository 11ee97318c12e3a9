"""`make image` on a fresh machine installs what it needs (issue 21): `deploy/image/needs.sh` runs apt-get for
a missing mmdebstrap, and the Makefile runs it before the build. Runs in `make test` (no image needed): the
machine's apt-get is replaced by a stand-in that records its arguments and "installs" a fake mmdebstrap."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NEEDS = ROOT / "deploy" / "image" / "needs.sh"


def _tool(path: Path, body: str) -> None:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def _bare_path(tmp_path: Path) -> str:
    """A PATH with the shell tools needs.sh uses but without mmdebstrap (as on a fresh machine)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "env", "cat", "sh"):
        for d in ("/usr/bin", "/bin"):
            if os.path.exists(f"{d}/{tool}"):
                os.symlink(f"{d}/{tool}", bin_dir / tool)
                break
    return str(bin_dir)


def test_a_missing_mmdebstrap_is_installed_with_apt_get(tmp_path: Path) -> None:
    path = _bare_path(tmp_path)
    log = tmp_path / "apt.log"
    apt = tmp_path / "apt-get"
    _tool(apt, f'echo "$*" >>{log}\ncase "$1" in install) printf "#!/bin/sh\\n" >{path}/mmdebstrap; '
               f'/bin/chmod +x {path}/mmdebstrap;; esac\n')
    done = subprocess.run(["bash", str(NEEDS)], env={"PATH": path, "APT_GET": str(apt)}, capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    calls = log.read_text().splitlines()
    assert calls[0].startswith("update")
    assert calls[1].startswith("install") and "mmdebstrap" in calls[1].split()
    assert "installing mmdebstrap" in done.stderr


def test_nothing_is_installed_when_mmdebstrap_is_there(tmp_path: Path) -> None:
    path = _bare_path(tmp_path)
    _tool(Path(path) / "mmdebstrap", "exit 0\n")
    apt = tmp_path / "apt-get"
    _tool(apt, "exit 9\n")
    done = subprocess.run(["bash", str(NEEDS)], env={"PATH": path, "APT_GET": str(apt)}, capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0 and done.stderr == ""


def test_without_apt_get_the_message_names_the_package(tmp_path: Path) -> None:
    done = subprocess.run(["bash", str(NEEDS)], env={"PATH": _bare_path(tmp_path), "APT_GET": "no-such-apt-get"},
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 1 and "mmdebstrap" in done.stderr


def test_make_image_runs_needs_before_the_build() -> None:
    dry = subprocess.run(["make", "-n", "-W", "pyproject.toml", "image"], cwd=ROOT, capture_output=True, text=True,
                         timeout=60, env={**os.environ, "MAKEFLAGS": ""})
    text = dry.stdout
    assert "deploy/image/needs.sh" in text
    assert text.index("deploy/image/needs.sh") < text.index("build-rootfs.sh")


def test_tools_and_their_packages_are_named_by_the_caller(tmp_path: Path) -> None:
    """`make vm-e2e` names TOOL:PACKAGE pairs: a missing tool's package is installed once, a present tool's not."""
    path = _bare_path(tmp_path)
    _tool(Path(path) / "mmdebstrap", "exit 0\n")
    log = tmp_path / "apt.log"
    apt = tmp_path / "apt-get"
    _tool(apt, f'echo "$*" >>{log}\ncase "$1" in install) for t in qemu-system-x86_64 qemu-img; do '
               f'printf "#!/bin/sh\\n" >{path}/$t; /bin/chmod +x {path}/$t; done;; esac\n')
    done = subprocess.run(["bash", str(NEEDS), "mmdebstrap", "qemu-system-x86_64:qemu-system-x86",
                           "qemu-img:qemu-system-x86"], env={"PATH": path, "APT_GET": str(apt), "NEEDS_FOR": "make vm-e2e"},
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    install = log.read_text().splitlines()[1].split()
    assert install[0] == "install" and install.count("qemu-system-x86") == 1 and "mmdebstrap" not in install
    assert "make vm-e2e: installing qemu-system-x86" in done.stderr
