"""The filesystem side of our unix sockets (hook socket, debug socket): make room safely, remove only ours.

gRPC silently unlinks whatever is at the path when it binds, so without these checks a second
hookserver would steal a running one's socket. A stale socket (a killed agent's) is replaced; a live
one, or a path that is not a socket (a typo pointing at a real file), is refused with a ConfigError
that names the setting, so startup fails with one clear line.
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


def prepare_socket_path(path: str, *, setting: str) -> None:
    """Create the parent directory and remove a stale socket; refuse a live socket or a non-socket.

    `setting` names the configuration key in every error (e.g. `hook.socket`)."""
    if len(os.fsencode(path)) > _MAX_SUN_PATH:
        raise ConfigError(f"{setting}: {path} is longer than {_MAX_SUN_PATH} bytes (a unix socket limit)")
    parent = os.path.dirname(path)
    try:
        os.makedirs(parent, mode=0o750, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"{setting}: cannot create the directory of {path}: {exc.strerror or exc}") from exc
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ConfigError(f"{setting}: cannot inspect {path}: {exc.strerror or exc}") from exc
    if not stat.S_ISSOCK(st.st_mode):
        raise ConfigError(f"{setting}: {path} exists and is not a socket; refusing to replace it")
    if socket_is_live(path):
        raise ConfigError(f"{setting}: another server is listening on {path}; refusing to take it over")
    log.info("replacing stale socket %s", path)
    try:
        os.unlink(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ConfigError(f"{setting}: cannot remove the stale socket {path}: {exc.strerror or exc}") from exc


def remove_own_socket(path: str, inode: int | None) -> None:
    """Unlink `path` if it is still the socket we bound (same inode), not one a successor made."""
    if inode is None:
        return
    try:
        st = os.lstat(path)
        if stat.S_ISSOCK(st.st_mode) and st.st_ino == inode:
            os.unlink(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        # Shutdown goes on; a leftover socket is replaced as stale on the next start.
        log.warning("socket %s: not removed: %s", path, exc.strerror or exc)
