"""The debug socket file: make room for it safely, and remove only our own.

gRPC silently unlinks whatever socket file is at the path when it binds, so without this check a
second hookserver would steal a running one's debug socket. A path that is not a socket (a typo
pointing at a real file) is never removed.
"""

from __future__ import annotations

import logging
import os
import socket
import stat

from hookserver.errors import ConfigError

__all__ = ["prepare_socket_path", "remove_own_socket", "socket_is_live"]

log = logging.getLogger(__name__)

_MAX_SUN_PATH = 107  # sockaddr_un.sun_path is 108 bytes with the terminating NUL
_PROBE_TIMEOUT_S = 0.5


def socket_is_live(path: str) -> bool:
    """True when something accepts connections on the unix socket at `path`."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(_PROBE_TIMEOUT_S)
    try:
        probe.connect(path)
    except OSError:
        return False
    finally:
        probe.close()
    return True


def prepare_socket_path(path: str) -> None:
    """Create the parent directory and remove a stale socket; refuse a live socket or a non-socket."""
    if len(os.fsencode(path)) > _MAX_SUN_PATH:
        raise ConfigError(f"debug socket {path}: path is longer than {_MAX_SUN_PATH} bytes (a unix socket limit)")
    parent = os.path.dirname(path)
    try:
        os.makedirs(parent, mode=0o750, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"debug socket {path}: cannot create {parent}: {exc.strerror}") from exc
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ConfigError(f"debug socket {path}: {exc.strerror}") from exc
    if not stat.S_ISSOCK(st.st_mode):
        raise ConfigError(f"debug socket {path}: exists and is not a socket; refusing to replace it")
    if socket_is_live(path):
        raise ConfigError(f"debug socket {path}: another server is listening on it")
    try:
        os.unlink(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ConfigError(f"debug socket {path}: cannot remove the stale socket: {exc.strerror}") from exc


def remove_own_socket(path: str, inode: int | None) -> None:
    """Unlink `path` if it is still the socket we bound (same inode), not one a successor made."""
    if inode is None:
        return
    try:
        if os.lstat(path).st_ino == inode:
            os.unlink(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        # Shutdown goes on; a leftover socket is replaced as stale on the next start.
        log.warning("debug socket %s: not removed: %s", path, exc.strerror)
