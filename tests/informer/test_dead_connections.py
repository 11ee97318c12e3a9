"""Dead apiserver connections against the HTTP fake: a quiet watch stays open without a flap of the
stale flag, a black hole (every byte held, no RST, no FIN) is noticed within the idle timeout plus the
connect timeout, and the apiserver sockets carry TCP keepalive."""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from hookserver.informer.transport import ApiClientTransport, load_client_configuration
from hookserver.store import StateStore
from tests.informer.conftest import api_settings, eventually, run, running
from tests.informer.fake_apiserver import FakeApiServer, make_node, make_pod


class RecordingStore(StateStore):
    """Every set_stale(True), however brief: a flap a sampling loop could miss still shows here."""

    def __init__(self) -> None:
        super().__init__()
        self.stale_marks: list[float] = []

    def set_stale(self, stale: bool) -> None:
        if stale:
            self.stale_marks.append(time.monotonic())
        super().set_stale(stale)


def _source(informer: Any, resource: str) -> dict[str, Any]:
    return next(s for s in informer.status()["sources"] if s["resource"] == resource)


def _watch_rvs(fake: FakeApiServer) -> list[str]:
    return [q.get("resourceVersion", "") for path, q in fake.requests
            if path == "/api/v1/pods" and q.get("watch") in ("1", "true")]


def test_a_quiet_watch_stays_open_without_a_new_request_or_going_stale(
    fake: FakeApiServer, tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    """Before, a watch silent for the idle timeout was closed and re-opened: a request and, because an HTTP/1.1
    response cut short cannot be reused, a new connection each time (18 TLS handshakes in 10 minutes)."""
    fake.apply("nodes", make_node())
    first = fake.apply("pods", make_pod("first"))

    async def scenario() -> None:
        store = RecordingStore()
        registry = CollectorRegistry()
        settings = api_settings(fake, tmp_path, watch_timeout_s=600, watch_idle_timeout_s=0.3)
        async with running(settings, store, registry) as informer:
            assert await informer.wait_synced(5)
            store.stale_marks.clear()  # stale until the first sync, by design
            fake.quiet(True)
            pods = next(r for r in informer.reflectors if r.kind.name == "pods")
            watches = len(_watch_rvs(fake))
            connections = fake.connections
            caplog.clear()
            with caplog.at_level(logging.INFO, logger="hookserver"):
                await eventually(lambda: pods.idle_checks >= 3, timeout_s=10, what="three idle checks")
            assert store.stale_marks == [] and not store.snapshot().stale and informer.synced()
            assert [r for r in caplog.records if r.levelno >= logging.INFO] == []
            status = _source(informer, "pods")
            assert status["lists"] == 1 and status["errors"] == 0 and status["connected"]
            assert status["idle_rewatches"] == 0
            # the watch was never re-opened, and the probes that proved the server alive reused a connection
            assert len(_watch_rvs(fake)) == watches
            assert fake.paths_requested("/version") >= 1
            assert fake.connections - connections <= 1
            # an event made while the watch was quiet arrives once it speaks again: nothing was lost
            second = fake.apply("pods", make_pod("second"))
            fake.quiet(False)
            await eventually(lambda: second["metadata"]["uid"] in store.snapshot().pods, what="second pod")
            assert first["metadata"]["uid"] in store.snapshot().pods
            assert store.stale_marks == [] and _source(informer, "pods")["lists"] == 1

    run(scenario())


def test_a_black_hole_is_noticed_within_the_idle_plus_the_connect_timeout(
    fake: FakeApiServer, tmp_path: Path,
) -> None:
    """Before the idle timeout, nothing noticed it until timeoutSeconds + 30 s (here 630 s or more)."""
    fake.apply("nodes", make_node())
    pod = fake.apply("pods", make_pod("web"))
    idle_s, connect_s = 0.5, 0.5

    async def scenario() -> None:
        store = RecordingStore()
        settings = api_settings(fake, tmp_path, watch_timeout_s=600, watch_idle_timeout_s=idle_s,
                                connect_timeout_s=connect_s)
        async with running(settings, store) as informer:
            assert await informer.wait_synced(5)
            fake.black_hole(True)
            started = time.monotonic()
            await eventually(lambda: store.snapshot().stale, timeout_s=10, what="stale")
            noticed = time.monotonic() - started
            # the bound, plus scheduling slack on a contended machine (a regression is minutes, not seconds)
            assert noticed < idle_s + connect_s + 1.5, noticed
            assert fake.held_requests >= 1
            status = informer.status()
            assert status["stale"] is True
            # Every watch is black-holed; another resource's may notice first, so wait for the pods one too.
            await eventually(lambda: not _source(informer, "pods")["connected"], timeout_s=idle_s + connect_s + 3,
                             what="the pods watch noticing")
            pods = _source(informer, "pods")
            assert "timed out" in pods["last_error"].lower(), pods
            assert pod["metadata"]["uid"] in store.snapshot().pods  # the cache keeps serving
            fake.black_hole(False)
            await eventually(lambda: not store.snapshot().stale, timeout_s=10, what="recovery")
            assert _source(informer, "pods")["lists"] == 1  # caught up by re-watching, not relisting

    run(scenario())


def test_disabled_idle_timeout_keeps_a_quiet_watch_open(fake: FakeApiServer, tmp_path: Path) -> None:
    fake.apply("nodes", make_node())

    async def scenario() -> None:
        settings = api_settings(fake, tmp_path, watch_timeout_s=600, watch_idle_timeout_s=0)
        async with running(settings) as informer:
            assert await informer.wait_synced(5)
            fake.quiet(True)
            watches = len(_watch_rvs(fake))
            await asyncio.sleep(1.0)
            pods = next(r for r in informer.reflectors if r.kind.name == "pods")
            assert pods.idle_rewatches == 0 and len(_watch_rvs(fake)) == watches

    run(scenario())


def _keepalive_of(sock: socket.socket) -> tuple[int, int, int, int]:
    return (sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
            sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
            sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL),
            sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT))


@pytest.mark.skipif(not hasattr(socket, "TCP_KEEPIDLE"), reason="TCP_KEEPIDLE is Linux-only")
def test_apiserver_sockets_carry_tcp_keepalive_and_the_idle_read_timeout(
    fake: FakeApiServer, tmp_path: Path,
) -> None:
    transport = ApiClientTransport(load_client_configuration(fake.kubeconfig(str(tmp_path / "kc"))),
                                   keepalive=(15, 5, 3))
    try:
        stream = transport.open_watch("/api/v1/nodes", {"watch": "1"}, timeout_s=2, idle_timeout_s=7)
        sock = stream._response.connection.sock  # type: ignore[attr-defined]
        assert _keepalive_of(sock)[0] != 0 and _keepalive_of(sock)[1:] == (15, 5, 3)
        assert sock.gettimeout() == 7
        assert socket.TCP_NODELAY in {opt for _, opt, _ in transport._api.configuration.socket_options}
        stream.close()
    finally:
        transport.close()
    # options the kubeconfig's configuration already has are left alone
    configuration = load_client_configuration(fake.kubeconfig(str(tmp_path / "kc2")))
    configuration.socket_options = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
    ApiClientTransport(configuration, keepalive=(15, 5, 3)).close()
    assert configuration.socket_options == [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]


def test_a_watch_whose_bytes_stop_raises_the_idle_timeout(fake: FakeApiServer, tmp_path: Path) -> None:
    from hookserver.informer.transport import WatchIdleTimeout

    transport = ApiClientTransport(load_client_configuration(fake.kubeconfig(str(tmp_path / "kc"))))
    try:
        fake.quiet(True)
        stream = transport.open_watch("/api/v1/nodes", {"watch": "1"}, timeout_s=2, idle_timeout_s=0.3)
        started = time.monotonic()
        with pytest.raises(WatchIdleTimeout, match="no byte for 0.3 s"):
            list(stream.lines())
        assert 0.25 < time.monotonic() - started < 2.0
    finally:
        transport.close()
