"""Sidecar (restartPolicy: Always) init containers in every place a pod's requests are counted (issue 37, item 3):
the QoS eviction ledgers, the BE CPU request the collectors report, the predictor's priority requests, all as
Kubernetes' `resource.PodRequests` counts them (koordlet: `util.GetPodRequest` -> `resourcehelper.PodRequests`).

One pod, worked out by hand:
  containers      main     cpu 500m  memory 100Mi  batch-cpu 1000  batch-memory 1Gi
  initContainers  proxy    cpu 100m  memory 50Mi   batch-cpu 200   batch-memory 128Mi   restartPolicy Always
                  migrate  cpu 1     -             batch-cpu 3000  batch-memory 256Mi
per resource max(sum of containers + sidecars, each init container + the sidecars started before it):
  cpu           max(500m + 100m, 100m, 1000m + 100m)            = 1100m
  memory        max(100Mi + 50Mi, 50Mi, 0 + 50Mi)                = 150Mi
  batch-cpu     max(1000 + 200, 200, 3000 + 200)                 = 3200
  batch-memory  max(1Gi + 128Mi, 128Mi, 256Mi + 128Mi)           = 1152Mi
"""

from __future__ import annotations

from typing import Any

from collectors.targets import _cpu_request_cores
from hookserver.informer.convert import pod_from_json
from hookserver.koord_resources import BATCH_CPU, BATCH_MEMORY
from hookserver.podclass import node_allocatable
from hookserver.predictor.predictors import compute_reclaimable
from hookserver.store.records import PodRecord
from qos.snapshot.builder import pod_requests, pod_requests_milli
from tests.predictor.helpers import DAY, NOW, node, prediction

MI = 1 << 20


def _c(name: str, restart: str = "", **requests: str) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "resources": {"requests": {k.replace("_", "-").replace(
        "batch-", "kubernetes.io/batch-"): v for k, v in requests.items()}}}
    if restart:
        out["restartPolicy"] = restart
    return out


def _pod(labels: dict[str, str] | None = None) -> PodRecord:
    body = {
        "metadata": {"uid": "uid-p", "namespace": "ns", "name": "p", "labels": labels or {},
                     "creationTimestamp": "2020-01-01T00:00:00Z"},
        "spec": {
            "containers": [_c("main", cpu="500m", memory="100Mi", batch_cpu="1000", batch_memory="1Gi")],
            "initContainers": [
                _c("proxy", "Always", cpu="100m", memory="50Mi", batch_cpu="200", batch_memory="128Mi"),
                _c("migrate", cpu="1", batch_cpu="3000", batch_memory="256Mi"),
            ],
        },
        "status": {"phase": "Running", "qosClass": "Burstable"},
    }
    return pod_from_json(body, source="apiserver", now=1.0)


def test_the_one_aggregation() -> None:
    from hookserver.podclass import request_amounts

    assert request_amounts(_pod(), ("cpu", "memory", BATCH_CPU, BATCH_MEMORY)) == {
        "cpu": 1100, "memory": 150 * MI, BATCH_CPU: 3200, BATCH_MEMORY: 1152 * MI}


def test_the_eviction_ledgers_count_sidecars_and_init_containers() -> None:
    # the eviction modes' requests (allocatable evict sums these per priority class) and the BE CPU figures
    assert pod_requests(_pod()) == {"cpu": 1100, "memory": 150 * MI, BATCH_CPU: 3200, BATCH_MEMORY: 1152 * MI}
    assert pod_requests_milli(_pod()) == (3200, 1100)


def test_the_be_cpu_request_collected_counts_them() -> None:
    assert _cpu_request_cores(_pod(), is_be=True) == 3.2  # batch-cpu for a BE pod
    assert _cpu_request_cores(_pod(), is_be=False) == 1.1


def test_the_predictors_priority_requests_count_them() -> None:
    prod = _pod({"koordinator.sh/priority-class": "koord-prod"})
    report = compute_reclaimable(
        pods=[prod], with_metrics={"uid-p"}, predictions={"uid-p": prediction("uid-p", p95_cpu=100, p98_mem=10 * MI)},
        allocatable=node_allocatable(node()), now=NOW, cold_start_s=DAY, margin_percent=10)
    (line,) = report.pods
    assert (line.request_cpu_milli, line.request_memory_bytes) == (1100, 150 * MI)
