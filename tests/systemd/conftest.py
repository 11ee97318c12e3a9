"""The executor's fixture trees (tests/executor/conftest.py) for the keeper's tests, and a short socket path."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.executor.conftest import v2tree

__all__ = ["sock_path", "v2tree"]


@pytest.fixture
def sock_path() -> Iterator[Path]:
    """AF_UNIX names are at most 107 bytes, and tmp_path can be longer."""
    short = Path(f"/tmp/fsd-{os.getpid()}-{time.monotonic_ns()}.sock")
    yield short
    short.unlink(missing_ok=True)
