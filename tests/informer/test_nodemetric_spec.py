"""The NodeMetric spec writer against the HTTP fake: created when missing, kept in step with one apply,
left alone (one GET, no write) when it already is, never rewriting what koord-manager owns, and every
failure a result."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from hookserver.informer import NodeMetricSpecWriter
from hookserver.informer.nodemetric_status import NodeMetricStatusWriter
from hookserver.informer.transport import ApiClientTransport, load_client_configuration
from tests.informer.conftest import NODE
from tests.informer.fake_apiserver import FakeApiServer

KOORD = "koordinator-manager"
PATH = f"/apis/slo.koordinator.sh/v1alpha1/nodemetrics/{NODE}"
SPEC: dict[str, Any] = {"metricCollectPolicy": {"aggregateDurationSeconds": 300, "reportIntervalSeconds": 60,
                                                "nodeAggregatePolicy": {"durations": ["5m0s", "10m0s", "30m0s"]}}}


def transport(fake: FakeApiServer, tmp_path: Path) -> ApiClientTransport:
    return ApiClientTransport(load_client_configuration(fake.kubeconfig(str(tmp_path / "kc"))))


def writer(fake: FakeApiServer, tmp_path: Path, sleeps: list[float] | None = None) -> NodeMetricSpecWriter:
    return NodeMetricSpecWriter(transport(fake, tmp_path), node_name=NODE, timeout_s=5,
                                sleep=(sleeps.append if sleeps is not None else lambda s: None))


def metric(spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric", "metadata": {"name": NODE},
            "spec": copy.deepcopy(spec)}


def gets(fake: FakeApiServer) -> int:
    return sum(1 for path, query in fake.requests if path == PATH and "method" not in query)


def test_created_when_missing_then_unchanged_with_one_read_and_no_write(fake: FakeApiServer, tmp_path: Path) -> None:
    w = writer(fake, tmp_path)
    created = w.ensure(SPEC)
    assert (created.result, created.attempts) == ("created", 1)
    stored = fake.get("nodemetrics", NODE)
    assert stored["spec"] == SPEC and created.resource_version == stored["metadata"]["resourceVersion"]
    write = fake.writes[-1]
    assert (write.method, write.subresource, write.content_type) == ("PATCH", "", "application/apply-patch+yaml")
    assert write.query == {"fieldManager": "hookserver", "force": "false"}
    assert write.body == metric(SPEC)
    writes, reads = len(fake.writes), gets(fake)
    again = w.ensure(copy.deepcopy(SPEC))
    assert (again.result, again.resource_version) == ("unchanged", created.resource_version)
    assert (len(fake.writes), gets(fake)) == (writes, reads + 1)  # the steady state is one GET


def test_updated_keeps_our_fields_in_step_and_drops_the_ones_we_no_longer_set(
        fake: FakeApiServer, tmp_path: Path) -> None:
    w = writer(fake, tmp_path)
    assert w.ensure(SPEC).result == "created"
    smaller = {"metricCollectPolicy": {"reportIntervalSeconds": 30}}
    updated = w.ensure(smaller)
    assert updated.result == "updated"
    assert fake.get("nodemetrics", NODE)["spec"] == smaller
    assert w.ensure(smaller).result == "unchanged"


def test_status_reports_in_between_do_not_make_it_write(fake: FakeApiServer, tmp_path: Path) -> None:
    w = writer(fake, tmp_path)
    assert w.ensure(SPEC).result == "created"
    status_writer = NodeMetricStatusWriter(transport(fake, tmp_path), node_name=NODE, timeout_s=5)
    assert status_writer.deliver({"updateTime": "2026-11-26T00:00:00Z"}).result == "ok"  # merge patch still works
    writes = len(fake.writes)
    assert w.ensure(SPEC).result == "unchanged"
    assert len(fake.writes) == writes
    stored = fake.get("nodemetrics", NODE)
    assert stored["spec"] == SPEC and stored["status"] == {"updateTime": "2026-11-26T00:00:00Z"}


def test_koord_managers_spec_is_a_conflict_and_nothing_changes(fake: FakeApiServer, tmp_path: Path) -> None:
    theirs = {"metricCollectPolicy": {"aggregateDurationSeconds": 600, "reportIntervalSeconds": 60}}
    assert fake.apply_as(KOORD, "nodemetrics", NODE, metric(theirs))[0] == 201
    before = fake.get("nodemetrics", NODE)
    delivery = writer(fake, tmp_path).ensure(SPEC)
    assert delivery.result == "conflict"
    assert delivery.conflicts == ((KOORD, ".spec.metricCollectPolicy.aggregateDurationSeconds"),)
    assert KOORD in delivery.detail and "aggregateDurationSeconds" in delivery.detail
    assert fake.get("nodemetrics", NODE) == before


def test_equal_to_koord_managers_is_unchanged_and_theirs_is_kept(fake: FakeApiServer, tmp_path: Path) -> None:
    theirs = copy.deepcopy(SPEC)
    theirs["nodeMemoryCollectPolicy"] = "usageWithoutPageCache"
    fake.apply_as(KOORD, "nodemetrics", NODE, metric(theirs))
    w = writer(fake, tmp_path)
    shared = w.ensure(SPEC)
    assert shared.result == "unchanged"  # the values were already there: now we own them too
    owners = fake.managed_fields("nodemetrics", NODE)
    assert owners.owners(("spec", "metricCollectPolicy", "reportIntervalSeconds")) == ["hookserver", KOORD]
    assert w.ensure({"metricCollectPolicy": {"reportIntervalSeconds": 60}}).result == "unchanged"  # theirs stays
    assert fake.get("nodemetrics", NODE)["spec"] == theirs


def test_missing_crd_is_not_found(fake: FakeApiServer, tmp_path: Path) -> None:
    fake.uninstall("nodemetrics")
    delivery = writer(fake, tmp_path).ensure(SPEC)
    assert delivery.result == "not_found" and "CRD" in delivery.detail and "not installed" in delivery.detail


def test_forbidden_names_what_the_role_lacks(fake: FakeApiServer, tmp_path: Path) -> None:
    fake.fail_next_patches(1, 403, body={"kind": "Status", "reason": "Forbidden", "code": 403, "message":
                                         f'nodemetrics.slo.koordinator.sh "{NODE}" is forbidden: User "sa" cannot '
                                         'create resource "nodemetrics"'})
    delivery = writer(fake, tmp_path).ensure(SPEC)
    assert delivery.result == "forbidden"
    assert "create and patch nodemetrics" in delivery.detail and "cannot create resource" in delivery.detail


class Scripted:
    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.methods: list[str] = []

    def request_json(self, method: str, path: str, body: Any = None, **_: Any) -> tuple[int, Any]:
        self.methods.append(method)
        return self.answers.pop(0)  # type: ignore[no-any-return]


def test_a_forbidden_read_stops_before_the_write() -> None:
    transport = Scripted((403, {"message": "cannot get resource"}))
    delivery = NodeMetricSpecWriter(transport, node_name=NODE).ensure(SPEC)
    assert delivery.result == "forbidden" and "get nodemetrics" in delivery.detail
    assert transport.methods == ["GET"]


def test_a_transient_failure_is_retried_and_an_outage_is_an_error(fake: FakeApiServer, tmp_path: Path) -> None:
    fake.fail_next_patches(1, 429)
    sleeps: list[float] = []
    delivery = writer(fake, tmp_path, sleeps).ensure(SPEC)
    assert (delivery.result, delivery.attempts) == ("created", 2) and len(sleeps) == 1
    fake.fail_next_patches(4, 500)
    failed = writer(fake, tmp_path).ensure({"metricCollectPolicy": {"reportIntervalSeconds": 15}})
    assert (failed.result, failed.attempts) == ("error", 4) and "HTTP 500" in failed.detail
    fake.kill()
    down = writer(fake, tmp_path).ensure(SPEC)
    assert down.result == "error" and down.detail


@pytest.mark.parametrize(("body", "expected"), [
    ({"reason": "Conflict", "message": f'Apply failed with 1 conflict: conflict with "{KOORD}" using '
      "slo.koordinator.sh/v1alpha1: .spec.metricCollectPolicy.reportIntervalSeconds"},
     ((KOORD, ".spec.metricCollectPolicy.reportIntervalSeconds"),)),
    ({"reason": "Conflict", "message": "Apply failed with 4 conflicts: (message cut)", "details": None}, ()),
])
def test_malformed_conflict_bodies_still_say_what_happened(
        fake: FakeApiServer, tmp_path: Path, body: Any, expected: Any) -> None:
    fake.fail_next_patches(1, 409, body=body)
    delivery = writer(fake, tmp_path).ensure(SPEC)
    assert (delivery.result, delivery.conflicts) == ("conflict", expected)
    assert delivery.detail.startswith("conflict: ") and len(delivery.detail) > len("conflict: ")


def test_a_read_only_spec_with_tuples_is_sent_and_compared_as_json(fake: FakeApiServer, tmp_path: Path) -> None:
    """What a store snapshot hands over (MappingProxyType, tuples) is the same spec as the server's JSON."""
    from types import MappingProxyType

    frozen = MappingProxyType({"metricCollectPolicy": MappingProxyType({
        "aggregateDurationSeconds": 300, "reportIntervalSeconds": 60,
        "nodeAggregatePolicy": MappingProxyType({"durations": ("5m0s", "10m0s", "30m0s")})})})
    w = writer(fake, tmp_path)
    assert w.ensure(frozen).result == "created"
    assert fake.get("nodemetrics", NODE)["spec"] == SPEC
    writes = len(fake.writes)
    assert w.ensure(frozen).result == "unchanged" and len(fake.writes) == writes
