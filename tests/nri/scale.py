"""A node's worth of pods and containers as the runtime sends them in Synchronize.

Realistic objects, not minimal ones: every pod carries the labels a Deployment or Job gives it, the
koordinator annotations (the batch spec the hook reads, with values that differ from pod to pod so no
memo can answer the whole node from one entry), and a `kubectl.kubernetes.io/last-applied-configuration`
padded to the requested size (up to 64 KiB a pod is what large Helm releases and Argo workflows leave);
every container has the kubelet's CRI annotations, an environment, mounts and the resources the kubelet
gave it. Used by the Synchronize tests (correctness at scale) and `tests/bench/bench_nri_sync.py` (time).
"""

from __future__ import annotations

import json

from hookserver.api import nri_pb2
from tests.reference_example import SPEC_KEY

__all__ = ["expected_update", "node_objects"]


_MOUNTS = ("/etc/hosts", "/dev/termination-log", "/var/run/secrets/kubernetes.io/serviceaccount")


def _field(number: int, data: bytes) -> bytes:
    """One length-delimited protobuf field (tag, varint length, bytes)."""
    out, n = bytearray([number << 3 | 2]), len(data)
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out) + data


def _mount(destination: str, source: str) -> bytes:
    """Container.mounts entry: Mount{1 destination, 2 type, 3 source, 4 options}."""
    body = _field(1, destination.encode()) + _field(2, b"bind") + _field(3, source.encode())
    return _field(9, body + _field(4, b"rbind") + _field(4, b"rw"))


def _spec(i: int) -> dict[str, object]:
    cpu_a, cpu_b = 250 + (i % 7) * 250, 500 + (i % 5) * 500
    mem_a, mem_b = (1 + i % 3) << 28, (1 + i % 4) << 29
    return {
        "containers": {
            "main": {
                "requests": {"kubernetes.io/batch-cpu": str(cpu_a), "kubernetes.io/batch-memory": str(mem_a)},
                "limits": {"kubernetes.io/batch-cpu": str(cpu_a * 2), "kubernetes.io/batch-memory": str(mem_a)},
            },
            "sidecar": {
                "requests": {"kubernetes.io/batch-cpu": str(cpu_b), "kubernetes.io/batch-memory": str(mem_b)},
                "limits": {"kubernetes.io/batch-cpu": str(cpu_b), "kubernetes.io/batch-memory": str(mem_b)},
            },
        }
    }


def expected_update(i: int, name: str, *, workloads: int = 0) -> tuple[int, int, int]:
    """(shares, quota_us, memory limit bytes) the batchresource hook gives container `name` of pod i."""
    spec = _spec(i % workloads if workloads else i)["containers"]
    assert isinstance(spec, dict)
    c = spec[name]
    request_milli, limit_milli = int(c["requests"]["kubernetes.io/batch-cpu"]), int(c["limits"]["kubernetes.io/batch-cpu"])
    return request_milli * 1024 // 1000, limit_milli * 100, int(c["limits"]["kubernetes.io/batch-memory"])


def node_objects(
    pods: int, *, annotation_bytes: int = 2048, stopped_every: int = 0, workloads: int = 0
) -> tuple[list[nri_pb2.PodSandbox], list[nri_pb2.Container]]:
    """`pods` BE pods with two running containers each ("main", "sidecar"), ids `ctr-<i>-<name>`.

    `annotation_bytes` is roughly the size of each pod's annotations; `stopped_every` > 0 adds a
    stopped third container to every n-th pod (the runtime lists those too; they get no update).
    `workloads` > 0: the pods share that many batch specs (pods of a few Jobs), else up to 420 differ.
    """
    out_pods: list[nri_pb2.PodSandbox] = []
    out_ctrs: list[nri_pb2.Container] = []
    for i in range(pods):
        uid = f"0000{i:04d}-5e1f-4c8a-9d2b-{i:012d}"
        pod = nri_pb2.PodSandbox(id=f"{i:064x}", name=f"batch-job-{i}-x7k2p", uid=uid, namespace=f"team-{i % 20}")
        pod.labels.update({
            "koordinator.sh/qosClass": "BE", "app": f"batch-{i % 50}", "job-name": f"batch-job-{i}",
            "controller-uid": uid, "pod-template-hash": f"{i:08x}", "io.kubernetes.pod.namespace": pod.namespace,
        })
        spec_json = json.dumps(_spec(i % workloads if workloads else i))
        pod.annotations[SPEC_KEY] = spec_json
        pod.annotations["koordinator.sh/priority-class"] = "koord-batch"
        pod.annotations["kubernetes.io/config.source"] = "api"
        pod.annotations["kubernetes.io/config.seen"] = "2026-11-26T02:00:00.000000000Z"
        used = sum(len(k) + len(v) for k, v in pod.annotations.items())
        pad = max(0, annotation_bytes - used - 64)
        doc = json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod.name}, "spec": {"x": ""}})
        pod.annotations["kubectl.kubernetes.io/last-applied-configuration"] = doc.replace('"x": ""', '"x": "' + "a" * pad + '"')
        pod.linux.cgroup_parent = f"/kubepods/besteffort/pod{uid}"
        pod.linux.cgroups_path = f"/kubepods/besteffort/pod{uid}/{pod.id}"
        pod.linux.namespaces.add(type="network", path=f"/var/run/netns/cni-{i:08x}")
        pod.ips.append(f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}")
        out_pods.append(pod)
        names = ["main", "sidecar"] + (["init"] if stopped_every and i % stopped_every == 0 else [])
        for name in names:
            ctr = nri_pb2.Container(
                id=f"ctr-{i}-{name}", pod_sandbox_id=pod.id, name=name,
                state=nri_pb2.CONTAINER_STOPPED if name == "init" else nri_pb2.CONTAINER_RUNNING,
                pid=10000 + i,
            )
            ctr.annotations.update({
                "io.kubernetes.container.hash": f"{i:08x}", "io.kubernetes.container.restartCount": "0",
                "io.kubernetes.container.terminationMessagePath": "/dev/termination-log",
                "io.kubernetes.cri.container-name": name, "io.kubernetes.cri.sandbox-id": pod.id,
                "io.kubernetes.cri.image-name": "registry.example.com/batch/worker:v1.2.3",
            })
            ctr.labels.update({"io.kubernetes.container.name": name, "io.kubernetes.pod.uid": uid})
            ctr.args.extend(["/bin/worker", "--queue", f"q-{i % 10}"])
            ctr.env.extend([f"VAR_{k}=value-{k}-{i}" for k in range(12)])
            ctr.linux.resources.cpu.shares.value = 2
            ctr.linux.resources.cpu.period.value = 100000
            ctr.linux.resources.memory.limit.value = 0
            ctr.linux.cgroups_path = f"/kubepods/besteffort/pod{uid}/{ctr.id}"
            # Mounts (field 9) are not in our schema; put them on the wire as the runtime would, so the
            # decoder meets (and skips) them.
            ctr.MergeFromString(b"".join(_mount(m, f"/var/lib/kubelet/pods/{uid}{m}") for m in _MOUNTS))
            out_ctrs.append(ctr)
    return out_pods, out_ctrs
