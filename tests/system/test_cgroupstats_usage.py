"""The per-cycle read (`CgroupStatReader.usage`, `throttle_counts`) gives what the general readers give.

On v1 the memory comes from memory.numa_stat (half the kernel's cost of memory.stat); these fixtures hold
both files with the same counters, the way the kernel writes them, and a real-cgroup test in
tests/collectors/test_real_host.py checks the two agree on a live cgroup.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest

from hookserver.errors import SystemFileError
from hookserver.system.cgroupstats import CgroupStatReader, CgroupVersion
from hookserver.system.roots import SystemRoots

PAGE = os.sysconf("SC_PAGE_SIZE")
V1_STAT = (
    "cache 0\nrss 0\nactive_anon 0\ninactive_anon 0\n"
    f"total_cache {30 * PAGE}\ntotal_active_anon {5 * PAGE}\ntotal_inactive_anon {7 * PAGE}\n"
    f"total_active_file {10 * PAGE}\ntotal_inactive_file {20 * PAGE}\ntotal_unevictable {2 * PAGE}\n"
)
NUMA = (
    "total=0 N0=0\nfile=0 N0=0\nanon=0 N0=0\nunevictable=0 N0=0\n"
    "hierarchical_total=44 N0=40 N1=4\nhierarchical_file=30 N0=28 N1=2\n"
    "hierarchical_anon=12 N0=10 N1=2\nhierarchical_unevictable=2 N0=2 N1=0\n"
)


def _v1(tmp_path: Path, *, numa: str | None = NUMA, cpu_stat: str = "nr_periods 10\nnr_throttled 3\nthrottled_time 9\n") -> CgroupStatReader:
    for controller, files in (
        ("memory", {"memory.stat": V1_STAT, **({"memory.numa_stat": numa} if numa is not None else {})}),
        ("cpuacct", {"cpuacct.usage": "123456789\n"}),
        ("cpu", {"cpu.stat": cpu_stat}),
    ):
        base = tmp_path / controller / "pod"
        base.mkdir(parents=True)
        for name, text in files.items():
            (base / name).write_text(text)
    return CgroupStatReader(SystemRoots(cgroup=str(tmp_path)), CgroupVersion.V1)


def test_v1_numa_stat_gives_the_memory_stat_totals(tmp_path: Path) -> None:
    reader = _v1(tmp_path)
    general = reader.memory("pod")
    assert general is not None
    assert reader.usage("pod") == (123456789, general.without_cache, general.with_cache)
    assert general.without_cache == 14 * PAGE and general.with_cache == 44 * PAGE  # anon 12 + unevictable 2 (+ file 30)
    assert reader.numa_stat  # still on the cheap file
    reader.close()


def test_v1_without_numa_stat_falls_back_to_memory_stat_for_good(tmp_path: Path) -> None:
    reader = _v1(tmp_path, numa=None)
    assert reader.usage("pod") == (123456789, 14 * PAGE, 44 * PAGE)
    assert not reader.numa_stat


def test_v1_numa_stat_without_hierarchical_lines_falls_back(tmp_path: Path) -> None:
    reader = _v1(tmp_path, numa="total=44 N0=44\nfile=30 N0=30\nanon=12 N0=12\nunevictable=2 N0=2\n")
    assert reader.usage("pod") == (123456789, 14 * PAGE, 44 * PAGE)
    assert not reader.numa_stat


def test_v1_gone_cgroup_reads_as_missing_without_giving_up_numa_stat(tmp_path: Path) -> None:
    reader = _v1(tmp_path)
    assert reader.usage("other-pod") == (-1, -1, -1)
    assert reader.numa_stat


def test_v1_garbage_in_numa_stat_names_the_file(tmp_path: Path) -> None:
    reader = _v1(tmp_path, numa=NUMA.replace("hierarchical_anon=12", "hierarchical_anon=lots"))
    with pytest.raises(SystemFileError, match=r"memory\.numa_stat: a hierarchical page count is not an integer"):
        reader.usage("pod")


@pytest.mark.parametrize("order", list(itertools.permutations(("file", "anon", "unevictable"))))
def test_v1_numa_stat_lines_in_any_order_give_the_same_usage(tmp_path: Path, order: tuple[str, ...]) -> None:
    # The kernel's order (file, anon, unevictable) takes one anchored search; any other takes the scan.
    pages = {"file": 30, "anon": 12, "unevictable": 2}
    numa = "total=0 N0=0\nhierarchical_total=44 N0=44\n" + "".join(
        f"hierarchical_{name}={pages[name]} N0={pages[name]} N1=0\n" for name in order
    )
    reader = _v1(tmp_path, numa=numa)
    assert reader.usage("pod") == (123456789, 14 * PAGE, 44 * PAGE)
    assert reader.numa_stat
    reader.close()


def test_v1_garbage_cpu_usage_names_the_file(tmp_path: Path) -> None:
    reader = _v1(tmp_path)
    (tmp_path / "cpuacct" / "pod" / "cpuacct.usage").write_text("soon\n")
    reader.files.close()
    with pytest.raises(SystemFileError, match=r"cpuacct\.usage: expected an integer"):
        reader.usage("pod")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("nr_periods 10\nnr_throttled 3\nthrottled_time 9\n", (10, 3)),  # the kernel's order: parsed in place
        ("throttled_time 9\nnr_throttled 3\nnr_periods 10\nnr_bursts 0\n", (10, 3)),  # any other: the general way
        ("nr_bursts 1\n", None),  # no period counter: no sample
    ],
)
def test_v1_throttle_counts(tmp_path: Path, text: str, expected: tuple[int, int] | None) -> None:
    reader = _v1(tmp_path, cpu_stat=text)
    assert reader.throttle_counts("pod") == expected
    stat = reader.throttling("pod")
    assert (None if stat is None else (stat.nr_periods, stat.nr_throttled)) == expected


def test_v1_garbage_throttle_counter_names_the_file(tmp_path: Path) -> None:
    reader = _v1(tmp_path, cpu_stat="nr_periods ten\nnr_throttled 3\n")
    with pytest.raises(SystemFileError, match=r"cpu\.stat: nr_periods/nr_throttled are not integers: b.ten."):
        reader.throttle_counts("pod")


def _v2(tmp_path: Path, stat: str, current: str | None) -> CgroupStatReader:
    base = tmp_path / "pod"
    base.mkdir()
    (base / "memory.stat").write_text(stat)
    (base / "cpu.stat").write_text("usage_usec 500\nuser_usec 400\nsystem_usec 100\nnr_periods 4\nnr_throttled 1\nthrottled_usec 7\n")
    if current is not None:
        (base / "memory.current").write_text(current)
    return CgroupStatReader(SystemRoots(cgroup=str(tmp_path)), CgroupVersion.V2)


V2_STAT = "anon 50\nfile 70\nkernel 8\nfile_mapped 3\ninactive_anon 30\nactive_anon 20\ninactive_file 60\nactive_file 5\nunevictable 4\n"


@pytest.mark.parametrize("current", ["999\n", None])
def test_v2_usage_gives_what_memory_gives(tmp_path: Path, current: str | None) -> None:
    reader = _v2(tmp_path, V2_STAT, current)
    general = reader.memory("pod")
    assert general is not None
    assert reader.usage("pod") == (500_000, general.without_cache, general.with_cache)
    assert general.without_cache == 54  # inactive_anon + active_anon + unevictable
    assert general.with_cache == (999 if current else 54 + 70)  # memory.current, else + file (not file_mapped)
    assert reader.throttle_counts("pod") == (4, 1)


_LRU = {"inactive_anon": 30, "active_anon": 20, "inactive_file": 60, "active_file": 5, "unevictable": 4}


@pytest.mark.parametrize("order", [tuple(_LRU), ("active_anon", "inactive_anon", "active_file", "inactive_file", "unevictable"),
                                   ("unevictable", "inactive_file", "active_file", "inactive_anon", "active_anon")])
def test_v2_lru_lines_in_any_order_give_the_same_usage(tmp_path: Path, order: tuple[str, ...]) -> None:
    # The kernel's order (the first) takes one search; any other takes the per-line scan.
    stat = "anon 50\nfile 70\nkernel 8\n" + "".join(f"{name} {_LRU[name]}\n" for name in order) + "slab 9\n"
    reader = _v2(tmp_path, stat, "999\n")
    assert reader.usage("pod") == (500_000, 54, 999)


def test_v2_garbage_memory_current_names_the_file(tmp_path: Path) -> None:
    reader = _v2(tmp_path, V2_STAT, "lots\n")
    with pytest.raises(SystemFileError, match=r"memory\.current: expected an integer"):
        reader.usage("pod")


def test_v2_garbage_memory_counter_names_the_file(tmp_path: Path) -> None:
    reader = _v2(tmp_path, V2_STAT.replace("active_anon 20", "active_anon twenty"), "999\n")
    with pytest.raises(SystemFileError, match=r"memory\.stat: a memory counter is not an integer"):
        reader.usage("pod")
