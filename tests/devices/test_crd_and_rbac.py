"""deploy/crds/scheduling.koordinator.sh_devices.yaml accepts what the publisher writes (every field of a full
report is in the schema with its type, every required field present), and the ClusterRole grants exactly
create/patch on devices and nothing on the Node object itself."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from collectors.nvml import GpuDevice
from hookserver.devices.publisher import rfc3339
from hookserver.devices.rdma import RdmaDevice
from hookserver.devices.report import build_device
from tests.devices.test_report import gpu

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "deploy" / "crds" / "scheduling.koordinator.sh_devices.yaml"


def _problems(value: Any, schema: dict[str, Any], where: str) -> list[str]:
    """A small structural-schema check: types, properties known, required present."""
    if schema.get("x-kubernetes-int-or-string"):
        return [] if isinstance(value, (int, str)) else [f"{where}: not int-or-string"]
    kind = schema.get("type")
    if kind == "object":
        if not isinstance(value, dict):
            return [f"{where}: not an object"]
        out = [f"{where}: {r} missing" for r in schema.get("required", []) if r not in value]
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        for key, child in value.items():
            if props is not None and key in props:
                out += _problems(child, props[key], f"{where}.{key}")
            elif isinstance(extra, dict):
                out += _problems(child, extra, f"{where}.{key}")
            elif props is not None and where != "$.metadata":
                out.append(f"{where}.{key}: not in the schema (pruned by the apiserver)")
        return out
    if kind == "array":
        if not isinstance(value, list):
            return [f"{where}: not an array"]
        return [p for i, item in enumerate(value) for p in _problems(item, schema["items"], f"{where}[{i}]")]
    expected = {"string": str, "integer": int, "boolean": bool}[str(kind)]
    ok = isinstance(value, expected) and not (expected is int and isinstance(value, bool))
    if ok and "enum" in schema and value not in schema["enum"]:
        ok = False
    return [] if ok else [f"{where}: {value!r} is not {kind}"]


def _full_report() -> dict[str, Any]:
    gpus: list[GpuDevice] = [gpu(m) for m in range(8)]
    gpus[2] = gpu(2, healthy=False, reason="Xid79: fell off the bus")
    rdma = [RdmaDevice(bus_id="0000:3b:00.0", names=("mlx5_0",), minor=0, numa_node=0, pcie_root="pci0000:3a",
                       healthy=True, vf_enabled=True, vfs=("0000:3b:00.2",))]
    return build_device(node_name="n1", node_uid="u", gpus=gpus, driver_version="550.54.15", rdma=rdma,
                        unhealthy_since={"GPU-0002": rfc3339(1_800_000_000)})


def test_the_crd_is_cluster_scoped_v1alpha1_and_takes_the_whole_report() -> None:
    crd = yaml.safe_load(CRD.read_text())
    assert crd["metadata"]["name"] == "devices.scheduling.koordinator.sh"
    spec = crd["spec"]
    assert (spec["group"], spec["scope"], spec["names"]["kind"], spec["names"]["plural"]) == (
        "scheduling.koordinator.sh", "Cluster", "Device", "devices")
    (version,) = spec["versions"]
    assert version["name"] == "v1alpha1" and version["served"] and version["storage"]
    assert "subresources" not in version  # as koordinator's: status is no subresource
    schema = version["schema"]["openAPIV3Schema"]
    assert _problems(_full_report(), schema, "$") == []
    # and the checker does catch a document the schema refuses
    broken = _full_report()
    del broken["spec"]["devices"][0]["health"]
    broken["spec"]["devices"][1]["topology"]["nodeID"] = "zero"
    assert len(_problems(broken, schema, "$")) == 2


def test_the_cluster_role_grants_create_and_patch_on_devices_and_no_node_write() -> None:
    docs = [d for d in yaml.safe_load_all((ROOT / "deploy" / "hookserver.yaml").read_text()) if d]
    role = next(d for d in docs if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "hookserver")
    device_rules = [r for r in role["rules"] if "devices" in r["resources"]]
    assert device_rules == [{"apiGroups": ["scheduling.koordinator.sh"], "resources": ["devices"],
                             "verbs": ["create", "patch"]}]
    node_verbs = {v for r in role["rules"] if "nodes" in r["resources"] for v in r["verbs"]}
    assert node_verbs == {"get", "list", "watch"}  # GPU labels on the Node stay an operator's grant
