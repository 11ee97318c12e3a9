"""Fault injection inside the agent under soak: loaded by Python's `site` because the campaign puts this
directory first on the agent's PYTHONPATH. Nothing in hookserver knows it is here.

Why a shim and not LD_PRELOAD or a FUSE mount: it needs no compiler or extra package, it sees the exact path
of each open (so faults land on the files the agent writes and nowhere else), and it counts every fault it
injects in a log the campaign compares with the agent's own metrics.

`SOAK_FAULTS` names a JSON control file, re-read when its mtime changes (at most every 0.2 s):
  {"errno": "EIO", "rate": 0.3, "prefixes": ["/sys/fs/cgroup/cpu/hookserver-soak-x"],
   "slow_replace_s": 0.0, "clock_offset_s": 0.0}
Every open for writing is appended to `SOAK_WRITES` (the "no write outside the cgroup root" check); every
injected fault to `SOAK_INJECTED`. `clock_offset_s` shifts `time.time` (wall clock; monotonic never jumps).
"""

from __future__ import annotations

import errno as _errno
import json as _json
import os as _os
import random as _random
import threading as _threading
import time as _time

_CONTROL = _os.environ.get("SOAK_FAULTS", "")
_WRITES = _os.environ.get("SOAK_WRITES", "")
_INJECTED = _os.environ.get("SOAK_INJECTED", "")
_WRITE_FLAGS = _os.O_WRONLY | _os.O_RDWR | _os.O_CREAT | _os.O_TRUNC | _os.O_APPEND

_real_open = _os.open
_real_replace = _os.replace
_real_rename = _os.rename
_real_time = _time.time
_lock = _threading.Lock()
_state: dict[str, object] = {"mtime": 0.0, "checked": 0.0, "spec": {}}
_seen: set[str] = set()


def _spec() -> dict[str, object]:
    now = _time.monotonic()
    if not _CONTROL or now - float(_state["checked"]) < 0.2:  # type: ignore[arg-type]
        return _state["spec"]  # type: ignore[return-value]
    _state["checked"] = now
    try:
        mtime = _os.stat(_CONTROL).st_mtime
        if mtime != _state["mtime"]:
            with open(_CONTROL, encoding="utf-8") as handle:
                _state["spec"] = _json.load(handle)
            _state["mtime"] = mtime
    except (OSError, ValueError):
        pass
    return _state["spec"]  # type: ignore[return-value]


def _append(log: str, line: str) -> None:
    if not log:
        return
    fd = _real_open(log, _os.O_WRONLY | _os.O_APPEND | _os.O_CREAT | _os.O_CLOEXEC, 0o600)
    try:
        _os.write(fd, (line + "\n").encode())
    finally:
        _os.close(fd)


def _open(path, flags, mode=0o777, *, dir_fd=None):  # type: ignore[no-untyped-def]
    if flags & _WRITE_FLAGS and isinstance(path, (str, bytes)) and dir_fd is None:
        where = _os.path.abspath(_os.fsdecode(path))
        if where != _WRITES and where != _INJECTED and where != _CONTROL:
            with _lock:
                if where not in _seen:
                    _seen.add(where)
                    _append(_WRITES, where)
            spec = _spec()
            name = spec.get("errno")
            prefixes = spec.get("prefixes") or []
            if name and any(where.startswith(str(p)) for p in prefixes):  # type: ignore[attr-defined]
                if _random.random() < float(spec.get("rate", 0.0)):  # type: ignore[arg-type]
                    code = getattr(_errno, str(name))
                    _append(_INJECTED, f"{name} {where}")
                    raise OSError(code, _os.strerror(code), where)
    if dir_fd is None:
        return _real_open(path, flags, mode)
    return _real_open(path, flags, mode, dir_fd=dir_fd)


def _slow(src: object) -> None:
    """Widens the window between a temporary file and its rename, so a kill -9 lands there often."""
    delay = float(_spec().get("slow_replace_s", 0.0))  # type: ignore[arg-type]
    if delay > 0:
        _time.sleep(delay)


def _replace(src, dst, *args, **kwargs):  # type: ignore[no-untyped-def]
    _slow(src)
    return _real_replace(src, dst, *args, **kwargs)


def _rename(src, dst, *args, **kwargs):  # type: ignore[no-untyped-def]
    _slow(src)
    return _real_rename(src, dst, *args, **kwargs)


def _time_now() -> float:
    return _real_time() + float(_spec().get("clock_offset_s", 0.0))  # type: ignore[arg-type]


if _CONTROL or _WRITES:
    _os.open = _open
    _os.replace = _replace
    _os.rename = _rename
    _time.time = _time_now
