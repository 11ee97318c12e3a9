"""`hookctl record export FILE`: a consistent copy of the recording, taken while the agent keeps writing.

SQLite's online backup API copies a snapshot of the database (the WAL included) page by page; the copy is a
plain rollback-journal file (journal_mode DELETE), one file to take off the node.
"""

from __future__ import annotations

import os
import sqlite3

from hookserver.errors import InputError

from hookserver.recorder.schema import explain_sqlite_error

__all__ = ["export_recording"]


def _check_target(dest: str) -> None:
    """Refuse a target the copy could not be renamed to, before copying anything."""
    folder = os.path.dirname(os.path.abspath(dest))
    if os.path.isdir(dest):
        raise InputError(f"{dest} is a directory; give the file to write", field="FILE")
    if not os.path.isdir(folder):
        raise InputError(f"no folder {folder} to write {os.path.basename(dest)} in", field="FILE")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"cannot write in {folder} (permission denied)", field="FILE")


def export_recording(source: str, dest: str) -> int:
    """Copy `source` to `dest` (replaced if it exists) and return the copy's size in bytes. On any failure the
    partial copy (`dest.part`) is removed: nothing half-written is left behind."""
    if not os.path.exists(source):
        raise FileNotFoundError(f"no recording at {source} (is recorder.enabled on, and is this the agent's state_dir?)")
    _check_target(dest)
    tmp = dest + ".part"
    try:
        if os.path.exists(tmp):
            os.unlink(tmp)
        src = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
        try:
            out = sqlite3.connect(tmp)
            try:
                src.backup(out)
                out.execute("PRAGMA journal_mode=DELETE")
            finally:
                out.close()
        finally:
            src.close()
        os.replace(tmp, dest)
    except sqlite3.Error as exc:
        _discard(tmp)
        if "malformed" in str(exc) or "not a database" in str(exc):
            raise explain_sqlite_error(source, exc) from None
        raise InputError(f"cannot write {dest}: SQLite: {' '.join(str(exc).split())}", field="FILE") from None
    except BaseException:
        _discard(tmp)
        raise
    return os.path.getsize(dest)


def _discard(tmp: str) -> None:
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass
