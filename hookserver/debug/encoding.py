"""Turn what the store and the providers hold into the JSON a debug reply carries.

Providers are written by other areas (NRI, collectors, NodeSLO) and return whatever is natural to
them: frozen dataclasses, mappings, enums, pydantic models. Converting here, once, keeps those areas
free of debug-API code, and an unconvertible value degrades to its `repr` rather than failing the
whole reply.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import json
import math
from collections.abc import Mapping
from typing import Any

__all__ = ["dumps", "format_age", "format_ts", "to_jsonable"]

_MAX_DEPTH = 32


def format_ts(ts: float) -> str:
    """Epoch seconds as ISO-8601 UTC with milliseconds; 0 (never) as an empty string."""
    if not ts or not math.isfinite(ts):
        return ""
    try:
        moment = dt.datetime.fromtimestamp(ts, tz=dt.UTC)
    except (OverflowError, OSError, ValueError):
        return ""
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def format_age(seconds: float) -> str:
    """Like kubectl's AGE column: 42s, 5m12s, 3h4m, 2d5h."""
    if not math.isfinite(seconds) or seconds < 0:
        return "0s"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60}s"
    if s < 86400:
        return f"{s // 3600}h{(s % 3600) // 60}m"
    return f"{s // 86400}d{(s % 86400) // 3600}h"


def to_jsonable(value: Any, _depth: int = 0) -> Any:
    """A structure of dict/list/str/int/float/bool/None equal in content to `value`."""
    if _depth > _MAX_DEPTH:
        return repr(value)
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        # NaN and inf are not JSON; say what they were instead of producing an invalid document.
        return value if math.isfinite(value) else str(value)
    if isinstance(value, enum.Enum):
        return to_jsonable(value.value, _depth + 1)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name), _depth + 1) for f in dataclasses.fields(value)}
    model_dump = getattr(value, "model_dump", None)
    if callable(model_dump) and not isinstance(value, type):
        return to_jsonable(model_dump(mode="json"), _depth + 1)
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v, _depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v, _depth + 1) for v in value]
    if isinstance(value, (set, frozenset)):
        items = [to_jsonable(v, _depth + 1) for v in value]
        return sorted(items, key=repr)
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return repr(value)


def dumps(value: Any) -> str:
    """The reply document. Compact: hookctl re-indents for `-o json`."""
    return json.dumps(to_jsonable(value), separators=(",", ":"), ensure_ascii=False, allow_nan=False)
