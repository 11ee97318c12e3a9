"""One process's identity and OOM score, read from `<proc-root>/<pid>/`.

A pid alone does not name a process for long: the kernel hands a freed pid to the next process. The
OOMScoreAdj reconciler records what a process's `oom_score_adj` was before it changed it, and `hookserver
cleanup` may run hours later; it must put the value back on *that* process, never on a stranger that got
the same pid. The pair (pid, start time in clock ticks since boot: field 22 of `/proc/<pid>/stat`) is unique
for the life of a boot, so it is the key both use (`process_key`).

Every reader answers None for a process that is gone (or a file that does not parse): processes exit
between any two reads, and that is never an error here.
"""

from __future__ import annotations

import os

__all__ = ["OOM_SCORE_ADJ_MAX", "OOM_SCORE_ADJ_MIN", "can_lower_oom_scores", "process_key", "read_oom_score_adj",
           "read_start_ticks", "split_process_key"]

# The kernel's range (include/uapi/linux/oom.h): -1000 makes a process immune, 1000 makes it the first victim.
OOM_SCORE_ADJ_MIN = -1000
OOM_SCORE_ADJ_MAX = 1000


def _read(path: str) -> str | None:
    try:
        with open(path, "rb") as handle:
            return handle.read(4096).decode("ascii", errors="replace")
    except OSError:
        return None


def read_start_ticks(proc_root: str, pid: int) -> int | None:
    """Field 22 (starttime) of `/proc/<pid>/stat`, counted after the `)` that ends the command name (a
    name may hold spaces and parentheses itself)."""
    text = _read(os.path.join(proc_root, str(pid), "stat"))
    if text is None or ")" not in text:
        return None
    fields = text.rsplit(")", 1)[1].split()
    # After ")": field 3 (state) is fields[0], so field 22 is fields[19].
    if len(fields) < 20 or not fields[19].isdigit():
        return None
    return int(fields[19])


def read_oom_score_adj(proc_root: str, pid: int) -> int | None:
    text = _read(os.path.join(proc_root, str(pid), "oom_score_adj"))
    if text is None:
        return None
    try:
        return int(text.strip())
    except ValueError:
        return None


_CAP_SYS_RESOURCE = 24  # include/uapi/linux/capability.h


def can_lower_oom_scores(proc_root: str) -> bool:
    """Whether this process holds CAP_SYS_RESOURCE (`CapEff` of `/proc/self/status`). Without it the kernel
    refuses (EACCES) to set a process's oom_score_adj below the floor its last privileged writer left (the
    runtime writes the kubelet's value with the capability), so only raising a score can work. An unreadable
    status answers True: the writes then say for themselves what the kernel allows."""
    text = _read(os.path.join(proc_root, "self", "status"))
    for line in (text or "").splitlines():
        if line.startswith("CapEff:"):
            try:
                return bool(int(line.split(":", 1)[1].strip(), 16) >> _CAP_SYS_RESOURCE & 1)
            except ValueError:
                return True
    return True


def process_key(pid: int, start_ticks: int) -> str:
    """`<pid>@<start ticks>`: the originals key of one process."""
    return f"{pid}@{start_ticks}"


def split_process_key(key: str) -> tuple[int, int] | None:
    """(pid, start ticks) from `process_key`'s text, None for anything else (a hand-edited state file)."""
    pid, sep, start = key.partition("@")
    if not sep or not pid.isdigit() or not start.isdigit():
        return None
    return int(pid), int(start)
