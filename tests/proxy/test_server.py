"""Server lifecycle: message size limit, socket file handling, registration file, start/stop states."""

from __future__ import annotations

import json
import os
import socket
import stat
from pathlib import Path

import grpc
import pytest

from hookserver.dispatch import HookDispatcher
from hookserver.errors import ConfigError
from hookserver.hooks import FailurePolicy, HookRegistry, HookResult, PodRequest
from hookserver.hooks.plugins import BatchResourcePlugin
from hookserver.proxy import ProxyServer, ServerState, proxy_stage_names
from hookserver.store import StateStore
from tests.proxy.conftest import Harness, build, container_request, hook_settings


def test_oversized_message_is_resource_exhausted_and_server_survives(harness: Harness) -> None:
    req = container_request("a")
    req.container_annotations["big"] = "x" * (100 * 1024)  # the harness limit is 64 KiB
    with pytest.raises(grpc.RpcError) as info:
        harness.stub.PreCreateContainerHook(req, timeout=5)
    assert info.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert harness.stub.PreCreateContainerHook(container_request("a"), timeout=5).container_resources.cpu_shares == 512


def test_socket_mode_is_applied(tmp_path: Path) -> None:
    h = build(tmp_path, socket_mode=0o660)
    try:
        st = os.stat(h.server.socket_path)
        assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o660
    finally:
        h.channel.close()
        h.server.stop(grace_s=0.2)
    assert not os.path.exists(h.server.socket_path)


def _dead_socket(path: str) -> None:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.close()  # bound, never listening: what a killed server leaves behind


def test_stale_socket_is_replaced(tmp_path: Path) -> None:
    settings = hook_settings(tmp_path)
    Path(settings.socket).parent.mkdir(parents=True, exist_ok=True)
    _dead_socket(settings.socket)
    stale_inode = os.stat(settings.socket).st_ino
    os.link(settings.socket, f"{settings.socket}.keep")  # pins the inode so it cannot be reused
    h = build(tmp_path)
    try:
        assert h.settings.socket == settings.socket
        assert os.stat(settings.socket).st_ino != stale_inode
        assert stat.S_IMODE(os.stat(settings.socket).st_mode) == 0o660
        assert h.stub.PreCreateContainerHook(container_request("a"), timeout=5).container_resources.cpu_shares == 512
    finally:
        h.channel.close()
        h.server.stop(grace_s=0.2)


def _server(tmp_path: Path, **overrides: object) -> ProxyServer:
    registry = HookRegistry([BatchResourcePlugin()])
    dispatcher = HookDispatcher(registry=registry, store=StateStore(), executor=None)
    return ProxyServer(hook_settings(tmp_path, **overrides), dispatcher=dispatcher, registry=registry)


@pytest.mark.parametrize("kind", ["file", "directory"])
def test_a_path_that_is_not_a_socket_is_never_deleted(tmp_path: Path, kind: str) -> None:
    server = _server(tmp_path)
    path = Path(server.socket_path)
    if kind == "file":
        path.write_text("precious")
    else:
        path.mkdir()
    with pytest.raises(ConfigError, match="not a socket"):
        server.start()
    assert path.exists() and (kind == "directory" or path.read_text() == "precious")
    assert not server.registration_path.exists()


def test_a_live_socket_is_not_taken_over(tmp_path: Path) -> None:
    first = build(tmp_path)
    try:
        second = _server(tmp_path, registration_name="second")
        with pytest.raises(ConfigError, match="another server is listening"):
            second.start()
        assert first.stub.PreCreateContainerHook(container_request("a"), timeout=5).container_resources.cpu_shares == 512
    finally:
        first.channel.close()
        first.server.stop(grace_s=0.2)


def test_registration_file_content_and_removal(tmp_path: Path) -> None:
    h = build(tmp_path, failure_policy="Fail", host_endpoint="/var/run/koordlet/koordlet.sock")
    path = h.server.registration_path
    text = path.read_text()
    assert json.loads(text) == {
        "remote-endpoint": "/var/run/koordlet/koordlet.sock",
        "failure-policy": "Fail",
        "runtime-hooks": ["PreCreateContainer", "PreRunPodSandbox", "PreUpdateContainerResources"],
    }
    assert list(json.loads(text)) == ["remote-endpoint", "failure-policy", "runtime-hooks"]
    assert '\n\t"remote-endpoint"' in text  # tab-indented, like koordlet writes it
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert [p.name for p in path.parent.iterdir()] == ["hookserver.json"]  # no temp file left behind
    h.channel.close()
    h.server.stop(grace_s=0.2)
    assert not path.exists()
    assert h.server.state is ServerState.STOPPED


def test_registration_defaults_to_the_socket_and_honours_disabled_stages(tmp_path: Path) -> None:
    server = _server(tmp_path, disable_stages=("PreUpdateContainerResources",))
    server.start()
    try:
        doc = json.loads(server.registration_path.read_text())
        assert doc["remote-endpoint"] == server.socket_path
        assert doc["failure-policy"] == "Ignore"
        assert doc["runtime-hooks"] == ["PreCreateContainer", "PreRunPodSandbox"]
    finally:
        server.stop(grace_s=0.2)


def test_a_replaced_registration_file_is_left_alone_on_stop(tmp_path: Path) -> None:
    server = _server(tmp_path)
    server.start()
    server.registration_path.write_text('{"remote-endpoint": "/someone/else.sock"}')
    server.stop(grace_s=0.2)
    assert json.loads(server.registration_path.read_text()) == {"remote-endpoint": "/someone/else.sock"}


def test_registration_failure_undoes_the_start(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    server = _server(tmp_path, registration_dir=str(blocker / "hookserver.d"))
    with pytest.raises(ConfigError, match="registration file"):
        server.start()
    assert not os.path.exists(server.socket_path)
    assert server.state is ServerState.NEW


def test_an_unusable_socket_directory_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    server = _server(tmp_path, socket=str(blocker / "h.sock"))
    with pytest.raises(ConfigError, match="hook.socket"):
        server.start()
    assert server.state is ServerState.NEW and not server.registration_path.exists()


def test_start_twice_and_restart_are_refused(tmp_path: Path) -> None:
    server = _server(tmp_path)
    server.start()
    with pytest.raises(ConfigError, match="running"):
        server.start()
    server.stop(grace_s=0.2)
    server.stop(grace_s=0.2)  # idempotent
    with pytest.raises(ConfigError, match="stopped"):
        server.start()


@pytest.mark.parametrize("socket_value", ["relative.sock", "tcp://127.0.0.1:1", ""])
def test_only_absolute_unix_socket_paths_are_accepted(tmp_path: Path, socket_value: str) -> None:
    with pytest.raises(ConfigError, match="hook.socket"):
        _server(tmp_path, socket=socket_value)


def test_unix_scheme_is_accepted(tmp_path: Path) -> None:
    plain = hook_settings(tmp_path).socket
    server = _server(tmp_path, socket=f"unix://{plain}")
    assert server.socket_path == plain and server.address == f"unix://{plain}"


class _RemoveOnly:
    name = "remover"

    def pre_remove_run_pod_sandbox(self, request: PodRequest, snapshot: object) -> HookResult:
        return HookResult.skip("test")


def test_stage_list_leaves_out_stages_the_proxy_never_calls() -> None:
    registry = HookRegistry([BatchResourcePlugin(), _RemoveOnly()])
    assert "PreRemoveRunPodSandbox" in registry.stage_names()
    assert proxy_stage_names(registry) == ["PreCreateContainer", "PreRunPodSandbox", "PreUpdateContainerResources"]
    with pytest.raises(ConfigError, match="NoSuchStage"):
        proxy_stage_names(registry, ("NoSuchStage",))


def test_policy_enum_round_trips_settings_values() -> None:
    assert {FailurePolicy(v) for v in ("Ignore", "Fail")} == set(FailurePolicy)
