"""memory.stat is read by picking the needed keys, not by splitting the whole file: same values, same errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from hookserver.errors import SystemFileError
from hookserver.system.cgroupstats import CgroupStatReader, CgroupVersion, MemoryUsage
from hookserver.system.roots import SystemRoots

# A real v1 layout: own counters first, then hierarchical total_* counters (children included).
V1 = (
    "cache 10\nrss 20\nactive_anon 1\ninactive_anon 2\nactive_file 3\ninactive_file 4\nunevictable 5\n"
    "hierarchical_memory_limit 9223372036854771712\n"
    "total_cache 1000\ntotal_rss 2000\ntotal_active_anon 100\ntotal_inactive_anon 200\n"
    "total_active_file 300\ntotal_inactive_file 400\ntotal_unevictable 7"  # no trailing newline
)


def _reader(tmp_path: Path, version: CgroupVersion, text: str) -> CgroupStatReader:
    base = tmp_path / ("memory" if version is CgroupVersion.V1 else "") / "pod"
    base.mkdir(parents=True)
    (base / "memory.stat").write_text(text)
    return CgroupStatReader(SystemRoots(cgroup=str(tmp_path)), version)


def test_v1_uses_the_hierarchical_totals(tmp_path: Path) -> None:
    reader = _reader(tmp_path, CgroupVersion.V1, V1)
    # without cache = total inactive_anon + active_anon + unevictable; files = total active + inactive file.
    assert reader.memory("pod") == MemoryUsage(without_cache=307, with_cache=1007, cache=1000)
    reader.close()


def test_v1_without_totals_uses_its_own_counters(tmp_path: Path) -> None:
    reader = _reader(tmp_path, CgroupVersion.V1, "cache 10\nactive_anon 1\ninactive_anon 2\nactive_file 3\ninactive_file 4\n")
    assert reader.memory("pod") == MemoryUsage(without_cache=3, with_cache=10, cache=10)
    reader.close()


def test_v2_prefers_file_and_memory_current(tmp_path: Path) -> None:
    reader = _reader(tmp_path, CgroupVersion.V2, "anon 50\nfile 70\ninactive_anon 30\nactive_anon 20\nactive_file 5\n")
    (tmp_path / "pod" / "memory.current").write_text("999\n")
    assert reader.memory("pod") == MemoryUsage(without_cache=50, with_cache=999, cache=70)
    reader.close()


def test_garbage_names_the_file_and_key_and_empty_is_no_sample(tmp_path: Path) -> None:
    reader = _reader(tmp_path, CgroupVersion.V1, V1.replace("total_active_anon 100", "total_active_anon lots"))
    with pytest.raises(SystemFileError, match="memory.stat: total_active_anon is not an integer"):
        reader.memory("pod")
    (tmp_path / "memory" / "pod" / "memory.stat").write_text("")
    assert reader.memory("pod") is None
    reader.close()
