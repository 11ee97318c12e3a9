"""The Node capacity writer against the HTTP fake: a server-side apply of nodes/<node>/status with our field
manager and force=false, values in capacity and allocatable, withdrawal of only what we own, koord-manager's
fields never overwritten, and every failure a result."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from hookserver.informer import NodeCapacityWriter
from hookserver.informer.transport import ApiClientTransport, load_client_configuration
from hookserver.koord_resources import BATCH_CPU, BATCH_MEMORY, MID_CPU
from hookserver.store import StateStore
from tests.informer.conftest import NODE, api_settings, eventually, running
from tests.informer.fake_apiserver import FakeApiServer, make_node

VALUES = {BATCH_CPU: "1500", BATCH_MEMORY: "2Gi"}
KOORD = "koordinator-manager"


def transport(fake: FakeApiServer, tmp_path: Path) -> ApiClientTransport:
    return ApiClientTransport(load_client_configuration(fake.kubeconfig(str(tmp_path / "kc"))))


def writer(fake: FakeApiServer, tmp_path: Path, sleeps: list[float] | None = None, **kwargs: Any) -> NodeCapacityWriter:
    return NodeCapacityWriter(transport(fake, tmp_path), node_name=NODE, timeout_s=5,
                              sleep=(sleeps.append if sleeps is not None else lambda s: None), **kwargs)


@pytest.fixture
def node(fake: FakeApiServer) -> dict[str, Any]:
    return fake.apply("nodes", make_node(NODE))


def status(fake: FakeApiServer) -> dict[str, Any]:
    stored = fake.get("nodes", NODE)
    assert stored is not None
    return dict(stored["status"])


def test_apply_writes_capacity_and_allocatable_through_the_status_subresource(
        fake: FakeApiServer, node: dict[str, Any], tmp_path: Path) -> None:
    delivery = writer(fake, tmp_path).apply(VALUES)
    assert (delivery.result, delivery.attempts, delivery.conflicts) == ("ok", 1, ())
    assert dict(delivery.node_values) == VALUES
    stored = fake.get("nodes", NODE)
    assert delivery.resource_version == stored["metadata"]["resourceVersion"] != node["metadata"]["resourceVersion"]
    for key in ("capacity", "allocatable"):
        assert {k: stored["status"][key][k] for k in VALUES} == VALUES
    assert stored["status"]["allocatable"]["cpu"] == "7800m"  # the kubelet's resources are untouched
    write = fake.writes[-1]
    assert (write.method, write.kind, write.name, write.subresource) == ("PATCH", "nodes", NODE, "status")
    assert write.content_type == "application/apply-patch+yaml"  # the real client's REST layer did not rewrite it
    assert write.query == {"fieldManager": "hookserver", "force": "false"}
    assert write.body == {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE},
                          "status": {"capacity": VALUES, "allocatable": VALUES}}  # JSON body, quantities as given
    assert fake.managed_fields("nodes", NODE).fields_of("hookserver") == {
        ("status", k, name) for k in ("capacity", "allocatable") for name in VALUES}


def test_a_name_left_out_is_removed_and_withdraw_takes_back_only_ours(
        fake: FakeApiServer, node: dict[str, Any], tmp_path: Path) -> None:
    w = writer(fake, tmp_path)
    assert w.apply(VALUES).result == "ok"
    assert w.apply({BATCH_CPU: "1500"}).result == "ok"
    assert BATCH_MEMORY not in status(fake)["capacity"] and BATCH_MEMORY not in status(fake)["allocatable"]
    fake.update_as(KOORD, "nodes", NODE, {"status": {"capacity": {MID_CPU: "500"}, "allocatable": {MID_CPU: "500"}}})
    assert w.apply({BATCH_CPU: "1500", MID_CPU: "500"}).result == "ok"  # same value as koord-manager's: shared
    delivery = w.withdraw()
    assert delivery.result == "ok" and dict(delivery.node_values) == {MID_CPU: "500"}
    after = status(fake)
    assert BATCH_CPU not in after["capacity"] and BATCH_CPU not in after["allocatable"]
    assert after["capacity"][MID_CPU] == after["allocatable"][MID_CPU] == "500"  # koord-manager's stays
    assert after["capacity"]["cpu"] == "8"
    assert fake.managed_fields("nodes", NODE).fields_of("hookserver") == set()
    assert w.withdraw().result == "ok"  # nothing left to withdraw is still fine


def test_koord_managers_field_is_a_conflict_and_nothing_changes(
        fake: FakeApiServer, node: dict[str, Any], tmp_path: Path) -> None:
    w = writer(fake, tmp_path)
    assert w.apply(VALUES).result == "ok"
    fake.update_as(KOORD, "nodes", NODE, {"status": {"allocatable": {BATCH_CPU: "900"}}})
    before = fake.get("nodes", NODE)
    delivery = w.apply({BATCH_CPU: "1600", BATCH_MEMORY: "3Gi"})
    assert delivery.result == "conflict" and delivery.attempts == 1
    assert delivery.conflicts == ((KOORD, f".status.allocatable.{BATCH_CPU}"),)
    assert KOORD in delivery.detail and f".status.allocatable.{BATCH_CPU}" in delivery.detail
    assert fake.get("nodes", NODE) == before  # all or nothing: batch-memory did not change either
    assert dict(delivery.node_values) == {}


def test_force_takes_the_field_over(fake: FakeApiServer, node: dict[str, Any], tmp_path: Path) -> None:
    fake.update_as(KOORD, "nodes", NODE, {"status": {"capacity": {BATCH_CPU: "900"}, "allocatable": {BATCH_CPU: "900"}}})
    w = writer(fake, tmp_path)
    assert w.apply({BATCH_CPU: "1600"}).result == "conflict"
    delivery = w.apply({BATCH_CPU: "1600"}, force=True)
    assert delivery.result == "ok" and delivery.node_values[BATCH_CPU] == "1600"
    assert fake.writes[-1].query == {"fieldManager": "hookserver", "force": "true"}
    assert fake.managed_fields("nodes", NODE).owners(("status", "allocatable", BATCH_CPU)) == ["hookserver"]


def test_a_second_agent_is_a_conflict_too(fake: FakeApiServer, node: dict[str, Any], tmp_path: Path) -> None:
    other = writer(fake, tmp_path, field_manager="hookserver-canary")
    assert other.apply({BATCH_CPU: "1000"}).result == "ok"
    delivery = writer(fake, tmp_path).apply({BATCH_CPU: "1500"})
    assert delivery.result == "conflict"
    assert {m for m, _ in delivery.conflicts} == {"hookserver-canary"}
    assert {f for _, f in delivery.conflicts} == {f".status.capacity.{BATCH_CPU}", f".status.allocatable.{BATCH_CPU}"}


def test_missing_node_forbidden_and_outage_are_results(fake: FakeApiServer, tmp_path: Path) -> None:
    w = writer(fake, tmp_path)
    missing = w.apply(VALUES)
    assert (missing.result, missing.detail) == ("not_found", f"node {NODE} does not exist")
    fake.apply("nodes", make_node(NODE))
    fake.fail_next_patches(1, 403, body={"kind": "Status", "reason": "Forbidden", "code": 403, "message":
                                         f'nodes "{NODE}" is forbidden: User "system:serviceaccount:x:hookserver" '
                                         'cannot patch resource "nodes/status" in API group "" at the cluster scope'})
    forbidden = w.apply(VALUES)
    assert forbidden.result == "forbidden" and "patch nodes/status" in forbidden.detail
    assert "cannot patch resource" in forbidden.detail
    fake.kill()
    down = w.apply(VALUES)
    assert (down.result, down.attempts) == ("error", 1) and down.detail


@pytest.mark.parametrize("code", [429, 500, 503])
def test_a_transient_failure_is_retried_within_the_call(
        fake: FakeApiServer, node: dict[str, Any], tmp_path: Path, code: int) -> None:
    fake.fail_next_patches(1, code)
    sleeps: list[float] = []
    delivery = writer(fake, tmp_path, sleeps).apply(VALUES)
    assert (delivery.result, delivery.attempts) == ("ok", 2)
    assert len(sleeps) == 1 and 0.010 <= sleeps[0] <= 0.011
    assert status(fake)["allocatable"][BATCH_CPU] == "1500"


def test_endless_server_errors_give_up_after_four_tries(fake: FakeApiServer, node: dict[str, Any],
                                                        tmp_path: Path) -> None:
    fake.fail_next_patches(10, 503)
    delivery = writer(fake, tmp_path).apply(VALUES)
    assert (delivery.result, delivery.attempts) == ("error", 4)
    assert "HTTP 503" in delivery.detail and "after 4 tries" in delivery.detail


def test_an_optimistic_409_is_retried_but_an_apply_conflict_is_not(
        fake: FakeApiServer, node: dict[str, Any], tmp_path: Path) -> None:
    fake.fail_next_patches(1, 409)  # "injected 409": a Conflict without field-manager causes
    assert writer(fake, tmp_path).apply(VALUES).attempts == 2


@pytest.mark.parametrize(("body", "conflicts", "in_detail"), [
    # no details at all: the pairs come from the message
    ({"kind": "Status", "reason": "Conflict", "code": 409, "message": 'Apply failed with 1 conflict: conflict with '
      f'"{KOORD}" using v1: .status.capacity.{BATCH_CPU}'}, ((KOORD, f".status.capacity.{BATCH_CPU}"),), KOORD),
    # causes that are not a list, and a message nobody can split: still a conflict, and the message says it
    ({"reason": "Conflict", "message": "Apply failed with 2 conflicts: <elided>", "details": {"causes": {}}}, (),
     "<elided>"),
    # a cause without a field manager in its message: the message fills in
    ({"reason": "Conflict", "details": {"causes": [{"reason": "FieldManagerConflict", "field": ".x"}]},
      "message": 'Apply failed with 1 conflict: conflict with "m": .x'}, (("m", ".x"),), "m owns .x"),
])
def test_malformed_conflict_bodies_still_say_what_happened(
        fake: FakeApiServer, node: dict[str, Any], tmp_path: Path, body: Any, conflicts: Any, in_detail: str) -> None:
    fake.fail_next_patches(1, 409, body=body)
    delivery = writer(fake, tmp_path).apply(VALUES)
    assert (delivery.result, delivery.conflicts, delivery.attempts) == ("conflict", conflicts, 1)
    assert in_detail in delivery.detail


def test_a_conflict_body_that_is_not_json_is_retried_then_reported(
        fake: FakeApiServer, node: dict[str, Any], tmp_path: Path) -> None:
    fake.fail_next_patches(4, 409, body="upstream says: conflict")
    delivery = writer(fake, tmp_path).apply(VALUES)
    assert (delivery.result, delivery.attempts) == ("error", 4)
    assert "HTTP 409" in delivery.detail and "upstream says: conflict" in delivery.detail


def test_the_informer_sees_who_owns_the_published_resources(
        fake: FakeApiServer, node: dict[str, Any], tmp_path: Path) -> None:
    """End to end over the watch: node_from_json reads the managedFields the apply produced."""
    store = StateStore()

    def owners() -> dict[str, tuple[str, ...]]:
        snap = store.snapshot()
        return dict(snap.node.published_owners) if snap.node is not None else {"": ()}

    async def scenario() -> None:
        async with running(api_settings(fake, tmp_path), store=store) as informer:
            assert await informer.wait_synced(5)
            assert owners() == {}
            w = writer(fake, tmp_path)
            assert (await asyncio.to_thread(w.apply, VALUES)).result == "ok"
            await eventually(lambda: owners() == {BATCH_CPU: ("hookserver",), BATCH_MEMORY: ("hookserver",)},
                             what="our ownership")
            fake.update_as(KOORD, "nodes", NODE, {"status": {"allocatable": {BATCH_CPU: "900"}}})
            await eventually(lambda: owners()[BATCH_CPU] == ("hookserver", KOORD), what="shared: capacity is ours")
            fake.update_as(KOORD, "nodes", NODE, {"status": {"capacity": {BATCH_CPU: "900"}}})
            await eventually(lambda: owners()[BATCH_CPU] == (KOORD,), what="koord-manager's")
            rv = fake.get("nodes", NODE)["metadata"]["resourceVersion"]
            await eventually(lambda: store.snapshot().node.resource_version == rv, what="the resourceVersion")

    asyncio.run(scenario())
