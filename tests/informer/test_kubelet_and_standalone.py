"""The kubelet `/pods` source (token, https, failures) and standalone mode (host node, --slo-file)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import ssl
import subprocess
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from hookserver.config import Settings
from hookserver.informer import InformerSettings, KubeletSettings
from hookserver.store import StateStore
from hookserver.store.records import PodRecord
from tests.informer.conftest import NODE, TOKEN, eventually, run, running
from tests.informer.fake_apiserver import FakeKubelet, make_pod


def kubelet_settings(kubelet: FakeKubelet, token_file: Path, **extra: object) -> Settings:
    return Settings(
        node_name=NODE,
        informer=InformerSettings(
            source="kubelet",
            kubelet=KubeletSettings(port=kubelet.port, token_file=str(token_file), auth="token",
                                    sync_interval_s=0.05, **extra),  # type: ignore[arg-type]
        ),
    )


def test_kubelet_pods_polled_with_token_and_replaced(tmp_path: Path) -> None:
    kubelet = FakeKubelet(token=TOKEN).start()
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    a, b = make_pod("a"), make_pod("b", qos="BE")
    kubelet.pods = [a, b]

    async def scenario() -> None:
        store = StateStore()
        # a pod a hook told us about, not (yet) in the kubelet's list: the kubelet poll must not drop it
        store.upsert_pod(PodRecord(uid="from-hook", namespace="x", name="y", source="proxy", sandbox_id="sb1"))
        async with running(kubelet_settings(kubelet, token_file), store) as informer:
            assert await informer.wait_synced(5)
            snap = store.snapshot()
            assert {a["metadata"]["uid"], b["metadata"]["uid"], "from-hook"} == set(snap.pods)
            assert snap.pods[b["metadata"]["uid"]].source == "kubelet"
            assert snap.node is not None and snap.node.source == "host"  # no apiserver credentials here
            kubelet.pods = [b]
            await eventually(lambda: a["metadata"]["uid"] not in store.snapshot().pods, what="removal")
            assert "from-hook" in store.snapshot().pods
            # a rotated token the agent has not seen: 401, stale, cache kept
            kubelet.token = "rotated"
            await eventually(lambda: store.snapshot().stale, what="stale on 401")
            assert b["metadata"]["uid"] in store.snapshot().pods
            assert "401" in informer.status()["sources"][0]["last_error"]
            token_file.write_text("rotated")  # re-read on every poll
            await eventually(lambda: not store.snapshot().stale, what="recovery with the new token")
        kubelet.stop()

    run(scenario())


def test_kubelet_garbage_response_is_an_error_not_a_crash(tmp_path: Path) -> None:
    kubelet = FakeKubelet().start()
    kubelet.fail_with = 500
    token_file = tmp_path / "token"
    token_file.write_text("t")

    async def scenario() -> None:
        store = StateStore()
        async with running(kubelet_settings(kubelet, token_file), store) as informer:
            await eventually(lambda: kubelet.requests >= 3, what="retries")
            assert store.snapshot().stale and not informer.synced() and not informer.first_sync_done()
            kubelet.fail_with = 0
            kubelet.pods = [make_pod("ok"), {"metadata": {"name": "broken"}}]
            await eventually(lambda: informer.synced(), what="recovery")
            assert informer.first_sync_done()
            assert len(store.snapshot().pods) == 1
            assert informer.status()["sources"][0]["skipped"] >= 1
        kubelet.stop()

    run(scenario())


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is needed to make a test certificate")
def test_kubelet_secure_port_with_ca_and_default_token_auth(tmp_path: Path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", str(key), "-out", str(cert),
         "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )
    kubelet = FakeKubelet(token=TOKEN)
    kubelet.pods = [make_pod("secure")]
    kubelet.start()
    server: ThreadingHTTPServer = kubelet._server  # type: ignore[assignment]
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(cert), str(key))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    settings = Settings(node_name=NODE, informer=InformerSettings(source="kubelet", kubelet=KubeletSettings(
        port=kubelet.port, scheme="https", ca_file=str(cert), token_file=str(token_file), sync_interval_s=0.05)))

    async def scenario() -> None:
        store = StateStore()
        async with running(settings, store) as informer:
            assert await informer.wait_synced(5), informer.status()
            assert [p.name for p in store.snapshot().pods.values()] == ["secure"]

    run(scenario())
    kubelet.stop()


def test_standalone_node_from_host_and_slo_file_reloaded_on_change(tmp_path: Path) -> None:
    slo_file = tmp_path / "slo.yaml"

    def write(threshold: dict[str, object]) -> None:
        doc = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "slo-controller-config"},
               "data": {"resource-threshold-config": json.dumps({
                   "clusterStrategy": {"enable": False},
                   "nodeStrategies": [{"name": "mine", "nodeSelector": {"matchLabels": {"pool": "colo"}},
                                       **threshold}]})}}
        tmp = slo_file.with_suffix(".tmp")
        tmp.write_text(yaml.safe_dump(doc))
        os.replace(tmp, slo_file)  # like a ConfigMap volume update: a new inode

    write({"enable": True, "cpuSuppressPolicy": "cfsQuota"})
    settings = Settings(node_name="host-1", standalone=True, slo_file=str(slo_file),
                        informer=InformerSettings(slo_file_poll_s=0.02, node_labels={"pool": "colo"}))

    async def scenario() -> None:
        store = StateStore()
        async with running(settings, store) as informer:
            assert informer.mode == "standalone" and await informer.wait_synced(5)
            snap = store.snapshot()
            assert snap.node is not None and snap.node.name == "host-1"
            assert snap.node.labels["pool"] == "colo" and int(snap.node.capacity["cpu"]) >= 1
            assert snap.node.capacity["memory"].endswith("Ki")
            assert snap.node_slo.resource_used_threshold_with_be.cpu_suppress_policy == "cfsQuota"
            assert snap.node_slo_sources["resourceUsedThresholdWithBE"] == (
                f"file {slo_file}: resource-threshold-config nodeStrategies[mine]")
            write({"enable": True, "cpuSuppressThresholdPercent": 40})
            await eventually(lambda: store.snapshot().node_slo.resource_used_threshold_with_be
                             .cpu_suppress_threshold_percent == 40, what="reload")
            slo_file.write_text("data: {resource-threshold-config: '{\"clusterStrategy\": {\"enable\": 7}}'}")
            await eventually(lambda: "last_error" in informer.slo_report(), what="bad file reported")
            assert "resource-threshold-config.clusterStrategy.enable" in informer.slo_report()["last_error"]
            assert store.snapshot().node_slo.resource_used_threshold_with_be.cpu_suppress_threshold_percent == 40
            slo_file.unlink()
            await eventually(lambda: "not found" in informer.slo_report().get("last_error", ""), what="missing")
            assert store.snapshot().node_slo.resource_used_threshold_with_be.enable

    run(scenario())


def test_standalone_without_file_uses_defaults() -> None:
    async def scenario() -> None:
        store = StateStore()
        async with running(Settings(node_name="n", standalone=True), store) as informer:
            assert await informer.wait_synced(5) and not store.snapshot().stale
            assert informer.first_sync_done()  # no source to wait for: started is synced
            assert set(store.snapshot().node_slo_sources.values()) == {"default"}
            assert informer.status()["sources"] == []
            assert informer.slo_report()["effective"]["cpuBurstStrategy"]["cpuBurstPercent"] == 1000

    run(scenario())


def test_standalone_run_lasts_until_stop() -> None:
    from hookserver.informer import build_informer

    async def scenario() -> None:
        informer = build_informer(Settings(node_name="n", standalone=True), store=StateStore())
        stop = asyncio.Event()
        task = asyncio.create_task(informer.run(stop))
        await asyncio.sleep(0.05)
        assert not task.done()  # the daemon treats an early return as a dead root task
        stop.set()
        await asyncio.wait_for(task, 1)

    run(scenario())


def test_no_informer_threads_left_after_stop(tmp_path: Path) -> None:
    kubelet = FakeKubelet().start()
    token_file = tmp_path / "t"
    token_file.write_text("x")

    async def scenario() -> None:
        async with running(kubelet_settings(kubelet, token_file)) as informer:
            assert await informer.wait_synced(5)

    run(scenario())
    kubelet.stop()
    assert not [t for t in threading.enumerate() if t.name.startswith("informer-")]


def test_a_missing_slo_file_is_reported_once_not_every_poll(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """`--slo-file` naming a file that is not there yet: one warning and one error count while it stays
    missing (the poll runs every 2 s: before the fix each poll logged again, forever), and again only when a
    file that existed goes away."""
    from hookserver.informer.slo_file import SLOFileSource
    from hookserver.informer.slo_state import SLOState

    path = tmp_path / "slo.yaml"
    source = SLOFileSource(str(path), slo=SLOState(StateStore()), poll_s=2.0)
    with caplog.at_level(logging.WARNING, logger="hookserver.informer.slo_state"):
        for _ in range(5):
            assert source.load_if_changed() is False
        assert (source.errors, len(caplog.records)) == (1, 1)
        path.write_text("apiVersion: slo.koordinator.sh/v1alpha1\nkind: NodeSLO\nspec: {}\n")
        assert source.load_if_changed() is True
        path.unlink()
        for _ in range(3):
            source.load_if_changed()
    assert source.errors == 2 and len(caplog.records) == 2
    assert "not found" in caplog.records[-1].getMessage()
