"""Reading a recording back: frames as the QoSSnapshots the agent planned on, with the config in force at each
and the decisions the agent recorded for it. Read-only; nothing here knows about planners.
"""

from __future__ import annotations

import bisect
import json
import os
import sqlite3
import struct
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from qos.snapshot.kernel import PodKernel
from qos.snapshot.model import PodFacts, QoSSnapshot

from hookserver.recorder.codec import (
    decode_pod,
    decode_snapshot,
    node_from_json,
    slo_from_json,
    topology_from_json,
    unpack_misc,
    unpack_pod_arrays,
)
from hookserver.recorder.decisions import Decision
from hookserver.recorder.kernel_codec import KernelTemplate, kernel_facts, layout_from_json, unpack_values
from hookserver.recorder.schema import RecordingError, explain_sqlite_error, has_kernel_column, open_read

__all__ = ["Frame", "Recording", "open_recording"]

_POD_SLOTS = tuple((PodFacts.__dict__[f.name].__set__, f.name) for f in fields(PodFacts)
                   if f.name not in ("cpu_usage_cores", "memory_usage_bytes"))
_SET_CPU = PodFacts.__dict__["cpu_usage_cores"].__set__
_SET_MEMORY = PodFacts.__dict__["memory_usage_bytes"].__set__


@dataclass(frozen=True, slots=True)
class Frame:
    snapshot: QoSSnapshot
    extra: Mapping[str, float]
    colocation: Mapping[str, Any] | None
    decisions: Mapping[str, Decision] = field(default_factory=dict)
    # the state CPU burst and memory QoS started the round from (`states.py`); None: not recorded (format 1)
    states: Mapping[str, Any] | None = None


class _Timeline:
    """Values by time: the one in force at `ts` is the last set at or before it (the first, before that)."""

    def __init__(self, rows: list[tuple[float, Any]]) -> None:
        self.ts = [r[0] for r in rows]
        self.values = [r[1] for r in rows]

    def at(self, ts: float) -> Any:
        if not self.values:
            return None
        i = bisect.bisect_right(self.ts, ts) - 1
        return self.values[max(i, 0)]


# What decoding a damaged row raises: a bad zlib stream, a short packed blob, bad JSON or UTF-8 (ValueError,
# pydantic's ValidationError too), a facts id or field that is not there.
_DECODE_ERRORS = (zlib.error, struct.error, ValueError, KeyError, IndexError, TypeError)


def _undecodable(path: str, what: str, exc: Exception) -> RecordingError:
    text = " ".join(str(exc).split())[:200]
    return RecordingError(f"{path}: cannot decode {what} ({type(exc).__name__}: {text}): a corrupted copy; "
                          "export it again with `hookctl record export`")


class Recording:
    def __init__(self, path: str) -> None:
        self.path = path
        self._conn = open_read(path)
        try:
            self._load()
        except _DECODE_ERRORS as exc:
            self._conn.close()
            raise _undecodable(path, "its config or pod facts", exc) from None
        except BaseException:
            self._conn.close()
            raise

    def _load(self) -> None:
        self.meta = {k: v for k, v in self._conn.execute("SELECT key, value FROM meta")}
        self._config: dict[str, _Timeline] = {}
        rows: dict[str, list[tuple[float, Any]]] = {}
        for ts, kind, body in self._conn.execute("SELECT ts, kind, body FROM config ORDER BY ts"):
            rows.setdefault(kind, []).append((ts, json.loads(body)))
        for kind, values in rows.items():
            self._config[kind] = _Timeline(values)
        self.pod_bodies: dict[int, dict[str, Any]] = {
            pid: json.loads(body) for pid, body in self._conn.execute("SELECT id, body FROM pod_facts")}
        self._templates: dict[int, PodFacts] = {}
        self._kernel_templates: dict[int, KernelTemplate | None] = {}
        self._kernel_column = has_kernel_column(self._conn)
        self.created_at: dict[str, float] = {}
        for body in self.pod_bodies.values():
            if body.get("created_at"):
                self.created_at[body["uid"]] = body["created_at"]
        self._decoded: dict[str, dict[int, Any]] = {}

    @property
    def node_name(self) -> str:
        return str(self.meta.get("node", ""))

    @property
    def agent_started_at(self) -> float:
        return float(self.meta.get("agent_started_at", "0") or 0)

    @property
    def reconciler_settings(self) -> dict[str, dict[str, float]]:
        """The replayed reconcilers' interval and cool-down as the agent ran them."""
        return json.loads(self.meta["reconcilers"]) if "reconcilers" in self.meta else {}

    @property
    def predictor_settings(self) -> dict[str, Any]:
        return json.loads(self.meta["predictor"]) if "predictor" in self.meta else {}

    def config_history(self, kind: str) -> list[tuple[float, Any]]:
        """Every value of one config kind the recording holds, with the time it took effect, oldest first."""
        timeline = self._config.get(kind)
        return list(zip(timeline.ts, timeline.values)) if timeline is not None else []

    def config_at(self, kind: str, ts: float) -> Any:
        timeline = self._config.get(kind)
        return timeline.at(ts) if timeline is not None else None

    def span(self) -> tuple[float, float, int]:
        lo, hi, n = self._conn.execute("SELECT MIN(ts), MAX(ts), COUNT(*) FROM frames").fetchone()
        return float(lo or 0.0), float(hi or 0.0), int(n)

    def evictions(self) -> list[dict[str, Any]]:
        cols = ("ts", "reconciler", "pod_uid", "pod_key", "reason", "status", "message")
        return [dict(zip(cols, row)) for row in self._conn.execute(
            f"SELECT {', '.join(cols)} FROM evictions ORDER BY ts")]

    def pod_events(self) -> list[tuple[float, str, str, str]]:
        return list(self._conn.execute("SELECT ts, uid, pod_key, event FROM pod_events ORDER BY ts"))

    def _cached(self, kind: str, ts: float, decode: Any, as_: str = "") -> Any:
        """Decoded config values, decoded once per distinct row."""
        timeline = self._config.get(kind)
        if timeline is None or not timeline.values:
            return decode(None)
        i = max(bisect.bisect_right(timeline.ts, ts) - 1, 0)
        cache = self._decoded.setdefault(as_ or kind, {})
        if i not in cache:
            cache[i] = decode(timeline.values[i])
        return cache[i]

    def _pod(self, facts_id: int, cpu: float | None, memory: float | None) -> PodFacts:
        """The pod's facts with this frame's usage. Built through the slots' member descriptors from a decoded
        template: a day of 200 pods is 1.7 million of these, and `dataclasses.replace` took a third of a replay."""
        template = self._templates.get(facts_id)
        if template is None:
            template = decode_pod(self.pod_bodies[facts_id], None, None)
            self._templates[facts_id] = template
        pod: PodFacts = object.__new__(PodFacts)
        for setter, name in _POD_SLOTS:
            setter(pod, getattr(template, name))
        _SET_CPU(pod, cpu)
        _SET_MEMORY(pod, memory)
        return pod

    def _kernel_template(self, facts_id: int) -> KernelTemplate | None:
        if facts_id not in self._kernel_templates:
            body = self.pod_bodies[facts_id]
            static = body.get("kernel")
            self._kernel_templates[facts_id] = None if static is None else KernelTemplate(body["uid"], static)
        return self._kernel_templates[facts_id]

    def _kernel_pods(self, facts_ids: list[int], blob: bytes) -> dict[str, PodKernel]:
        """The frame's per-container values, in the pods' order, onto each pod's recorded containers."""
        values = unpack_values(blob)
        out: dict[str, PodKernel] = {}
        at = 0
        for facts_id in facts_ids:
            template = self._kernel_template(facts_id)
            if template is None:
                continue
            if at + template.width > len(values):
                raise IndexError(f"container values end at {len(values)}, pod {template.uid} needs {at + template.width}")
            out[template.uid] = template.build(values, at)
            at += template.width
        if at != len(values):
            raise ValueError(f"{len(values) - at} container values left over")
        return out

    def frames(self) -> Iterator[Frame]:
        """The frames in time order. A frame that does not decode is a RecordingError naming it."""
        kernel = "kernel" if self._kernel_column else "NULL"
        for ts, misc_blob, blob, kernel_blob in self._conn.execute(
                f"SELECT ts, misc, pods, {kernel} FROM frames ORDER BY ts"):
            try:
                frame = self._frame(ts, misc_blob, blob, kernel_blob)
            except _DECODE_ERRORS as exc:
                raise _undecodable(self.path, f"the frame at {ts!r}", exc) from None
            yield frame

    def _frame(self, ts: float, misc_blob: bytes, blob: bytes, kernel_blob: bytes | None) -> Frame:
        misc = unpack_misc(misc_blob)
        slo_body = self.config_at("slo", ts)
        slo = self._cached("slo", ts, lambda v: slo_from_json(v["spec"]) if v else slo_from_json({}), "slo-spec")
        ids, values = unpack_pod_arrays(blob)
        n = len(ids)
        pod = self._pod
        pods = tuple(pod(ids[i], None if values[i] != values[i] else values[i],
                         None if values[n + i] != values[n + i] else values[n + i]) for i in range(n))
        layout = self._cached("kernel", ts, layout_from_json)
        if kernel_blob is not None:
            layout = kernel_facts(layout, self._kernel_pods(list(ids), kernel_blob))
        snap = decode_snapshot(
            ts, misc, pods, slo=slo, slo_sources=(slo_body or {}).get("sources", {}),
            node=self._cached("node", ts, node_from_json), tier_layout=self.config_at("be_tier", ts),
            topology=self._cached("topology", ts, topology_from_json), gates=self.config_at("gates", ts),
            collect_interval_s=float(self.config_at("collect_interval_s", ts) or 1.0), kernel=layout,
        )
        decisions = {name: Decision.parse(name, text) for name, text in misc.get("decisions", {}).items()}
        return Frame(snap, misc.get("extra", {}), self.config_at("colocation", ts), decisions, misc.get("states"))

    def close(self) -> None:
        self._conn.close()


def open_recording(path: str) -> Recording:
    """A recording checked before a replay starts: a file (not a directory, not empty), SQLite that SQLite finds
    sound (`PRAGMA quick_check`), of this format, with at least one frame. RecordingError otherwise, one line."""
    if not os.path.exists(path):
        raise RecordingError(f"{path}: no such file")
    if os.path.isdir(path):
        raise RecordingError(f"{path}: a directory, not a recording file")
    if os.path.getsize(path) == 0:
        raise RecordingError(f"{path}: an empty file, not a recording")
    recording: Recording | None = None
    try:
        recording = Recording(path)
        problems = [row[0] for row in recording._conn.execute("PRAGMA quick_check")]
        if problems != ["ok"]:
            raise RecordingError(f"{path}: SQLite found the recording malformed ({'; '.join(map(str, problems[:3]))}): "
                                 "a truncated or corrupted copy; export it again with `hookctl record export`")
        if recording.span()[2] == 0:
            raise RecordingError(f"{path}: a recording without frames (the agent had not recorded a round yet)")
    except sqlite3.Error as exc:
        if recording is not None:
            recording.close()
        raise explain_sqlite_error(path, exc) from None
    except BaseException:
        if recording is not None:
            recording.close()
        raise
    return recording
