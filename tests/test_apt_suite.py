"""tests.apt_suite reads the host's own apt configuration (no archive host written in the project): the main
archive entries of the host's release, from deb822 `.sources` and one-line `sources.list` files alike."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.apt_suite import DEFAULT_KEYRING, ArchiveSource, host_archive_sources, sources_list


def _etc(tmp_path: Path, *, sources: str = "", one_line: str = "") -> tuple[Path, Path]:
    etc = tmp_path / "apt"
    (etc / "sources.list.d").mkdir(parents=True)
    if sources:
        (etc / "sources.list.d" / "debian.sources").write_text(sources)
    if one_line:
        (etc / "sources.list").write_text(one_line)
    release = tmp_path / "os-release"
    release.write_text('PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nVERSION_CODENAME=bookworm\n')
    return etc, release


def test_deb822_main_archive_only(tmp_path: Path) -> None:
    etc, release = _etc(tmp_path, sources=(
        "Types: deb\nURIs: http://mirror.invalid/debian\nSuites: bookworm bookworm-updates\nComponents: main\n"
        "Signed-By: /usr/share/keyrings/a.gpg\n\n"
        "Types: deb\nURIs: http://mirror.invalid/debian-security\nSuites: bookworm-security\nComponents: main\n\n"
        "Types: deb-src\nURIs: http://src.invalid/debian\nSuites: bookworm\n\n"
        "Enabled: no\nTypes: deb\nURIs: http://off.invalid/debian\nSuites: bookworm\n"
    ))
    assert host_archive_sources(etc, release) == [ArchiveSource("http://mirror.invalid/debian", "/usr/share/keyrings/a.gpg")]


def test_one_line_entries_with_and_without_options(tmp_path: Path) -> None:
    etc, release = _etc(tmp_path, one_line=(
        "# a comment\n"
        "deb http://plain.invalid/debian bookworm main\n"
        "deb [arch=amd64 signed-by=/k.gpg] http://opts.invalid/debian bookworm main contrib\n"
        "deb http://sec.invalid/debian-security bookworm-security main\n"
        "deb-src http://plain.invalid/debian bookworm main\n"
        "deb [signed-by=/broken.gpg http://broken.invalid/debian bookworm main\n"  # no "]": skipped, not a crash
    ))
    assert host_archive_sources(etc, release) == [
        ArchiveSource("http://plain.invalid/debian", DEFAULT_KEYRING),
        ArchiveSource("http://opts.invalid/debian", "/k.gpg"),
    ]


def test_no_sources_is_an_empty_list_not_an_error(tmp_path: Path) -> None:
    etc, release = _etc(tmp_path)
    assert host_archive_sources(etc, release) == []


def test_a_private_sources_list_for_other_suites(tmp_path: Path) -> None:
    """What `make bench-go` (tests/bench/go_nri/build.sh) writes for forky and trixie: every host archive entry,
    each suite's main, with the entry's keyring."""
    sources = [ArchiveSource("http://mirror.invalid/debian", "/k.gpg"), ArchiveSource("http://two.invalid/d", "/j.gpg")]
    assert sources_list(["forky", "trixie"], sources) == (
        "deb [signed-by=/k.gpg] http://mirror.invalid/debian forky main\n"
        "deb [signed-by=/k.gpg] http://mirror.invalid/debian trixie main\n"
        "deb [signed-by=/j.gpg] http://two.invalid/d forky main\n"
        "deb [signed-by=/j.gpg] http://two.invalid/d trixie main\n"
    )
    assert sources_list(["forky"], []) == ""


def test_the_sources_list_for_another_suite_is_the_hosts_archive_with_that_suite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """What the VM tier's image recipe hands mmdebstrap (`--print-sources`), and `download` hands apt-get."""
    from tests import apt_suite

    monkeypatch.setattr(apt_suite, "host_archive_sources",
                        lambda: [ArchiveSource("http://mirror.invalid/debian", "/k.gpg")])
    assert apt_suite.sources_list("trixie") == "deb [signed-by=/k.gpg] http://mirror.invalid/debian trixie main\n"
    assert apt_suite.main(["--suite", "bookworm", "--print-sources"]) == 0
    assert capsys.readouterr().out == "deb [signed-by=/k.gpg] http://mirror.invalid/debian bookworm main\n"
    monkeypatch.setattr(apt_suite, "host_archive_sources", lambda: [])
    assert apt_suite.main(["--suite", "bookworm", "--print-sources"]) == 1
    assert "no Debian archive source" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # neither a download nor --print-sources: a usage error, not a traceback
        apt_suite.main(["--suite", "bookworm"])
