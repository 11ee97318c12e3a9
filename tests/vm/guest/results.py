"""What the guest tests hand the host through the results share: numbers (timings.json) and evidence files.

Why files: the host-side test reports the tier's benchmark (boot to agent-ready, reaction to systemd resets)
from what the guest saw, and the guest's clock is the only one that knows when the guest booted; a failure's
evidence (the agent's log, its write audit) is gone with the guest unless it is saved here.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

__all__ = ["record", "save", "uptime_s"]


def uptime_s() -> float:
    """Seconds since the guest's kernel started."""
    return float(Path("/proc/uptime").read_text().split()[0])


def _out() -> Path | None:
    out = os.environ.get("VM_TIER_OUT")
    return Path(out) if out else None


def save(name: str, text: str) -> None:
    """Keep `text` as the results share's file `name` (no-op outside the VM tier)."""
    out = _out()
    if out is not None:
        (out / name).write_text(text)


def record(name: str, value: object) -> None:
    """Add `name` to the results share's timings.json (no-op outside the VM tier)."""
    out = _out()
    if out is None:
        return
    path = out / "timings.json"
    doc = json.loads(path.read_text()) if path.exists() else {}
    doc[name] = value
    path.write_text(json.dumps(doc, indent=1, sort_keys=True))
