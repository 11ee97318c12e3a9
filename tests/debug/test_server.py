"""The debug server itself: its socket file, status codes for bad requests, and providers."""

from __future__ import annotations

import os
import socket
import stat
import string
import threading
from pathlib import Path
from typing import Any

import grpc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hookserver.api import debug_pb2, debug_pb2_grpc
from hookserver.debug import DebugCallError, DebugClient, DebugServer
from hookserver.errors import ConfigError, InputError
from hookserver.store import StateStore
from tests.debug.conftest import ServerFactory, World


def test_socket_mode_is_0660_and_stop_removes_it(make_server: ServerFactory) -> None:
    server = make_server()
    mode = os.stat(server.socket_path).st_mode
    assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o660
    assert server.address == f"unix:{server.socket_path}"
    server.stop(0.1)
    assert not os.path.exists(server.socket_path)
    server.stop(0.1)  # twice is harmless


def test_stale_socket_is_replaced(tmp_path: Path, world: World) -> None:
    path = tmp_path / "debug.sock"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))
    stale.close()  # the file stays, nobody listens: what a kill -9 leaves behind
    server = DebugServer(str(path), store=world.store)
    server.start()
    try:
        with DebugClient(str(path)) as client:
            assert '"pods":3' in client.status()
    finally:
        server.stop(0.1)


def test_live_socket_is_not_stolen(make_server: ServerFactory, world: World) -> None:
    first = make_server()
    second = DebugServer(first.socket_path, store=world.store)
    with pytest.raises(ConfigError, match="another server is listening"):
        second.start()
    with DebugClient(first.socket_path) as client:  # the first server still answers
        assert client.pods().startswith("[")


def test_a_regular_file_at_the_path_is_never_removed(tmp_path: Path, world: World) -> None:
    path = tmp_path / "important.conf"
    path.write_text("keep me")
    with pytest.raises(ConfigError, match="is not a socket"):
        DebugServer(str(path), store=world.store).start()
    assert path.read_text() == "keep me"


def test_a_too_long_path_is_a_config_error(tmp_path: Path, world: World) -> None:
    path = tmp_path / ("x" * 120) / "debug.sock"
    with pytest.raises(ConfigError, match="longer than 107 bytes"):
        DebugServer(str(path), store=world.store).start()


def test_start_twice_and_unknown_providers_are_refused(make_server: ServerFactory, world: World) -> None:
    server = make_server()
    with pytest.raises(ConfigError, match="already started"):
        server.start()
    with pytest.raises(ConfigError, match="unknown name.*tpo"):
        DebugServer("/tmp/x.sock", store=world.store, providers={"tpo": lambda a: {}})
    with pytest.raises(ConfigError, match="unknown name 'nope'"):
        server.register_provider("nope", lambda a: {})


def test_a_provider_registered_late_is_used(make_server: ServerFactory) -> None:
    server = make_server()
    with DebugClient(server.socket_path) as client:
        with pytest.raises(DebugCallError) as missing:
            client.nri()
        assert missing.value.code == "UNAVAILABLE"
        server.register_provider("nri", lambda args: {"state": "connecting"})
        assert client.nri() == '{"state":"connecting"}'


@pytest.mark.parametrize(
    ("namespace", "name", "field"),
    [("", "x", "namespace"), ("ns", "", "name"), ("Bad_NS", "x", "namespace"), ("ns", "a/b", "name"),
     ("a" * 64, "x", "namespace"), ("ns", "x" * 254, "name"), ("ns", "-x", "name")],
)
def test_explain_bad_fields_are_invalid_argument(
    make_server: ServerFactory, namespace: str, name: str, field: str
) -> None:
    server = make_server()
    with DebugClient(server.socket_path) as client, pytest.raises(DebugCallError) as err:
        client.explain(namespace, name)
    assert err.value.code == "INVALID_ARGUMENT"
    assert str(err.value).startswith(f"{field}: ")
    assert "\n" not in str(err.value)


def test_metrics_with_an_empty_query_is_invalid_argument(make_server: ServerFactory) -> None:
    server = make_server(providers={"metrics": lambda args: []})
    with DebugClient(server.socket_path) as client, pytest.raises(DebugCallError) as err:
        client.metrics("   ")
    assert err.value.code == "INVALID_ARGUMENT" and "query" in str(err.value)


def test_provider_input_error_is_invalid_argument(make_server: ServerFactory) -> None:
    def strict(args: dict[str, Any]) -> Any:
        raise InputError(f"cannot parse {args['query']!r}", field="query")

    server = make_server(providers={"metrics": strict})
    with DebugClient(server.socket_path) as client, pytest.raises(DebugCallError) as err:
        client.metrics("rate(")
    assert err.value.code == "INVALID_ARGUMENT"
    assert str(err.value) == "query: cannot parse 'rate('"


def test_provider_values_are_converted_to_json(make_server: ServerFactory) -> None:
    from dataclasses import dataclass
    from enum import Enum

    class State(Enum):
        UP = "connected"

    @dataclass(frozen=True)
    class Nri:
        state: State
        events: frozenset[str]
        latency: float

    server = make_server(providers={"nri": lambda args: Nri(State.UP, frozenset({"b", "a"}), float("nan"))})
    with DebugClient(server.socket_path) as client:
        assert client.nri() == '{"state":"connected","events":["a","b"],"latency":"nan"}'


def test_raw_grpc_client_gets_reply_json(make_server: ServerFactory) -> None:
    """Any gRPC client, not only hookctl, can use the service by its wire name."""
    server = make_server()
    with grpc.insecure_channel(server.address) as channel:
        stub = debug_pb2_grpc.DebugStub(channel)
        reply = stub.Events(debug_pb2.EventsRequest(limit=1), timeout=5)
        method = channel.unary_unary(
            "/hookserver.debug.v1.Debug/Pods",
            request_serializer=debug_pb2.PodsRequest.SerializeToString,
            response_deserializer=debug_pb2.DebugReply.FromString,
        )
        pods = method(debug_pb2.PodsRequest(), timeout=5)
    assert reply.json.startswith("[{") and reply.json.count('"rpc"') == 1
    assert '"batch/be-job-0"' in pods.json


def test_garbage_bytes_on_the_wire_do_not_hurt_the_server(make_server: ServerFactory) -> None:
    server = make_server()
    with grpc.insecure_channel(server.address) as channel:
        raw = channel.unary_unary("/hookserver.debug.v1.Debug/Explain")
        with pytest.raises(grpc.RpcError) as err:
            raw(b"\xff\xff\xff\xff\x0f", timeout=5)
        assert err.value.code() in (grpc.StatusCode.INTERNAL, grpc.StatusCode.INVALID_ARGUMENT)
    with DebugClient(server.socket_path) as client:
        assert client.pods().startswith("[")


def test_concurrent_clients_all_get_answers(make_server: ServerFactory) -> None:
    server = make_server()
    results: list[str] = []
    lock = threading.Lock()

    def worker() -> None:
        with DebugClient(server.socket_path) as client:
            for _ in range(10):
                text = client.explain("batch", "be-job-0")
                with lock:
                    results.append(text)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(results) == 80 and len(set(results)) == 1


_names = st.text(alphabet=string.ascii_letters + string.digits + "-._/ \n\x00é", max_size=70)


def test_explain_any_input_is_answered_with_a_clear_status(make_server: ServerFactory) -> None:
    server = make_server()

    @settings(max_examples=60, deadline=None)
    @given(namespace=_names, name=_names)
    def check(namespace: str, name: str) -> None:
        with DebugClient(server.socket_path) as client:
            try:
                client.explain(namespace, name)
            except DebugCallError as exc:
                assert exc.code in ("INVALID_ARGUMENT", "NOT_FOUND"), exc
                assert str(exc) and "\n" not in str(exc)

    check()
    with DebugClient(server.socket_path) as client:  # still serving after all of that
        assert '"batch/be-job-0"' in client.pods()


def test_server_serves_an_empty_store(tmp_path: Path) -> None:
    server = DebugServer(str(tmp_path / "d.sock"), store=StateStore())
    server.start()
    try:
        with DebugClient(server.socket_path) as client:
            assert client.pods() == "[]" and client.events() == "[]" and client.writes() == "[]"
            assert '"pods":0' in client.status()
    finally:
        server.stop(0.1)
