"""The informer's first sync, and the /readyz check the daemon hangs on it, against the HTTP fake apiserver.

Readiness waits for every list (pods, node, NodeSLO) once; a later outage marks the store stale but never
makes the pod unready again. Standalone has no such check.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hookserver.daemon import Daemon
from hookserver.store import StateStore
from tests.informer.conftest import NODE, api_settings, eventually, run, running, served  # noqa: F401 - a fixture
from tests.informer.fake_apiserver import FakeApiServer, make_node, make_nodeslo, make_pod
from tests.readiness import daemon_settings, readyz


def _populate(fake: FakeApiServer) -> None:
    fake.apply("nodes", make_node(NODE))
    fake.apply("nodeslos", make_nodeslo(NODE))
    fake.apply("pods", make_pod("web", qos="LS"))


def test_first_sync_waits_for_every_list_and_outlives_an_outage(fake: FakeApiServer, tmp_path: Path) -> None:
    _populate(fake)
    fake.uninstall("pods")  # the node and NodeSLO lists succeed, the pod list keeps failing
    informer_calls: list[str] = []

    async def scenario() -> None:
        store = StateStore()
        async with running(api_settings(fake, tmp_path), store) as informer:
            informer.on_first_sync(lambda: informer_calls.append("synced"))
            await eventually(lambda: fake.list_count("nodes") >= 1 and fake.list_count("pods") >= 2,
                             what="the node listed and the pod list retried")
            await eventually(lambda: any(s["resource"] == "node" and s["synced"]
                                         for s in informer.status()["sources"]), what="the node list applied")
            assert not informer.first_sync_done() and informer_calls == []
            fake.install("pods")
            await eventually(informer.first_sync_done, what="first sync")
            assert informer_calls == ["synced"]
            fake.kill()
            await eventually(lambda: store.snapshot().stale, what="the outage noticed")
            assert informer.first_sync_done() and not informer.synced()
            late: list[str] = []
            informer.on_first_sync(lambda: late.append("at once"))
            assert late == ["at once"]
        assert informer_calls == ["synced"]

    run(scenario())


# -- the daemon: /readyz ----------------------------------------------------------------------------------


def _readyz(daemon: Daemon) -> tuple[int, list[str]]:
    return readyz(daemon.http.port)


def _informer_check(daemon: Daemon) -> tuple[bool, str]:
    check = next(c for c in daemon.health.readiness()[1] if c.name == "informer")
    return check.ready, check.reason


def test_readyz_waits_for_the_informers_first_sync_in_cluster_mode(
    fake: FakeApiServer, tmp_path: Path, served: list[Daemon]
) -> None:
    _populate(fake)
    api = api_settings(fake, tmp_path)
    daemon = Daemon(daemon_settings(tmp_path, NODE, kubeconfig=api.kubeconfig,
                                     informer=api.informer.model_dump()))
    served.append(daemon)
    daemon.http.start()
    for part in ("proxy", "debug"):  # what Daemon.run reports once those servers listen
        daemon.health.set_ready(part, True)
    status, body = _readyz(daemon)
    assert status == 503 and "informer: not ready: first sync not done yet" in body, body

    async def scenario() -> None:
        stop = asyncio.Event()
        fake.black_hole(True)  # the apiserver takes the list requests and never answers
        task = asyncio.create_task(daemon.informer.run(stop))
        try:
            await eventually(lambda: fake.held_requests >= 3, what="every list held")
            assert (await asyncio.to_thread(_readyz, daemon))[0] == 503
            fake.black_hole(False)
            await eventually(lambda: _informer_check(daemon)[0], what="ready after the first sync")
            status, body = await asyncio.to_thread(_readyz, daemon)
            assert status == 200 and "informer: ok" in body, body
            fake.kill()  # a later outage: the store goes stale, readiness stays
            await eventually(lambda: daemon.store.snapshot().stale, what="the outage noticed")
            assert (await asyncio.to_thread(_readyz, daemon))[0] == 200
        finally:
            stop.set()
            await asyncio.wait_for(task, timeout=5)

    run(scenario())


def test_standalone_readiness_has_no_informer_check(tmp_path: Path, served: list[Daemon]) -> None:
    daemon = Daemon(daemon_settings(tmp_path, NODE, standalone=True))
    served.append(daemon)
    assert [c.name for c in daemon.health.readiness()[1]] == ["debug", "proxy"]


def test_a_failing_first_sync_listener_breaks_neither_the_sync_nor_the_other_listeners(
    fake: FakeApiServer, tmp_path: Path,
) -> None:
    """Listeners run inside a source's list; one that raises is logged, the rest still run, and the list
    that completed the sync is not retried as if it had failed."""
    _populate(fake)
    heard: list[str] = []

    def broken() -> None:
        raise RuntimeError("listener bug")

    async def scenario() -> None:
        store = StateStore()
        async with running(api_settings(fake, tmp_path), store) as informer:
            informer.on_first_sync(broken)
            informer.on_first_sync(lambda: heard.append("synced"))
            await eventually(informer.first_sync_done, what="first sync")
            await eventually(lambda: heard == ["synced"], what="the second listener")
            await eventually(informer.synced, what="watching")
            assert all(s["lists"] == 1 for s in informer.status()["sources"] if "lists" in s), informer.status()

    run(scenario())
