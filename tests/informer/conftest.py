"""Fixtures: a fresh HTTP fake apiserver per test, a kubeconfig pointing at it, and a running informer."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from hookserver.config import Settings
from hookserver.informer import Informer, InformerSettings, build_informer
from hookserver.store import StateStore
from tests.informer.fake_apiserver import FakeApiServer

NODE = "node-a"
TOKEN = "s3cret-token"


@pytest.fixture(autouse=True)
def _quiet_urllib3() -> None:
    logging.getLogger("urllib3").setLevel(logging.ERROR)


@pytest.fixture
def fake() -> Iterator[FakeApiServer]:
    server = FakeApiServer(token=TOKEN, bookmark_interval_s=0.05).start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture
def served() -> Iterator[list[Any]]:
    """Daemons a test builds: their metrics HTTP servers are stopped after it (Daemon.run stops the rest)."""
    daemons: list[Any] = []
    yield daemons
    for daemon in daemons:
        daemon.http.stop()


def fast_informer_settings(**overrides: Any) -> InformerSettings:
    values: dict[str, Any] = {
        "source": "apiserver", "backoff_initial_s": 0.02, "backoff_max_s": 0.1, "backoff_jitter": 0.1,
        "resync_period_s": 0, "list_timeout_s": 5, "connect_timeout_s": 2, "first_list_spread_s": 0,
        "relist_spread_s": 0,
    }
    values.update(overrides)
    return InformerSettings(**values)


def api_settings(fake: FakeApiServer, tmp_path: Path, **overrides: Any) -> Settings:
    return Settings(
        node_name=NODE, kubeconfig=fake.kubeconfig(str(tmp_path / "kubeconfig")),
        informer=fast_informer_settings(**overrides),
    )


@contextlib.asynccontextmanager
async def running(settings: Settings, store: StateStore | None = None,
                  registry: CollectorRegistry | None = None) -> AsyncIterator[Informer]:
    informer = build_informer(settings, store=store or StateStore(), registry=registry or CollectorRegistry())
    stop = asyncio.Event()
    task = asyncio.create_task(informer.run(stop))
    try:
        yield informer
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=5)


async def eventually(check: Callable[[], bool], *, timeout_s: float = 5.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.005)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def count_threads(prefix: str) -> int:
    return sum(1 for t in threading.enumerate() if t.name.startswith(prefix))
