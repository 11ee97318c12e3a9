"""/readyz and the informer's first sync against the real kube-apiserver (through a cuttable TCP proxy).

The daemon starts while the apiserver cannot be reached: /readyz answers 503 and names the informer. Once
the proxy lets it through, the real lists (pods, node, NodeSLO) complete and /readyz turns 200. A later
outage makes the store stale, and /readyz stays 200 (an unready DaemonSet pod during an outage helps
nobody). The fake-apiserver version of this is tests/informer/test_first_sync.py.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from hookserver.daemon import Daemon
from tests.informer.conftest import eventually, fast_informer_settings
from tests.kube.conftest import NodeFactory
from tests.kube.kubehttp import KubeHttp
from tests.kube.tcpproxy import CuttableProxy
from tests.readiness import daemon_settings, readyz


def test_readyz_waits_for_the_real_first_sync_and_survives_a_later_outage(
    kube: KubeHttp, kube_nodes: NodeFactory, proxy: CuttableProxy, tmp_path: Path, slo_crds: None,
) -> None:
    node = kube_nodes.make("ready")["metadata"]["name"]
    kubeconfig = kube.with_server(proxy.url).kubeconfig(str(tmp_path), "via-proxy")
    proxy.cut()  # the apiserver cannot be reached when the agent starts
    daemon = Daemon(daemon_settings(tmp_path, node, kubeconfig=kubeconfig,
                                    informer=fast_informer_settings().model_dump()))
    daemon.http.start()
    try:
        for part in ("proxy", "debug"):  # what Daemon.run reports once those servers listen
            daemon.health.set_ready(part, True)
        port = daemon.http.port

        async def scenario() -> None:
            stop = asyncio.Event()
            task = asyncio.create_task(daemon.informer.run(stop))
            try:
                await eventually(lambda: proxy.refused > 0, timeout_s=10, what="the lists refused")
                status, body = await asyncio.to_thread(readyz, port)
                assert status == 503 and "informer: not ready: first sync not done yet" in body, body
                proxy.restore()
                await eventually(daemon.informer.first_sync_done, timeout_s=30, what="the real first sync")
                status, body = await asyncio.to_thread(readyz, port)
                assert status == 200 and "informer: ok" in body, body
                proxy.cut()
                await eventually(lambda: daemon.store.snapshot().stale, timeout_s=15, what="the outage noticed")
                status, body = await asyncio.to_thread(readyz, port)
                assert status == 200, body
            finally:
                stop.set()
                await asyncio.wait_for(task, timeout=10)

        asyncio.run(scenario())
    finally:
        daemon.http.stop()
