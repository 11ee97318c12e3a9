"""The registration file koord-runtime-proxy discovers hook servers by (reference §2.3).

The proxy watches its hookserver dir and reloads every `*.json` in it, so the file is written only after
the server listens, and atomically: a temporary name the proxy ignores (no `.json` suffix), fsync,
rename, fsync of the directory. A temporary file left by a killed agent (named after its process id) is
removed at the next write, so restarts do not pile them up in the proxy's directory. On shutdown it is removed only if it still holds what we wrote: a
newer instance that took over the same name keeps its registration.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from hookserver.errors import ConfigError
from hookserver.system.staletmp import remove_stale_tmp

__all__ = ["Registration", "render_registration"]

log = logging.getLogger(__name__)

_FILE_MODE = 0o644


def render_registration(*, remote_endpoint: str, failure_policy: str, runtime_hooks: Iterable[str]) -> str:
    """Tab-indented JSON with koordlet's keys, in koordlet's order."""
    doc = {
        "remote-endpoint": remote_endpoint,
        "failure-policy": failure_policy,
        "runtime-hooks": list(runtime_hooks),
    }
    return json.dumps(doc, indent="\t") + "\n"


@dataclass(frozen=True, slots=True)
class Registration:
    """One registration file: where it lives and what it says."""

    path: Path
    content: str

    @classmethod
    def build(
        cls, *, directory: str, name: str, remote_endpoint: str, failure_policy: str, runtime_hooks: Iterable[str]
    ) -> Registration:
        if not name or "/" in name or name in (".", ".."):
            raise ConfigError(f"hook.registration_name: {name!r} is not a plain file name")
        return cls(
            path=Path(directory) / f"{name}.json",
            content=render_registration(
                remote_endpoint=remote_endpoint, failure_policy=failure_policy, runtime_hooks=runtime_hooks
            ),
        )

    def write(self) -> None:
        """Create the directory if needed and replace the file atomically. Raises ConfigError naming the path."""
        directory = self.path.parent
        tmp = directory / f".{self.path.name}.{os.getpid()}.tmp"
        try:
            directory.mkdir(parents=True, exist_ok=True)
            remove_stale_tmp(str(directory), re.compile(re.escape(f".{self.path.name}.") + r"(?P<pid>[0-9]+)\.tmp"))
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, _FILE_MODE)
            try:
                os.write(fd, self.content.encode())
                os.fsync(fd)
            finally:
                os.close(fd)
            os.chmod(tmp, _FILE_MODE)  # the umask must not narrow what the proxy may read
            os.replace(tmp, self.path)
            _fsync_dir(directory)
        except OSError as exc:
            with contextlib.suppress(OSError):  # best effort: the directory itself may be what failed
                tmp.unlink(missing_ok=True)
            raise ConfigError(f"registration file {self.path}: {exc.strerror or exc}") from exc
        log.info("registered with koord-runtime-proxy: %s", self.path)

    def remove(self) -> bool:
        """Remove the file if it is still ours (same content). Returns whether it was removed."""
        try:
            current = self.path.read_text()
        except FileNotFoundError:
            return False
        except OSError as exc:
            log.warning("registration file %s: cannot read it back to remove it: %s", self.path, exc.strerror or exc)
            return False
        if current != self.content:
            log.info("registration file %s was replaced by someone else; leaving it", self.path)
            return False
        try:
            self.path.unlink()
        except FileNotFoundError:
            return False
        except OSError as exc:
            log.warning("registration file %s: cannot remove it: %s", self.path, exc.strerror or exc)
            return False
        return True


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
