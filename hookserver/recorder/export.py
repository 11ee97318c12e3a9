"""`hookctl record export FILE`: a consistent copy of the recording, taken while the agent keeps writing.

SQLite's online backup API copies a snapshot of the database (the WAL included) page by page; the copy is a
plain rollback-journal file (journal_mode DELETE), one file to take off the node.
"""

from __future__ import annotations

import os
import sqlite3

__all__ = ["export_recording"]


def export_recording(source: str, dest: str) -> int:
    """Copy `source` to `dest` (replaced if it exists) and return the copy's size in bytes."""
    if not os.path.exists(source):
        raise FileNotFoundError(f"no recording at {source} (is recorder.enabled on, and is this the agent's state_dir?)")
    tmp = dest + ".part"
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
    return os.path.getsize(dest)
