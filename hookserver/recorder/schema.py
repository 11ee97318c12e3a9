"""The recording's SQLite schema, and how a recording is opened (writer: WAL; reader: read-only).

One file, standard-library `sqlite3`: WAL with `synchronous=NORMAL` makes every frame its own transaction,
so a kill -9 of the agent loses at most the frame being written, and a reader (an export, a replay on the
node) never blocks the writer. `auto_vacuum=INCREMENTAL` lets rotation give pages back to the file system.

Tables:
  meta        key -> value: format version, node, interval, when the agent started.
  config      what was in force from `ts` on, by kind (slo, node, be_tier, topology, gates, colocation, predictor).
  pod_facts   a pod's facts (labels, requests, phase, ...) without its usage; a new row when they change.
  frames      one per recorded round: node usage, BE stats, the BE tier's cpuset and quota, PSI/throttling
              and what each replayed reconciler decided on that snapshot (`decisions.py`), as compressed JSON
              (`misc`); the pods' usage as one packed blob (facts id, CPU cores, memory bytes per pod); from
              format 2 on, `kernel`: the containers' values (CPU, memory, throttled ratio, CFS quota and
              burst; `kernel_codec.py`), NULL in a format-1 frame.
  evictions   what the agent's evictions came to (from its audit).
  pod_events  pod lifecycle: appeared, phase changes, terminating, gone.
"""

from __future__ import annotations

import sqlite3

from hookserver.errors import InputError

__all__ = ["FORMAT_VERSION", "READABLE_FORMATS", "RecordingError", "explain_sqlite_error", "has_kernel_column",
           "open_read", "open_write"]

# 2: per-container values (`frames.kernel`) and the containers' static facts in `pod_facts`. A format-1 file
# still replays (its frames have no container part); the writer upgrades one in place (one new column).
FORMAT_VERSION = 2
READABLE_FORMATS = ("1", "2")

_DDL = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS config (ts REAL NOT NULL, kind TEXT NOT NULL, body TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS config_ts ON config (kind, ts);
CREATE TABLE IF NOT EXISTS pod_facts (
    id INTEGER PRIMARY KEY, digest TEXT NOT NULL UNIQUE, uid TEXT NOT NULL, body TEXT NOT NULL,
    first_ts REAL NOT NULL, last_ts REAL NOT NULL);
CREATE TABLE IF NOT EXISTS frames (
    ts REAL PRIMARY KEY, node_cpu REAL, node_memory REAL, misc BLOB NOT NULL, pods BLOB NOT NULL, kernel BLOB);
CREATE TABLE IF NOT EXISTS evictions (
    ts REAL NOT NULL, reconciler TEXT NOT NULL, pod_uid TEXT NOT NULL, pod_key TEXT NOT NULL,
    reason TEXT NOT NULL, status TEXT NOT NULL, message TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS pod_events (ts REAL NOT NULL, uid TEXT NOT NULL, pod_key TEXT NOT NULL, event TEXT NOT NULL);
"""


def open_write(path: str) -> sqlite3.Connection:
    """Open (or create) a recording for writing. The caller serialises access (one lock per recorder)."""
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    try:
        conn.execute("PRAGMA auto_vacuum=INCREMENTAL")  # effective only on a new file: before the first table
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.executescript(_DDL)
        if not has_kernel_column(conn):  # a format-1 file: its old frames keep NULL there
            conn.execute("ALTER TABLE frames ADD COLUMN kernel BLOB")
        conn.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('format', ?)", (str(FORMAT_VERSION),))
        conn.execute("UPDATE meta SET value = ? WHERE key = 'format' AND value = '1'", (str(FORMAT_VERSION),))
    except BaseException:
        conn.close()  # a full disk or a foreign file: no half-open handle left behind
        raise
    return conn


def has_kernel_column(conn: sqlite3.Connection) -> bool:
    """Whether the frames table has format 2's `kernel` column."""
    return any(row[1] == "kernel" for row in conn.execute("PRAGMA table_info(frames)"))


class RecordingError(InputError):
    """A file that is not a readable recording: one line naming the file and what is wrong with it."""


def explain_sqlite_error(path: str, exc: sqlite3.Error) -> RecordingError:
    """SQLite's own words kept ("database disk image is malformed"), with what they mean for a recording."""
    text = " ".join(str(exc).split())
    if "malformed" in text:
        return RecordingError(f"{path}: SQLite found the recording malformed ({text}): a truncated or corrupted "
                              "copy; export it again with `hookctl record export`")
    if "not a database" in text:
        return RecordingError(f"{path}: not an SQLite database ({text}), so not a flight recording")
    return RecordingError(f"{path}: SQLite cannot read it: {text}")


def open_read(path: str) -> sqlite3.Connection:
    """Open a recording read-only (a replay never changes the file it reads). RecordingError if it is not one
    of this format: not SQLite, malformed, SQLite without our tables, or another format version."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
    except sqlite3.Error as exc:
        raise explain_sqlite_error(path, exc) from None
    try:
        try:
            row = conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
        except sqlite3.Error as exc:
            if "no such table" in str(exc):
                raise RecordingError(f"{path}: an SQLite database without a recording's tables, "
                                     "not a hookserver flight recording") from None
            raise explain_sqlite_error(path, exc) from None
        if row is None:
            raise RecordingError(f"{path}: no format mark, not a hookserver flight recording")
        if str(row[0]) not in READABLE_FORMATS:
            raise RecordingError(f"{path}: a flight recording of format {row[0]!s:.20}; this hookserver reads "
                                 f"formats {' and '.join(READABLE_FORMATS)}")
    except BaseException:
        conn.close()
        raise
    return conn
