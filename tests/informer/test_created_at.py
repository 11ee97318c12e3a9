"""metadata.creationTimestamp reaches PodRecord.created_at (the predictor's cold start), and survives a merge
with a hook or NRI copy of the pod that does not know it."""

from __future__ import annotations

import pytest

from hookserver.errors import InputError
from hookserver.informer.convert import pod_from_json
from hookserver.store.changes import merge_pod_records
from hookserver.store.records import PodRecord
from tests.informer.fake_apiserver import make_pod


def test_creation_timestamp_is_parsed():
    obj = make_pod("web")
    obj["metadata"]["creationTimestamp"] = "2026-11-23T08:00:00Z"
    assert pod_from_json(obj, source="apiserver", now=0.0).created_at == 1795420800.0
    del obj["metadata"]["creationTimestamp"]
    assert pod_from_json(obj, source="apiserver", now=0.0).created_at == 0.0


def test_bad_creation_timestamp_names_the_field():
    obj = make_pod("web")
    obj["metadata"]["creationTimestamp"] = "last tuesday"
    with pytest.raises(InputError, match="metadata.creationTimestamp"):
        pod_from_json(obj, source="apiserver", now=0.0)


def test_a_hook_copy_without_creation_time_keeps_the_apiservers():
    api = PodRecord(uid="u", namespace="n", name="p", created_at=1795420800.0, source="apiserver")
    hook = PodRecord(uid="u", namespace="n", name="p", cgroup_parent="/kubepods/podu", source="proxy")
    merged = merge_pod_records(api, hook)
    assert merged.created_at == 1795420800.0 and merged.cgroup_parent == "/kubepods/podu"
