"""No registry or mirror host name in any file of the project (issue 40): Debian packages come through apt from
the host's own configured archive, Python packages through pip's own configuration, and nothing names a host to
download from. A script that grows a `curl http://<mirror>/...` again, or a doc that tells people to pull from
a registry, fails here.

One form is allowed: `docker.io/library/<name>`, the name containerd's CRI gives an unqualified image reference
(`image: hookserver:X` is looked up as `docker.io/library/hookserver:X`). The project's images are imported from
archives it builds (deploy/image), never pulled, so that prefix is a naming rule the node tier must match, not a
place anything is fetched from.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Registry and mirror domains, as patterns (escaped dots, so this file does not match itself).
HOSTS = re.compile(
    r"(?<![\w.-])(?:[\w-]+\.)*(?:"
    r"debian\.org|ubuntu\.com|docker\.io|docker\.com|gcr\.io|quay\.io|ghcr\.io|registry\.k8s\.io|pkg\.dev"
    r"|pypi\.org|pythonhosted\.org|proxy\.golang\.org|sum\.golang\.org|npmjs\.(?:org|com)|crates\.io"
    r"|ecr\.aws|azurecr\.io|mcr\.microsoft\.com|nodesource\.com|packages\.cloud\.google\.com"
    r")(?![\w-])",
    re.IGNORECASE,
)
# containerd's name for an unqualified image reference (see the docstring); nothing else of that host.
ALLOWED = re.compile(r"docker\.io/library/[\w{}<>.$-]+")


def _tracked_files() -> list[Path]:
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=30
        ).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"not a git checkout ({exc})")
    return [ROOT / name for name in listed.decode().split("\0") if name]


def hosts_in(text: str) -> list[str]:
    """The registry/mirror host names in `text`, past the allowed image-name form."""
    return [m.group(0) for m in HOSTS.finditer(ALLOWED.sub("", text))]


def test_the_pattern_finds_the_hosts_that_crept_in_before() -> None:
    mirror = "deb." + "debian" + ".org"
    assert hosts_in(f'MIRROR="${{DEBIAN_MIRROR:-http://{mirror}/debian}}"') == [mirror]
    assert hosts_in("pull " + "registry.k8s" + ".io/pause:3.10 or " + "quay" + ".io/x") == [
        "registry.k8s" + ".io", "quay" + ".io"]
    assert hosts_in("pip download --index-url https://" + "pypi" + ".org/simple") == ["pypi" + ".org"]
    assert hosts_in('full_name = f"' + "docker" + '.io/library/{name}"') == []
    assert hosts_in("docker" + ".io/other/image") == ["docker" + ".io"]
    assert hosts_in("a Debian mirror, the host's apt sources, example.org") == []


def test_no_file_of_the_project_names_a_registry_or_mirror_host() -> None:
    found: list[str] = []
    for path in _tracked_files():
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue  # binary, or deleted in the work tree
        for number, line in enumerate(text.splitlines(), 1):
            for host in hosts_in(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {host}")
    assert not found, "registry or mirror host names (use the host's apt/pip configuration):\n" + "\n".join(found)
