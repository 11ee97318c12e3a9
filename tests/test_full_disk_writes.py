"""A state write that fails (ENOSPC on a full state dir, EIO) removes its temporary file (found by `make soak`:
on a full disk every failed checkpoint, NodeMetric and capacity write left a half-written `*.tmp`, one per model,
holding the space that the next write needed until the agent restarted).

The disk is really full: a 64 KiB tmpfs mounted for the test (root only; skipped with the reason otherwise).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from hookserver.capacity.sinks import write_document
from hookserver.predictor.checkpoint import Checkpointer
from hookserver.predictor.reporter import FileStatusSink
from hookserver.topology.publisher import LocalTopologySink


@pytest.fixture
def full_dir(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a small tmpfs")
    where = tmp_path / "full"
    where.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "hs-full-test", str(where)],
                      capture_output=True, check=False).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        fd = os.open(where / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
        with contextlib.suppress(OSError):
            while os.write(fd, b"\0" * 4096):
                pass
        os.close(fd)
        os.truncate(where / "filler", os.path.getsize(where / "filler") - 4096)  # room for a partial write
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=False)


def test_failed_writes_leave_no_temporary_files_on_a_full_disk(full_dir: Path) -> None:
    checkpoints = Checkpointer(str(full_dir))
    for i in range(3):
        with pytest.raises(OSError):
            checkpoints.save(f"uid-{i}", b"x" * 20_000)
    delivery = FileStatusSink(str(full_dir / "nodemetric.json"), node_name="n").deliver({"pad": "x" * 20_000})
    assert delivery.result == "error"
    assert "No space" in write_document(str(full_dir / "capacity.json"), node_name="n", values={"a": "1"},
                                        report={"pad": "x" * 20_000})
    # The NodeResourceTopology document shares the one atomic writer (its own copy kept the temporary file).
    topology = LocalTopologySink(str(full_dir / "noderesourcetopology.json")).apply({"pad": "x" * 20_000})
    assert topology.result == "error" and "No space" in topology.detail
    assert sorted(p.name for p in full_dir.iterdir()) == ["filler"]
    # The space is still there for the next write that fits.
    checkpoints.save("uid-small", b"{}")
    assert (full_dir / "uid-small.json").read_bytes() == b"{}"
