"""Generated protobuf code is committed: it must match what `make protos` produces today, byte for byte.

Generic over every .proto under protos/, so every helper's protos are covered. Plus the wire contract of
the runtime hook API (reference koordinator-runtimehooks.md §1.2), checked through the descriptors, and a
golden encoding, so a renumbered or retyped field cannot slip through a regeneration.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from hookserver.api import runtime_hook_pb2 as pb

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "protos"
PROTOS = sorted(PROTO_ROOT.rglob("*.proto"))


def _generate(out: Path) -> None:
    """Exactly the Makefile's `protos` invocation, written into `out` instead of the checkout."""
    cmd = [
        sys.executable, "-m", "grpc_tools.protoc", "-I", "protos",
        f"--python_out={out}", f"--pyi_out={out}", f"--grpc_python_out={out}",
        *(str(p.relative_to(ROOT)) for p in PROTOS),
    ]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"protoc failed: {done.stderr}"


def test_committed_generated_code_is_current(tmp_path: Path) -> None:
    assert PROTOS, "no .proto files under protos/"
    _generate(tmp_path)
    generated = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    assert generated, "protoc produced nothing"
    stale = [
        str(rel) for rel in generated
        if not (ROOT / rel).is_file() or (ROOT / rel).read_bytes() != (tmp_path / rel).read_bytes()
    ]
    assert not stale, "stale or missing generated files (run `make protos`): " + ", ".join(stale)


# -- the runtime hook wire contract ----------------------------------------------------------------
T = FieldDescriptor
MAP = "map<string,string>"
LCR = "runtime.v1alpha1.LinuxContainerResources"

# message -> field name -> (number, type); nested messages by full name, repeated ones prefixed "repeated ".
WIRE: dict[str, dict[str, tuple[int, object]]] = {
    "PodSandboxMetadata": {
        "name": (1, T.TYPE_STRING), "uid": (2, T.TYPE_STRING), "namespace": (3, T.TYPE_STRING),
        "attempt": (4, T.TYPE_UINT32),
    },
    "PodSandboxHookRequest": {
        "pod_meta": (1, "runtime.v1alpha1.PodSandboxMetadata"), "runtime_handler": (2, T.TYPE_STRING),
        "labels": (3, MAP), "annotations": (4, MAP), "cgroup_parent": (5, T.TYPE_STRING),
        "overhead": (6, LCR), "resources": (7, LCR),
    },
    "PodSandboxHookResponse": {
        "labels": (1, MAP), "annotations": (2, MAP), "cgroup_parent": (3, T.TYPE_STRING), "resources": (4, LCR),
    },
    "LinuxContainerResources": {
        "cpu_period": (1, T.TYPE_INT64), "cpu_quota": (2, T.TYPE_INT64), "cpu_shares": (3, T.TYPE_INT64),
        "memory_limit_in_bytes": (4, T.TYPE_INT64), "oom_score_adj": (5, T.TYPE_INT64),
        "cpuset_cpus": (6, T.TYPE_STRING), "cpuset_mems": (7, T.TYPE_STRING),
        "hugepage_limits": (8, "repeated runtime.v1alpha1.HugepageLimit"), "unified": (9, MAP),
        "memory_swap_limit_in_bytes": (10, T.TYPE_INT64),
    },
    "HugepageLimit": {"page_size": (1, T.TYPE_STRING), "limit": (2, T.TYPE_UINT64)},
    "ContainerMetadata": {"name": (1, T.TYPE_STRING), "attempt": (2, T.TYPE_UINT32), "id": (3, T.TYPE_STRING)},
    "ContainerResourceHookRequest": {
        "pod_meta": (1, "runtime.v1alpha1.PodSandboxMetadata"),
        "container_meta": (2, "runtime.v1alpha1.ContainerMetadata"), "container_annotations": (3, MAP),
        "container_resources": (4, LCR), "pod_resources": (5, LCR), "pod_annotations": (6, MAP),
        "pod_labels": (7, MAP), "pod_cgroup_parent": (8, T.TYPE_STRING), "container_envs": (9, MAP),
    },
    "ContainerResourceHookResponse": {
        "container_annotations": (1, MAP), "container_resources": (2, LCR), "pod_cgroup_parent": (3, T.TYPE_STRING),
        "container_envs": (4, MAP),
    },
}

RPCS = {
    "PreRunPodSandboxHook": ("PodSandboxHookRequest", "PodSandboxHookResponse"),
    "PostStopPodSandboxHook": ("PodSandboxHookRequest", "PodSandboxHookResponse"),
    "PreCreateContainerHook": ("ContainerResourceHookRequest", "ContainerResourceHookResponse"),
    "PreStartContainerHook": ("ContainerResourceHookRequest", "ContainerResourceHookResponse"),
    "PostStartContainerHook": ("ContainerResourceHookRequest", "ContainerResourceHookResponse"),
    "PostStopContainerHook": ("ContainerResourceHookRequest", "ContainerResourceHookResponse"),
    "PreUpdateContainerResourcesHook": ("ContainerResourceHookRequest", "ContainerResourceHookResponse"),
}


def _shape(field: FieldDescriptor) -> object:
    if field.type != T.TYPE_MESSAGE:
        assert not field.is_repeated, f"{field.full_name}: unexpected repeated scalar"
        return field.type
    sub: Descriptor = field.message_type
    if sub.GetOptions().map_entry:
        key, value = sub.fields_by_name["key"], sub.fields_by_name["value"]
        assert (key.number, key.type, value.number, value.type) == (1, T.TYPE_STRING, 2, T.TYPE_STRING)
        return MAP
    return f"repeated {sub.full_name}" if field.is_repeated else sub.full_name


def test_package_and_messages_are_exactly_the_reference_set() -> None:
    assert pb.DESCRIPTOR.package == "runtime.v1alpha1"
    assert set(pb.DESCRIPTOR.message_types_by_name) == set(WIRE)
    assert not pb.DESCRIPTOR.enum_types_by_name  # the reference API has no enums


@pytest.mark.parametrize("message", sorted(WIRE))
def test_every_field_has_the_reference_number_and_type(message: str) -> None:
    descriptor = pb.DESCRIPTOR.message_types_by_name[message]
    got = {f.name: (f.number, _shape(f)) for f in descriptor.fields}
    assert got == WIRE[message]


def test_service_has_the_seven_unary_rpcs() -> None:
    service = pb.DESCRIPTOR.services_by_name["RuntimeHookService"]
    assert service.full_name == "runtime.v1alpha1.RuntimeHookService"
    got = {m.name: (m.input_type.name, m.output_type.name) for m in service.methods}
    assert got == RPCS
    assert not any(m.client_streaming or m.server_streaming for m in service.methods)


# Hand-assembled from the proto3 wire rules: tag = number << 3 | wire type.
GOLDEN = bytes.fromhex(
    "0a06" "0a0170" "120175"                      # 1 pod_meta {name "p", uid "u"}
    "1205" "0a0163" "1002"                        # 2 container_meta {name "c", attempt 2}
    "220b" "10" "ffffffffffffffffff01"            # 4 container_resources {cpu_quota -1 (10-byte varint)}
    "4202" "2f6b"                                 # 8 pod_cgroup_parent "/k"
    "4a06" "0a0141" "120142"                      # 9 container_envs {"A": "B"} as a map entry
)


def test_golden_encoding_of_a_container_request() -> None:
    req = pb.ContainerResourceHookRequest(
        pod_meta=pb.PodSandboxMetadata(name="p", uid="u"),
        container_meta=pb.ContainerMetadata(name="c", attempt=2),
        container_resources=pb.LinuxContainerResources(cpu_quota=-1),
        pod_cgroup_parent="/k",
        container_envs={"A": "B"},
    )
    assert req.SerializeToString(deterministic=True) == GOLDEN
    back = pb.ContainerResourceHookRequest.FromString(GOLDEN)
    assert back == req and back.container_resources.cpu_quota == -1
