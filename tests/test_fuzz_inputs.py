"""Fuzzed input at every entry point that parses something from outside: each parser either returns its value
or raises its own typed error naming what is wrong; nothing else escapes (an AttributeError or TypeError out of
a parser is a crash in the informer loop, a failed hook, a checkpoint that stops a start).

A short profile runs in `make test`; `make soak` runs it again with SOAK_FUZZ_EXAMPLES (default there 2000).
NRI/ttrpc frames are fuzzed in tests/nri/test_server_fuzz.py and tests/nri/test_wire.py (reused by the soak).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hookserver.api import runtime_hook_pb2 as pb
from hookserver.errors import (
    AnnotationError,
    CheckpointCorrupt,
    ConfigError,
    InformerError,
    InputError,
    QuantityError,
)
from hookserver.extended_resource_spec import _json_value, parse_spec_text
from hookserver.informer.convert import node_from_json, pod_from_json
from hookserver.predictor.checkpoint import decode_checkpoint, encode_checkpoint
from hookserver.predictor.models import ModelTable
from hookserver.quantity import parse_quantity
from hookserver.slo.configmap import parse_slo_configmap
from hookserver.slo.document import parse_slo_document, parse_slo_text
from tests.proxy.conftest import Harness, build
from tests.reference_example import SPEC_KEY, WORKED_SPEC

EXAMPLES = int(os.environ.get("SOAK_FUZZ_EXAMPLES", "60"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))

_scalar = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True),
                    st.text(max_size=20),
                    st.sampled_from(["1", "100m", "1Gi", "-1", "1e3", "0.5", "1Ki", "BE", "LS", "", "true", "50%"]))
_keys = st.one_of(st.text(max_size=12), st.sampled_from([
    "metadata", "spec", "status", "name", "namespace", "uid", "labels", "annotations", "containers", "resources",
    "requests", "limits", "cpu", "memory", "nodeName", "phase", "qosClass", "containerStatuses", "containerID",
    "creationTimestamp", "kind", "data", "resourceUsedThresholdWithBE", "enable", "cpuSuppressThresholdPercent",
    "colocation-config", "resource-threshold-config", "resource-qos-config", "cpu-burst-config", "nodeConfigs",
    "nodeSelector", "matchLabels", "beQOS", "lsrQOS", "cpuQOS", "memoryQOS", "UID", "CPU", "Memory",
    "LastUpdated", "bucketWeights", "totalWeight", "referenceTimestamp", "Samples", "FirstSample",
    "kubernetes.io/batch-cpu", "initContainers", "priority", "deletionTimestamp", "managedFields"]))
_json = st.recursive(_scalar, lambda children: st.one_of(
    st.lists(children, max_size=4), st.dictionaries(_keys, children, max_size=6)), max_leaves=30)


def _mutations(base: Any) -> st.SearchStrategy[Any]:
    """A valid document with one subtree replaced by anything: the cases most likely to pass the first checks."""
    def replace(doc: Any, path: list[int], value: Any) -> Any:
        if not path or not isinstance(doc, (dict, list)) or not doc:
            return value
        if isinstance(doc, dict):
            key = list(doc)[path[0] % len(doc)]
            return {**doc, key: replace(doc[key], path[1:], value)}
        i = path[0] % len(doc)
        return [*doc[:i], replace(doc[i], path[1:], value), *doc[i + 1:]]

    return st.builds(replace, st.just(base), st.lists(st.integers(0, 50), min_size=1, max_size=6), _json)


_POD = {"metadata": {"name": "p", "namespace": "n", "uid": "u", "labels": {"koordinator.sh/qosClass": "BE"},
                     "annotations": {SPEC_KEY: json.dumps(WORKED_SPEC)}, "creationTimestamp": "2024-01-01T00:00:00Z"},
        "spec": {"nodeName": "a", "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"},
                                                                             "limits": {"memory": "1Gi"}}}]},
        "status": {"phase": "Running", "qosClass": "BestEffort",
                   "containerStatuses": [{"name": "c", "containerID": "containerd://abc"}]}}
_SLO = {"spec": {"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressThresholdPercent": 65},
                 "resourceQOSStrategy": {"beClass": {"cpuQOS": {"enable": True, "groupIdentity": -1}}}}}
_CONFIGMAP = {"colocation-config": json.dumps({"enable": True, "cpuReclaimThresholdPercent": 60,
                                               "nodeConfigs": [{"nodeSelector": {"matchLabels": {"a": "b"}},
                                                                "name": "x", "cpuReclaimThresholdPercent": 50}]}),
              "resource-threshold-config": json.dumps({"clusterStrategy": {"enable": True}})}


def _table() -> ModelTable:
    return ModelTable(cpu_half_life_s=43200.0, memory_half_life_s=86400.0)


def _checkpoint() -> dict[str, Any]:
    model = _table().new_model("uid-1")
    model.cpu.add_sample(0.5, 1.0, 1_700_000_000.0)
    return dict(json.loads(encode_checkpoint(model)))


@FUZZ
@given(st.one_of(st.text(max_size=40), st.from_regex(r"[+-]?[0-9.eE+-]{0,30}(m|k|Ki|Mi|Gi|Ti|Pi|Ei|M|G|T|P|E|n|u)?",
                                                      fullmatch=True), _scalar))
def test_quantities(text: Any) -> None:
    try:
        parse_quantity(text, field="q")
    except QuantityError:
        pass


@FUZZ
@given(st.one_of(st.text(max_size=200), _json.map(json.dumps), _mutations(WORKED_SPEC).map(json.dumps)))
def test_extended_resource_spec_annotation(text: str) -> None:
    try:
        parse_spec_text(text)
    except (AnnotationError, QuantityError):
        pass


def _loads(text: str) -> tuple[str, Any]:
    try:
        return "ok", json.loads(text)
    except ValueError as exc:
        return "error", str(exc)


@FUZZ
@given(st.one_of(st.text(max_size=200), _json.map(json.dumps), _mutations(WORKED_SPEC).map(json.dumps),
                 st.tuples(_json.map(json.dumps), st.sampled_from(["", " ", "\n", " x", "}", "{}", "\t "]),
                           st.sampled_from(["", " ", "\n"])).map(lambda t: t[2] + t[0] + t[1])))
def test_the_spec_annotations_json_reads_as_json_loads(text: str) -> None:
    # The scanner alone reads a spec; any text must give json.loads's value, or its error (whitespace around
    # the value, extra data after it, a value cut short). NaN is compared by its text.
    try:
        got: tuple[str, Any] = ("ok", _json_value(text))
    except ValueError as exc:
        got = ("error", str(exc))
    assert repr(got) == repr(_loads(text))


@FUZZ
@given(st.one_of(_json, _mutations(_POD)))
def test_pods_from_the_apiserver_and_the_kubelets_pod_list(obj: Any) -> None:
    try:
        pod_from_json(obj, source="kubelet", now=0.0)
    except (InformerError, InputError):
        pass
    try:
        node_from_json(obj, source="apiserver", now=0.0)
    except (InformerError, InputError):
        pass


@FUZZ
@given(st.one_of(_json, _mutations(_SLO), _mutations({"kind": "ConfigMap", "data": _CONFIGMAP})))
def test_nodeslo_and_slo_controller_config_documents(doc: Any) -> None:
    try:
        parse_slo_document(doc, origin="fuzz")
    except ConfigError:
        pass


@FUZZ
@given(st.one_of(st.dictionaries(_keys, _json, max_size=4), _mutations(_CONFIGMAP),
                 st.dictionaries(st.sampled_from(sorted(_CONFIGMAP)), _json.map(json.dumps), max_size=3)))
def test_slo_controller_config_data(data: dict[str, Any]) -> None:
    try:
        parse_slo_configmap(data, origin="fuzz")
    except ConfigError:
        pass


@FUZZ
@given(st.text(max_size=300))
def test_slo_file_text(text: str) -> None:
    try:
        parse_slo_text(text, origin="fuzz")
    except ConfigError:
        pass


@FUZZ
@given(st.one_of(st.binary(max_size=200), _json.map(lambda d: json.dumps(d).encode()),
                 _mutations(_checkpoint()).map(lambda d: json.dumps(d).encode())))
def test_checkpoints(data: bytes) -> None:
    try:
        decode_checkpoint(data, name="uid-1.json", table=_table())
    except CheckpointCorrupt:
        pass


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    h = build(tmp_path_factory.mktemp("fuzzproxy"))
    yield h
    h.channel.close()
    h.server.stop(grace_s=0.5)


_labels = st.dictionaries(st.one_of(st.text(max_size=10), st.just("koordinator.sh/qosClass")),
                          st.one_of(st.text(max_size=10), st.sampled_from(["BE", "LS", "LSR", "SYSTEM"])), max_size=3)
_annotations = st.dictionaries(st.one_of(st.text(max_size=10), st.just(SPEC_KEY)),
                               st.one_of(st.text(max_size=40), _mutations(WORKED_SPEC).map(json.dumps)), max_size=2)


@FUZZ
@given(name=st.text(max_size=10), labels=_labels, annotations=_annotations,
       parent=st.one_of(st.text(max_size=30), st.sampled_from(["/../../etc", "/kubepods/../..", "//x", ""])),
       shares=st.integers(0, 2**62), ctr=st.text(max_size=6))
def test_proxy_requests_are_answered_or_refused_naming_a_field(
    proxy: Harness, name: str, labels: dict[str, str], annotations: dict[str, str], parent: str, shares: int,
    ctr: str,
) -> None:
    """Through the real gRPC server: OK (fail open) or INVALID_ARGUMENT; never UNKNOWN or INTERNAL."""
    meta = pb.PodSandboxMetadata(name=name, namespace="ns", uid="u")
    calls = [
        lambda: proxy.stub.PreRunPodSandboxHook(pb.PodSandboxHookRequest(
            pod_meta=meta, labels=labels, annotations=annotations, cgroup_parent=parent), timeout=10),
        lambda: proxy.stub.PreCreateContainerHook(pb.ContainerResourceHookRequest(
            pod_meta=meta, container_meta=pb.ContainerMetadata(name=ctr), pod_labels=labels,
            pod_annotations=annotations, pod_cgroup_parent=parent,
            container_resources=pb.LinuxContainerResources(cpu_shares=shares)), timeout=10),
    ]
    for call in calls:
        try:
            call()
        except grpc.RpcError as exc:
            assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT, (exc.code(), exc.details())


def test_the_short_profile_is_short() -> None:
    """`make test` keeps the profile small; the soak raises it."""
    assert EXAMPLES <= 5000
    assert Path(__file__).name == "test_fuzz_inputs.py"
