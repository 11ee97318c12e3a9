"""node_from_json reads who owns the batch/mid resources in the Node's status (metadata.managedFields), the
capacity publisher's way to see koord-manager or a second agent before it writes; and the Node's
resourceVersion. Malformed managedFields entries are skipped, never raised."""

from __future__ import annotations

import time
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from hookserver.informer.convert import node_from_json
from hookserver.koord_resources import BATCH_CPU, BATCH_MEMORY, MID_CPU, MID_MEMORY
from tests.informer.fake_apiserver import make_node

# As kube-apiserver 1.20 serves a node the kubelet registered, koord-manager published into and an agent
# applied to (the shapes are copied from the real server: Update entries carry "." marks, Apply ones do not).
MANAGED_FIELDS: list[Any] = [
    {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": "2026-11-26T01:00:00Z",
     "fieldsType": "FieldsV1", "fieldsV1": {
         "f:metadata": {"f:labels": {".": {}, "f:kubernetes.io/hostname": {}}},
         "f:status": {"f:allocatable": {".": {}, "f:cpu": {}, "f:memory": {}, "f:pods": {}},
                      "f:capacity": {".": {}, "f:cpu": {}, "f:memory": {}, "f:pods": {}},
                      "f:conditions": {".": {}, 'k:{"type":"Ready"}': {".": {}, "f:status": {}}}}}},
    {"manager": "koordinator-manager", "operation": "Update", "apiVersion": "v1", "time": "2026-11-26T01:01:00Z",
     "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {
         "f:allocatable": {f"f:{BATCH_CPU}": {}, f"f:{BATCH_MEMORY}": {}},
         "f:capacity": {f"f:{BATCH_CPU}": {}, f"f:{BATCH_MEMORY}": {}}}}},
    {"manager": "hookserver", "operation": "Apply", "apiVersion": "v1", "time": "2026-11-26T01:02:00Z",
     "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {
         "f:allocatable": {f"f:{BATCH_MEMORY}": {}},
         "f:capacity": {f"f:{BATCH_MEMORY}": {}, f"f:{MID_CPU}": {}}}}},  # mid-cpu in capacity only: still owned
    # malformed entries: skipped, each for its own reason
    "not an entry",
    {"operation": "Update", "fieldsV1": {"f:status": {"f:capacity": {f"f:{MID_MEMORY}": {}}}}},  # no manager
    {"manager": 7, "fieldsV1": {"f:status": {"f:capacity": {f"f:{MID_MEMORY}": {}}}}},
    {"manager": "broken-fields", "fieldsV1": ["f:status"]},
    {"manager": "broken-status", "fieldsV1": {"f:status": "yes"}},
    {"manager": "broken-capacity", "fieldsV1": {"f:status": {"f:capacity": [f"f:{MID_MEMORY}"]}}},
]


def node_with(managed: Any) -> dict[str, Any]:
    node = make_node("n")
    node["metadata"]["resourceVersion"] = "4242"
    node["metadata"]["managedFields"] = managed
    return node


def test_owners_of_each_published_resource_from_capacity_and_allocatable() -> None:
    record = node_from_json(node_with(MANAGED_FIELDS), source="apiserver", now=1.0)
    assert dict(record.published_owners) == {
        BATCH_CPU: ("koordinator-manager",),
        BATCH_MEMORY: ("hookserver", "koordinator-manager"),
        MID_CPU: ("hookserver",),
    }
    assert record.resource_version == "4242"
    assert record.capacity["cpu"] == "8"  # the rest of the conversion is untouched


def test_nobody_owning_a_published_resource_gives_an_empty_map() -> None:
    kubelet_only = MANAGED_FIELDS[:1]
    assert dict(node_from_json(node_with(kubelet_only), source="apiserver", now=1.0).published_owners) == {}
    node = make_node("n")
    assert dict(node_from_json(node, source="apiserver", now=1.0).published_owners) == {}
    assert node_from_json(node, source="apiserver", now=1.0).resource_version == ""


def test_a_manager_with_two_entries_is_named_once() -> None:
    twice = [
        {"manager": "hookserver", "operation": op, "fieldsV1": {"f:status": {"f:capacity": {f"f:{BATCH_CPU}": {}}}}}
        for op in ("Apply", "Update")
    ]
    assert dict(node_from_json(node_with(twice), source="apiserver", now=1.0).published_owners) == {
        BATCH_CPU: ("hookserver",)}


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                    lambda children: st.lists(children, max_size=3)
                    | st.dictionaries(st.sampled_from(["manager", "fieldsV1", "f:status", "f:capacity",
                                                        "f:allocatable", f"f:{BATCH_CPU}", "operation"]),
                                      children, max_size=4),
                    max_leaves=20))
def test_whatever_managed_fields_hold_the_conversion_never_fails(managed: Any) -> None:
    record = node_from_json(node_with(managed), source="apiserver", now=1.0)
    for name, owners in record.published_owners.items():
        assert owners and list(owners) == sorted(owners) and all(isinstance(o, str) and o for o in owners)
        assert name in (BATCH_CPU, BATCH_MEMORY, MID_CPU, MID_MEMORY)


def test_reading_owners_stays_cheap() -> None:
    """Every Node watch event pays for it: a real-sized list costs a few microseconds, not a model parse."""
    node = node_with(MANAGED_FIELDS)
    node_from_json(node, source="apiserver", now=1.0)
    rounds = 2000
    start = time.perf_counter()
    for _ in range(rounds):
        node_from_json(node, source="apiserver", now=1.0)
    per_call_us = (time.perf_counter() - start) / rounds * 1e6
    assert per_call_us < 200, per_call_us
