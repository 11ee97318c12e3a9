"""Store-feeding logic without a server: conversion, merging sources, change-filtered listeners."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hookserver.errors import InputError
from hookserver.informer.convert import POD_FIELDS_FROM_API, node_from_json, pod_from_json
from hookserver.informer.handlers import PodHandler
from hookserver.store import StateStore
from hookserver.store.changes import PodChange, hook_annotations, merge_pod_records, pod_changed_fields
from hookserver.store.records import PodRecord
from tests.informer.fake_apiserver import make_node, make_pod


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda p: p["metadata"].__setitem__("uid", 5), "metadata.uid"),
        (lambda p: p["metadata"].pop("namespace"), "metadata.namespace"),
        (lambda p: p["metadata"].__setitem__("labels", {"a": 1}), "metadata.labels[a]"),
        (lambda p: p["spec"].__setitem__("priority", "high"), "spec.priority"),
        (lambda p: p["spec"].__setitem__("containers", {"main": {}}), "spec.containers"),
        (lambda p: p["spec"]["containers"][0].pop("name"), "spec.containers[0].name"),
        (lambda p: p["spec"]["containers"][0]["resources"]["limits"].__setitem__("cpu", "1x"),
         "spec.containers[0].resources.limits[cpu]"),
        (lambda p: p.__setitem__("status", []), "pod.status"),
    ],
)
def test_malformed_pod_names_the_field(mutate: Any, field: str) -> None:
    pod = make_pod("p")
    mutate(pod)
    with pytest.raises(InputError) as info:
        pod_from_json(pod, source="apiserver", now=1.0)
    assert info.value.field == field


def test_node_conversion_and_bad_capacity() -> None:
    node = node_from_json(make_node("n", labels={"a": "b"}), source="apiserver", now=2.0)
    assert node.name == "n" and node.labels == {"a": "b"} and node.capacity["memory"] == "32Gi"
    broken = make_node("n")
    broken["status"]["capacity"]["cpu"] = "eight"
    with pytest.raises(InputError, match=r"status.capacity\[cpu\]"):
        node_from_json(broken, source="apiserver", now=2.0)


def test_apiserver_copy_keeps_runtime_facts_and_hook_copy_keeps_api_facts() -> None:
    store = StateStore(clock=lambda: 10.0)
    # the proxy saw the sandbox first
    store.upsert_pod(PodRecord(uid="u1", namespace="ns", name="p", sandbox_id="sb-1", cgroup_parent="/kubepods/pod-u1",
                               source="proxy", labels=MappingProxyType({"x": "1"})))
    api = pod_from_json(make_pod("p", namespace="ns", uid="u1", priority=5), source="apiserver", now=11.0)
    merged = store.merge_pod(api, authoritative=POD_FIELDS_FROM_API)
    assert (merged.sandbox_id, merged.cgroup_parent) == ("sb-1", "/kubepods/pod-u1")
    assert merged.priority == 5 and merged.source == "apiserver" and merged.labels == {"app": "p"}
    assert merged.first_seen == 10.0
    # a later hook copy knows no priority or specs: a plain merge keeps them
    hook = PodRecord(uid="u1", namespace="ns", name="p", sandbox_id="sb-1", source="nri")
    again = store.merge_pod(hook)
    assert again.priority == 5 and again.container_specs == api.container_specs and again.source == "nri"
    assert store.snapshot().pods_by_sandbox["sb-1"].uid == "u1"


def test_authoritative_empty_annotations_replace_old_ones() -> None:
    old = PodRecord(uid="u", namespace="n", name="p", annotations=MappingProxyType({"a.koordinator.sh/x": "1"}))
    new = PodRecord(uid="u", namespace="n", name="p")
    assert merge_pod_records(old, new).annotations == {"a.koordinator.sh/x": "1"}
    assert merge_pod_records(old, new, authoritative=POD_FIELDS_FROM_API).annotations == {}


def test_hook_annotations_are_koordinator_domains_only() -> None:
    annotations = {"node.koordinator.sh/extended-resource-spec": "{}", "koordinator.sh/x": "1",
                   "kubectl.kubernetes.io/last-applied-configuration": "{}", "notkoordinator.sh/y": "2"}
    assert set(hook_annotations(annotations)) == {"node.koordinator.sh/extended-resource-spec", "koordinator.sh/x"}


_fields = st.fixed_dictionaries({
    "cpu": st.sampled_from(["100m", "1", "2"]),
    "qos": st.sampled_from(["", "LS", "BE"]),
    "priority": st.sampled_from([None, 0, 9000]),
    "phase": st.sampled_from(["Pending", "Running"]),
    "hook_ann": st.sampled_from(["", "v1", "v2"]),
    "other_ann": st.sampled_from(["", "x"]),
    "app": st.sampled_from(["a", "b"]),
})


def _pod(values: dict[str, Any]) -> PodRecord:
    return pod_from_json(_raw(values), source="apiserver", now=0.0)


@settings(max_examples=150, deadline=None)
@given(_fields, _fields)
def test_listener_fires_exactly_when_a_relevant_field_changes(before: dict[str, Any], after: dict[str, Any]) -> None:
    expected = set()
    if before["cpu"] != after["cpu"]:
        expected.add("resources")
    if before["qos"] != after["qos"]:
        expected.add("qos")
    if before["priority"] != after["priority"]:
        expected.add("priority")
    if before["phase"] != after["phase"]:
        expected.add("phase")
    if before["hook_ann"] != after["hook_ann"]:
        expected.add("annotations")
    assert pod_changed_fields(_pod(before), _pod(after)) == expected

    store = StateStore()
    seen: list[PodChange] = []
    handler = PodHandler(store, source="apiserver")
    store.subscribe_pods(seen.append)
    handler.replace([_raw(before)])
    handler.apply("MODIFIED", _raw(after))
    assert [c.kind for c in seen] == (["added", "updated"] if expected else ["added"])
    if expected:
        assert seen[1].fields == expected
    handler.apply("DELETED", _raw(after))
    assert seen[-1].kind == "deleted" and not store.snapshot().pods


def _raw(values: dict[str, Any]) -> dict[str, Any]:
    annotations = {}
    if values["hook_ann"]:
        annotations["node.koordinator.sh/extended-resource-spec"] = values["hook_ann"]
    if values["other_ann"]:
        annotations["deployment.kubernetes.io/revision"] = values["other_ann"]
    pod = make_pod("p", uid="u", qos=values["qos"], cpu=values["cpu"], priority=values["priority"],
                   phase=values["phase"], annotations=annotations)
    pod["metadata"]["labels"]["app"] = values["app"]
    return pod


def test_listener_errors_do_not_fail_the_writer() -> None:
    store = StateStore()
    calls: list[str] = []

    def broken(change: PodChange) -> None:
        raise RuntimeError("listener bug")

    store.subscribe_pods(broken)
    unsubscribe = store.subscribe_pods(lambda c: calls.append(c.kind))
    store.upsert_pod(PodRecord(uid="u", namespace="n", name="p"))
    unsubscribe()
    store.remove_pod("u")
    assert calls == ["added"] and not store.snapshot().pods


def test_relist_removes_only_pods_this_source_added() -> None:
    store = StateStore()
    store.upsert_pod(PodRecord(uid="hook-only", namespace="n", name="h", source="nri"))
    handler = PodHandler(store, source="apiserver")
    skipped = handler.replace([make_pod("a", uid="a"), make_pod("b", uid="b"), {"metadata": "nope"}])
    assert skipped == 1 and set(store.snapshot().pods) == {"hook-only", "a", "b"}
    handler.replace([make_pod("b", uid="b")])
    assert set(store.snapshot().pods) == {"hook-only", "b"} and handler.count() == 1
