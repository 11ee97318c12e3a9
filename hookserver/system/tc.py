"""The traffic-control tree of one network interface as `tc` shows it, and the node's default-route interface.

`tc -j` gives JSON for qdiscs and filters, but iproute2 (6.1 at least) prints htb classes as text even with
`-j`, so classes are parsed from either. Rates are bits per second; tc prints them in SI units (`50Mbit`,
`33333Kbit`, `1600bit`), from the kernel's bytes-per-second value, so a value read back may differ from the
one written by rounding: compare with `rates_match`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

__all__ = [
    "Runner",
    "TcClass",
    "default_route_interface",
    "parse_classes",
    "parse_filter_prefs",
    "parse_rate",
    "parse_root_qdisc",
    "rates_match",
    "run_tc",
]

_UNITS = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "tbit": 10**12,
          "bps": 8, "kbps": 8 * 10**3, "mbps": 8 * 10**6, "gbps": 8 * 10**9}
_RATE = re.compile(r"^([0-9]+(?:\.[0-9]+)?)([a-zA-Z]*)$")


# How a command is run: (argv, timeout) -> (exit status, output). Tests pass a fake.
Runner = Callable[[Sequence[str], float], tuple[int, str]]


def run_tc(argv: Sequence[str], timeout_s: float) -> tuple[int, str]:
    """Run a command without a shell; (exit status, stderr+stdout). A missing binary or a timeout is status 127
    / 124 with the reason, never an exception."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s, check=False)
    except FileNotFoundError as exc:
        return 127, f"{argv[0]}: not installed ({exc.strerror})"
    except subprocess.TimeoutExpired:
        return 124, f"timed out after {timeout_s} s"
    return done.returncode, (done.stderr + done.stdout).strip()



@dataclass(frozen=True, slots=True)
class TcClass:
    classid: str
    parent: str  # "root" for a class at the top
    rate_bps: int
    ceil_bps: int
    prio: int = 0


def parse_rate(text: str | int | float) -> int:
    """bits/s from tc's notation (`50Mbit`, `1600bit`, `12Kbps` = bytes); a bare number is bits/s."""
    if isinstance(text, (int, float)):
        return int(text)
    m = _RATE.match(text.strip())
    if m is None or m.group(2).lower() not in (*_UNITS, ""):
        raise ValueError(f"not a tc rate: {text!r}")
    return int(float(m.group(1)) * _UNITS.get(m.group(2).lower(), 1))


def rates_match(a: int, b: int) -> bool:
    """Equal within tc's printing and the kernel's bytes/s rounding (0.5 % or 8 bits)."""
    return abs(a - b) <= max(8, max(a, b) // 200)


def parse_root_qdisc(text: str) -> tuple[str, str]:
    """(kind, handle) of the root qdisc from `tc -j qdisc show dev X`; ("", "") when none is listed."""
    for entry in _json_list(text):
        if entry.get("root"):
            return str(entry.get("kind", "")), str(entry.get("handle", ""))
    return "", ""


def parse_classes(text: str) -> Mapping[str, TcClass]:
    """classid -> class, from `tc [-j] class show dev X` (JSON when tc gives it, else its text lines)."""
    out: dict[str, TcClass] = {}
    stripped = text.strip()
    if stripped.startswith("["):
        for e in _json_list(stripped):
            if e.get("class") != "htb" and e.get("kind", "htb") != "htb":
                continue
            cid = str(e.get("handle", ""))
            prio = str(e.get("prio", "0"))
            out[cid] = TcClass(cid, str(e.get("parent", "root")), parse_rate(str(e.get("rate", "0"))),
                               parse_rate(str(e.get("ceil", "0"))), int(prio) if prio.isdigit() else 0)
        return MappingProxyType(out)
    for line in stripped.splitlines():
        words = line.split()
        if len(words) < 3 or words[0] != "class" or words[1] != "htb":
            continue
        fields = dict(zip(words[3::1], words[4::1]))
        parent = "root" if "root" in words[3:5] else fields.get("parent", "root")
        out[words[2]] = TcClass(words[2], parent, parse_rate(fields.get("rate", "0")), parse_rate(fields.get("ceil", "0")),
                                int(fields.get("prio", "0")) if fields.get("prio", "0").isdigit() else 0)
    return MappingProxyType(out)


def parse_filter_prefs(text: str, kind: str) -> frozenset[int]:
    """The preferences of the filters of `kind` (e.g. "cgroup") from `tc -j filter show dev X`."""
    prefs = (str(e.get("pref", "")) for e in _json_list(text) if e.get("kind") == kind)
    return frozenset(int(p) for p in prefs if p.isdigit())


def default_route_interface(proc_root: str) -> str:
    """The interface of the IPv4 default route (`<proc>/net/route`, destination 00000000), "" when none."""
    try:
        with open(os.path.join(proc_root, "net", "route"), encoding="ascii", errors="replace") as handle:
            lines = handle.read().splitlines()[1:]
    except OSError:
        return ""
    for line in lines:
        fields = line.split()
        if len(fields) > 2 and fields[1] == "00000000":
            return fields[0]
    return ""


def _json_list(text: str) -> list[dict[str, object]]:
    try:
        doc = json.loads(text) if text.strip() else []
    except ValueError:
        return []
    return [e for e in doc if isinstance(e, dict)] if isinstance(doc, list) else []
