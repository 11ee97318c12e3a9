"""Fixtures for collector tests: a scripted host (v1 or v2), a fake clock, a fresh store and registry."""

from __future__ import annotations

from pathlib import Path
import pytest

from hookserver.store.state import StateStore
from tests.collectors.fakehost import FakeClock, FakeHost



@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(clock: FakeClock) -> StateStore:
    return StateStore(clock=clock.time)


@pytest.fixture(params=[1, 2], ids=["v1", "v2"])
def host(request: pytest.FixtureRequest, tmp_path: Path) -> FakeHost:
    return FakeHost(tmp_path / "host", version=request.param)


@pytest.fixture
def host_v1(tmp_path: Path) -> FakeHost:
    return FakeHost(tmp_path / "host1", version=1)


@pytest.fixture
def host_v2(tmp_path: Path) -> FakeHost:
    return FakeHost(tmp_path / "host2", version=2)
