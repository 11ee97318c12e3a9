"""Temporary files left by a writer that was killed between writing and renaming them.

Writers that name their temporary file after their process id (`node-originals.json.tmp.<pid>.<tid>`,
`.hookserver.json.<pid>.tmp`) never meet their own leftovers again after a kill -9, so without this every
killed agent left one more file behind: growth without bound in the state dir and the runtime proxy's
registration dir (found by `make soak`, tests/soak/writers.py). Only files of processes that no longer exist
are removed: a live writer (a `hookserver cleanup` beside the agent) keeps its file until its rename.
"""

from __future__ import annotations

import logging
import os
import re

__all__ = ["pid_alive", "remove_stale_tmp"]

log = logging.getLogger(__name__)


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists (one we may not signal still exists)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_tmp(directory: str, pattern: re.Pattern[str]) -> list[str]:
    """Remove the files in `directory` whose whole name matches `pattern` (its group `pid` the writer's process
    id) when that process is gone and is not this one. Returns the names removed; errors are logged, never
    raised: a leftover is untidy, not a reason to stop a start."""
    removed: list[str] = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    for name in names:
        match = pattern.fullmatch(name)
        if match is None:
            continue
        pid = int(match.group("pid"))
        if pid == os.getpid() or pid_alive(pid):
            continue
        try:
            os.unlink(os.path.join(directory, name))
        except FileNotFoundError:
            continue
        except OSError as exc:
            log.warning("cannot remove the stale temporary file %s: %s", os.path.join(directory, name), exc)
            continue
        removed.append(name)
    if removed:
        log.info("removed %d temporary file(s) left by killed writers in %s", len(removed), directory)
    return removed
