"""The flight recorder's part of `hookctl status`: on or off (and why), its file, size, frames and their span,
and the last write error.

Why its own function: an operator who finds no recording on a node (or a stale one) asks first whether the
recorder is on, where it writes and when it last wrote; the daemon's status answered only "recording" and a
count of this run's frames. The daemon's status provider calls `recorder_status` (hookserver.wiring.views).
"""

from __future__ import annotations

from typing import Any

from hookserver.recorder.writer import FlightRecorder

__all__ = ["recorder_status"]


def recorder_status(recorder: FlightRecorder | None, problem: str) -> dict[str, Any]:
    """`recorder`: the daemon's (None: off); `problem`: why it could not be opened ("" when it was not asked)."""
    if recorder is not None:
        return recorder.status()
    if problem:
        return {"state": "unavailable", "reason": problem}
    return {"state": "disabled"}
