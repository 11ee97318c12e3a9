"""A pod's request as the scheduler (and koord-manager's batch formula) counts it: k8s PodRequests, from the JSON."""

from __future__ import annotations

from typing import Any

import pytest

from hookserver.errors import InputError
from hookserver.informer.convert import pod_from_json
from hookserver.podclass import effective_requests
from hookserver.store.changes import merge_pod_records, pod_changed_fields
from hookserver.store.records import PodRecord


def _pod(containers: list[dict[str, Any]], init: list[dict[str, Any]] | None = None, **spec: Any) -> PodRecord:
    body = {"metadata": {"uid": "u1", "namespace": "ns", "name": "p"},
            "spec": {"containers": containers, "initContainers": init or [], **spec}}
    return pod_from_json(body, source="apiserver", now=1.0)


def _c(name: str, cpu: str = "", memory: str = "", restart: str = "") -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
    out: dict[str, Any] = {"name": name, "resources": {"requests": requests}}
    if restart:
        out["restartPolicy"] = restart
    return out


def test_containers_only_is_their_sum() -> None:
    pod = _pod([_c("a", "500m", "1Gi"), _c("b", "250m", "512Mi")])
    assert (effective_requests(pod).cpu_milli, effective_requests(pod).memory_bytes) == (750, 1536 << 20)


def test_a_large_init_container_sets_the_floor() -> None:
    pod = _pod([_c("a", "500m", "1Gi")], init=[_c("init", "2", "256Mi")])
    got = effective_requests(pod)
    assert (got.cpu_milli, got.memory_bytes) == (2000, 1 << 30)  # max per resource, not the sum


def test_sidecars_run_beside_the_containers_and_the_later_init_containers() -> None:
    # sidecar 100m starts first; then a 1-CPU init container runs with it (1100m); then containers 500m + sidecar.
    pod = _pod([_c("main", "500m", "100Mi")],
               init=[_c("proxy", "100m", "50Mi", restart="Always"), _c("migrate", "1", "10Mi")])
    got = effective_requests(pod)
    assert (got.cpu_milli, got.memory_bytes) == (1100, 150 << 20)


def test_pod_level_requests_replace_the_aggregate_and_overhead_is_added() -> None:
    pod = _pod([_c("a", "500m", "1Gi")], overhead={"cpu": "100m", "memory": "64Mi"},
               resources={"requests": {"cpu": "2"}})
    got = effective_requests(pod)
    assert (got.cpu_milli, got.memory_bytes) == (2100, (1 << 30) + (64 << 20))


def test_bad_init_containers_are_named() -> None:
    with pytest.raises(InputError, match=r"spec.initContainers\[0\].resources.requests\[cpu\]"):
        _pod([_c("a", "1")], init=[{"name": "x", "resources": {"requests": {"cpu": "lots"}}}])
    with pytest.raises(InputError, match="spec.initContainers"):
        _pod([_c("a", "1")], initContainers={"not": "a list"})


def test_an_init_container_change_is_a_resources_change_and_a_hook_copy_keeps_it() -> None:
    before = _pod([_c("a", "1")], init=[_c("i", "1")])
    after = _pod([_c("a", "1")], init=[_c("i", "3")])
    assert "resources" in pod_changed_fields(before, after)
    hook_copy = PodRecord(uid="u1", namespace="ns", name="p", sandbox_id="sb", source="nri")
    merged = merge_pod_records(after, hook_copy)
    assert merged.init_container_specs == after.init_container_specs and merged.sandbox_id == "sb"
