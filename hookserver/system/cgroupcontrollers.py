"""Which cgroup v2 controllers a cgroup has: the ones its parent hands down in `cgroup.subtree_control`.

A controller the parent does not hand down has no files in the child (`cpuset.cpus` is ENOENT in
`kubepods-besteffort.slice` until something turns cpuset on below `kubepods.slice`). That is a state of the node,
not a failed write: readers ask here first, so planners leave such cgroups out and say once why, and they pick
the cgroup up again on the round after the controller appears. On v1 each controller is its own hierarchy, so
"missing" there is the cgroup's directory missing in that hierarchy (the caller checks that).
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from hookserver.system.files import read_text

__all__ = ["missing_controllers", "subtree_control", "with_controller"]


def subtree_control(cgroup_dir: str) -> frozenset[str] | None:
    """The controllers this v2 cgroup hands to its children; None when the file cannot be read (not a v2
    cgroup, gone, or a fixture tree without it): unknown, which callers treat as "nothing missing"."""
    text = read_text(os.path.join(cgroup_dir, "cgroup.subtree_control"))
    if text is None:
        return None
    return frozenset(text.split())


def missing_controllers(root: str, rel: str, wanted: Iterable[str]) -> frozenset[str]:
    """The `wanted` controllers that cgroup `rel` (under the v2 mount `root`) does not get from its parent."""
    rel = rel.strip("/")
    parent = os.path.dirname(rel)
    handed = subtree_control(os.path.join(root, parent) if parent else root)
    if handed is None:
        return frozenset()
    return frozenset(c for c in wanted if c not in handed)


def with_controller(root: str, levels: tuple[tuple[str, ...], ...], controller: str) -> tuple[tuple[str, ...], ...]:
    """`levels` (cgroup dirs by depth under the v2 mount `root`, the first level's parents left unchecked) without
    the dirs whose parent does not hand `controller` down; a level left empty ends the tuple (nothing below it
    can have the controller either). One read per parent."""
    handed: dict[str, bool] = {}

    def has(rel: str) -> bool:
        parent = os.path.dirname(rel)
        if parent not in handed:
            got = subtree_control(os.path.join(root, parent))
            handed[parent] = got is None or controller in got
        return handed[parent]

    out: list[tuple[str, ...]] = []
    for depth, level in enumerate(levels):
        kept = level if depth == 0 else tuple(d for d in level if has(d))
        if not kept:
            break
        out.append(kept)
    return tuple(out)
