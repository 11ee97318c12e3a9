"""The heap reserve (`hookserver.aio.heapreserve`): a large buffer made after it is served from heap already
touched, so reading and decoding an NRI sync chunk takes no page faults. Counted by the kernel (minor faults),
in a child process: the allocator's thresholds are process-wide."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hookserver.aio.heapreserve import MAX_RESERVE_BYTES, MIN_RESERVE_BYTES, reserve_heap
from hookserver.hooks.settings import HookServerSettings
from hookserver.daemon import Daemon
from tests.readiness import daemon_settings
from tests.test_interpreter import while_serving

# A sync chunk's life on the loop: its pieces as the transport reads them, joined into one frame, then freed.
_CHILD = """
import json, resource, sys
from hookserver.aio.heapreserve import reserve_heap
reserve = reserve_heap(int(sys.argv[1]))
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
before = faults()
pieces = [bytes([i]) * (256 << 10) for i in range(12)]
frame = b"".join(pieces)
copy = bytes(memoryview(frame)[8:])
taken = faults() - before
del pieces, frame, copy
print(json.dumps({"faults": taken, "status": reserve.status()}))
"""


def _chunk_faults(reserve_bytes: int) -> dict[str, object]:
    out = subprocess.run([sys.executable, "-c", _CHILD, str(reserve_bytes)], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).resolve().parents[1], timeout=60)
    result: dict[str, object] = json.loads(out.stdout)
    return result


def test_a_sync_chunks_buffers_take_no_page_faults_after_the_reserve() -> None:
    # 3 MiB of pieces, a 3 MiB frame and a 3 MiB copy: ~2,300 pages, each faulted in once without the reserve.
    without = _chunk_faults(0)
    with_reserve = _chunk_faults(16 << 20)
    assert isinstance(without["faults"], int) and without["faults"] > 1500
    assert isinstance(with_reserve["faults"], int) and with_reserve["faults"] < 100
    assert with_reserve["status"] == {"applied": True, "reserved_mib": 16.0, "mmap_threshold_mib": 16.0,
                                      "trim_threshold_mib": 32.0, "detail": ""}
    assert without["status"] == {"applied": False, "reserved_mib": 0.0, "mmap_threshold_mib": 0.0,
                                 "trim_threshold_mib": 0.0, "detail": "off (hook.heap_reserve_mib is 0)"}


def test_a_reserve_over_glibcs_limit_or_under_a_mib_is_refused() -> None:
    with pytest.raises(ValueError, match="over glibc's limit"):
        reserve_heap(MAX_RESERVE_BYTES + 1)
    with pytest.raises(ValueError, match="under 1048576"):
        reserve_heap(MIN_RESERVE_BYTES - 1)
    with pytest.raises(ValueError):
        HookServerSettings(heap_reserve_mib=33)
    with pytest.raises(ValueError):
        HookServerSettings(heap_reserve_mib=-1)


def test_the_daemon_reserves_the_heap_on_its_loops_thread(tmp_path: Path) -> None:
    settings = daemon_settings(tmp_path, "node-a", standalone=True, hook={
        "socket": str(tmp_path / "hook.sock"), "registration_dir": str(tmp_path / "reg"), "heap_reserve_mib": 4,
    })
    daemon = Daemon(settings)
    seen = while_serving(daemon, lambda: daemon.heap_reserve is not None, lambda: {"status": daemon.info()})
    status = seen["status"]
    assert isinstance(status, dict)
    assert status["heap_reserve"] == {"applied": True, "reserved_mib": 4.0, "mmap_threshold_mib": 4.0,
                                      "trim_threshold_mib": 8.0, "detail": ""}


def test_finding_glibc_spawns_no_process_and_opens_nothing_for_writing(monkeypatch: pytest.MonkeyPatch) -> None:
    """`make soak` traces every path the agent opens for writing: ctypes.util.find_library's `ldconfig -p` child
    opened /dev/null. The C library is the process's own, found without a child."""
    import os

    from hookserver.aio import heapreserve

    def no_child(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"a child process: {args}")

    real_open = os.open
    written: list[str] = []

    def tracing_open(path: str, flags: int, *rest: int) -> int:
        if flags & (os.O_WRONLY | os.O_RDWR):
            written.append(path)
        return real_open(path, flags, *rest)

    monkeypatch.setattr(subprocess, "Popen", no_child)
    monkeypatch.setattr(os, "open", tracing_open)
    libc = heapreserve._glibc()
    assert libc is not None and libc.gnu_get_libc_version() is not None
    assert written == []
