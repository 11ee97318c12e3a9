"""A real `hookserver serve --standalone --nri-socket ...` process registers with the fake runtime,
is synchronized, answers CreateContainer/UpdateContainer for a BE pod, shows its NRI connection in
`hookctl nri`, and on SIGTERM closes the connection and exits 0.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import pytest

from hookserver.api import nri_pb2
from tests.nri.conftest import EXPECTED, be_pod, container, run
from tests.nri.fake_runtime import FakeRuntime, wait_for

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def _daemon_available() -> str:
    try:
        import hookserver.cli.serve  # noqa: F401
        import hookserver.daemon  # noqa: F401
    except ImportError as exc:
        return f"the daemon is not importable yet: {exc}"
    return ""


async def _run_daemon(sock_dir: Path) -> None:
    pod = be_pod(cgroup_parent="")  # no pod cgroup: this test writes no host files
    runtime = FakeRuntime(pods=[pod], containers=[container(pod, "a", "ctr-a")])
    nri_socket = str(sock_dir / "nri.sock")
    await runtime.serve(nri_socket)
    env = dict(os.environ, PYTHONPATH=str(ROOT), HOOKSERVER_NRI__BACKOFF_INITIAL_S="0.05")
    args = [
        sys.executable, "-m", "hookserver.cli.serve", "serve", "--standalone",
        "--nri-socket", nri_socket,
        "--hook-socket", str(sock_dir / "hook.sock"),
        "--debug-socket", str(sock_dir / "debug.sock"),
        "--registration-dir", str(sock_dir / "reg"),
        "--state-dir", str(sock_dir / "state"),
        "--metrics-addr", "127.0.0.1:0",
        # A (missing) SLO file keeps the standalone informer running: see the lead's note on
        # `serve --standalone` without one (the informer returns at once and the daemon stops).
        "--slo-file", str(sock_dir / "slo.yaml"),
        "--log-level", "INFO",
    ]
    proc = await asyncio.create_subprocess_exec(
        *args, cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    output = b""
    try:
        ready = asyncio.create_task(runtime.ready_conn(0, timeout=30))
        exited = asyncio.create_task(proc.wait())
        done, _ = await asyncio.wait({ready, exited}, return_when=asyncio.FIRST_COMPLETED)
        if exited in done:
            ready.cancel()
            assert proc.stdout is not None
            output = await proc.stdout.read()
            raise AssertionError(f"hookserver exited {proc.returncode} before registering:\n{output.decode()[-3000:]}")
        exited.cancel()
        conn = ready.result()
        assert conn.registered == ("hookserver", "00")
        assert conn.configure_reply is not None and conn.configure_reply.events == 0x68F
        (update,) = conn.sync_replies[-1].update
        assert update.container_id == "ctr-a"

        reply = await conn.call(
            "CreateContainer", nri_pb2.CreateContainerRequest(pod=pod, container=container(pod, "b", "ctr-b")),
            nri_pb2.CreateContainerResponse,
        )
        res = reply.adjust.linux.resources
        assert (res.cpu.shares.value, res.cpu.quota.value, res.memory.limit.value) == EXPECTED["b"]

        hookctl = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "hookserver.cli.hookctl", "--socket", str(sock_dir / "debug.sock"), "nri", "-o", "json",
            cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        out, err = await hookctl.communicate()
        assert hookctl.returncode == 0, err.decode()
        status = json.loads(out)
        assert status["state"] == "ready"
        assert status["runtime"]["name"] == "containerd"
        assert "CreateContainer" in status["events"]

        proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(15):
            code = await proc.wait()
        assert code == 0
        await wait_for(conn.closed.is_set, what="the plugin to close its connection")
        assert runtime.max_live == 1
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        await runtime.aclose()


def test_hookserver_serve_registers_and_answers(sock_dir: Path) -> None:
    reason = _daemon_available()
    if reason:
        pytest.skip(reason)
    run(_run_daemon(sock_dir), timeout=60)
