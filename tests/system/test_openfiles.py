"""Kept-open descriptors for cgroup stat files: re-reads see new content, vanished and recreated files are
noticed, idle descriptors are closed, the cap holds, and churn leaks no descriptor. The last test does the
same on a real cgroup v1 directory, where a removed cgroup's open file fails with ENODEV."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from hookserver.system.cgroupstats import CgroupStatReader, CgroupVersion
from hookserver.system.openfiles import OpenFiles
from hookserver.system.roots import SystemRoots


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_rereads_see_new_content_through_one_descriptor(tmp_path: Path) -> None:
    f = tmp_path / "cpuacct.usage"
    f.write_text("100\n")
    files = OpenFiles()
    assert files.read(str(f)) == "100\n"
    with open(f, "r+") as handle:  # rewritten in place, as the kernel's counters change: same inode
        handle.write("250\n")
    assert files.read(str(f)) == "250\n"
    assert files.opened == 1 and len(files) == 1
    files.close()
    assert len(files) == 0


def test_deleted_file_reads_as_gone_and_a_recreated_one_is_read_fresh(tmp_path: Path) -> None:
    d = tmp_path / "pod-a"
    d.mkdir()
    (d / "memory.stat").write_text("anon 1\n")
    files = OpenFiles()
    path = str(d / "memory.stat")
    assert files.read(path) == "anon 1\n"
    (d / "memory.stat").unlink()
    d.rmdir()
    assert files.read(path) is None  # the cgroup went away: no stale sample from the old descriptor
    assert len(files) == 0
    d.mkdir()
    (d / "memory.stat").write_text("anon 7\n")
    assert files.read(path) == "anon 7\n"  # recreated under the same name: the new file
    files.close()


def test_the_sweep_stats_only_files_outside_the_kernel_prefixes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Kernel files rely on ENODEV (the real-cgroup tests below); stat-ing each at every sweep cost ~25 ms on
    # a 500-pod node. Files elsewhere keep the inode check, and idle kernel files are still closed.
    kernel = tmp_path / "cgroup"
    kernel.mkdir()
    kept, idle, plain = kernel / "cpu.stat", kernel / "memory.stat", tmp_path / "other.stat"
    for f in (kept, idle, plain):
        f.write_text("nr_periods 1\n")
    files = OpenFiles(kernel_prefixes=(str(kernel),), sweep_every=2, idle_cycles=1)
    for f in (kept, idle, plain):
        assert files.read(str(f)) == "nr_periods 1\n"
    stat_calls: list[str] = []
    real_stat = os.stat

    def counting_stat(path: str, *args: object, **kwargs: object) -> os.stat_result:
        stat_calls.append(str(path))
        return real_stat(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "stat", counting_stat)
    files.new_cycle()
    files.read(str(kept))
    files.read(str(plain))
    files.new_cycle()  # cycle 2: sweep
    assert stat_calls == [str(plain)]
    assert len(files) == 2 and files.closed_idle == 1  # memory.stat was idle: closed all the same
    replacement = tmp_path / "other.stat.new"
    replacement.write_text("nr_periods 9\n")
    os.replace(replacement, plain)
    files.new_cycle()
    files.read(str(plain))
    files.new_cycle()  # cycle 4: sweep
    assert files.read(str(plain)) == "nr_periods 9\n"  # outside the prefixes, a replaced file is reopened
    files.close()


def test_idle_descriptors_are_closed_and_the_cap_is_kept(tmp_path: Path) -> None:
    paths = []
    for i in range(5):
        p = tmp_path / f"f{i}"
        p.write_text(f"{i}\n")
        paths.append(str(p))
    files = OpenFiles(max_open=2, sweep_every=1, idle_cycles=1)
    assert [files.read(p) for p in paths] == [f"{i}\n" for i in range(5)]  # beyond the cap: read the old way
    assert len(files) == 2 and files.uncached_reads == 3
    files.new_cycle()
    files.read(paths[0])
    files.new_cycle()
    files.new_cycle()
    assert len(files) == 0 and files.closed_idle == 2  # f1 idle since cycle 0, f0 since cycle 1


def test_missing_file_is_none_and_other_errors_name_the_file(tmp_path: Path) -> None:
    files = OpenFiles()
    assert files.read(str(tmp_path / "nope")) is None
    with pytest.raises(Exception, match="EISDIR|cannot read"):
        files.read(str(tmp_path))


def test_churn_leaks_no_descriptor(tmp_path: Path) -> None:
    before = _fds()
    reader = CgroupStatReader(SystemRoots(cgroup=str(tmp_path)), CgroupVersion.V2)
    for round_ in range(3):
        rels = [f"kubepods/pod{round_}-{i}" for i in range(100)]
        for rel in rels:
            d = tmp_path / rel
            d.mkdir(parents=True)
            (d / "cpu.stat").write_text(f"usage_usec {round_}\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\n")
            (d / "memory.stat").write_text("anon 1\nfile 2\nactive_anon 1\ninactive_anon 0\n")
            (d / "memory.current").write_text("3\n")
        reader.new_cycle()
        for rel in rels:
            assert reader.cpu_usage_ns(rel) == round_ * 1000
            assert reader.memory(rel) is not None
        assert _fds() - before == 300  # three kept files per cgroup
        for rel in rels:
            for name in ("cpu.stat", "memory.stat", "memory.current"):
                (tmp_path / rel / name).unlink()
            (tmp_path / rel).rmdir()
        reader.new_cycle()
        assert all(reader.memory(rel) is None for rel in rels)  # vanished: found on the read that saw it
        assert _fds() == before  # ... and the cgroup's other kept files (cpu.stat, memory.current) closed too
    reader.close()
    assert _fds() == before


def _v1_memory() -> str:
    base = "/sys/fs/cgroup/memory"
    if os.geteuid() != 0:
        return "needs root to create cgroups"
    if not os.access(base, os.W_OK) or not os.path.exists(f"{base}/memory.stat"):
        return f"{base} is not a writable cgroup v1 memory hierarchy"
    return ""


@pytest.mark.skipif(bool(_v1_memory()), reason=_v1_memory() or "ok")
def test_real_cgroup_removed_and_recreated_under_the_same_name() -> None:
    base = "/sys/fs/cgroup/memory"
    name = f"hookserver-test-{uuid.uuid4().hex[:12]}"
    top = os.path.join(base, name)
    files = OpenFiles(kernel_prefixes=(base,))
    path = os.path.join(top, "memory.limit_in_bytes")
    before = _fds()
    os.mkdir(top)
    try:
        with open(path, "w") as handle:
            handle.write(str(64 << 20))
        assert files.read(path) == f"{64 << 20}\n"
        assert files.opened == 1
        os.rmdir(top)
        assert files.read(path) is None  # ENODEV from the kept descriptor, then ENOENT: gone
        assert files.reopened == 1 and len(files) == 0
        os.mkdir(top)
        with open(path, "w") as handle:
            handle.write(str(32 << 20))
        assert files.read(path) == f"{32 << 20}\n"  # the new cgroup's file, not the old one's
        # Removed and recreated between two reads, with no sweep: the kept descriptor still reads ENODEV.
        os.rmdir(top)
        os.mkdir(top)
        with open(path, "w") as handle:
            handle.write(str(16 << 20))
        assert files.read(path) == f"{16 << 20}\n"
        assert files.reopened == 2
    finally:
        files.close()
        if os.path.isdir(top):
            os.rmdir(top)
    assert _fds() == before
