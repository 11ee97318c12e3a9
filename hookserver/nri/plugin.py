"""The NRI plugin lifecycle: connect, serve, register, and reconnect until stopped.

One connection at a time, always: a session is unwound completely (reader cancelled, in-flight
requests cancelled, socket closed and waited for) before the next dial, so the runtime never sees
two live registrations of this plugin (koordinator#2334). The runtime ends a plugin by closing the
socket (it never calls Shutdown on external plugins), so every close is followed by a redial with
capped exponential backoff and jitter. A reconnect is a new registration and a full Synchronize.

Within a session the conn-1 server runs before RegisterPlugin is sent, because the runtime may call
Configure (and Synchronize) before it writes the RegisterPlugin reply.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import re
import socket
import time
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from hookserver.aio.backoff import Backoff
from hookserver.aio.periodic import sleep_or_stop
from hookserver.api import nri_pb2
from hookserver.nri.settings import NriSettings
from hookserver.dispatch import HookDispatcher
from hookserver.errors import ConfigError, WireError
from hookserver.hooks.deadline import CallDeadline
from hookserver.hooks.outcome import FailurePolicy
from hookserver.hooks.registry import HookRegistry
from hookserver.nri.conn import TtrpcClient, TtrpcServer
from hookserver.nri.handlers import PLUGIN_SERVICE, RUNTIME_SERVICE, PluginService
from hookserver.nri.mux import PLUGIN_SERVICE_CONN, RUNTIME_SERVICE_CONN, Multiplexer
from hookserver.nri.events import NRI_VERSION
from hookserver.nri.status import ConnState, NriStatus
from hookserver.nri.sync import CatchUp
from hookserver.nri.watchdog import LoopWatchdog
from hookserver.store.state import StateStore

__all__ = ["Dial", "NriPlugin"]

log = logging.getLogger(__name__)

# A custom dialer returns a connected unix stream socket (non-blocking); the multiplexer takes it over.
Dial = Callable[[], Awaitable[socket.socket]]

ENV_SOCKET = "NRI_PLUGIN_SOCKET"
ENV_NAME = "NRI_PLUGIN_NAME"
ENV_IDX = "NRI_PLUGIN_IDX"
_NAME = re.compile(r"^[A-Za-z0-9_.+-]+$")
_IDX = re.compile(r"^[0-9]{2}$")
_WATCHDOG_STALL_S = 0.5


class NriPlugin:
    """hookserver as an NRI plugin. Construct once; `run` until the stop event is set."""

    def __init__(
        self,
        settings: NriSettings,
        *,
        dispatcher: HookDispatcher,
        store: StateStore,
        registry: HookRegistry,
        failure_policy: FailurePolicy = FailurePolicy.IGNORE,
        socket_path: str | None = None,
        dial: Dial | None = None,
        on_close: Callable[[str], None] | None = None,
        on_ready: Callable[[], None] | None = None,
        environ: Mapping[str, str] | None = None,
        hook_workers: int = 4,
        rng: Callable[[], float] = random.random,
        catch_up: CatchUp | None = None,
    ) -> None:
        env = os.environ if environ is None else environ
        self._settings = settings
        self._dispatcher = dispatcher
        self._store = store
        self._registry = registry
        self._policy = failure_policy
        self._socket_path = socket_path or settings.socket
        self._dial = dial
        self._on_close = on_close
        self._on_ready = on_ready
        self._workers = hook_workers
        self._rng = rng
        # Pods a Synchronize could not finish in the runtime's budget go here (the reconciler, at once).
        self._catch_up = catch_up
        self._inherited_fd = _inherited_fd(env)
        name, idx = settings.plugin_name, settings.plugin_idx
        if self._inherited_fd is not None:  # launched by the runtime: its names win
            name, idx = env.get(ENV_NAME) or name, env.get(ENV_IDX) or idx
        if not _NAME.match(name):
            raise ConfigError(f"nri plugin name {name!r}: use only letters, digits and _.+-")
        if not _IDX.match(idx):
            raise ConfigError(f"nri plugin index {idx!r}: must be two digits 00-99")
        self.name, self.idx = name, idx
        target = f"fd {self._inherited_fd}" if self._inherited_fd is not None else self._socket_path
        self._status = NriStatus(plugin=f"{idx}-{name}", socket=target)
        self._running = False
        # Reports a hook that holds the loop past half the per-call budget (half of NRI's request timeout).
        self.deadline = CallDeadline()
        self.watchdog = LoopWatchdog(stall_s=_WATCHDOG_STALL_S, on_poll=self.deadline.nudge)

    def status(self) -> dict[str, Any]:
        """JSON-able connection state for `hookctl nri` (debug provider "nri"), with the hooks' breakers."""
        out = self._status.as_dict()
        out["loop_stalls"] = {
            "count": self.watchdog.stalls,
            "longest_ms": round(self.watchdog.longest_stall_s * 1000, 1),
            "threshold_ms": self.watchdog.stall_s * 1000,
        }
        out["hook_interrupts"] = self.deadline.interrupts
        out["breakers"] = self._dispatcher.breaker_status()
        return out

    @property
    def state(self) -> ConnState:
        return self._status.state

    async def run(self, stop: asyncio.Event) -> None:
        """Connect, register and serve; reconnect with backoff until `stop` is set. Never raises for
        connection problems: they are logged and shown in `status()`."""
        if self._running:
            raise RuntimeError("NriPlugin.run is already running")
        self._running = True
        st = self._status
        pool = ThreadPoolExecutor(max_workers=self._workers, thread_name_prefix="nri-hook")
        backoff = Backoff(
            initial_s=self._settings.backoff_initial_s, max_s=self._settings.backoff_max_s, jitter=0.25, rand=self._rng
        )
        self.watchdog.start()
        try:
            while not stop.is_set():
                was_ready = await self._session(stop, pool)
                if stop.is_set():
                    break
                if was_ready:
                    backoff.reset()  # a session that got as far as synchronized starts the schedule over
                delay = backoff.next_delay()
                st.state, st.next_retry_s = ConnState.BACKOFF, delay
                st.reconnects += 1
                if await sleep_or_stop(stop, delay):
                    break
                st.next_retry_s = None
        finally:
            st.state = ConnState.STOPPED
            st.connected_since = None
            pool.shutdown(wait=False, cancel_futures=True)
            self.watchdog.stop()
            self._running = False

    # -- one connection --------------------------------------------------------------------------
    async def _session(self, stop: asyncio.Event, pool: ThreadPoolExecutor) -> bool:
        """One connection from dial to close. Returns whether it got as far as synchronized."""
        st = self._status
        st.state = ConnState.CONNECTING
        try:
            async with asyncio.timeout(self._settings.connect_timeout_s):
                mux = await self._open()
        except (OSError, TimeoutError) as exc:
            self._note_error(f"dial {st.socket}: {exc or type(exc).__name__}")
            return False
        st.connections += 1
        service = PluginService(
            dispatcher=self._dispatcher, registry=self._registry, policy=self._policy, status=st, pool=pool,
            clock=self._store.clock, watchdog=self.watchdog, deadline=self.deadline, catch_up=self._catch_up,
        )
        server = TtrpcServer(
            mux, PLUGIN_SERVICE_CONN, PLUGIN_SERVICE, service.methods(), inline=service.inline_methods(),
            after_inline=service.after_inline_reply,
        )
        client = TtrpcClient(mux, RUNTIME_SERVICE_CONN)
        mux.open(PLUGIN_SERVICE_CONN, server.feed)
        mux.open(RUNTIME_SERVICE_CONN, client.feed)
        reason = "stopped"
        async with contextlib.AsyncExitStack() as stack:
            # Unwound in reverse: reader cancelled, in-flight requests cancelled, socket closed.
            stack.push_async_callback(mux.close)
            stack.push_async_callback(server.close)
            stack.callback(service.close)  # a split sync cut by the close: its worker stops waiting
            reader_task = asyncio.create_task(mux.run(), name="nri-mux-reader")
            stack.push_async_callback(_cancel, reader_task)
            try:
                reason = await self._serve(stop, reader_task, service, client)
            finally:
                client.fail_all(WireError(reason))
        ready = service.synchronized.is_set()
        st.connected_since = None
        if not stop.is_set():
            self._note_error(reason)
        if self._on_close is not None:
            self._on_close(reason)
        return ready

    async def _serve(
        self, stop: asyncio.Event, reader_task: asyncio.Task[None], service: PluginService, client: TtrpcClient
    ) -> str:
        st = self._status
        st.state = ConnState.REGISTERING
        # NRI_version (nri v0.12): the protocol level we speak, so the runtime does not log "unknown".
        request = nri_pb2.RegisterPluginRequest(plugin_name=self.name, plugin_idx=self.idx, NRI_version=NRI_VERSION)
        register = asyncio.create_task(
            client.call(
                RUNTIME_SERVICE, "RegisterPlugin", request.SerializeToString(),
                timeout_s=self._settings.connect_timeout_s,
            ),
            name="nri-register",
        )
        stopped = asyncio.create_task(stop.wait(), name="nri-stop-wait")
        synced = asyncio.create_task(service.synchronized.wait(), name="nri-sync-wait")
        waiting: set[asyncio.Future[Any]] = {register, stopped, synced, reader_task}
        try:
            while True:
                done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                if stopped in done:
                    return "stopped"
                if reader_task in done:
                    return _reader_end(reader_task)
                if register in done:
                    waiting.discard(register)
                    try:
                        register.result()
                    except WireError as exc:
                        return f"RegisterPlugin failed: {exc}"
                    st.connected_since = self._store.clock()
                    if st.state is ConnState.REGISTERING:
                        st.state = ConnState.REGISTERED
                    log.info("nri: registered as %s on %s (NRI version %s)", st.plugin, st.socket, NRI_VERSION)
                if synced in done:
                    waiting.discard(synced)
                    st.state = ConnState.READY
                    if self._on_ready is not None:
                        self._on_ready()
        finally:
            for task in (register, stopped, synced):
                task.cancel()
            await asyncio.gather(register, stopped, synced, return_exceptions=True)

    async def _open(self) -> Multiplexer:
        fd = self._inherited_fd
        if fd is not None:
            # The runtime's socketpair end can be used once; later attempts dial the socket path.
            self._inherited_fd = None
            sock = socket.socket(fileno=fd)
            sock.setblocking(False)
            return await Multiplexer.over(sock)
        self._status.socket = self._socket_path if self._dial is None else "custom dialer"
        if self._dial is not None:
            return await Multiplexer.over(await self._dial())
        return await Multiplexer.dial(self._socket_path)

    def _note_error(self, message: str) -> None:
        st = self._status
        level = logging.DEBUG if message == st.last_error else logging.WARNING
        log.log(level, "nri: %s (%s)", message, st.plugin)
        st.error(message, self._store.clock())


def _inherited_fd(env: Mapping[str, str]) -> int | None:
    raw = env.get(ENV_SOCKET, "")
    if not raw:
        return None
    try:
        fd = int(raw)
    except ValueError:
        raise ConfigError(f"environment {ENV_SOCKET}={raw!r}: not a file descriptor number") from None
    if fd < 0:
        raise ConfigError(f"environment {ENV_SOCKET}={raw!r}: not a file descriptor number")
    return fd


def _reader_end(task: asyncio.Task[None]) -> str:
    if task.cancelled():
        return "reader cancelled"
    exc = task.exception()
    if exc is None:
        return "the runtime closed the connection"
    if isinstance(exc, WireError):
        return str(exc)
    return f"reader failed: {exc!r}"


async def _cancel(task: asyncio.Task[None]) -> None:
    """Stop the reader; how it ended was already read by `_reader_end` (or does not matter now)."""
    if not task.done():
        task.cancel()
    await asyncio.gather(task, return_exceptions=True)
