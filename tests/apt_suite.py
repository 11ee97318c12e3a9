"""Debian packages of another suite, through apt-get, with this host's own archive and keyring.

Some tiers need a newer package than the host's suite has (containerd 1.7 with NRI is in Debian 13; this host
may run Debian 12). The rule: packages come through apt, never a URL written in the project. So this module
reads the archive URIs and keyring the host's apt is already configured with (deb822 `.sources` files and
one-line `sources.list`), writes a private sources list for the other suite under a state directory of its
own (never the host's apt state), and runs `apt-get update` and `apt-get download` there.

    python -m tests.apt_suite --suite trixie --dest build/pkgs containerd
    python -m tests.apt_suite --suite bookworm --print-sources   # the list alone (mmdebstrap's input)
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

DEFAULT_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
_NO_SOURCES = "the host's apt has no Debian archive source for its own release (/etc/apt)"


class AptSuiteError(RuntimeError):
    """The host has no usable Debian archive source, or apt-get failed (the message says which)."""


@dataclass(frozen=True)
class ArchiveSource:
    uri: str
    keyring: str


def _host_codename(os_release: Path) -> str:
    for line in os_release.read_text().splitlines():
        if line.startswith("VERSION_CODENAME="):
            return line.split("=", 1)[1].strip().strip('"')
    return ""


def _deb822_stanzas(text: str) -> list[dict[str, str]]:
    stanzas: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if current:
                stanzas.append(current)
            current = {}
            continue
        if line.startswith("#") or line[:1].isspace():
            continue
        key, _, value = line.partition(":")
        current[key.strip().lower()] = value.strip()
    if current:
        stanzas.append(current)
    return stanzas


def host_archive_sources(etc_apt: Path = Path("/etc/apt"), os_release: Path = Path("/etc/os-release")) -> list[ArchiveSource]:
    """The host's main-archive entries: those serving its own release suite (not -security or -updates)."""
    codename = _host_codename(os_release) if os_release.exists() else ""
    found: list[ArchiveSource] = []
    for path in sorted((etc_apt / "sources.list.d").glob("*.sources")) if (etc_apt / "sources.list.d").is_dir() else []:
        for stanza in _deb822_stanzas(path.read_text()):
            if "deb" not in stanza.get("types", "").split() or stanza.get("enabled", "yes").lower() == "no":
                continue
            suites = stanza.get("suites", "").split()
            if codename and codename not in suites:
                continue
            keyring = stanza.get("signed-by", "") or DEFAULT_KEYRING
            found.extend(ArchiveSource(uri, keyring) for uri in stanza.get("uris", "").split())
    one_line = [etc_apt / "sources.list", *sorted((etc_apt / "sources.list.d").glob("*.list"))]
    for path in one_line:
        if not path.is_file():
            continue
        for raw in path.read_text().splitlines():
            words = raw.split("#", 1)[0].split()
            if not words or words[0] != "deb":
                continue
            options = ""
            if len(words) > 1 and words[1].startswith("["):
                end = next((i for i, w in enumerate(words) if w.endswith("]")), None)
                if end is None:
                    continue  # an option list without its "]": apt refuses the line too
                options = " ".join(words[1 : end + 1])
                words = [words[0], *words[end + 1 :]]
            if len(words) < 3 or (codename and words[2] != codename):
                continue
            keyring = DEFAULT_KEYRING
            for option in options.strip("[]").split():
                if option.startswith("signed-by="):
                    keyring = option.split("=", 1)[1]
            found.append(ArchiveSource(words[1], keyring))
    return found


def sources_list(suites: str | list[str], sources: list[ArchiveSource] | None = None) -> str:
    """A private sources list: `main` of each of `suites` (one suite or several) on each of the host's archive
    entries and keyrings (`sources`, read from the host's apt when None); "" when the host has none. What
    `download` gives apt-get, what `make bench-go`'s builder writes, and what the VM tier's image recipe gives
    mmdebstrap (tests/vm/build-image.sh, through `--print-sources`)."""
    found = host_archive_sources() if sources is None else sources
    names = [suites] if isinstance(suites, str) else suites
    return "".join(f"deb [signed-by={s.keyring}] {s.uri} {suite} main\n" for s in found for suite in names)


def _apt_options(state: Path) -> list[str]:
    return [
        "-o", f"Dir::Etc::SourceList={state / 'sources.list'}",
        "-o", "Dir::Etc::SourceParts=/dev/null",
        "-o", f"Dir::State::Lists={state / 'lists'}",
        "-o", f"Dir::Cache={state / 'cache'}",
        "-o", "APT::Sandbox::User=root",
    ]


def download(suite: str, packages: list[str], dest: Path, *, state: Path | None = None) -> list[Path]:
    """`apt-get download` PACKAGES from SUITE (main) into DEST; returns the .deb files written there."""
    sources = host_archive_sources()
    if not sources:
        raise AptSuiteError(_NO_SOURCES)
    state = state or dest / ".apt"
    for sub in ("lists/partial", "cache/archives/partial"):
        (state / sub).mkdir(parents=True, exist_ok=True)
    (state / "sources.list").write_text(sources_list(suite, sources))
    options = _apt_options(state)
    update = subprocess.run(["apt-get", *options, "update", "-q"], capture_output=True, text=True)
    if update.returncode != 0:
        raise AptSuiteError(f"apt-get update for {suite} failed: {update.stderr.strip()[-500:]}")
    dest.mkdir(parents=True, exist_ok=True)
    before = set(dest.glob("*.deb"))
    got = subprocess.run(["apt-get", *options, "download", "-q", *packages], cwd=dest, capture_output=True, text=True)
    if got.returncode != 0:
        raise AptSuiteError(f"apt-get download {' '.join(packages)} from {suite} failed: {got.stderr.strip()[-500:]}")
    return sorted(set(dest.glob("*.deb")) - before) or sorted(dest.glob("*.deb"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", required=True)
    parser.add_argument("--dest", type=Path)
    parser.add_argument("--print-sources", action="store_true", help="print the sources list for --suite and stop")
    parser.add_argument("packages", nargs="*")
    args = parser.parse_args(argv)
    if not args.print_sources and (args.dest is None or not args.packages):
        parser.error("--dest and at least one package are needed (or --print-sources)")
    try:
        if args.print_sources:
            text = sources_list(args.suite)
            if not text:
                raise AptSuiteError(_NO_SOURCES)
            print(text, end="")
            return 0
        for deb in download(args.suite, args.packages, args.dest):
            print(deb)
    except AptSuiteError as exc:
        print(f"apt_suite: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
