"""The guest tests run only inside the VM tier's guest: root, systemd as PID 1 and the unified cgroup v2
hierarchy. Anywhere else (this host's `make test`) each is skipped with the reason."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.vm.guest.results import record, uptime_s


def _not_a_guest() -> str:
    if os.geteuid() != 0:
        return "needs root"
    if not Path("/run/systemd/system").is_dir():
        return "needs systemd as PID 1"
    if not Path("/sys/fs/cgroup/cgroup.controllers").exists():
        return "needs the unified cgroup v2 hierarchy (the VM tier's guest: make vm-e2e)"
    return ""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    why = _not_a_guest()
    if not why:
        record("tests_start_uptime_s", uptime_s())  # collected: pytest's and the imports' start-up is over
        return
    for item in items:
        if "tests/vm/guest/" in str(item.fspath):
            item.add_marker(pytest.mark.skip(reason=why))
