"""deploy/: the shipped config parses with our own loader, the Containerfile is what the image writer
reads, and the writer's OCI layout and docker-archive are self-consistent (digests, diff ids, names).
Fast: no apiserver, no root, no image build (those are `make e2e` and `make image-test`)."""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import sys
import tarfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from hookserver import __version__
from hookserver.config import load_settings
from hookserver.informer import InformerSettings

ROOT = Path(__file__).resolve().parents[1]


def _oci() -> ModuleType:
    spec = importlib.util.spec_from_file_location("hookserver_deploy_oci", ROOT / "deploy" / "image" / "oci.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


oci = _oci()


def test_the_configmaps_config_is_valid_for_this_build(tmp_path: Path) -> None:
    for manifest in sorted((ROOT / "deploy").glob("hookserver*.yaml")):
        docs = [d for d in yaml.safe_load_all(manifest.read_text()) if d]
        config = next(d for d in docs if d["kind"] == "ConfigMap")["data"]["config.yaml"]
        path = tmp_path / "config.yaml"
        path.write_text(config)
        settings = load_settings(config_file=str(path), overrides={"node_name": "n"})
        assert settings.cgroup.root == "/host-cgroup" and settings.proc_root == "/host-proc"
        daemonset = next(d for d in docs if d["kind"] == "DaemonSet")
        mounts = {m["mountPath"] for m in daemonset["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]}
        # every host path the config names is mounted
        for configured in (settings.cgroup.root, settings.proc_root, settings.hook.registration_dir):
            assert configured in mounts, configured
        assert any(settings.hook.socket.startswith(m + "/") for m in mounts)
        # the kubelet's root dir (cpu_manager_state), read-only and as a directory, as koordlet mounts it
        spec = daemonset["spec"]["template"]["spec"]
        kubelet = next(m for m in spec["containers"][0]["volumeMounts"]
                       if m["mountPath"] == settings.topology.kubelet_root_dir)
        assert kubelet.get("readOnly") is True, manifest
        volume = next(v for v in spec["volumes"] if v["name"] == kubelet["name"])
        assert volume["hostPath"]["path"] == "/var/lib/kubelet", manifest


def test_the_slo_config_role_grants_one_configmap_in_koordinators_namespace() -> None:
    """The Role is what the informer's ConfigMap source needs, and its binding names the agent's account;
    that the grant works and nothing more (tests/kube/test_rbac.py) depends on this shape."""
    manifest = (ROOT / "deploy" / "hookserver.yaml").read_text()
    docs = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(manifest) if d}
    role = docs[("Role", "hookserver-slo-config")]
    binding = docs[("RoleBinding", "hookserver-slo-config")]
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == "koordinator-system"
    assert role["rules"] == [{"apiGroups": [""], "resources": ["configmaps"],
                              "resourceNames": ["slo-controller-config"], "verbs": ["get", "list", "watch"]}]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                  "name": "hookserver-slo-config"}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "hookserver", "namespace": "hookserver-system"}]
    assert "Namespace" not in {kind for kind, name in docs if name == "koordinator-system"}
    assert InformerSettings().slo_configmap == "koordinator-system/slo-controller-config"


def test_the_capacity_admission_policy_names_the_agent_and_the_published_resources() -> None:
    """deploy/capacity-admission-policy.yaml cannot be admitted by the 1.20 apiserver of the e2e tier; what can be
    checked here: it binds to the policy, matches the agent's ServiceAccount and only nodes/status updates, and
    allows exactly the resources the publisher writes (a new published resource must be added there too)."""
    from hookserver.koord_resources import PUBLISHED_RESOURCES

    docs = [d for d in yaml.safe_load_all((ROOT / "deploy" / "capacity-admission-policy.yaml").read_text()) if d]
    policy, binding = docs
    assert binding["spec"]["policyName"] == policy["metadata"]["name"] and binding["spec"]["validationActions"] == ["Deny"]
    assert policy["spec"]["matchConstraints"]["resourceRules"][0]["resources"] == ["nodes/status"]
    (condition,) = policy["spec"]["matchConditions"]
    assert "system:serviceaccount:hookserver-system:hookserver" in condition["expression"]
    published = next(v["expression"] for v in policy["spec"]["variables"] if v["name"] == "published")
    assert yaml.safe_load(published) == list(PUBLISHED_RESOURCES)
    manifest = {(d["kind"], d["metadata"]["name"]) for d in yaml.safe_load_all((ROOT / "deploy" / "hookserver.yaml")
                                                                              .read_text()) if d}
    assert ("ServiceAccount", "hookserver") in manifest


def test_the_containerfile_defines_a_non_root_image_with_the_agent_as_entrypoint() -> None:
    spec = oci.parse_containerfile((ROOT / "deploy" / "Containerfile").read_text(), {"VERSION": __version__})
    assert spec.layer_tar == "build/image/rootfs.tar"
    assert spec.user == "65532:65532"
    assert spec.entrypoint == ["/opt/hookserver/bin/hookserver"]
    assert spec.labels["org.opencontainers.image.version"] == __version__
    assert spec.env["PATH"].startswith("/opt/hookserver/bin:")
    assert spec.exposed == ["9316/tcp"]


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("FROM debian:bookworm\nADD r.tar /\n", "only FROM scratch"),
        ("FROM scratch\nRUN apt-get install x\nADD r.tar /\n", "RUN is not supported"),
        ("FROM scratch\nENV PATH\n", "expected KEY=VALUE"),
        ("FROM scratch\nENTRYPOINT /bin/x\nADD r.tar /\n", r"JSON \(exec\) form"),
        ("FROM scratch\nUSER 1\n", "no `ADD <rootfs.tar> /`"),
        ("ADD r.tar /\n", "ADD before FROM"),
        ("FROM scratch\nADD a.tar /\nADD b.tar /\n", "exactly one"),
    ],
)
def test_the_writer_refuses_what_it_cannot_honour(text: str, error: str) -> None:
    with pytest.raises(oci.ContainerfileError, match=error):
        oci.parse_containerfile(text, {})


def test_an_unused_build_arg_is_an_error() -> None:
    with pytest.raises(oci.ContainerfileError, match="--build-arg NOPE has no ARG line"):
        oci.parse_containerfile("FROM scratch\nADD r.tar /\n", {"NOPE": "1"})


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_the_written_image_is_self_consistent(tmp_path: Path) -> None:
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w") as tar:
        info = tarfile.TarInfo("opt/hello.txt")
        payload = b"hello\n"
        info.size = len(payload)
        tar.addfile(info, io.BytesIO(payload))
    (tmp_path / "rootfs.tar").write_bytes(layer.getvalue())
    spec = oci.parse_containerfile(
        'FROM scratch\nARG V=1\nADD rootfs.tar /\nUSER 7:7\nENTRYPOINT ["/x"]\nLABEL v="${V}"\n', {"V": "2.0"}
    )
    out = tmp_path / "out"
    out.mkdir()
    summary: dict[str, Any] = oci.build(spec, context=tmp_path, tag="demo:2.0", out=out, created_epoch=86400)
    blobs = out / "oci" / "blobs" / "sha256"
    for blob in blobs.iterdir():  # content addressing holds for every blob
        assert _sha(blob.read_bytes()) == blob.name
    index = json.loads((out / "oci" / "index.json").read_text())
    entry = index["manifests"][0]
    assert entry["annotations"]["org.opencontainers.image.ref.name"] == "2.0"
    assert entry["annotations"]["io.containerd.image.name"] == "docker.io/library/demo:2.0"
    manifest = json.loads((blobs / entry["digest"].split(":")[1]).read_text())
    config = json.loads((blobs / manifest["config"]["digest"].split(":")[1]).read_text())
    assert config["rootfs"]["diff_ids"] == [f"sha256:{_sha(layer.getvalue())}"]
    assert config["config"]["User"] == "7:7" and config["config"]["Labels"] == {"v": "2.0"}
    assert config["created"] == "1970-01-02T00:00:00Z"
    assert summary["uncompressed_bytes"] == len(layer.getvalue())
    with tarfile.open(out / "demo-2.0.docker.tar") as tar:
        docker_manifest = json.loads(tar.extractfile("manifest.json").read())  # type: ignore[union-attr]
        assert docker_manifest[0]["RepoTags"] == ["demo:2.0"]
        assert tar.extractfile(docker_manifest[0]["Layers"][0]).read() == layer.getvalue()  # type: ignore[union-attr]
    with tarfile.open(out / "demo-2.0.oci.tar") as tar:
        assert {"index.json", "oci-layout"} <= set(tar.getnames())
    # same inputs, same digests (reproducible)
    again = tmp_path / "again"
    again.mkdir()
    assert oci.build(spec, context=tmp_path, tag="demo:2.0", out=again, created_epoch=86400)["manifest_digest"] == \
        summary["manifest_digest"]
