"""NriPlugin end to end against the fake runtime, over a real unix socket.

The runtime calls Configure before answering RegisterPlugin, so every test that gets as far as
`ready_conn` also proves the plugin served conn 1 before its registration was answered.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from hookserver.api import nri_pb2
from hookserver.hooks.outcome import FailurePolicy
from hookserver.hooks.plugins.batchresource import BatchResourcePlugin
from hookserver.nri import ConnState
from tests.nri.conftest import EXPECTED, be_pod, container, nri_world, run
from tests.nri.fake_runtime import CallError, RuntimeConn, wait_for

# RunPodSandbox | StopPodSandbox | RemovePodSandbox | CreateContainer | UpdateContainer | StopContainer | RemoveContainer
EXPECTED_MASK = 0x1 | 0x2 | 0x4 | 0x8 | 0x80 | 0x200 | 0x400


def _resources(res: nri_pb2.LinuxResources) -> tuple[int, int, int]:
    return res.cpu.shares.value, res.cpu.quota.value, res.memory.limit.value


async def _create(conn: RuntimeConn, pod: nri_pb2.PodSandbox, ctr: nri_pb2.Container) -> nri_pb2.CreateContainerResponse:
    return await conn.call(
        "CreateContainer", nri_pb2.CreateContainerRequest(pod=pod, container=ctr), nri_pb2.CreateContainerResponse
    )


def test_register_configure_and_subscribe_in_words(sock_dir: Path) -> None:
    async def body() -> None:
        async with nri_world(sock_dir) as w:
            conn = await w.runtime.ready_conn()
            assert conn.registered == ("hookserver", "00")
            assert conn.configure_reply is not None
            assert conn.configure_reply.events == EXPECTED_MASK
            assert conn.register_timeout_nano > 0
            await wait_for(lambda: w.plugin.state is ConnState.READY, what="ready state")
            status = w.plugin.status()
            assert status["state"] == "ready"
            assert status["plugin"] == "00-hookserver"
            assert status["runtime"]["name"] == "containerd"
            assert status["runtime"]["version"] == "v1.7.13"
            assert status["runtime"]["request_timeout_ms"] == 2000
            assert status["events"] == [
                "RunPodSandbox", "StopPodSandbox", "RemovePodSandbox", "CreateContainer",
                "UpdateContainer", "StopContainer", "RemoveContainer",
            ]
            assert status["reconnects"] == 0 and status["connections"] == 1

    run(body())


def test_be_pod_lifecycle_statechange_and_dedicated_rpcs(sock_dir: Path) -> None:
    async def body() -> None:
        async with nri_world(sock_dir) as w:
            conn = await w.runtime.ready_conn()
            pod = be_pod()
            # nri <= v0.11: RunPodSandbox arrives as StateChange(event=1) with no container.
            await conn.call("StateChange", nri_pb2.StateChangeEvent(event=1, pod=pod), nri_pb2.Empty)
            assert "uid-1" in w.store.snapshot().pods
            # nri v0.12: the dedicated rpc goes through the same path.
            pod2 = be_pod("uid-2", name="be-2", sandbox="sb-2", cgroup_parent="/kubepods/besteffort/poduid-2")
            await conn.call("RunPodSandbox", nri_pb2.RunPodSandboxRequest(pod=pod2), nri_pb2.RunPodSandboxResponse)
            snap = w.store.snapshot()
            assert snap.pods["uid-2"].source == "nri" and snap.pods["uid-2"].qos_class == "BE"
            assert snap.pods["uid-2"].cgroup_parent == "/kubepods/besteffort/poduid-2"

            for name, cid in (("a", "ctr-a"), ("b", "ctr-b")):
                reply = await _create(conn, pod, container(pod, name, cid, env=["X=1=2", "=bad", "EMPTY="]))
                assert _resources(reply.adjust.linux.resources) == EXPECTED[name]
                assert not reply.adjust.linux.resources.cpu.HasField("period")
                assert len(reply.update) == 0  # never an update of the container being created
            assert {"ctr-a", "ctr-b"} <= set(w.store.snapshot().containers)

            # A kubelet update (shares 2 from the CRI) gets the batch values back, filed under the id.
            wanted = nri_pb2.LinuxResources()
            wanted.cpu.shares.value = 2
            wanted.cpu.quota.value = -1
            reply_u = await conn.call(
                "UpdateContainer",
                nri_pb2.UpdateContainerRequest(pod=pod, container=container(pod, "a", "ctr-a"), linux_resources=wanted),
                nri_pb2.UpdateContainerResponse,
            )
            assert len(reply_u.update) == 1
            assert reply_u.update[0].container_id == "ctr-a"
            assert _resources(reply_u.update[0].linux.resources) == EXPECTED["a"]
            record = w.store.snapshot().containers["ctr-a"]
            assert record.resources.cpu_shares == 2 and record.resources.cpu_quota_us == -1  # the request's values

            # Stop a container (dedicated rpc in every version), remove the other through StateChange.
            await conn.call(
                "StopContainer", nri_pb2.StopContainerRequest(pod=pod, container=container(pod, "a", "ctr-a")),
                nri_pb2.StopContainerResponse,
            )
            assert "ctr-a" not in w.store.snapshot().containers
            await conn.call(
                "StateChange", nri_pb2.StateChangeEvent(event=11, pod=pod, container=container(pod, "b", "ctr-b")),
                nri_pb2.Empty,
            )
            assert "ctr-b" not in w.store.snapshot().containers
            # Pod stop keeps the record; remove (StateChange and dedicated rpc) forgets it.
            await conn.call("StateChange", nri_pb2.StateChangeEvent(event=2, pod=pod), nri_pb2.Empty)
            assert "uid-1" in w.store.snapshot().pods
            await conn.call("StateChange", nri_pb2.StateChangeEvent(event=3, pod=pod), nri_pb2.Empty)
            await conn.call(
                "RemovePodSandbox", nri_pb2.RemovePodSandboxRequest(pod=pod2), nri_pb2.RemovePodSandboxResponse
            )
            assert not w.store.snapshot().pods
            rpcs = [e.rpc for e in w.store.audit.events() if e.door == "nri"]
            assert "StateChange(RunPodSandbox)" in rpcs and "RunPodSandbox" in rpcs and "CreateContainer" in rpcs
            assert w.plugin.status()["calls"]["CreateContainer"] == 2

    run(body())


def test_non_be_pod_gets_an_empty_adjustment(sock_dir: Path) -> None:
    async def body() -> None:
        async with nri_world(sock_dir) as w:
            conn = await w.runtime.ready_conn()
            pod = be_pod(qos="LS")
            reply = await _create(conn, pod, container(pod, "a", "ctr-a"))
            assert not reply.HasField("adjust")
            assert reply.SerializeToString() == b""

    run(body())


def test_split_synchronize_loads_store_and_updates_running_be_containers(sock_dir: Path) -> None:
    pod = be_pod()
    other = be_pod("uid-9", name="ls", sandbox="sb-9", qos="LS")
    ctrs = [
        container(pod, "a", "ctr-a"),
        container(pod, "b", "ctr-b"),
        container(pod, "a", "ctr-old", state=4),  # stopped: neither loaded nor updated
        container(other, "a", "ctr-ls"),
    ]

    async def body() -> None:
        async with nri_world(sock_dir, pods=[pod, other], containers=ctrs, sync_chunk=2) as w:
            conn = await w.runtime.ready_conn()
            assert len(conn.sync_replies) == 3
            assert all(r.more and not r.update for r in conn.sync_replies[:-1])
            final = conn.sync_replies[-1]
            assert not final.more
            got = {u.container_id: _resources(u.linux.resources) for u in final.update}
            assert got == {"ctr-a": EXPECTED["a"], "ctr-b": EXPECTED["b"]}
            assert all(u.ignore_failure for u in final.update)
            # The reply goes out before the store learns the synced node (sync.py): wait for the bookkeeping.
            await wait_for(lambda: len(w.store.snapshot().containers) == 3, what="the synced node learned")
            snap = w.store.snapshot()
            assert set(snap.pods) == {"uid-1", "uid-9"}
            assert set(snap.containers) == {"ctr-a", "ctr-b", "ctr-ls"}
            status = w.plugin.status()
            sync = {k: status["sync"][k] for k in ("pods", "containers", "updates", "chunks", "complete", "handed_to_reconciler")}
            assert sync == {
                "pods": 2, "containers": 4, "updates": 2, "chunks": 3, "complete": True, "handed_to_reconciler": 0
            }

    run(body())


def test_reconnect_after_runtime_closes_with_one_live_registration(sock_dir: Path) -> None:
    async def body() -> None:
        closes: list[str] = []
        async with nri_world(sock_dir) as w:
            first = await w.runtime.ready_conn(0)
            await first.close("containerd restarted")
            second = await w.runtime.ready_conn(1)
            assert second is not first
            await wait_for(lambda: w.plugin.state is ConnState.READY, what="ready again")
            assert w.runtime.registrations == 2
            assert w.runtime.live == 1
            assert w.runtime.max_live == 1
            status = w.plugin.status()
            assert status["reconnects"] == 1 and status["connections"] == 2
            assert "closed" in status["last_error"]
            # The new connection works.
            pod = be_pod()
            reply = await _create(second, pod, container(pod, "b", "ctr-b"))
            assert _resources(reply.adjust.linux.resources) == EXPECTED["b"]
            closes.append(status["last_error"])
        assert closes

    run(body())


def test_runtime_that_rejects_the_mask_is_retried_with_backoff(sock_dir: Path) -> None:
    async def body() -> None:
        async with nri_world(sock_dir, valid_mask=0x1) as w:
            # Our mask always has bookkeeping bits, so a runtime accepting only RunPodSandbox drops us.
            await wait_for(lambda: len(w.runtime.rejected_masks) >= 2, what="two rejected registrations")
            assert w.runtime.registrations == 0 and w.runtime.max_live == 0
            assert w.plugin.status()["reconnects"] >= 1
            assert w.plugin.status()["last_error"]

    run(body())


def test_malformed_mux_frame_makes_the_plugin_reconnect(sock_dir: Path) -> None:
    async def body() -> None:
        async with nri_world(sock_dir) as w:
            first = await w.runtime.ready_conn(0)
            await first.send_raw(b"\x00\x00\x00\x01\xff\xff\xff\xf0")  # declares ~4 GiB on conn 1
            await first.closed.wait()
            second = await w.runtime.ready_conn(1)
            assert not second.closed.is_set()
            assert w.runtime.max_live == 1
            assert "limit" in w.plugin.status()["last_error"]

    run(body())


def test_unknown_ttrpc_message_type_makes_the_plugin_reconnect(sock_dir: Path) -> None:
    async def body() -> None:
        async with nri_world(sock_dir) as w:
            first = await w.runtime.ready_conn(0)
            frame = b"\x00\x00\x00\x00\x00\x00\x00\x63\x07\x00"  # empty data, stream 99, type 7
            await first.send_raw(b"\x00\x00\x00\x01\x00\x00\x00\x0a" + frame)
            await first.closed.wait()
            await w.runtime.ready_conn(1)
            assert "unexpected message type" in w.plugin.status()["last_error"]

    run(body())


def test_bad_requests_get_status_codes_and_the_connection_lives(sock_dir: Path) -> None:
    async def body() -> None:
        async with nri_world(sock_dir) as w:
            conn = await w.runtime.ready_conn()
            code, message, _ = await conn.call_raw("Frobnicate", b"")
            assert code == 12 and "Frobnicate" in message
            code, _, _ = await conn.call_raw("Configure", b"", service="nri.pkg.api.v1alpha1.Nope")
            assert code == 12
            # Undecodable payload for a known method: INVALID_ARGUMENT naming the message type.
            code, message, _ = await conn.call_raw("CreateContainer", b"\x0a\xff\xff")
            assert code == 3 and "CreateContainerRequest" in message
            # Even (server-side) stream ids are refused, as ttrpc >= 1.2 servers do.
            conn.next_sid = 1000
            code, message, _ = await conn.call_raw("Configure", b"")
            assert code == 3 and "odd" in message
            conn.next_sid = 1001
            # An oversized frame (> 4 MiB) is answered RESOURCE_EXHAUSTED on its stream and discarded.
            big = nri_pb2.CreateContainerRequest(pod=nri_pb2.PodSandbox(name="x" * (4 << 20)))
            code, message, _ = await conn.call_raw("CreateContainer", big.SerializeToString())
            assert code == 8 and "exceeds" in message
            pod = be_pod()
            reply = await _create(conn, pod, container(pod, "a", "ctr-a"))
            assert _resources(reply.adjust.linux.resources) == EXPECTED["a"]
            assert not conn.closed.is_set() and w.plugin.status()["connections"] == 1

    run(body())


def test_plugin_never_sends_a_mux_frame_over_4096_bytes(sock_dir: Path) -> None:
    pods = [be_pod(f"uid-{i}", name=f"p{i}", sandbox=f"sb-{i}", cgroup_parent="") for i in range(200)]
    ctrs = [container(p, n, f"{p.uid}-{n}") for p in pods for n in ("a", "b")]

    async def body() -> None:
        async with nri_world(sock_dir, pods=pods, containers=ctrs) as w:
            conn = await w.runtime.ready_conn()
            final = conn.sync_replies[-1]
            assert len(final.update) == 400
            assert len(final.SerializeToString()) > 3 * 4096  # so the reply really was split
            assert conn.max_plugin_frame <= 4096
            assert sum(1 for cid, n in conn.plugin_frames if cid == 1 and n == 4096) >= 3

    run(body())


class SlowPlugin:
    name = "Slow"

    def pre_create_container(self, request: object, snapshot: object) -> object:
        time.sleep(0.6)
        return BatchResourcePlugin().pre_create_container(request, snapshot)  # type: ignore[arg-type]


def test_slow_hook_answers_empty_within_the_budget(sock_dir: Path) -> None:
    async def body() -> None:
        async with nri_world(sock_dir, plugins=[SlowPlugin()], request_timeout_ms=400) as w:
            conn = await w.runtime.ready_conn()
            pod = be_pod()
            started = time.monotonic()
            reply = await _create(conn, pod, container(pod, "a", "ctr-a"))
            elapsed = time.monotonic() - started
            assert reply.SerializeToString() == b""
            assert elapsed < 0.4, f"answered after {elapsed:.3f}s, past the 400 ms request timeout"
            assert elapsed >= 0.19  # the budget is half the timeout: it did wait for the hook
            events = [e for e in w.store.audit.events() if e.result == "timeout"]
            assert events and events[0].rpc == "CreateContainer" and events[0].pod_key == "default/be-pod"
            assert w.plugin.status()["timeouts"] == 1

    run(body())


def test_slow_hook_under_fail_policy_fails_within_the_budget(sock_dir: Path) -> None:
    async def body() -> None:
        async with nri_world(
            sock_dir, plugins=[SlowPlugin()], request_timeout_ms=400, policy=FailurePolicy.FAIL
        ) as w:
            conn = await w.runtime.ready_conn()
            pod = be_pod()
            try:
                await _create(conn, pod, container(pod, "a", "ctr-a"))
            except CallError as exc:
                assert exc.code == 4
            else:
                raise AssertionError("expected DEADLINE_EXCEEDED under the Fail policy")
            assert w.plugin.status()["timeouts"] == 1

    run(body())


def test_fail_policy_rejection_is_an_error_status_and_ignore_is_empty(sock_dir: Path) -> None:
    bad = be_pod(spec={"containers": {"a": {"limits": {"kubernetes.io/batch-cpu": "lots"}}}})

    async def body(policy: FailurePolicy) -> tuple[int, bytes]:
        async with nri_world(sock_dir, policy=policy) as w:
            conn = await w.runtime.ready_conn()
            try:
                reply = await _create(conn, bad, container(bad, "a", "ctr-a"))
            except CallError as exc:
                assert "batch-cpu" in exc.message  # the message names the field
                return exc.code, b""
            return 0, reply.SerializeToString()

    assert run(body(FailurePolicy.FAIL)) == (2, b"")
    assert run(body(FailurePolicy.IGNORE)) == (0, b"")


def test_eight_concurrent_creates_are_answered_correctly(sock_dir: Path) -> None:
    spec = {
        "containers": {
            f"c{i}": {
                "requests": {"kubernetes.io/batch-cpu": str(100 * (i + 1))},
                "limits": {"kubernetes.io/batch-cpu": str(1000 * (i + 1)), "kubernetes.io/batch-memory": f"{i + 1}Gi"},
            }
            for i in range(8)
        }
    }
    pod = be_pod(spec=spec)

    async def body() -> None:
        async with nri_world(sock_dir) as w:
            conn = await w.runtime.ready_conn()
            replies = await asyncio.gather(
                *(_create(conn, pod, container(pod, f"c{i}", f"ctr-{i}")) for i in range(8))
            )
            for i, reply in enumerate(replies):
                assert _resources(reply.adjust.linux.resources) == (
                    100 * (i + 1) * 1024 // 1000, 100_000 * (i + 1), (i + 1) << 30,
                )

    run(body())


def test_inherited_socket_from_the_runtime(sock_dir: Path) -> None:
    """Pre-launched by the runtime: fd from NRI_PLUGIN_SOCKET, identity from NRI_PLUGIN_NAME/IDX."""
    import socket as socketlib

    from hookserver.nri.settings import NriSettings
    from hookserver.nri import NriPlugin

    closes: list[str] = []
    readies: list[bool] = []

    async def body() -> None:
        async with nri_world(sock_dir, start_plugin=False) as w:
            ours, theirs = socketlib.socketpair()
            reader, writer = await asyncio.open_unix_connection(sock=theirs)
            await w.runtime.attach(reader, writer)
            plugin = NriPlugin(
                NriSettings(socket=str(sock_dir / "absent.sock"), backoff_initial_s=0.02),
                dispatcher=w.dispatcher, store=w.store, registry=w.registry,
                environ={"NRI_PLUGIN_SOCKET": str(ours.detach()), "NRI_PLUGIN_NAME": "koord", "NRI_PLUGIN_IDX": "42"},
                on_close=closes.append, on_ready=lambda: readies.append(True),
            )
            stop = asyncio.Event()
            task = asyncio.create_task(plugin.run(stop))
            conn = await w.runtime.ready_conn(0)
            assert conn.registered == ("koord", "42")
            assert plugin.status()["plugin"] == "42-koord"
            await wait_for(lambda: readies == [True], what="on_ready")
            assert closes == []
            await conn.close()
            await wait_for(lambda: closes == ["the runtime closed the connection"], what="on_close")
            # The fd is used once; afterwards the plugin dials the (absent) socket path and backs off.
            await wait_for(lambda: str(sock_dir / "absent.sock") in plugin.status()["last_error"], what="redial")
            stop.set()
            await task
            assert plugin.status()["state"] == "stopped"

    run(body())


def test_bad_identity_or_inherited_socket_is_a_config_error() -> None:
    import pytest

    from hookserver.nri.settings import NriSettings
    from hookserver.dispatch import HookDispatcher
    from hookserver.errors import ConfigError
    from hookserver.hooks.registry import HookRegistry
    from hookserver.nri import NriPlugin
    from hookserver.store.state import StateStore

    store = StateStore()
    registry = HookRegistry([BatchResourcePlugin()])
    dispatcher = HookDispatcher(registry=registry, store=store, executor=None)

    def make(settings: NriSettings, env: dict[str, str]) -> NriPlugin:
        return NriPlugin(settings, dispatcher=dispatcher, store=store, registry=registry, environ=env)

    with pytest.raises(ConfigError, match="plugin name 'bad name'"):
        make(NriSettings(plugin_name="bad name"), {})
    with pytest.raises(ConfigError, match="NRI_PLUGIN_SOCKET='three'"):
        make(NriSettings(), {"NRI_PLUGIN_SOCKET": "three"})
    with pytest.raises(ConfigError, match="index '7'"):
        make(NriSettings(), {"NRI_PLUGIN_SOCKET": "3", "NRI_PLUGIN_IDX": "7"})
    assert make(NriSettings(), {}).status()["state"] == "idle"


def test_status_times_are_iso_8601() -> None:
    from hookserver.nri.status import NriStatus

    status = NriStatus("hookserver", "/x")
    status.connected_since = 0.0
    status.last_error_at = 1795331756.762
    report = status.as_dict()
    assert report["connected_since"] == "1970-01-01T00:00:00.000Z"
    assert report["last_error_at"] == "2026-11-22T07:15:56.762Z"


def test_registration_sends_the_plugins_nri_version(sock_dir: Path) -> None:
    """nri v0.12's RegisterPluginRequest field 3, NRI_version (a string): without it containerd 2.3 logs the
    plugin as registered "with NRI version unknown". Checked on the bytes the plugin sent, field by field."""
    async def body() -> None:
        async with nri_world(sock_dir, runtime_version="v2.3.0", nri_version="v0.12.0") as w:
            conn = await w.runtime.ready_conn()
            raw = conn.register_payload
            # field 1 plugin_name "hookserver", field 2 plugin_idx "00", field 3 NRI_version "v0.12.2"
            assert raw == b"\x0a\x0ahookserver" + b"\x12\x0200" + b"\x1a\x07v0.12.2"
            assert nri_pb2.RegisterPluginRequest.FromString(raw).NRI_version == "v0.12.2"
            assert w.plugin.status()["runtime"]["nri_version"] == "v0.12.0"

    run(body())
