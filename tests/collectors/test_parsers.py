"""The /proc, PSI, cpulist and cgroup parsers on real kernel output (tests/fixtures/proc_linux6) and bad input."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hookserver.errors import SystemFileError
from hookserver.system.procfs import parse_meminfo, parse_pid_cgroup, parse_pressure, parse_proc_stat, read_cpu_ticks, read_meminfo
from hookserver.system.roots import SystemRoots
from hookserver.system.cpulist import format_cpu_list, parse_cpu_list

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "proc_linux6"


def test_real_proc_stat_meminfo_and_pressure() -> None:
    roots = SystemRoots(proc=str(FIXTURE))
    ticks = read_cpu_ticks(roots)
    # cpu  81343 0 7590 172652 290 0 199 342 0 0 (user nice system idle iowait irq softirq steal guest guest_nice)
    assert ticks is not None and ticks.ncpu == 2
    assert ticks.busy == 81343 + 0 + 7590 + 0 + 199 + 342
    assert ticks.total == ticks.busy + 172652 + 290
    mem = read_meminfo(roots)
    assert mem is not None and 0 < mem.available <= mem.total and mem.used == mem.total - mem.available
    for resource in ("cpu", "memory", "io"):
        lines = parse_pressure((FIXTURE / "pressure" / resource).read_text(), resource)
        assert set(lines) == {"some", "full"} and all(line.total_us >= 0 for line in lines.values())


def test_missing_files_read_as_none(tmp_path: Path) -> None:
    roots = SystemRoots(proc=str(tmp_path))
    assert read_cpu_ticks(roots) is None and read_meminfo(roots) is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("intr 1 2\n", "no aggregate 'cpu' line"),
        ("cpu  1 2 3\n", "no aggregate 'cpu' line"),
        ("cpu  1 2 three 4\n", "non-integer"),
    ],
)
def test_bad_proc_stat_names_the_file(text: str, message: str) -> None:
    with pytest.raises(SystemFileError, match=message) as info:
        parse_proc_stat(text, "/host/proc/stat")
    assert "/host/proc/stat" in str(info.value) and info.value.path == "/host/proc/stat"


def test_meminfo_and_pressure_errors() -> None:
    with pytest.raises(SystemFileError, match="MemTotal or MemFree missing"):
        parse_meminfo("Buffers: 1 kB\n", "/p/meminfo")
    with pytest.raises(SystemFileError, match="malformed PSI line"):
        parse_pressure("some avg10=x avg60=0 avg300=0 total=0\n", "/p/pressure/cpu")
    with pytest.raises(SystemFileError, match="unexpected PSI line"):
        parse_pressure("most avg10=0\n", "/p/pressure/cpu")
    # Older kernels print no `full` line for cpu: that is fine.
    assert set(parse_pressure("some avg10=1.00 avg60=0.50 avg300=0.10 total=7\n", "x")) == {"some"}


def test_pid_cgroup_lines() -> None:
    text = "12:memory:/kubepods/pod1/c1\n1:name=systemd:/system.slice\n0::/kubepods.slice/x.scope\nbroken\n"
    assert parse_pid_cgroup(text) == [
        ("memory", "/kubepods/pod1/c1"), ("name=systemd", "/system.slice"), ("", "/kubepods.slice/x.scope")
    ]


@given(st.sets(st.integers(min_value=0, max_value=511), max_size=64))
def test_cpu_list_round_trip(cpus: set[int]) -> None:
    # Render as ranges the way the kernel does, then parse back.
    ordered = sorted(cpus)
    assert sorted(parse_cpu_list(format_cpu_list(cpus) + "\n")) == ordered


@pytest.mark.parametrize("text", ["3-1", "a", "1-", "-1", "70000"])
def test_bad_cpu_lists(text: str) -> None:
    with pytest.raises(ValueError):
        parse_cpu_list(text)
