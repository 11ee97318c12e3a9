"""The NRT publisher and writer: unchanged content writes nothing, a change writes once, a missing CRD is
one warning however many rounds it lasts (and its end one line), standalone writes the state-dir document, and
`hookctl topology` shows the document and the pools."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from hookserver.informer.nrt import NRT_RESOURCE_PATH, NodeResourceTopologyWriter
from hookserver.store import PodRecord, StateStore
from hookserver.topology import ANNOTATION_RESOURCE_STATUS
from hookserver.topology.publisher import LocalTopologySink, TopologyPublisher
from hookserver.debug.render_topology import render_topology
from tests.topology.sysfs import one_socket_two_cores, write_tree


class Apiserver:
    """Answers server-side applies of the NRT: 404 while the CRD is missing, then 200 (or what is set)."""

    def __init__(self) -> None:
        self.crd = False
        self.calls: list[tuple[str, str, Any, dict[str, str]]] = []

    def request_json(self, method: str, path: str, body: Any = None, *, timeout_s: float,
                     content_type: str = "application/json", params: Any = None) -> tuple[int, Any]:
        self.calls.append((method, path, body, dict(params or {})))
        assert content_type == "application/apply-patch+yaml"
        if not self.crd:
            return 404, {"kind": "Status", "reason": "NotFound", "message": "the server could not find the requested resource"}
        return 200, body


def _lsr(uid: str, cpuset: str) -> PodRecord:
    return PodRecord(uid=uid, namespace="ns", name=uid, labels=MappingProxyType({"koordinator.sh/qosClass": "LSR"}),
                     annotations=MappingProxyType({ANNOTATION_RESOURCE_STATUS: json.dumps({"cpuset": cpuset})}),
                     phase="Running")


def _publisher(tmp_path: Path, api: Apiserver) -> tuple[TopologyPublisher, StateStore]:
    roots = write_tree(tmp_path, *one_socket_two_cores())
    store = StateStore()
    writer = NodeResourceTopologyWriter(api, node_name="n1", sleep=lambda s: None)
    return TopologyPublisher(store=store, roots=roots, node_name="n1", sink=writer,
                             document_path=str(tmp_path / "state" / "noderesourcetopology.json")), store


def test_unchanged_content_writes_nothing_and_a_change_writes_once(tmp_path: Path) -> None:
    api = Apiserver()
    api.crd = True
    publisher, store = _publisher(tmp_path, api)
    assert publisher.tick() == "ok"
    method, path, body, params = api.calls[0]
    assert (method, path, params) == ("PATCH", f"{NRT_RESOURCE_PATH}/n1", {"fieldManager": "hookserver", "force": "false"})
    assert body["kind"] == "NodeResourceTopology" and body["metadata"]["name"] == "n1"
    for _ in range(5):
        assert publisher.tick() == "unchanged"
    assert len(api.calls) == 1
    store.upsert_pod(_lsr("a", "1"))
    assert publisher.tick() == "ok"
    assert len(api.calls) == 2
    pools = json.loads(api.calls[1][2]["metadata"]["annotations"]["node.koordinator.sh/cpu-shared-pools"])
    assert pools == [{"socket": 0, "node": 0, "cpuset": "0"}]
    assert publisher.tick() == "unchanged" and len(api.calls) == 2
    # the state dir holds the same document
    saved = json.loads((tmp_path / "state" / "noderesourcetopology.json").read_text())
    assert saved == api.calls[1][2]


def test_a_missing_crd_is_one_warning_and_its_end_one_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    api = Apiserver()
    publisher, _ = _publisher(tmp_path, api)
    with caplog.at_level(logging.INFO, logger="hookserver.topology.publisher"):
        results = [publisher.tick() for _ in range(20)]
        assert set(results) == {"crd_missing"}
        assert len(api.calls) == 20  # retried every round, so the CRD's arrival is noticed
        api.crd = True
        assert publisher.tick() == "ok"
        assert publisher.tick() == "unchanged"
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2, lines
    assert "not delivered (crd_missing)" in lines[0] and "CRD" in lines[0] and "not installed" in lines[0]
    assert "delivered again" in lines[1]
    assert publisher.view()["last_result"] == "unchanged"


def test_standalone_writes_the_state_dir_document_and_hookctl_shows_the_pools(tmp_path: Path) -> None:
    roots = write_tree(tmp_path, *one_socket_two_cores())
    store = StateStore()
    store.upsert_pod(_lsr("lsr-1", "1"))
    path = tmp_path / "state" / "noderesourcetopology.json"
    publisher = TopologyPublisher(store=store, roots=roots, node_name="n1", sink=LocalTopologySink(str(path)),
                                  document_path=str(path))
    assert publisher.tick() == "ok"
    mtime = path.stat().st_mtime_ns
    assert publisher.tick() == "unchanged" and path.stat().st_mtime_ns == mtime
    doc = json.loads(path.read_text())
    assert doc["zones"][0]["name"] == "node-0"
    view = publisher.view()
    assert view["pools"]["ls_share_pool"] == "0" and view["pools"]["exclusive"] == {"lsr-1": {"qos": "LSR", "cpuset": "1"}}
    text = render_topology(json.loads(json.dumps(view)))
    assert "LS share pool: 0" in text and "bound to LSR lsr-1: 1" in text and "node-0: cpu 2, memory 4Gi" in text
    assert "report: unchanged -> file" in text


def test_forbidden_names_the_clusterrole(tmp_path: Path) -> None:
    class Forbidden(Apiserver):
        def request_json(self, method: str, path: str, body: Any = None, **kw: Any) -> tuple[int, Any]:
            return 403, {"kind": "Status", "message": "noderesourcetopologies is forbidden"}

    writer = NodeResourceTopologyWriter(Forbidden(), node_name="n1")
    delivery = writer.apply({"metadata": {"name": "n1"}})
    assert delivery.result == "forbidden" and "deploy/hookserver.yaml" in delivery.detail


def test_hookctl_topology_over_the_debug_socket(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from hookserver.cli.hookctl import main as hookctl_main
    from hookserver.debug.server import DebugServer

    roots = write_tree(tmp_path, *one_socket_two_cores())
    store = StateStore()
    store.upsert_pod(_lsr("lsr-1", "1"))
    path = tmp_path / "state" / "noderesourcetopology.json"
    publisher = TopologyPublisher(store=store, roots=roots, node_name="n1", sink=LocalTopologySink(str(path)))
    publisher.tick()
    server = DebugServer(str(tmp_path / "d.sock"), store=store, providers={"topology": lambda args: publisher.view()})
    bare = DebugServer(str(tmp_path / "n.sock"), store=store, providers={})
    server.start()
    bare.start()
    try:
        capsys.readouterr()
        assert hookctl_main(["--socket", str(tmp_path / "d.sock"), "topology"]) == 0
        out = capsys.readouterr().out
        assert "LS share pool: 0" in out and "node.koordinator.sh/cpu-shared-pools:" in out
        assert hookctl_main(["--socket", str(tmp_path / "d.sock"), "topology", "-o", "json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["document"]["kind"] == "NodeResourceTopology"
        assert hookctl_main(["--socket", str(tmp_path / "n.sock"), "topology"]) == 1
        assert "topology.enabled: false" in capsys.readouterr().err
    finally:
        server.stop(0.1)
        bare.stop(0.1)


class SharedWithKoordManager(Apiserver):
    """The object exists; koord-manager took the zones (an Update of each zone's batch figures), so an apply that
    carries zones conflicts on `.zones`; `others` makes an apply conflict on those fields too."""

    def __init__(self, others: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.crd = True
        self.others = others

    def request_json(self, method: str, path: str, body: Any = None, *, timeout_s: float,
                     content_type: str = "application/json", params: Any = None) -> tuple[int, Any]:
        self.calls.append((method, path, body, dict(params or {})))
        fields = ([".zones"] if "zones" in body else []) + list(self.others)
        if not fields:
            return 200, body
        causes = [{"reason": "FieldManagerConflict", "field": f,
                   "message": 'conflict with "koord-manager" using topology.node.k8s.io/v1alpha1'} for f in fields]
        return 409, {"kind": "Status", "status": "Failure", "reason": "Conflict", "code": 409,
                     "message": f"Apply failed with {len(fields)} conflict(s)", "details": {"causes": causes}}


def test_zones_koord_manager_took_are_left_to_it_and_the_rest_keeps_being_applied(tmp_path: Path) -> None:
    """koord-manager writes per-zone batch figures into the NRT (an Update, so it owns the atomic zones list):
    every apply of our zones then conflicted, and the cpu-shared-pools annotation koord-scheduler reads stopped
    following the node. Now the zones are yielded and the rest is applied."""
    api = SharedWithKoordManager()
    publisher, store = _publisher(tmp_path, api)  # type: ignore[arg-type]
    assert publisher.tick() == "ok" and "zones left to koord-manager" in publisher.last_detail
    assert "zones" in api.calls[0][2] and "zones" not in api.calls[1][2]
    assert api.calls[1][2]["metadata"]["annotations"]  # the annotations went out
    store.upsert_pod(_lsr("u1", "0"))  # a pool change: the next document differs
    before = len(api.calls)
    assert publisher.tick() == "ok"
    assert len(api.calls) == before + 1 and "zones" not in api.calls[-1][2]  # one apply, straight without zones


def test_a_conflict_beyond_the_zones_is_still_a_conflict(tmp_path: Path) -> None:
    api = SharedWithKoordManager(others=(".metadata.annotations.node.koordinator.sh/cpu-shared-pools",))
    publisher, _ = _publisher(tmp_path, api)  # type: ignore[arg-type]
    assert publisher.tick() == "conflict" and "cpu-shared-pools" in publisher.last_detail
    assert len(api.calls) == 1  # nothing re-sent: another writer of the annotations is never overwritten


def test_the_node_owns_its_nrt_once_its_uid_is_known(tmp_path: Path) -> None:
    """koordlet makes the Node the NRT's controller owner, so the object goes with the Node (issue 37); before the
    Node is seen (or standalone, with no uid) the reference is left out rather than sent empty."""
    from hookserver.store import NodeRecord

    api = Apiserver()
    api.crd = True
    publisher, store = _publisher(tmp_path, api)
    assert publisher.tick() == "ok"
    assert "ownerReferences" not in api.calls[-1][2]["metadata"]
    store.set_node(NodeRecord(name="n1", uid="0d5b2f3e-uid"))
    assert publisher.tick() == "ok"  # the new owner is a change: sent once
    assert api.calls[-1][2]["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "0d5b2f3e-uid", "controller": True,
         "blockOwnerDeletion": True}]
    assert publisher.tick() == "unchanged"
