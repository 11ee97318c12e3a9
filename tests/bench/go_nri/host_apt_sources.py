"""The host's own Debian archive, as its apt configuration names it, written as a private sources.list for
another suite: `make bench-go` fetches Go and the NRI library with `apt-get download` from the mirror and keyring
the machine already trusts, so no mirror host name is written in any file of the project.

Reads deb822 files (`/etc/apt/sources.list.d/*.sources`) and one-line files (`sources.list`,
`sources.list.d/*.list`); keeps the `deb` entries of the main archive (a suite without a dash: `bookworm`, not
`bookworm-security` or `bookworm-updates`, whose URIs serve only their own suites) and prints, for each wanted
suite, `deb [signed-by=KEYRING] URI SUITE main`. Usage: `python3 host_apt_sources.py ETC_APT SUITE...`.
Exit 3 (build.sh's "the network or a download failed") when the host names no Debian archive.
"""

from __future__ import annotations

import glob
import os
import re
import sys
from dataclasses import dataclass

__all__ = ["ArchiveSource", "archive_sources", "parse_deb822", "parse_one_line", "sources_list"]

# apt's own default trust when an entry names no Signed-By: the keyring the debian-archive-keyring package installs.
DEFAULT_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"


@dataclass(frozen=True, slots=True)
class ArchiveSource:
    """One `deb` URI of the host and the keyring apt checks it with ("" = apt's trusted.gpg.d)."""

    uri: str
    signed_by: str
    suites: tuple[str, ...]


def parse_deb822(text: str) -> list[ArchiveSource]:
    """The `deb` stanzas of a .sources file (Enabled: no skipped); continuation lines are folded."""
    out: list[ArchiveSource] = []
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        last = ""
        for line in stanza.splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            if line[0] in " \t" and last:
                fields[last] += " " + line.strip()
                continue
            name, _, value = line.partition(":")
            last = name.strip().lower()
            fields[last] = value.strip()
        if "deb" not in fields.get("types", "").split() or fields.get("enabled", "yes").lower() == "no":
            continue
        signed_by = fields.get("signed-by", "")
        if signed_by.startswith("-----BEGIN"):  # an inline key: apt accepts it only in deb822, so keep the default
            signed_by = ""
        for uri in fields.get("uris", "").split():
            out.append(ArchiveSource(uri.rstrip("/"), signed_by, tuple(fields.get("suites", "").split())))
    return out


_ONE_LINE = re.compile(r"^\s*deb\s+(?:\[(?P<options>[^\]]*)\]\s+)?(?P<uri>\S+)\s+(?P<suite>\S+)")


def parse_one_line(text: str) -> list[ArchiveSource]:
    """The `deb` lines of a one-line-style sources.list."""
    out: list[ArchiveSource] = []
    for line in text.splitlines():
        match = _ONE_LINE.match(line)
        if match is None:
            continue
        options = dict(
            opt.split("=", 1) for opt in (match.group("options") or "").split() if "=" in opt
        )
        out.append(ArchiveSource(match.group("uri").rstrip("/"), options.get("signed-by", ""), (match.group("suite"),)))
    return out


def archive_sources(etc_apt: str) -> list[ArchiveSource]:
    """Every `deb` entry the host's apt configuration under `etc_apt` names, deb822 files first."""
    found: list[ArchiveSource] = []
    for path in sorted(glob.glob(os.path.join(etc_apt, "sources.list.d", "*.sources"))):
        with open(path, encoding="utf-8") as fh:
            found += parse_deb822(fh.read())
    one_line = [os.path.join(etc_apt, "sources.list"), *sorted(glob.glob(os.path.join(etc_apt, "sources.list.d", "*.list")))]
    for path in one_line:
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as fh:
                found += parse_one_line(fh.read())
    return found


def sources_list(sources: list[ArchiveSource], suites: list[str]) -> str:
    """A sources.list for `suites` on the host's main-archive URIs (entries with a dashless suite), one line per
    URI and suite, in the host's order; "" when the host names no such entry."""
    main = [s for s in sources if any("-" not in suite and "/" not in suite for suite in s.suites)]
    lines: list[str] = []
    seen: set[str] = set()
    for source in main:
        if source.uri in seen:
            continue
        seen.add(source.uri)
        keyring = source.signed_by or (DEFAULT_KEYRING if os.path.isfile(DEFAULT_KEYRING) else "")
        option = f"[signed-by={keyring}] " if keyring else ""
        lines += [f"deb {option}{source.uri} {suite} main" for suite in suites]
    return "".join(line + "\n" for line in lines)


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: host_apt_sources.py ETC_APT SUITE...", file=sys.stderr)
        return 2
    text = sources_list(archive_sources(argv[0]), argv[1:])
    if not text:
        print(f"host_apt_sources.py: no Debian archive (a deb entry of a release suite) under {argv[0]}", file=sys.stderr)
        return 3
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
