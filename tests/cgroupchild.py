"""A Python child started inside real cgroups, for tests that measure what the kernel charges it.

On cgroup v1 memory charged before a process moves stays where it was charged, so a child moved after
it started can leave its allocations outside the cgroup when the parent is slow to move it (a slow moment
once failed two real-cgroup tests together). Here the shell moves itself first, then execs Python.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["spawn_inside"]


def spawn_inside(procs_files: list[Path], code: str, **popen: Any) -> subprocess.Popen[bytes]:
    """`python -c code`, in the cgroups whose `cgroup.procs` files are given before its first instruction."""
    moves = "; ".join(f'echo $$ > "{path}"' for path in procs_files)
    return subprocess.Popen(["/bin/sh", "-c", f'{moves} && exec "$0" -c "$1"', sys.executable, code], **popen)
