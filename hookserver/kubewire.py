"""Kubernetes wire formats shared by the NodeMetric status, the colocation config and the Node capacity
writer: canonical quantities, Go durations and times. A shared helper outside the layers (every area may use it).

Quantities are printed the way apimachinery's `resource.Quantity` canonicalises what koordlet builds:
CPU as `NewMilliQuantity(milli, DecimalSI)` ("1500m", "2", "0") and memory as `NewQuantity(bytes, BinarySI)`
("512Mi", "3Ki", "1536", and below 1024 the decimal form, e.g. "1k" for 1000). Durations are `metav1.Duration`
strings ("5m0s", "1h0m0s").
"""

from __future__ import annotations

import datetime
import math
import re
from typing import Any

from hookserver.errors import InputError

__all__ = ["cpu_quantity", "decimal_quantity", "format_go_duration", "iso_time", "memory_quantity", "node_owner_references",
           "parse_go_duration"]

_DECIMAL_SUFFIX = {-3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_BINARY_SUFFIX = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")


def _decimal(value: int, exponent: int) -> str:
    if value == 0:
        return "0"
    while value % 1000 == 0 and exponent < 18:
        value //= 1000
        exponent += 3
    return f"{value}{_DECIMAL_SUFFIX[exponent]}"


def cpu_quantity(milli: int) -> str:
    return _decimal(int(milli), -3)


def decimal_quantity(value: int) -> str:
    """`NewQuantity(value, DecimalSI)`: a plain count such as koordlet's GPU core use ("35", "0", "1k")."""
    return _decimal(int(value), 0)


def memory_quantity(num_bytes: int) -> str:
    value = int(num_bytes)
    if -1024 < value < 1024:
        return _decimal(value, 0)
    power = 0
    while value % 1024 == 0 and power < len(_BINARY_SUFFIX) - 1:
        value //= 1024
        power += 1
    return f"{value}{_BINARY_SUFFIX[power]}"


_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_go_duration(text: str, *, field: str = "duration") -> float:
    """Seconds of a Go duration string ("5m", "1h30m", "300ms", "0"). InputError names the field."""
    raw = text.strip()
    if raw in ("0", "+0", "-0"):
        return 0.0
    sign = -1.0 if raw.startswith("-") else 1.0
    body = raw.lstrip("+-")
    if not body:
        raise InputError(f"not a duration: {text!r}", field=field)
    total = 0.0
    pos = 0
    while pos < len(body):
        match = _PART.match(body, pos)
        if match is None:
            raise InputError(f"not a duration: {text!r} (use e.g. 5m, 1h30m, 90s)", field=field)
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    return sign * total


def format_go_duration(seconds: float) -> str:
    """Go's `time.Duration.String()` for whole-second and sub-second values."""
    nanos = round(seconds * 1e9)
    if nanos == 0:
        return "0s"
    sign = "-" if nanos < 0 else ""
    nanos = abs(nanos)
    if nanos < 1_000_000_000:
        for unit, size in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if nanos >= size:
                return f"{sign}{_trim(nanos / size)}{unit}"
    hours, rest = divmod(nanos, 3600 * 10**9)
    minutes, rest = divmod(rest, 60 * 10**9)
    secs = _trim(rest / 1e9)
    if hours:
        return f"{sign}{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{sign}{minutes}m{secs}s"
    return f"{sign}{secs}s"


def _trim(value: float) -> str:
    return f"{value:.9f}".rstrip("0").rstrip(".")


def iso_time(ts: float) -> str | None:
    """Epoch seconds as ISO-8601 UTC with milliseconds, as the rest of hookctl shows times; None for 0 (never)."""
    if not ts or not math.isfinite(ts):
        return None
    moment = datetime.datetime.fromtimestamp(ts, tz=datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def node_owner_references(node_name: str, node_uid: str) -> list[dict[str, Any]]:
    """The `ownerReferences` of an object this agent publishes for its node (the Device and the
    NodeResourceTopology, as koordlet sets them: the Node as controller, `metav1.NewControllerRef`), so the
    apiserver's garbage collector removes it with the Node. None without the Node's uid (not seen yet)."""
    if not node_uid:
        return []
    return [{"apiVersion": "v1", "kind": "Node", "name": node_name, "uid": node_uid, "controller": True,
             "blockOwnerDeletion": True}]
