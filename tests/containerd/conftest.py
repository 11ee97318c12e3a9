"""The containerd tier (marker `containerd_e2e`): a real containerd 1.7 with NRI (tests/containerd/runtime.py),
real runc containers, and hookserver as containerd's NRI plugin.

It runs where `make e2e` asks for it (HOOKSERVER_CONTAINERD_E2E=1, which tests/kube/e2e.sh sets) and as root;
elsewhere every test is skipped with the reason: fetching the package needs apt and the network once, and a
container needs root, so `make test` does not run it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.collectors.fake_nvml import compiler
from tests.containerd.agent import Agent
from tests.containerd.cri import CriClient
from tests.containerd.runtime import (
    CGROUP_PARENT,
    Containerd,
    ContainerdUnavailable,
    host_tool,
    remove_cgroup_tree,
)

ENV = "HOOKSERVER_CONTAINERD_E2E"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.containerd_e2e)


@pytest.fixture(scope="module")
def containerd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Containerd]:
    if os.environ.get(ENV) != "1":
        pytest.skip(f"the containerd tier runs under `make e2e` ({ENV}=1)")
    if os.geteuid() != 0:
        pytest.skip("the containerd tier needs root (containers, cgroups)")
    home = Path(tmp_path_factory.mktemp("containerd"))
    remove_cgroup_tree(CGROUP_PARENT)  # what an interrupted run left
    try:
        runtime = Containerd(home)
        runtime.start()
    except ContainerdUnavailable as exc:
        pytest.fail(str(exc))  # someone asked for this tier: a broken setup is an error, not a skip
    try:
        yield runtime
    finally:
        runtime.stop()
        remove_cgroup_tree(CGROUP_PARENT)
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="module")
def cri(containerd: Containerd) -> Iterator[CriClient]:
    client = CriClient(str(containerd.cri_socket))
    try:
        yield client
    finally:
        client.close()


@pytest.fixture(scope="module")
def agent(containerd: Containerd, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agent]:
    """The agent, connected and synchronized; its HAMi-core library stand-in installed. HAMi's node-wide lock
    directory (/tmp/vgpulock), which the NRI door creates where missing, is removed again if the test made it."""
    if compiler() is None:  # a fresh machine: the tier installs what it needs, as it does runc and busybox
        try:
            host_tool("/usr/bin/gcc", "gcc")
        except ContainerdUnavailable as exc:
            pytest.fail(f"the fake libnvidia-ml.so.1 needs a C compiler: {exc}")
    home = Path(tmp_path_factory.mktemp("agent"))
    running = Agent(home, containerd.nri_socket, drop_env=ENV)
    running.hami_library.parent.mkdir()
    running.hami_library.write_bytes(b"hami-core stand-in " + os.urandom(8).hex().encode())
    lock_dir = Path("/tmp/vgpulock")
    lock_existed = lock_dir.exists()
    running.start()
    try:
        status = running.wait_ready()
        assert status["runtime"]["name"] == "containerd", status
        yield running
    finally:
        assert running.stop() == 0, running.log_path.read_text()[-3000:]
        if not lock_existed and lock_dir.is_dir():
            shutil.rmtree(lock_dir)
