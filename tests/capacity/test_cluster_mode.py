"""The whole daemon in cluster mode against the fake apiserver: colocation-config from the ConfigMap, the NodeMetric
created from it, batch/mid capacity applied to the Node's status with the agent's field manager, a second writer
noticed and left alone, colocation switched off withdrawing the offer, and hookctl capacity over the debug API.

Usage comes from this host's real /proc (the node collector); pods are in an empty cgroup tree under tmp_path.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from hookserver.daemon import Daemon
from hookserver.debug.client import DebugClient
from hookserver.koord_resources import BATCH_CPU, BATCH_MEMORY, MID_CPU
from tests.informer.conftest import NODE, api_settings, eventually, fake, run, served  # noqa: F401 - fixtures
from tests.informer.configmaps import make_configmap, slo_data
from tests.informer.fake_apiserver import FakeApiServer, make_node, make_pod
from tests.readiness import daemon_settings

COLOCATION = {"enable": True, "metricReportIntervalSeconds": 30, "degradeTimeMinutes": 15}


@contextlib.asynccontextmanager
async def _running(daemon: Daemon) -> AsyncIterator[None]:
    stop = asyncio.Event()
    task = asyncio.create_task(daemon.run(stop))
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=15)


def _daemon(fake: FakeApiServer, tmp_path: Path, served: list[Daemon], **capacity: Any) -> Daemon:
    api = api_settings(fake, tmp_path)
    settings = daemon_settings(
        tmp_path, NODE, kubeconfig=api.kubeconfig, informer=api.informer.model_dump(),
        capacity={"interval_s": 0.1, "warmup_s": 1.0, **capacity},
        predictor={"enabled": False}, qos={"enabled": False}, reconciler={"enabled": False},
    )
    daemon = Daemon(settings)
    served.append(daemon)
    return daemon


def _allocatable(fake: FakeApiServer) -> dict[str, str]:
    node = fake.get("nodes", NODE) or {}
    return dict(node.get("status", {}).get("allocatable", {}))


def _our_writes(fake: FakeApiServer) -> int:
    return sum(1 for w in fake.writes if w.kind == "nodes" and w.manager == "hookserver")


def test_the_agent_publishes_creates_its_nodemetric_and_yields_to_koord_manager(
    fake: FakeApiServer, tmp_path: Path, served: list[Daemon]
) -> None:
    fake.apply("nodes", make_node(NODE))
    fake.apply("pods", make_pod("web", qos="LS"))
    fake.apply("configmaps", make_configmap(slo_data(colocation=COLOCATION)))
    daemon = _daemon(fake, tmp_path, served)

    async def scenario() -> None:
        async with _running(daemon):
            await eventually(lambda: BATCH_CPU in _allocatable(fake), timeout_s=20, what="batch-cpu on the Node")
            node = fake.get("nodes", NODE) or {}
            assert node["status"]["capacity"][BATCH_CPU] == node["status"]["allocatable"][BATCH_CPU]
            assert {BATCH_MEMORY, MID_CPU} <= set(node["status"]["allocatable"])
            owners = fake.managed_fields("nodes", NODE)
            assert "hookserver" in json.dumps(node["metadata"]["managedFields"]), owners
            metric = fake.get("nodemetrics", NODE)
            assert metric is not None
            assert metric["spec"]["metricCollectPolicy"]["reportIntervalSeconds"] == 30
            assert metric["spec"]["metricCollectPolicy"]["nodeAggregatePolicy"]["durations"] == ["5m0s", "10m0s", "30m0s"]
            with DebugClient(daemon.settings.debug.socket) as client:
                doc = json.loads(await asyncio.to_thread(client.capacity))
            assert doc["state"] == "published" and doc["offer"][BATCH_CPU] == _allocatable(fake)[BATCH_CPU]
            assert doc["publisher"]["why"].startswith("capacity.publisher: auto, and no koord-manager")
            assert doc["nodemetric"]["last_result"] == "created"
            # koord-manager starts and writes the fields: the agent notices from the Node watch and stops.
            status, _ = fake.update_as("koordinator-manager", "nodes", NODE,
                                       {"status": {"allocatable": {BATCH_CPU: "1000"}, "capacity": {BATCH_CPU: "1000"}}})
            assert status == 200
            await eventually(lambda: daemon.capacity is not None and daemon.capacity.last is not None
                             and daemon.capacity.last.state == "yielded", timeout_s=10, what="yielded")
            writes = _our_writes(fake)
            await asyncio.sleep(0.5)  # several ticks
            assert _our_writes(fake) == writes and _allocatable(fake)[BATCH_CPU] == "1000"
            assert "koordinator-manager" in daemon.capacity.last.reason

    run(scenario())


def test_colocation_switched_off_in_the_configmap_withdraws_the_offer(
    fake: FakeApiServer, tmp_path: Path, served: list[Daemon]
) -> None:
    fake.apply("nodes", make_node(NODE))
    fake.apply("configmaps", make_configmap(slo_data(colocation=COLOCATION)))
    daemon = _daemon(fake, tmp_path, served)

    async def scenario() -> None:
        async with _running(daemon):
            await eventually(lambda: BATCH_CPU in _allocatable(fake), timeout_s=20, what="batch-cpu on the Node")
            fake.apply("configmaps", make_configmap(slo_data(colocation={**COLOCATION, "enable": False})))
            capacity = daemon.capacity
            assert capacity is not None
            await eventually(lambda: capacity.last is not None and capacity.last.state == "disabled", timeout_s=10,
                             what="the publisher disabled")
            assert not {k for k in _allocatable(fake) if k.startswith("kubernetes.io/")}

    run(scenario())


def test_writes_refused_during_an_outage_are_recomputed_not_replayed(
    fake: FakeApiServer, tmp_path: Path, served: list[Daemon]
) -> None:
    fake.apply("nodes", make_node(NODE))
    fake.apply("configmaps", make_configmap(slo_data(colocation=COLOCATION)))
    daemon = _daemon(fake, tmp_path, served)

    def attempts(result: str) -> list[Any]:
        assert daemon.capacity is not None
        return [w for w in list(daemon.capacity.writes) if w.action == "write" and w.result == result]

    async def scenario() -> None:
        async with _running(daemon):
            await eventually(lambda: BATCH_CPU in _allocatable(fake), timeout_s=20, what="batch-cpu on the Node")
            fake.fail_next_patches(10_000, 503)  # the apiserver refuses every write from now on
            # Lower reclaim thresholds: smaller offers, which go out at once (a rise would wait for the growth hold).
            fake.apply("configmaps", make_configmap(slo_data(colocation={**COLOCATION, "cpuReclaimThresholdPercent": 40})))
            await eventually(lambda: len(attempts("error")) >= 2, timeout_s=20, what="refused writes")
            refused = attempts("error")[-1].values[BATCH_CPU]
            fake.apply("configmaps", make_configmap(slo_data(colocation={**COLOCATION, "cpuReclaimThresholdPercent": 25})))
            await eventually(lambda: attempts("error")[-1].values[BATCH_CPU] != refused, timeout_s=20,
                             what="a refused write with the new figure")
            fake.fail_next_patches(0)  # the apiserver is back
            await eventually(lambda: len(attempts("ok")) >= 2, timeout_s=20, what="a write after the outage")
            written = attempts("ok")[-1].values[BATCH_CPU]
            assert written != refused  # the figure of the last tick, not the first refused one
            assert _allocatable(fake)[BATCH_CPU] == written
            # 25 % of 8 cores minus this host's system usage: less than at 40 %
            assert int(written) < int(refused)

    run(scenario())
