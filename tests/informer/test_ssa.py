"""What both server-side apply writers share (hookserver/informer/ssa.py): reading the apiserver's conflict
Status (causes first, the message when they are missing or malformed), telling an apply conflict from an
optimistic-concurrency 409, the retry rules, and the fieldsV1 reader."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hookserver.errors import InformerError
from hookserver.informer.ssa import apply_conflicts, is_apply_conflict, owned_leaves, send, value_leaves
from hookserver.informer.transport import _is_json_type

# Field managers are printable (the apiserver validates it); Go's %q leaves printable runes as they are and
# escapes `"` and `\`, as json.dumps(ensure_ascii=False) does.
managers = st.text(alphabet=st.characters(categories=("L", "M", "N", "P", "S"), include_characters=" "),
                   min_size=1, max_size=20)
paths = st.lists(st.text(alphabet="abcdefghijklmnopqrstuvwxyzABC0123456789-_./", min_size=1, max_size=12),
                 min_size=1, max_size=4).map(lambda parts: "".join(f".{p}" for p in parts))
operations = st.sampled_from(["Apply", "Update", "Update-at"])


def who(manager: str, operation: str) -> str:
    """k8s.io/apiserver fieldmanager printManager."""
    quoted = json.dumps(manager, ensure_ascii=False)
    if operation == "Apply":
        return quoted
    return f"{quoted} using v1" + (" at 2026-11-26T01:24:23Z" if operation == "Update-at" else "")


def conflict_status(conflicts: list[tuple[str, str, str]], *, causes: bool = True) -> dict[str, Any]:
    """The apiserver's 409 (NewConflictError + getConflictMessage), from (manager, operation, field)."""
    if len(conflicts) == 1:
        m, op, f = conflicts[0]
        message = f"conflict with {who(m, op)}: {f}"
    else:
        lines: list[str] = []
        for name in sorted({who(m, op) for m, op, _ in conflicts}):
            lines.append(f"conflicts with {name}:")
            lines.extend(f"- {f}" for m, op, f in conflicts if who(m, op) == name)
        message = "\n".join(lines)
    body: dict[str, Any] = {
        "kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Conflict", "code": 409,
        "message": f"Apply failed with {len(conflicts)} conflict{'s' if len(conflicts) > 1 else ''}: {message}"}
    if causes:
        body["details"] = {"causes": [{"reason": "FieldManagerConflict", "message": f"conflict with {who(m, op)}",
                                       "field": f} for m, op, f in conflicts]}
    return body


def grouped(conflicts: list[tuple[str, str, str]]) -> list[tuple[str, str]]:
    """The order the many-conflict message lists them in: by printed manager, then as they came."""
    if len(conflicts) == 1:
        return [(conflicts[0][0], conflicts[0][2])]
    names = sorted({who(m, op) for m, op, _ in conflicts})
    return [(m, f) for name in names for m, op, f in conflicts if who(m, op) == name]


conflict_lists = st.lists(st.tuples(managers, operations, paths), min_size=1, max_size=5,
                          unique_by=lambda c: (c[0], c[2]))


@given(conflict_lists)
def test_causes_give_every_manager_and_field_in_order(conflicts: list[tuple[str, str, str]]) -> None:
    body = conflict_status(conflicts)
    assert is_apply_conflict(body)
    assert apply_conflicts(body) == tuple((m, f) for m, _op, f in conflicts)


@given(conflict_lists)
def test_the_message_alone_gives_the_same_pairs(conflicts: list[tuple[str, str, str]]) -> None:
    body = conflict_status(conflicts, causes=False)
    assert is_apply_conflict(body)
    assert list(apply_conflicts(body)) == list(dict.fromkeys(grouped(conflicts)))


@given(conflict_lists, st.sampled_from(["garbage", [1, 2], {"causes": "x"}, {"causes": [7, {"reason": "Other"}]},
                                        {"causes": [{"reason": "FieldManagerConflict", "message": 3}]}]))
def test_malformed_causes_fall_back_to_the_message(conflicts: list[tuple[str, str, str]], details: Any) -> None:
    body = conflict_status(conflicts, causes=False)
    body["details"] = details
    assert list(apply_conflicts(body)) == list(dict.fromkeys(grouped(conflicts)))


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=30),
                    lambda children: st.lists(children, max_size=3)
                    | st.dictionaries(st.sampled_from(["message", "details", "causes", "reason", "field", "kind"]),
                                      children, max_size=4),
                    max_leaves=25))
def test_any_body_is_read_without_raising(body: Any) -> None:
    found = apply_conflicts(body)
    assert all(isinstance(m, str) and isinstance(f, str) and f for m, f in found)
    assert isinstance(is_apply_conflict(body), bool)


def test_real_server_bodies() -> None:
    """Copied from kube-apiserver 1.20.2 (a Node status apply after koord-manager's merge patch)."""
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": "Conflict",
            "message": "Apply failed with 2 conflicts: conflicts with \"koordinator-manager\" using v1:\n"
                       "- .status.allocatable.kubernetes.io/batch-cpu\n- .status.capacity.kubernetes.io/batch-cpu",
            "details": {"causes": [
                {"reason": "FieldManagerConflict", "message": "conflict with \"koordinator-manager\" using v1",
                 "field": ".status.allocatable.kubernetes.io/batch-cpu"},
                {"reason": "FieldManagerConflict", "message": "conflict with \"koordinator-manager\" using v1",
                 "field": ".status.capacity.kubernetes.io/batch-cpu"}]}, "code": 409}
    expected = (("koordinator-manager", ".status.allocatable.kubernetes.io/batch-cpu"),
                ("koordinator-manager", ".status.capacity.kubernetes.io/batch-cpu"))
    assert apply_conflicts(body) == expected
    del body["details"]
    assert apply_conflicts(body) == expected
    applier = {"reason": "Conflict", "code": 409, "message": "Apply failed with 1 conflict: conflict with "
               "\"hookserver\": .spec.metricCollectPolicy.reportIntervalSeconds"}
    assert apply_conflicts(applier) == (("hookserver", ".spec.metricCollectPolicy.reportIntervalSeconds"),)


def test_an_optimistic_concurrency_conflict_is_not_an_apply_conflict() -> None:
    stale = {"kind": "Status", "reason": "Conflict", "code": 409, "message": 'Operation cannot be fulfilled on '
             'nodes "n": the object has been modified; please apply your changes to the latest version'}
    assert not is_apply_conflict(stale) and apply_conflicts(stale) == ()
    assert not is_apply_conflict("409 conflict") and not is_apply_conflict(None)
    unreadable = {"reason": "Conflict", "message": "Apply failed with 3 conflicts: (truncated)"}
    assert is_apply_conflict(unreadable) and apply_conflicts(unreadable) == ()


class Scripted:
    """A transport that answers from a script: (status, body) or an InformerError."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.calls: list[tuple[str, str, dict[str, Any]]] = []

    def request_json(self, method: str, path: str, body: Any = None, *, timeout_s: float,
                     content_type: str = "application/json", params: Any = None) -> tuple[int, Any]:
        self.calls.append((method, path, {"content_type": content_type, "params": params, "body": body}))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer  # type: ignore[no-any-return]


@pytest.mark.parametrize("first", [(429, {"reason": "TooManyRequests"}), (500, None), (503, "busy"),
                                   (409, {"reason": "Conflict", "message": "the object has been modified"}),
                                   InformerError("PATCH x: HTTP 502", status=502, reason="BadGateway")])
def test_transient_answers_are_retried_with_client_go_backoff(first: Any) -> None:
    sleeps: list[float] = []
    transport = Scripted(first, first, (200, {"ok": 1}))
    reply = send(transport, "PATCH", "/x", {}, timeout_s=1, sleep=sleeps.append)
    assert (reply.status, reply.body, reply.attempts) == (200, {"ok": 1}, 3)
    assert 0.010 <= sleeps[0] <= 0.011 and 0.050 <= sleeps[1] <= 0.055


def test_retries_stop_after_four_tries_and_other_answers_are_final() -> None:
    sleeps: list[float] = []
    reply = send(Scripted(*[(503, None)] * 5), "PATCH", "/x", {}, timeout_s=1, sleep=sleeps.append)
    assert (reply.status, reply.attempts, len(sleeps)) == (503, 4, 3) and sleeps[2] <= 0.275
    for final in [(403, {}), (404, "404 page not found"), (422, {}), (409, {"reason": "Conflict",
                  "details": {"causes": [{"reason": "FieldManagerConflict", "message": 'conflict with "a"',
                                          "field": ".a"}]}})]:
        assert send(Scripted(final), "PATCH", "/x", {}, timeout_s=1, sleep=sleeps.append).attempts == 1
    down = send(Scripted(InformerError("PATCH /x: connection refused")), "PATCH", "/x", {}, timeout_s=1)
    assert (down.status, down.attempts, down.error) == (0, 1, "PATCH /x: connection refused")


def test_fields_v1_leaves_ignore_granular_map_marks() -> None:
    """The real server's shape for an apply to a CRD: '.' marks on every object."""
    fields = {"f:spec": {".": {}, "f:metricCollectPolicy": {".": {}, "f:aggregateDurationSeconds": {},
                                                            "f:nodeAggregatePolicy": {".": {}, "f:durations": {}},
                                                            "f:reportIntervalSeconds": {}}}}
    spec = {"metricCollectPolicy": {"aggregateDurationSeconds": 300, "nodeAggregatePolicy": {"durations": ["5m"]},
                                    "reportIntervalSeconds": 60}}
    assert owned_leaves(fields) == frozenset(value_leaves({"spec": spec}))
    assert owned_leaves({"f:spec": {"f:containers": {'k:{"name":"a"}': {}}}}) is None
    assert owned_leaves(["f:spec"]) is None and owned_leaves({"f:a": "x"}) is None
    assert value_leaves({"a": {}, "b": [1, {"c": 2}]}) == {("a",): {}, ("b",): [1, {"c": 2}]}


@pytest.mark.parametrize(("content_type", "json_type"), [
    ("application/json", True), ("application/merge-patch+json", True), ("application/json-patch+json", True),
    ("application/strategic-merge-patch+json; charset=utf-8", True), ("application/apply-patch+yaml", False),
    ("application/yaml", False)])
def test_which_bodies_the_transport_serializes_itself(content_type: str, json_type: bool) -> None:
    assert _is_json_type(content_type) is json_type
