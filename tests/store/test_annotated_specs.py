"""A spec-less pod's batch requests and limits come from koord-manager's extended-resource-spec annotation
ahead of the runtime's announced values (issue 39): for a BE pod the kubelet announces cpu.shares 2 and no
quota ("no request"), while the annotation holds the spec's own batch resources.

Hand-worked inputs: container `main` asks batch-cpu 500 (milli-cores) and batch-memory 256Mi, limits 1000
and 512Mi; the kubelet's announcement for a BE container is shares 2, no quota, no memory limit.
"""

from __future__ import annotations

import json
import logging
from types import MappingProxyType

import pytest

from hookserver.koord_resources import ANNOTATION_EXTENDED_RESOURCE_SPEC as SPEC, BATCH_CPU, BATCH_MEMORY
from hookserver.resources import Resources
from hookserver.store.annotated_specs import annotated_container_spec
from hookserver.store.records import ContainerRecord, PodRecord
from hookserver.store.specs import SOURCE_ANNOTATION, container_spec

MAIN = {"requests": {BATCH_CPU: "500", BATCH_MEMORY: "256Mi"}, "limits": {BATCH_CPU: "1000", BATCH_MEMORY: "512Mi"}}
KUBELET_BE = Resources(cpu_shares=2, cpu_period_us=100_000)


def _pod(annotation: object = None, *, qos: str = "BE", text: str | None = None) -> PodRecord:
    annotations = {} if annotation is None and text is None else {SPEC: text if text is not None else json.dumps(annotation)}
    return PodRecord(uid="u-1", namespace="batch", name="job", qos_class=qos, source="proxy",
                     annotations=MappingProxyType(annotations))


def _record(name: str = "main", resources: Resources = KUBELET_BE) -> ContainerRecord:
    return ContainerRecord(id=f"c-{name}", pod_uid="u-1", name=name, source="proxy", resources=resources)


def test_a_be_container_takes_the_annotations_batch_resources() -> None:
    spec = container_spec(_pod({"containers": {"main": MAIN}}), "main", _record())
    assert spec.source == SOURCE_ANNOTATION == "extended-resource-spec annotation"
    assert dict(spec.requests) == {BATCH_CPU: "500", BATCH_MEMORY: "256Mi"}
    assert dict(spec.limits) == {BATCH_CPU: "1000", BATCH_MEMORY: "512Mi"}


def test_the_annotation_wins_over_what_the_runtime_announced_for_a_be_pod() -> None:
    announced = Resources(cpu_shares=4096, cpu_quota_us=800_000, cpu_period_us=100_000, memory_limit_bytes=1 << 30)
    spec = container_spec(_pod({"containers": {"main": MAIN}}), "main", _record(resources=announced))
    assert dict(spec.requests) == {BATCH_CPU: "500", BATCH_MEMORY: "256Mi"}
    assert dict(spec.limits) == {BATCH_CPU: "1000", BATCH_MEMORY: "512Mi"}


def test_it_stands_in_before_the_runtime_announced_anything() -> None:
    spec = container_spec(_pod({"containers": {"main": MAIN}}), "main", None)
    assert spec.source == SOURCE_ANNOTATION and dict(spec.requests)[BATCH_CPU] == "500"


def test_a_container_the_annotation_does_not_list_keeps_the_announced_values() -> None:
    announced = Resources(cpu_shares=2, cpu_quota_us=200_000, cpu_period_us=100_000)
    spec = container_spec(_pod({"containers": {"main": MAIN}}), "sidecar", _record("sidecar", announced))
    assert spec.source == "runtime (proxy)" and dict(spec.limits) == {BATCH_CPU: "2000"}


def test_the_pod_spec_still_wins() -> None:
    pod = PodRecord(uid="u-1", namespace="batch", name="job", qos_class="BE",
                    annotations={SPEC: json.dumps({"containers": {"main": MAIN}})},
                    container_specs={"main": ({BATCH_CPU: "700"}, {})})
    spec = container_spec(pod, "main", _record())
    assert spec.source == "pod spec" and dict(spec.requests) == {BATCH_CPU: "700"}


def test_a_pod_that_is_not_be_keeps_its_announced_cpu_and_memory_beside_the_batch_resources() -> None:
    announced = Resources(cpu_shares=1024, cpu_quota_us=200_000, cpu_period_us=100_000)
    spec = container_spec(_pod({"containers": {"main": MAIN}}, qos="LS"), "main", _record(resources=announced))
    assert spec.source == "extended-resource-spec annotation + runtime (proxy)"
    assert dict(spec.requests) == {"cpu": "1000m", BATCH_CPU: "500", BATCH_MEMORY: "256Mi"}
    assert dict(spec.limits) == {"cpu": "2000m", BATCH_CPU: "1000", BATCH_MEMORY: "512Mi"}


def test_deprecated_names_and_json_numbers_read_as_the_current_names() -> None:
    entry = {"requests": {"koordinator.sh/batch-cpu": 750, "koordinator.sh/batch-memory": "1Gi"}, "limits": None}
    spec = container_spec(_pod({"containers": {"main": entry}}), "main", _record())
    assert dict(spec.requests) == {BATCH_CPU: "750", BATCH_MEMORY: "1Gi"} and dict(spec.limits) == {}


@pytest.mark.parametrize("text", [
    "{not json",
    "[1, 2]",
    json.dumps({"containers": ["main"]}),
    json.dumps({"containers": {"main": "500"}}),
    json.dumps({"containers": {"main": {"requests": [BATCH_CPU]}}}),
    json.dumps({"containers": {"main": {"requests": {BATCH_CPU: "half"}}}}),
    json.dumps({"containers": {"main": {"requests": {BATCH_CPU: "-500"}}}}),
    json.dumps({"containers": {"main": {"requests": {BATCH_CPU: True}}}}),
    json.dumps({"containers": {"main": {"limits": {BATCH_MEMORY: "99999999999999999999Ei"}}}}),
    json.dumps({"containers": {"main": {"requests": {BATCH_CPU: "1"}}, "x": 3}}),
])
def test_a_malformed_annotation_falls_back_to_the_announced_values(text: str) -> None:
    announced = Resources(cpu_shares=2, cpu_quota_us=300_000, cpu_period_us=100_000)
    spec = container_spec(_pod(text=text), "main", _record(resources=announced))
    assert spec.source == "runtime (proxy)" and dict(spec.limits) == {BATCH_CPU: "3000"}
    assert dict(spec.requests) == {}


def test_a_malformed_annotation_logs_one_line_for_its_pod(caplog: pytest.LogCaptureFixture) -> None:
    pod = PodRecord(uid="u-log-once", namespace="batch", name="broken", qos_class="BE", annotations={SPEC: "{nope"})
    with caplog.at_level(logging.WARNING, logger="hookserver.store.annotated_specs"):
        for _ in range(3):
            assert container_spec(pod, "main", _record()).source == "none"
    lines = [r.getMessage() for r in caplog.records if r.name == "hookserver.store.annotated_specs"]
    assert len(lines) == 1 and "batch/broken (u-log-once)" in lines[0]


def test_the_parse_is_cached_by_the_annotation_text() -> None:
    text = json.dumps({"containers": {"main": MAIN, "other": MAIN}})
    first = annotated_container_spec(_pod(text=text), "main")
    again = annotated_container_spec(_pod(text=(text + " ")[:-1]), "main")  # an equal text, another object
    assert first is not None and again is first  # the same parsed entry, not a second parse


def test_no_annotation_or_no_containers_is_nothing() -> None:
    assert annotated_container_spec(_pod(), "main") is None
    assert annotated_container_spec(_pod({}), "main") is None
    assert annotated_container_spec(_pod({"containers": None}), "main") is None
    assert container_spec(_pod(), "main", _record()).source == "none"  # kubelet's BE shares: no request
