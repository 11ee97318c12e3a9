"""/metrics, /healthz and /readyz served for real on a loopback port."""

from __future__ import annotations

import asyncio
import http.client
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from prometheus_client import CollectorRegistry, Counter

from hookserver.dispatch import HookDispatcher
from hookserver.errors import ConfigError
from hookserver.hooks import HookRegistry, PodRequest, Stage
from hookserver.hooks.plugins import BatchResourcePlugin
from hookserver.observability import HealthState, HookMetrics, MetricsHttpServer
from hookserver.observability.http import parse_addr
from hookserver.store import StateStore

Factory = Callable[..., MetricsHttpServer]


@pytest.fixture
def serve() -> Iterator[Factory]:
    servers: list[MetricsHttpServer] = []

    def factory(registry: CollectorRegistry | None = None, health: HealthState | None = None) -> MetricsHttpServer:
        server = MetricsHttpServer(
            "127.0.0.1:0", registry or CollectorRegistry(), health or HealthState(), poll_interval_s=0.02
        )
        server.start()
        servers.append(server)
        return server

    yield factory
    for server in servers:
        server.stop()


def get(server: MetricsHttpServer, path: str, method: str = "GET") -> tuple[int, str, str]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    try:
        conn.request(method, path)
        response = conn.getresponse()
        return response.status, response.read().decode(), response.getheader("Content-Type") or ""
    finally:
        conn.close()


def test_metrics_show_hook_calls_after_a_dispatch(serve: Factory) -> None:
    registry = CollectorRegistry()
    metrics = HookMetrics(registry)
    dispatcher = HookDispatcher(
        registry=HookRegistry([BatchResourcePlugin()]), store=StateStore(), executor=None, metrics=metrics
    )
    server = serve(registry)
    status, body, _ = get(server, "/metrics")
    assert status == 200 and "hookserver_hook_calls_total{" not in body
    dispatcher.dispatch_pod(
        Stage.PRE_RUN_POD_SANDBOX, PodRequest("ns", "p", "u1", labels={"koordinator.sh/qosClass": "LS"}),
        door="proxy", rpc="PreRunPodSandboxHook",
    )
    status, body, content_type = get(server, "/metrics")
    assert status == 200 and content_type.startswith("text/plain")
    assert 'hookserver_hook_calls_total{door="proxy",result="ok",rpc="PreRunPodSandboxHook"} 1.0' in body
    assert "hookserver_hook_latency_seconds_bucket" in body


def test_metrics_come_from_the_given_registry_only(serve: Factory) -> None:
    ours = CollectorRegistry()
    Counter("hookserver_test_ours_total", "ours", registry=ours).inc(3)
    server = serve(ours)
    _, body, _ = get(server, "/metrics?name[]=ignored")
    assert "hookserver_test_ours_total 3.0" in body
    # The global default registry carries process and GC collectors; none of them may leak in.
    assert "python_gc_objects_collected_total" not in body and "process_cpu_seconds_total" not in body


def test_readyz_flips_from_503_to_200_with_reasons(serve: Factory) -> None:
    health = HealthState(required=["proxy"])
    server = serve(health=health)
    status, body, _ = get(server, "/readyz")
    assert status == 503 and "proxy: not ready: not reported yet" in body
    health.set_ready("proxy", True)
    health.set_ready("nri", False, "connecting")
    status, body, _ = get(server, "/readyz")
    assert status == 503
    assert body.splitlines() == ["not ready", "nri: not ready: connecting", "proxy: ok"]
    health.set_ready("nri", True)
    status, body, _ = get(server, "/readyz")
    assert status == 200 and body.splitlines()[0] == "ready"
    health.remove("nri")
    health.set_ready("proxy", False, "shutting down")
    assert get(server, "/readyz")[0] == 503


def test_healthz_follows_the_event_loop(serve: Factory) -> None:
    health = HealthState(loop_timeout_s=0.3)
    server = serve(health=health)
    assert get(server, "/healthz")[:2] == (200, "ok\n")

    loop = asyncio.new_event_loop()
    block = threading.Event()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        health.attach_loop(loop)
        assert get(server, "/healthz")[0] == 200
        loop.call_soon_threadsafe(block.wait, 5)  # wedge the loop, as a blocking call on it would
        status, body, _ = get(server, "/healthz")
        assert status == 503 and "did not respond within 0.3s" in body
        block.set()
        deadline = time.monotonic() + 5
        while get(server, "/healthz")[0] != 200 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert get(server, "/healthz")[0] == 200
    finally:
        block.set()
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
    status, body, _ = get(server, "/healthz")
    assert status == 503 and "not running" in body
    loop.close()
    assert "closed" in get(server, "/healthz")[1]


def test_unknown_paths_are_404_and_head_has_no_body(serve: Factory) -> None:
    server = serve()
    status, body, _ = get(server, "/debug/pprof")
    assert status == 404 and "not found: /debug/pprof" in body
    status, body, _ = get(server, "/metrics", method="HEAD")
    assert status == 200 and body == ""
    assert get(server, "/metrics", method="POST")[0] == 501


def test_port_zero_picks_distinct_free_ports(serve: Factory) -> None:
    a, b = serve(), serve()
    assert a.port > 0 and b.port > 0 and a.port != b.port
    assert get(a, "/healthz")[0] == 200 and get(b, "/healthz")[0] == 200


def test_a_taken_port_is_a_config_error_and_stop_frees_the_port(serve: Factory) -> None:
    first = serve()
    port = first.port
    clash = MetricsHttpServer(f"127.0.0.1:{port}", CollectorRegistry(), HealthState())
    with pytest.raises(ConfigError, match=f"cannot listen on 127.0.0.1:{port}"):
        clash.start()
    first.stop()
    with pytest.raises(ConnectionRefusedError):
        http.client.HTTPConnection("127.0.0.1", port, timeout=1).connect()
    again = MetricsHttpServer(f"127.0.0.1:{port}", CollectorRegistry(), HealthState())
    again.start()
    try:
        assert again.port == port
    finally:
        again.stop()


def test_a_failing_collector_is_a_500_for_that_scrape_only(serve: Factory) -> None:
    class Broken:
        def collect(self) -> list[object]:
            raise RuntimeError("cgroup vanished")

    registry = CollectorRegistry()
    registry.register(Broken())  # type: ignore[arg-type]
    server = serve(registry)
    status, body, _ = get(server, "/metrics")
    assert status == 500 and "RuntimeError: cgroup vanished" in body
    assert get(server, "/healthz")[0] == 200


@pytest.mark.parametrize(
    ("addr", "expected"),
    [("127.0.0.1:9316", ("127.0.0.1", 9316)), ("[::1]:0", ("::1", 0)), (":80", ("0.0.0.0", 80)),
     ("localhost:1", ("localhost", 1))],
)
def test_parse_addr(addr: str, expected: tuple[str, int]) -> None:
    assert parse_addr(addr) == expected


@pytest.mark.parametrize("addr", ["", "9316", "host:", "host:http", "1.2.3.4:70000", "::1:80", "[nope]:1"])
def test_parse_addr_rejects_with_the_field_name(addr: str) -> None:
    with pytest.raises(ConfigError, match="metrics.addr"):
        parse_addr(addr)


def test_ipv6_loopback_when_available() -> None:
    import socket

    if not socket.has_ipv6:
        pytest.skip("no IPv6 on this host")
    server = MetricsHttpServer("[::1]:0", CollectorRegistry(), HealthState())
    try:
        server.start()
    except ConfigError as exc:
        pytest.skip(f"::1 not bindable here: {exc}")
    try:
        conn = http.client.HTTPConnection("::1", server.port, timeout=5)
        conn.request("GET", "/healthz")
        assert conn.getresponse().status == 200
        conn.close()
    finally:
        server.stop()
