"""`make bench-go` reads the host's apt sources at run time (tests/bench/go_nri/host_apt_sources.py) instead of a
mirror URL written in the script: the main archive's URI and keyring, for another suite; never the security
or updates archive, never a disabled or deb-src entry. Fixture /etc/apt trees under tmp_path, no network."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parent / "bench" / "go_nri" / "host_apt_sources.py"


@pytest.fixture(scope="module")
def apt_sources() -> ModuleType:
    spec = importlib.util.spec_from_file_location("host_apt_sources", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["host_apt_sources"] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


DEB822 = """\
Types: deb
URIs: http://archive.invalid/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://security.invalid/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://src.invalid/debian
Suites: bookworm
Components: main

Types: deb
Enabled: no
URIs: http://disabled.invalid/debian
Suites: bookworm
Components: main
"""


def _etc(tmp_path: Path, files: dict[str, str]) -> str:
    for name, text in files.items():
        path = tmp_path / "etc-apt" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return str(tmp_path / "etc-apt")


def test_deb822_main_archive_for_other_suites(tmp_path: Path, apt_sources: ModuleType) -> None:
    etc = _etc(tmp_path, {"sources.list.d/debian.sources": DEB822})
    text = apt_sources.sources_list(apt_sources.archive_sources(etc), ["forky", "trixie"])
    assert text == (
        "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://archive.invalid/debian forky main\n"
        "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://archive.invalid/debian trixie main\n"
    )


def test_one_line_sources_keep_their_signed_by(tmp_path: Path, apt_sources: ModuleType) -> None:
    etc = _etc(tmp_path, {"sources.list": (
        "# a comment\n"
        "deb [arch=amd64 signed-by=/etc/apt/keyrings/local.gpg] http://one.invalid/debian/ bookworm main\n"
        "deb http://one.invalid/debian-security bookworm-security main\n"
        "deb-src http://one.invalid/debian bookworm main\n"
    )})
    text = apt_sources.sources_list(apt_sources.archive_sources(etc), ["trixie"])
    assert text == "deb [signed-by=/etc/apt/keyrings/local.gpg] http://one.invalid/debian trixie main\n"


def test_a_host_without_a_debian_archive_exits_3(tmp_path: Path, apt_sources: ModuleType,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    etc = _etc(tmp_path, {"sources.list.d/sec.sources": DEB822.split("\n\n")[1] + "\n"})
    assert apt_sources.main([etc, "forky"]) == 3
    assert "no Debian archive" in capsys.readouterr().err
    assert apt_sources.main([]) == 2
