"""A Python child started inside real cgroups, for tests that measure what the kernel charges it, and the
removal of such a cgroup once the child is killed.

On cgroup v1 memory charged before a process moves stays where it was charged, so a child moved after
it started can leave its allocations outside the cgroup when the parent is slow to move it (a slow moment
once failed two real-cgroup tests together). Here the shell moves itself first, then execs Python.
"""

from __future__ import annotations

import errno
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["rmdir_patiently", "spawn_inside"]


def spawn_inside(procs_files: list[Path], code: str, **popen: Any) -> subprocess.Popen[bytes]:
    """`python -c code`, in the cgroups whose `cgroup.procs` files are given before its first instruction."""
    moves = "; ".join(f'echo $$ > "{path}"' for path in procs_files)
    return subprocess.Popen(["/bin/sh", "-c", f'{moves} && exec "$0" -c "$1"', sys.executable, code], **popen)


def rmdir_patiently(path: Path, patience_s: float = 5.0) -> None:
    """rmdir a cgroup whose last task was just killed: the kernel answers EBUSY until the task has left.
    Gone already is fine; any other error, or EBUSY past `patience_s`, is raised."""
    deadline = time.monotonic() + patience_s
    while path.exists():
        try:
            path.rmdir()
        except FileNotFoundError:
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                raise
            time.sleep(0.02)
