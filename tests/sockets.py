"""Whether a unix socket takes connections: the tests that start an agent or a runtime wait on it.

One helper for all of them (five copies before). A stale socket file from a killed process exists but refuses
connections, so the file's existence says nothing.
"""

from __future__ import annotations

import socket
from pathlib import Path

__all__ = ["accepts"]


def accepts(path: Path | str) -> bool:
    """A connection to the unix socket at `path` is accepted now."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        try:
            sock.connect(str(path))
        except OSError:
            return False
    return True
