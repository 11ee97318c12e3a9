"""The flight recorder: keeps, on disk and bounded, what the planners and the predictor read, and what the
agent decided, so a node's day can be replayed elsewhere (`hookctl replay`).

The QoS runner calls `record_round(snapshot, plans)` after each round, on the round's worker thread. A frame is
written every `interval_s`, and for every round whose plan evicts (so the replay sees each eviction's exact
inputs). A frame is one SQLite transaction of ~8 KiB at 200 pods (pods' facts are written once and referenced
by id, their usage and their containers' values packed into two blobs), so recording costs a few milliseconds
of CPU per frame (3.2 ms measured on a loaded machine: 0.03 % of a core at one frame per 10 s). A failure is
counted and logged once; it never fails the QoS round.

Bounded two ways: frames older than `retention_s` go, and while the file is larger than `max_mib` the oldest
tenth goes; freed pages are returned with an incremental vacuum. The config in force at the oldest kept frame
is kept with it.
"""

from __future__ import annotations

import array
import logging
import math
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from qos.framework.plan import QoSPlan
from qos.snapshot.kernel import PodKernel
from qos.snapshot.model import PodFacts, QoSSnapshot

from hookserver.aio.hotgate import pause, paced
from hookserver.recorder.codec import (
    PodUsage,
    dumps,
    encode_frame,
    encode_pod,
    node_to_json,
    pack_misc,
    pack_pods,
    pod_key,
    slo_to_json,
    tier_to_json,
    topology_to_json,
)
from hookserver.recorder.decisions import REPLAYED, decision_of
from hookserver.recorder.kernel_codec import dynamic_of, layout_to_json, pack_values, static_key, static_of
from hookserver.recorder.states import KEPT, encode_state
from hookserver.recorder.schema import open_write
from hookserver.recorder.settings import RecorderSettings

__all__ = ["EvictionLike", "FlightRecorder"]

log = logging.getLogger(__name__)

_EPSILON_S = 0.05
_PRUNE_EVERY = 60  # frames between retention checks (10 minutes at the default interval)


class EvictionLike(Protocol):
    """An audit eviction record (hookserver.store.audit.EvictionRecord), read-only."""

    @property
    def ts(self) -> float: ...
    @property
    def reconciler(self) -> str: ...
    @property
    def pod_key(self) -> str: ...
    @property
    def pod_uid(self) -> str: ...
    @property
    def reason(self) -> str: ...
    @property
    def message(self) -> str: ...
    @property
    def status(self) -> str: ...


class FlightRecorder:
    """One recording file, one writer. Thread-safe (one lock); `close()` checkpoints the WAL."""

    def __init__(
        self,
        path: str,
        settings: RecorderSettings | None = None,
        *,
        node_name: str = "",
        extra: Callable[[], Mapping[str, float]] | None = None,
        created_at: Callable[[str], float] | None = None,
        colocation: Callable[[], Mapping[str, Any] | None] | None = None,
        predictor: Mapping[str, Any] | None = None,
        evictions: Callable[[float], Iterable[EvictionLike]] | None = None,
        started_at: float | None = None,
        reconcilers: Mapping[str, Mapping[str, float]] | None = None,
    ) -> None:
        """`extra()`: node series to keep per frame (PSI, throttling); `created_at(uid)`: a pod's creation time
        (the predictor's cold start); `colocation()`: the colocation strategy in force (camelCase JSON);
        `predictor`: the predictor's settings; `evictions(since)`: the audit's eviction records; `reconcilers`: name -> interval_s and cooldown_s."""
        self.path = path
        self.settings = settings or RecorderSettings()
        self._extra = extra
        self._created_at = created_at
        self._colocation = colocation
        self._evictions = evictions
        self._lock = threading.Lock()
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self._conn = open_write(path)
        self._pod_ids: dict[str, int] = {}
        # facts (as a tuple, no JSON) -> row id: a pod whose facts did not change costs a tuple and a lookup
        self._pod_by_key: dict[tuple[Any, ...], int] = {}
        self._pod_last: dict[int, float] = {}
        self._config_text: dict[str, str] = {}
        self._pods_seen: dict[str, tuple[str, str, bool]] = {}
        self._last_periodic = -math.inf
        self._last_eviction_ts = 0.0
        # the state each kept reconciler's next round starts from (its last plan's; `states.py`)
        self._round_state: dict[str, Any] = {}
        self._since_prune = 0
        self.frames = 0
        self.errors = 0
        self.last_error = ""
        self.last_error_at: float | None = None
        self.write_s = 0.0  # wall time spent writing frames
        self.write_cpu_s = 0.0  # CPU time of it (this thread's): the cost on a busy node
        started = time.time() if started_at is None else started_at
        meta = {"node": node_name, "interval_s": str(self.settings.interval_s), "agent_started_at": repr(started)}
        with self._conn:
            self._conn.execute("BEGIN")
            for key, value in meta.items():
                self._conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))
            if reconcilers is not None:
                self._conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('reconcilers', ?)",
                                   (dumps({k: dict(v) for k, v in reconcilers.items()}),))
            if predictor is not None:
                self._conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('predictor', ?)", (dumps(dict(predictor)),))
            self._conn.execute("COMMIT")
        for row in self._conn.execute("SELECT id, digest, last_ts FROM pod_facts"):
            self._pod_ids[row[1]] = row[0]
            self._pod_last[row[0]] = row[2]
        for kind, body in self._conn.execute(
                "SELECT kind, body FROM config c WHERE ts = (SELECT MAX(ts) FROM config WHERE kind = c.kind)"):
            self._config_text[kind] = body

    # -- the runner's hook --------------------------------------------------------------------------------
    def record_round(self, snapshot: QoSSnapshot, plans: Sequence[QoSPlan]) -> bool:
        """Write a frame when one is due or a plan evicts. Never raises: a failure is counted and logged once."""
        evicts = any(p.evictions for p in plans if p.reconciler in REPLAYED)
        periodic = snapshot.now - self._last_periodic >= self.settings.interval_s - _EPSILON_S
        started_from = dict(self._round_state)
        for p in plans:  # what the runner commits (Reconciler.commit's default, which these two keep)
            if p.reconciler in KEPT and p.state is not None:
                self._round_state[p.reconciler] = p.state
        if not evicts and not periodic:
            return False
        try:
            self.record_frame(snapshot, plans, started_from)
            if periodic:  # a frame for an eviction does not move the periodic grid
                self._last_periodic = snapshot.now
            return True
        except (sqlite3.Error, OSError, ValueError) as exc:
            self.errors += 1
            message = f"{type(exc).__name__}: {exc}"
            if message != self.last_error:
                log.warning("flight recorder: cannot write %s: %s", self.path, message)
            self.last_error = message
            self.last_error_at = snapshot.now
            return False

    def record_frame(self, snapshot: QoSSnapshot, plans: Sequence[QoSPlan],
                     started_from: Mapping[str, Any] | None = None) -> None:
        """One frame of `snapshot` and its `plans`; `started_from`: the state each of `states.KEPT` planned
        from (None: not known, as for a frame written outside the runner's rounds)."""
        t0, c0 = time.perf_counter(), time.thread_time()
        now = snapshot.now
        kpods = snapshot.kernel.pods
        with self._lock:
            conn = self._conn
            conn.execute("BEGIN")
            try:
                self._write_config(now, snapshot)
                # The hot gate between slices of pods (no hook takes this lock or the database).
                usages = [PodUsage(self._pod_id(p, now, kpods.get(p.uid)), p.cpu_usage_cores, p.memory_usage_bytes)
                          for p in paced(snapshot.pods, every=8)]
                pause()
                values: array.array[float] = array.array("d")
                for p in snapshot.pods:
                    pk = kpods.get(p.uid)
                    if pk is not None:
                        dynamic_of(pk, values)
                kernel_blob = pack_values(values) if kpods else None
                self._write_lifecycle(now, snapshot)
                pause()
                row = encode_frame(snapshot, self._extra() if self._extra is not None else {})
                pause()
                row.misc["decisions"] = {p.reconciler: decision_of(p).text() for p in plans if p.reconciler in REPLAYED}
                if started_from is not None:
                    states = {name: encode_state(name, started_from.get(name)) for name in KEPT}
                    row.misc["states"] = {name: body for name, body in states.items() if body is not None}
                conn.execute("INSERT OR REPLACE INTO frames (ts, node_cpu, node_memory, misc, pods, kernel) "
                             "VALUES (?, ?, ?, ?, ?, ?)",
                             (row.ts, row.node_cpu, row.node_memory, pack_misc(row.misc), pack_pods(usages), kernel_blob))
                self._write_evictions()
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            self.frames += 1
            self._since_prune += 1
            if self._since_prune >= _PRUNE_EVERY:
                self._since_prune = 0
                self._prune_locked(now)
        self.write_s += time.perf_counter() - t0
        self.write_cpu_s += time.thread_time() - c0

    # -- parts --------------------------------------------------------------------------------------------
    def _set_config(self, now: float, kind: str, value: Any) -> None:
        text = dumps(value)
        if self._config_text.get(kind) != text:
            self._conn.execute("INSERT INTO config (ts, kind, body) VALUES (?, ?, ?)", (now, kind, text))
            self._config_text[kind] = text

    def _write_config(self, now: float, snap: QoSSnapshot) -> None:
        self._set_config(now, "slo", {"spec": slo_to_json(snap.slo), "sources": dict(snap.slo_sources)})
        self._set_config(now, "node", node_to_json(snap.node))
        self._set_config(now, "be_tier", tier_to_json(snap.be_tier))
        self._set_config(now, "topology", topology_to_json(snap.topology))
        self._set_config(now, "gates", None if snap.feature_gates is None else dict(snap.feature_gates))
        self._set_config(now, "collect_interval_s", snap.collect_interval_s)
        self._set_config(now, "kernel", layout_to_json(snap.kernel))
        if self._colocation is not None:
            self._set_config(now, "colocation", self._colocation())

    def _pod_id(self, pod: PodFacts, now: float, kernel: PodKernel | None = None) -> int:
        key = pod_key(pod, None if kernel is None else static_key(kernel))
        pid = self._pod_by_key.get(key)
        if pid is not None:
            self._pod_last[pid] = now
            return pid
        created = self._created_at(pod.uid) if self._created_at is not None else 0.0
        digest, body = encode_pod(pod, created, None if kernel is None else static_of(kernel))
        pid = self._pod_ids.get(digest)
        if pid is None:
            cur = self._conn.execute(
                "INSERT INTO pod_facts (digest, uid, body, first_ts, last_ts) VALUES (?, ?, ?, ?, ?)",
                (digest, pod.uid, body, now, now))
            pid = int(cur.lastrowid or 0)
            self._pod_ids[digest] = pid
        self._pod_by_key[key] = pid
        self._pod_last[pid] = now
        return pid

    def _write_lifecycle(self, now: float, snap: QoSSnapshot) -> None:
        seen: dict[str, tuple[str, str, bool]] = {}
        events: list[tuple[float, str, str, str]] = []
        for pod in snap.pods:
            state = (pod.key, pod.phase, pod.terminating)
            seen[pod.uid] = state
            before = self._pods_seen.get(pod.uid)
            if before is None:
                events.append((now, pod.uid, pod.key, f"appeared {pod.phase or '(no phase)'}"))
            elif before != state:
                if before[1] != pod.phase:
                    events.append((now, pod.uid, pod.key, f"phase {before[1] or '-'} -> {pod.phase or '-'}"))
                if pod.terminating and not before[2]:
                    events.append((now, pod.uid, pod.key, "terminating"))
        for uid, state in self._pods_seen.items():
            if uid not in seen:
                events.append((now, uid, state[0], "gone"))
        self._pods_seen = seen
        if events:
            self._conn.executemany("INSERT INTO pod_events (ts, uid, pod_key, event) VALUES (?, ?, ?, ?)", events)

    def _write_evictions(self) -> None:
        if self._evictions is None:
            return
        rows = [e for e in self._evictions(self._last_eviction_ts) if e.ts > self._last_eviction_ts]
        if not rows:
            return
        self._conn.executemany(
            "INSERT INTO evictions (ts, reconciler, pod_uid, pod_key, reason, status, message) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(e.ts, e.reconciler, e.pod_uid, e.pod_key, e.reason, e.status, e.message) for e in rows])
        self._last_eviction_ts = max(e.ts for e in rows)

    # -- bounds -------------------------------------------------------------------------------------------
    def size_bytes(self) -> int:
        """The database file plus its WAL."""
        total = 0
        for suffix in ("", "-wal"):
            try:
                total += os.path.getsize(self.path + suffix)
            except OSError:
                pass
        return total

    def prune(self, now: float) -> None:
        with self._lock:
            self._prune_locked(now)

    def _prune_locked(self, now: float) -> None:
        conn = self._conn
        # flush the pods' last-seen times, then drop by age, then by size
        conn.executemany("UPDATE pod_facts SET last_ts = ? WHERE id = ?", [(ts, pid) for pid, ts in self._pod_last.items()])
        cutoff = now - self.settings.retention_s
        self._drop_before(cutoff)
        limit = self.settings.max_mib * 1024 * 1024
        for _ in range(10):
            pages, page_size, free = (conn.execute(f"PRAGMA {p}").fetchone()[0]
                                      for p in ("page_count", "page_size", "freelist_count"))
            if (pages - free) * page_size <= limit:
                break
            row = conn.execute("SELECT MIN(ts), MAX(ts) FROM frames").fetchone()
            if row[0] is None or row[0] == row[1]:
                break
            self._drop_before(row[0] + (row[1] - row[0]) / 10)
        conn.executescript("PRAGMA incremental_vacuum;")  # sqlite3_exec steps it to the end (execute: one page)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def _drop_before(self, cutoff: float) -> None:
        conn = self._conn
        conn.execute("BEGIN")
        conn.execute("DELETE FROM frames WHERE ts < ?", (cutoff,))
        conn.execute("DELETE FROM evictions WHERE ts < ?", (cutoff,))
        conn.execute("DELETE FROM pod_events WHERE ts < ?", (cutoff,))
        # keep the newest config row of each kind at or before the cutoff: it is what the first kept frame ran under
        conn.execute("""DELETE FROM config WHERE ts < ? AND ts < (
                            SELECT MAX(c2.ts) FROM config c2 WHERE c2.kind = config.kind AND c2.ts <= ?)""",
                     (cutoff, cutoff))
        gone = [r[0] for r in conn.execute("SELECT id FROM pod_facts WHERE last_ts < ?", (cutoff,))]
        gone = [pid for pid in gone if self._pod_last.get(pid, 0.0) < cutoff]
        conn.executemany("DELETE FROM pod_facts WHERE id = ?", [(pid,) for pid in gone])
        conn.execute("COMMIT")
        for pid in gone:
            self._pod_last.pop(pid, None)
        self._pod_ids = {d: i for d, i in self._pod_ids.items() if i in self._pod_last}
        self._pod_by_key = {k: i for k, i in self._pod_by_key.items() if i in self._pod_last}

    def describe(self) -> dict[str, Any]:
        return {"path": self.path, "frames": self.frames, "errors": self.errors, "last_error": self.last_error,
                "bytes": self.size_bytes(), "write_ms_per_frame": round(1000 * self.write_s / max(self.frames, 1), 3),
                "write_cpu_ms_per_frame": round(1000 * self.write_cpu_s / max(self.frames, 1), 3)}

    def status(self) -> dict[str, Any]:
        """For `hookctl status`: the file, its size, the frames it holds and their span, and the last write error
        (frames are counted in the file, so frames kept from before a restart count; `written` is this run's)."""
        with self._lock:
            try:
                count, oldest, newest = self._conn.execute("SELECT COUNT(*), MIN(ts), MAX(ts) FROM frames").fetchone()
            except sqlite3.Error as exc:  # the status says so; it never fails the status call
                count, oldest, newest = None, None, None
                problem = f"{type(exc).__name__}: {exc}"
            else:
                problem = ""
        return {"state": "recording", "file": self.path, "bytes": self.size_bytes(), "frames": count,
                "oldest_frame_at": oldest, "newest_frame_at": newest, "written": self.frames,
                "errors": self.errors, "last_error": self.last_error or problem or None,
                "last_error_at": self.last_error_at}

    def close(self) -> None:
        with self._lock:
            try:
                self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            finally:
                self._conn.close()
