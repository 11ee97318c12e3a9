"""The fake apiserver's field-ownership model does what kube-apiserver 1.20 was seen doing (the same
sequences run against the real server in tests/kube/test_node_capacity_kube.py), so writer tests against
the fake mean something."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest

from tests.informer.conftest import NODE, TOKEN
from tests.informer.fake_apiserver import FakeApiServer, make_node
from tests.informer.fake_ssa import ManagedFields, json_patch

BATCH = "kubernetes.io/batch-cpu"


def node_apply(values: dict[str, str] | None) -> dict[str, Any]:
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}}
    if values is not None:
        body["status"] = {"capacity": dict(values), "allocatable": dict(values)}
    return body


def owners(fake: FakeApiServer, path: tuple[str, ...]) -> list[str]:
    return fake.managed_fields("nodes", NODE).owners(path)


ALLOC = ("status", "allocatable", BATCH)
CAP = ("status", "capacity", BATCH)


def test_apply_owns_what_it_applied_and_serves_managed_fields(fake: FakeApiServer) -> None:
    fake.apply("nodes", make_node(NODE))
    code, obj = fake.apply_as("hookserver", "nodes", NODE, node_apply({BATCH: "1500"}), subresource="status")
    assert code == 200 and obj["status"]["allocatable"][BATCH] == "1500" and obj["status"]["capacity"][BATCH] == "1500"
    assert obj["status"]["allocatable"]["cpu"] == "7800m"  # what it did not apply is untouched
    entry = obj["metadata"]["managedFields"][0]
    assert (entry["manager"], entry["operation"], entry["fieldsV1"]) == ("hookserver", "Apply", {
        "f:status": {"f:allocatable": {f"f:{BATCH}": {}}, "f:capacity": {f"f:{BATCH}": {}}}})
    assert fake.get("nodes", NODE)["metadata"]["managedFields"] == obj["metadata"]["managedFields"]


def test_a_no_op_keeps_the_resource_version(fake: FakeApiServer) -> None:
    fake.apply("nodes", make_node(NODE))
    _, first = fake.apply_as("hookserver", "nodes", NODE, node_apply({BATCH: "1500"}), subresource="status")
    _, again = fake.apply_as("hookserver", "nodes", NODE, node_apply({BATCH: "1500"}), subresource="status")
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    code, _ = fake.update_as("koordinator-manager", "nodes", NODE, {"status": {"allocatable": {BATCH: "1500"}}})
    assert code == 200 and owners(fake, ALLOC) == ["hookserver"]  # an update that changes nothing takes nothing


def test_an_update_takes_what_it_changed_and_apply_then_conflicts(fake: FakeApiServer) -> None:
    fake.apply("nodes", make_node(NODE))
    fake.apply_as("hookserver", "nodes", NODE, node_apply({BATCH: "1500"}), subresource="status")
    fake.update_as("koordinator-manager", "nodes", NODE, {"status": {"allocatable": {BATCH: "1600"}}})
    assert owners(fake, ALLOC) == ["koordinator-manager"] and owners(fake, CAP) == ["hookserver"]
    code, status = fake.apply_as("hookserver", "nodes", NODE, node_apply({BATCH: "1500"}), subresource="status")
    assert code == 409
    assert status["message"] == ('Apply failed with 1 conflict: conflict with "koordinator-manager" using v1: '
                                 f".status.allocatable.{BATCH}")
    assert status["details"]["causes"] == [{"reason": "FieldManagerConflict", "field": f".status.allocatable.{BATCH}",
                                            "message": 'conflict with "koordinator-manager" using v1'}]
    assert fake.get("nodes", NODE)["status"]["allocatable"][BATCH] == "1600"
    code, _ = fake.apply_as("hookserver", "nodes", NODE, node_apply({BATCH: "1500"}), subresource="status", force=True)
    assert code == 200 and owners(fake, ALLOC) == ["hookserver"]


def test_same_value_is_shared_and_survives_the_others_withdrawal(fake: FakeApiServer) -> None:
    fake.apply("nodes", make_node(NODE))
    fake.update_as("koordinator-manager", "nodes", NODE,
                   {"status": {"allocatable": {BATCH: "1500"}, "capacity": {BATCH: "1500"}}})
    code, _ = fake.apply_as("hookserver", "nodes", NODE, node_apply({BATCH: "1500"}), subresource="status")
    assert code == 200 and owners(fake, ALLOC) == ["hookserver", "koordinator-manager"]
    fake.apply_as("hookserver", "nodes", NODE, node_apply(None), subresource="status")
    assert fake.get("nodes", NODE)["status"]["allocatable"][BATCH] == "1500"  # koord-manager still owns it
    assert owners(fake, ALLOC) == ["koordinator-manager"]


def test_multi_conflict_message_groups_by_manager(fake: FakeApiServer) -> None:
    fake.apply("nodes", make_node(NODE))
    fake.update_as("koordinator-manager", "nodes", NODE,
                   {"status": {"allocatable": {BATCH: "1"}, "capacity": {BATCH: "1"}}})
    code, status = fake.apply_as("hookserver", "nodes", NODE, node_apply({BATCH: "2"}), subresource="status")
    assert code == 409 and status["message"] == (
        'Apply failed with 2 conflicts: conflicts with "koordinator-manager" using v1:\n'
        f"- .status.allocatable.{BATCH}\n- .status.capacity.{BATCH}")


def test_status_apply_does_not_create_but_main_resource_apply_does(fake: FakeApiServer) -> None:
    assert fake.apply_as("hookserver", "nodes", NODE, node_apply({BATCH: "1"}), subresource="status")[0] == 404
    metric = {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric", "metadata": {"name": NODE},
              "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 60}}}
    code, obj = fake.apply_as("hookserver", "nodemetrics", NODE, metric)
    assert code == 201 and obj["metadata"]["uid"] and obj["spec"] == metric["spec"]
    assert fake.apply_as("hookserver", "nodemetrics", NODE, {**metric, "status": {"x": 1}})[1].get("status") is None


def _http(fake: FakeApiServer, method: str, path: str, body: Any, content_type: str,
          agent: str = "kubectl/v1.20.2 (linux/amd64)") -> tuple[int, Any]:
    request = urllib.request.Request(fake.url + path, data=json.dumps(body).encode(), method=method, headers={
        "Authorization": f"Bearer {TOKEN}", "Content-Type": content_type, "User-Agent": agent})
    try:
        with urllib.request.urlopen(request, timeout=5) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        try:
            return exc.code, json.loads(raw)
        except ValueError:
            return exc.code, raw.decode()


def test_http_writes_name_their_manager_by_field_manager_or_user_agent(fake: FakeApiServer) -> None:
    fake.apply("nodes", make_node(NODE))
    base = f"/api/v1/nodes/{NODE}"
    assert _http(fake, "PATCH", f"{base}/status", {"status": {"capacity": {BATCH: "1"}}},
                 "application/merge-patch+json")[0] == 200
    assert owners(fake, CAP) == ["kubectl"]
    assert _http(fake, "PATCH", f"{base}/status?fieldManager=koordinator-manager",
                 [{"op": "replace", "path": f"/status/capacity/{BATCH.replace('/', '~1')}", "value": "2"}],
                 "application/json-patch+json")[0] == 200
    assert owners(fake, CAP) == ["koordinator-manager"]
    node = fake.get("nodes", NODE)
    node["metadata"]["labels"] = {"x": "y"}
    node["status"]["capacity"][BATCH] = "3"  # ignored: the main resource does not write the status
    assert _http(fake, "PUT", base, node, "application/json")[0] == 200
    stored = fake.get("nodes", NODE)
    assert stored["metadata"]["labels"] == {"x": "y"} and stored["status"]["capacity"][BATCH] == "2"
    assert fake.managed_fields("nodes", NODE).owners(("metadata", "labels", "x")) == ["kubectl"]
    code, answer = _http(fake, "PATCH", f"{base}/status", node_apply({BATCH: "4"}), "application/apply-patch+yaml")
    assert code == 422 and "fieldManager" in answer["message"]  # apply needs a field manager
    fake.uninstall("nodemetrics")
    assert _http(fake, "PATCH", f"/apis/slo.koordinator.sh/v1alpha1/nodemetrics/{NODE}?fieldManager=a", {},
                 "application/apply-patch+yaml") == (404, "404 page not found\n")


def test_json_patch_ops_and_managed_fields_round_trip() -> None:
    doc = {"a": {"b": 1, "c/d": 2}}
    assert json_patch(doc, [{"op": "remove", "path": "/a/b"}, {"op": "add", "path": "/a/e", "value": [1]},
                            {"op": "test", "path": "/a/c~1d", "value": 2}]) == {"a": {"c/d": 2, "e": [1]}}
    table = ManagedFields.parse([
        {"manager": "m", "operation": "Apply", "apiVersion": "v1", "time": "t",
         "fieldsV1": {"f:spec": {".": {}, "f:a": {}, "f:b": {".": {}, "f:c": {}}}}},
        "junk", {"manager": None},
    ])
    assert table.fields_of("m") == {("spec", "a"), ("spec", "b", "c")}
    assert table.render()[0]["fieldsV1"] == {"f:spec": {"f:a": {}, "f:b": {"f:c": {}}}}


@pytest.mark.parametrize("code", [403, 429, 503])
def test_injected_failures_answer_any_write(fake: FakeApiServer, code: int) -> None:
    fake.apply("nodes", make_node(NODE))
    fake.fail_next_patches(1, code)
    assert fake.apply_as("hookserver", "nodes", NODE, node_apply({BATCH: "1"}), subresource="status")[0] == code
    assert fake.apply_as("hookserver", "nodes", NODE, node_apply({BATCH: "1"}), subresource="status")[0] == 200
