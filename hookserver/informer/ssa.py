"""Server-side apply, the part the Node capacity writer and the NodeMetric spec writer share.

Both writers publish into objects other controllers write too (koord-manager's noderesource controller
owns the same Node capacity names when it runs, and renders the NodeMetric spec). Server-side apply with
our own field manager and `force=false` is how they share without fighting: the apiserver records which
manager owns which field, refuses with 409 and a `FieldManagerConflict` cause when we would change a
field another manager owns, and removes a field we stop applying only when nobody else owns it.

Here: the request with client-go's DefaultBackoff for transient failures (429, 5xx and a 409 that is not
a field-manager conflict: 10 ms x5, 4 tries, 10 % jitter; a longer Retry-After is not honoured, the
caller's next round is the longer wait), the parser of the apiserver's conflict Status (its
`details.causes`, else its message), and the fieldsV1 reader that tells which leaves a manager owns.
"""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from hookserver.errors import InformerError

__all__ = [
    "APPLY_PATCH", "ApplyTransport", "Reply", "apply_conflicts", "describe_failure", "is_apply_conflict", "lookup",
    "owned_leaves", "resource_version", "send", "status_message", "value_leaves",
]

APPLY_PATCH = "application/apply-patch+yaml"  # the body is JSON, which is YAML
FIELD_MANAGER_CONFLICT = "FieldManagerConflict"
BACKOFF_S = (0.010, 0.050, 0.250)  # DefaultBackoff: Steps 4, Duration 10 ms, Factor 5, Jitter 0.1

Path = tuple[str, ...]


class ApplyTransport(Protocol):
    def request_json(
        self, method: str, path: str, body: Any = None, *, timeout_s: float, content_type: str = ...,
        params: Mapping[str, str] | None = None,
    ) -> tuple[int, Any]:
        """(HTTP status, decoded body); raises InformerError only when no HTTP answer came."""
        ...


@dataclass(frozen=True, slots=True)
class Reply:
    """The last answer of one request and how many tries it took; status 0 with `error` when no HTTP
    answer came (refused, reset, timed out)."""

    status: int
    body: Any
    attempts: int
    error: str = ""


def send(
    transport: ApplyTransport, method: str, path: str, body: Any = None, *, timeout_s: float,
    sleep: Callable[[float], None] = time.sleep, content_type: str = "application/json",
    params: Mapping[str, str] | None = None,
) -> Reply:
    attempt = 0
    while True:
        attempt += 1
        try:
            status, answer = transport.request_json(method, path, body, timeout_s=timeout_s,
                                                    content_type=content_type, params=params)
        except InformerError as exc:
            if not exc.status:
                return Reply(0, None, attempt, str(exc))
            status, answer = exc.status, {"reason": exc.reason, "message": str(exc)}
        if not _transient(status, answer) or attempt > len(BACKOFF_S):
            return Reply(status, answer, attempt)
        sleep(BACKOFF_S[attempt - 1] * (1 + 0.1 * random.random()))


def _transient(status: int, body: Any) -> bool:
    return status == 429 or status >= 500 or (status == 409 and not is_apply_conflict(body))


def status_message(body: Any) -> str:
    """The Status's message (or reason), or the start of a body that is not a Status."""
    if isinstance(body, Mapping):
        return str(body.get("message") or body.get("reason") or "")
    if isinstance(body, (str, bytes)):
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        return text.strip()[:200]
    return ""


def describe_failure(method: str, path: str, reply: Reply) -> str:
    if reply.status == 0:
        return reply.error
    message = status_message(reply.body)
    tries = f" (after {reply.attempts} tries)" if reply.attempts > 1 else ""
    return f"{method} {path}: HTTP {reply.status}{': ' + message if message else ''}{tries}"


# -- conflicts -------------------------------------------------------------------------------------

_APPLY_FAILED = re.compile(r"^Apply failed with \d+ conflicts?: ", re.S)
_QUOTED = r'"((?:[^"\\]|\\.)*)"'
# printManager (k8s.io/apiserver fieldmanager): "m" for an applier, "m" using v1 [at <RFC 3339>] for an updater.
_WHO = _QUOTED + r"(?: using \S+)?(?: at \S+)?"
_ONE = re.compile(rf"^conflict with {_WHO}: (.+)$", re.S)
_GROUP = re.compile(rf"^conflicts with {_WHO}:$")


def is_apply_conflict(body: Any) -> bool:
    """A 409 of server-side apply (a field another manager owns), not an optimistic-concurrency one."""
    if not isinstance(body, Mapping):
        return False
    if _causes(body):
        return True
    message = body.get("message")
    return isinstance(message, str) and _APPLY_FAILED.match(message) is not None


def _causes(body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    details = body.get("details")
    causes = details.get("causes") if isinstance(details, Mapping) else None
    if not isinstance(causes, list):
        return []
    return [c for c in causes if isinstance(c, Mapping) and c.get("reason") == FIELD_MANAGER_CONFLICT]


def apply_conflicts(body: Any) -> tuple[tuple[str, str], ...]:
    """(manager, field) pairs of an apply conflict, from `details.causes`, else from the message; in the
    apiserver's order, without repeats. Never raises: what cannot be read is left out."""
    if not isinstance(body, Mapping):
        return ()
    found: list[tuple[str, str]] = []
    for cause in _causes(body):
        manager = _manager(cause.get("message"))
        field = cause.get("field")
        if manager is not None and isinstance(field, str) and field:
            found.append((manager, field))
    if not found:
        message = body.get("message")
        if isinstance(message, str):
            found = _from_message(message)
    return tuple(dict.fromkeys(found))


def _manager(text: Any) -> str | None:
    if not isinstance(text, str):
        return None
    match = re.match(rf"^conflict with {_WHO}$", text, re.S)
    return _unquote(match.group(1)) if match else None


def _from_message(message: str) -> list[tuple[str, str]]:
    head = _APPLY_FAILED.match(message)
    if head is None:
        return []
    rest = message[head.end():]
    one = _ONE.match(rest)
    if one is not None and "\n" not in one.group(2):
        return [(_unquote(one.group(1)), one.group(2))]
    found: list[tuple[str, str]] = []
    manager: str | None = None
    for line in rest.split("\n"):
        group = _GROUP.match(line)
        if group is not None:
            manager = _unquote(group.group(1))
        elif line.startswith("- ") and manager is not None and line[2:]:
            found.append((manager, line[2:]))
    return found


def _unquote(quoted: str) -> str:
    """The inside of a Go %q string (JSON's escapes cover what a manager name holds)."""
    try:
        value = json.loads(f'"{quoted}"')
    except ValueError:
        return quoted
    return value if isinstance(value, str) else quoted


# -- managedFields ---------------------------------------------------------------------------------

def owned_leaves(fields_v1: Any, prefix: Path = ()) -> frozenset[Path] | None:
    """The leaf paths a fieldsV1 set owns (`f:<key>` nodes without `f:` children; the "." marks of
    granular maps are not leaves). None when it holds list-item keys (k:, v:, i:) or is malformed:
    the caller then cannot compare and asks the apiserver instead."""
    if not isinstance(fields_v1, Mapping):
        return None
    out: set[Path] = set()
    for key, child in fields_v1.items():
        if key == ".":
            continue
        if not isinstance(key, str) or not key.startswith("f:") or not isinstance(child, Mapping):
            return None
        path = (*prefix, key[2:])
        if any(k != "." for k in child):
            below = owned_leaves(child, path)
            if below is None:
                return None
            out |= below
        else:
            out.add(path)
    return frozenset(out)


def value_leaves(value: Any, prefix: Path = ()) -> dict[Path, Any]:
    """Leaf paths of a JSON value as server-side apply counts them: a non-empty object is a branch;
    anything else (scalars, lists, which are atomic in an unstructured CRD, empty objects) is a leaf."""
    if isinstance(value, Mapping) and value:
        out: dict[Path, Any] = {}
        for key, child in value.items():
            out.update(value_leaves(child, (*prefix, str(key))))
        return out
    return {prefix: value}


def resource_version(obj: Any) -> str:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    rv = meta.get("resourceVersion") if isinstance(meta, Mapping) else None
    return rv if isinstance(rv, str) else ""


def lookup(obj: Any, path: Path) -> tuple[bool, Any]:
    """(True, value) at `path` in nested objects, (False, None) where it is not there."""
    for key in path:
        if not isinstance(obj, Mapping) or key not in obj:
            return False, None
        obj = obj[key]
    return True, obj
