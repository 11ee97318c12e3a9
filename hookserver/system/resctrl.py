"""resctrl text: whether a group's `schemata` already holds the lines we want.

resctrl prints L3 masks without leading zeros and every domain of a resource on one line
(`L3:0=7ff;1=7ff`); a write may name a subset of resources. Shared by the QoS planner (skip a line that
holds) and the system-file executor (read-before-write).
"""

from __future__ import annotations

__all__ = ["schemata_holds"]


def schemata_holds(current: str, wanted: str) -> bool:
    """Whether every `RES:dom=val;dom=val` entry of `wanted` is in `current` (values compared as hex for
    L3, as text otherwise; resctrl prints L3 masks without leading zeros, e.g. `7ff`)."""
    have: dict[tuple[str, str], str] = {}
    for line in current.splitlines():
        name, _, rest = line.strip().partition(":")
        for item in rest.split(";"):
            dom, _, val = item.strip().partition("=")
            if dom:
                have[(name.strip(), dom.strip())] = val.strip()
    for line in wanted.splitlines():
        name, _, rest = line.strip().partition(":")
        for item in rest.split(";"):
            dom, _, val = item.strip().partition("=")
            if not dom:
                continue
            cur = have.get((name.strip(), dom.strip()))
            if cur is None:
                return False
            if name.strip().startswith("L3") or name.strip().startswith("L2"):
                try:
                    if int(cur, 16) != int(val.strip(), 16):
                        return False
                    continue
                except ValueError:
                    return False
            if cur != val.strip():
                return False
    return True
