"""What the flight recorder reads from the running agent besides the QoS round: PSI and throttling from the
store's series, pods' creation times, the colocation-config in force and the audit's evictions. The daemon
calls `build_recorder` once; everything here reads snapshots and never blocks on a lock held across I/O.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable, Mapping
from typing import Any

from hookserver.errors import RecorderUnavailable
from hookserver.store.state import StateStore

from hookserver.recorder.settings import RecorderSettings
from hookserver.recorder.writer import EvictionLike, FlightRecorder

__all__ = ["build_recorder", "node_extra"]

_PSI = "node_psi"
_THROTTLED = "pod_cpu_throttled_ratio"


def node_extra(store: StateStore) -> dict[str, float]:
    """Node PSI (every resource/degree/window the collector keeps) and the pods' CPU throttling (mean, max)."""
    out: dict[str, float] = {}
    for key, _ts, value, _interval in store.series.latest(_PSI):
        name = ":".join(v for v in (key.label("psi_resource_type"), key.label("psi_degree"), key.label("psi_precision")) if v)
        out[f"psi:{name}"] = value
    ratios = [value for _key, _ts, value, _interval in store.series.latest(_THROTTLED)]
    if ratios:
        out["throttled:mean"] = sum(ratios) / len(ratios)
        out["throttled:max"] = max(ratios)
    return out


def build_recorder(
    settings: RecorderSettings, *, state_dir: str, node_name: str, store: StateStore,
    predictor: Mapping[str, Any], reconcilers: Mapping[str, Mapping[str, float]],
) -> FlightRecorder:
    """The daemon's recorder. Raises RecorderUnavailable (naming the file) when it cannot be opened: the
    daemon then runs without it (found by `make soak`: on a full state dir the agent exited 1 at start)."""
    def created_at(uid: str) -> float:
        pod = store.snapshot().pods.get(uid)
        return float(pod.created_at or pod.first_seen) if pod is not None else 0.0

    def colocation() -> dict[str, Any] | None:
        resolved = store.snapshot().colocation
        if resolved is None:
            return None
        return {**resolved.strategy.to_json(), "enable": bool(resolved.enabled)}

    def evictions(since: float) -> Iterable[EvictionLike]:
        return store.audit.evictions(since=since)

    path = os.path.join(state_dir, settings.file)
    try:
        return FlightRecorder(
            path, settings, node_name=node_name, extra=lambda: node_extra(store),
            created_at=created_at, colocation=colocation, predictor=predictor, evictions=evictions,
            reconcilers=reconcilers,
        )
    except (sqlite3.Error, OSError) as exc:
        raise RecorderUnavailable(f"flight recorder {path}: {exc}", path=path) from exc
