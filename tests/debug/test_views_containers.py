"""`hookctl pods` counts a pod's containers as `explain` lists them."""

from __future__ import annotations

from types import MappingProxyType

from hookserver.debug.views import pods_view
from hookserver.store import StateStore
from hookserver.store.records import ContainerRecord, PodRecord


def test_pods_counts_containers_only_the_pod_statuses_list() -> None:
    """A pod the informer lists whose hooks never ran here showed 0 containers in `hookctl pods` (seen on
    the one-node kubelet cluster) while `explain` named its container."""
    store = StateStore()
    store.upsert_pod(PodRecord(uid="u1", namespace="ns", name="web", qos_class="LS",
                               container_ids=MappingProxyType({"main": "containerd://abc", "side": "containerd://def"})))
    store.upsert_container(ContainerRecord(id="abc", pod_uid="u1", name="main"))  # hooked too: counted once
    store.upsert_pod(PodRecord(uid="u2", namespace="ns", name="hooked", qos_class="BE"))
    store.upsert_container(ContainerRecord(id="x1", pod_uid="u2", name="a"))
    rows = {r["pod"]: r["containers"] for r in pods_view(store)}
    assert rows == {"ns/web": 2, "ns/hooked": 1}
