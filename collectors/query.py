"""`hookctl metrics QUERY`: a tiny query language over the time-series store.

    QUERY    := METRIC [ '{' MATCHER (',' MATCHER)* '}' ] [ '[' WINDOW ']' ] [ AGG ]
    MATCHER  := LABEL ( '=' | '!=' | '=~' ) '"' VALUE '"'        (=~ is a full-match regular expression)
    WINDOW   := NUMBER ( 's' | 'm' | 'h' )?                       (default 5m; capped at the retention)
    AGG      := avg | min | max | last | count | p50 | p90 | p95 | p99 | all | raw   (default all)

Examples: `node_cpu_usage[1m] p95`, `pod_cpu_usage{pod="6b2e..."}[5m] avg`,
`pod_memory_usage{qos="BE"} last`, `node_psi{resource="cpu",degree="some",window="avg10"}[10m] max`.

Labels use the store's names (`pod`, `container`, `qos`, `priority`, `device`, ...); the Prometheus names
`pod_uid`, `container_id`, `priority_class` are accepted as aliases. A malformed query raises `InputError`
naming the position, so `hookctl` can show it; nothing is evaluated until the whole query parses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from hookserver.errors import InputError
from hookserver.store.state import StateStore
from hookserver.store.timeseries import AGGREGATES, SeriesKey

from collectors.names import METRICS

__all__ = ["MAX_SERIES", "Matcher", "Query", "parse_query", "query_report"]

MAX_SERIES = 500
DEFAULT_WINDOW_S = 300.0
_ALIASES = {"pod_uid": "pod", "container_id": "container", "priority_class": "priority", "numa_node": "numa"}
_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}
_TOKEN = re.compile(
    r"""\s*(?:
        (?P<name>[A-Za-z_][A-Za-z0-9_]*)
      | (?P<string>"(?:[^"\\]|\\.)*")
      | (?P<window>\[\s*(?P<num>[0-9]+(?:\.[0-9]+)?)\s*(?P<unit>[smh]?)\s*\])
      | (?P<op>=~|!=|=|\{|\}|,)
    )""",
    re.VERBOSE,
)


@dataclass(frozen=True, slots=True)
class Matcher:
    label: str
    op: str
    value: str
    pattern: re.Pattern[str] | None = None

    def matches(self, key: SeriesKey) -> bool:
        actual = key.label(self.label)
        if self.op == "=":
            return actual == self.value
        if self.op == "!=":
            return actual != self.value
        assert self.pattern is not None
        return self.pattern.fullmatch(actual) is not None


@dataclass(frozen=True, slots=True)
class Query:
    metric: str
    matchers: tuple[Matcher, ...]
    window_s: float
    aggregate: str

    def matches(self, key: SeriesKey) -> bool:
        return all(m.matches(key) for m in self.matchers)


def _fail(text: str, pos: int, why: str) -> InputError:
    return InputError(f"{why} at position {pos}: {text[:pos]}>>{text[pos:]}", field="query")


def _tokens(text: str) -> list[tuple[str, str, int]]:
    out: list[tuple[str, str, int]] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            skipped = len(text[pos:]) - len(text[pos:].lstrip())
            raise _fail(text, pos + skipped, "unexpected character")
        kind = match.lastgroup or ""
        if kind in ("num", "unit"):
            kind = "window"
        out.append((kind, match.group(0).strip(), match.start(kind) if kind else pos))
        pos = match.end()
    return out


def parse_query(text: str) -> Query:
    if len(text) > 2000:
        raise InputError("query is longer than 2000 characters", field="query")
    tokens = _tokens(text)
    if not tokens or tokens[0][0] != "name":
        raise _fail(text, tokens[0][2] if tokens else 0, "expected a metric name")
    metric = tokens[0][1]
    i = 1
    matchers: list[Matcher] = []
    if i < len(tokens) and tokens[i][1] == "{":
        i += 1
        while True:
            if i < len(tokens) and tokens[i][1] == "}" and not matchers:
                break
            if i + 2 >= len(tokens) or tokens[i][0] != "name" or tokens[i + 1][0] != "op" or tokens[i + 2][0] != "string":
                raise _fail(text, tokens[i][2] if i < len(tokens) else len(text), 'expected label="value"')
            label = _ALIASES.get(tokens[i][1], tokens[i][1])
            op = tokens[i + 1][1]
            if op not in ("=", "!=", "=~"):
                raise _fail(text, tokens[i + 1][2], f"expected =, != or =~, got {op!r}")
            raw = tokens[i + 2][1][1:-1]
            value = re.sub(r"\\(.)", r"\1", raw)
            pattern = None
            if op == "=~":
                try:
                    pattern = re.compile(value)
                except re.error as exc:
                    raise _fail(text, tokens[i + 2][2], f"bad regular expression ({exc})") from None
            matchers.append(Matcher(label, op, value, pattern))
            i += 3
            if i < len(tokens) and tokens[i][1] == ",":
                i += 1
                continue
            if i < len(tokens) and tokens[i][1] == "}":
                break
            raise _fail(text, tokens[i][2] if i < len(tokens) else len(text), "expected ',' or '}'")
        i += 1
    window_s = DEFAULT_WINDOW_S
    if i < len(tokens) and tokens[i][0] == "window":
        match = _TOKEN.match(text, tokens[i][2])
        assert match is not None
        window_s = float(match.group("num")) * _UNITS[match.group("unit")]
        if window_s <= 0:
            raise _fail(text, tokens[i][2], "window must be positive")
        i += 1
    aggregate = "all"
    if i < len(tokens) and tokens[i][0] == "name":
        aggregate = tokens[i][1]
        if aggregate not in (*AGGREGATES, "all", "raw"):
            raise _fail(text, tokens[i][2], f"unknown aggregate {aggregate!r} (known: {', '.join((*AGGREGATES, 'all', 'raw'))})")
        i += 1
    if i < len(tokens):
        raise _fail(text, tokens[i][2], "unexpected trailing input")
    return Query(metric, tuple(matchers), window_s, aggregate)


def query_report(store: StateStore, query: str) -> dict[str, Any]:
    """Run a query against the store. Raises `InputError` (field 'query') for a malformed query or metric."""
    q = parse_query(query)
    series = store.series
    known = set(series.metrics())
    if q.metric not in known:
        if q.metric in METRICS:
            return _result(q, series.retention_s, [], False)
        choices = ", ".join(sorted(known | set(METRICS)))
        raise InputError(f"unknown metric {q.metric!r} (known: {choices})", field="query")
    keys = series.select(q.metric, q.matches)
    truncated = len(keys) > MAX_SERIES
    rows: list[dict[str, Any]] = []
    for key in keys[:MAX_SERIES]:
        row: dict[str, Any] = {"labels": key.as_dict()}
        if q.aggregate == "raw":
            row["points"] = [[ts, value] for ts, value in series.points(key, q.window_s)]
        else:
            stats = series.window(key, q.window_s)
            if stats is None:
                continue
            if q.aggregate == "all":
                row["stats"] = stats.as_dict()
            else:
                row["value"] = stats.get(q.aggregate)
        rows.append(row)
    return _result(q, series.retention_s, rows, truncated)


def _result(q: Query, retention_s: float, rows: list[dict[str, Any]], truncated: bool) -> dict[str, Any]:
    spec = METRICS.get(q.metric)
    return {
        "metric": q.metric,
        "unit": spec.unit if spec else "",
        "matchers": [f"{m.label}{m.op}{m.value!r}" for m in q.matchers],
        "window_s": min(q.window_s, retention_s),
        "aggregate": q.aggregate,
        "series": rows,
        "truncated": truncated,
    }
