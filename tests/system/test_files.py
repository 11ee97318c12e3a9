"""The system readers: missing files read as None/{}, bad content raises naming the file, kv parsing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hookserver.errors import SystemFileError
from hookserver.system import SystemRoots, exists, is_dir, read_int, read_kv, read_text
from hookserver.system.files import MAX_READ_BYTES
from hookserver.system.mounts import parse_mounts, read_cgroup_mounts


def test_read_text_missing_file_and_missing_dir_are_none(tmp_path: Path) -> None:
    assert read_text(str(tmp_path / "nope")) is None
    assert read_text(str(tmp_path / "nodir" / "file")) is None
    (tmp_path / "afile").write_text("x")
    # A path *through* a regular file (ENOTDIR) is also "gone", like a cgroup removed mid-walk.
    assert read_text(str(tmp_path / "afile" / "child")) is None


def test_read_text_returns_content(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("hello\n")
    assert read_text(str(tmp_path / "f")) == "hello\n"


def test_read_text_oversized_file_is_an_error_naming_it(tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.write_bytes(b"1" * (MAX_READ_BYTES + 1))
    with pytest.raises(SystemFileError) as info:
        read_text(str(big))
    assert info.value.path == str(big)
    assert read_text(str(big), max_bytes=MAX_READ_BYTES + 1) is not None


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file permissions")
def test_read_text_permission_error_raises(tmp_path: Path) -> None:
    f = tmp_path / "secret"
    f.write_text("1")
    f.chmod(0)
    with pytest.raises(SystemFileError, match="EACCES"):
        read_text(str(f))


def test_read_text_on_a_directory_raises_with_errno(tmp_path: Path) -> None:
    with pytest.raises(SystemFileError, match="EISDIR") as info:
        read_text(str(tmp_path))
    assert str(tmp_path) in str(info.value)


def test_read_int(tmp_path: Path) -> None:
    (tmp_path / "shares").write_text("1024\n")
    (tmp_path / "neg").write_text("-1\n")
    (tmp_path / "max").write_text("max\n")
    assert read_int(str(tmp_path / "shares")) == 1024
    assert read_int(str(tmp_path / "neg")) == -1
    assert read_int(str(tmp_path / "missing")) is None
    with pytest.raises(SystemFileError, match="expected an integer") as info:
        read_int(str(tmp_path / "max"))
    assert info.value.path.endswith("max")


def test_read_kv_memory_stat_and_meminfo_style(tmp_path: Path) -> None:
    (tmp_path / "memory.stat").write_text("cache 4096\nrss 8192\n\ntotal_rss 8192\nweird notanumber\nlonely\n")
    (tmp_path / "meminfo").write_text("MemTotal:       16314480 kB\nMemFree:         1000 kB\n")
    assert read_kv(str(tmp_path / "memory.stat")) == {"cache": 4096, "rss": 8192, "total_rss": 8192}
    assert read_kv(str(tmp_path / "meminfo")) == {"MemTotal": 16314480, "MemFree": 1000}
    assert read_kv(str(tmp_path / "missing")) == {}


_keys = st.from_regex(r"[a-z_][a-z0-9_]{0,15}", fullmatch=True)


@given(st.dictionaries(_keys, st.integers(min_value=-(2**63), max_value=2**64), max_size=30))
def test_read_kv_round_trips(tmp_path_factory: pytest.TempPathFactory, data: dict[str, int]) -> None:
    path = tmp_path_factory.mktemp("kv") / "stat"
    path.write_text("".join(f"{k} {v}\n" for k, v in data.items()))
    assert read_kv(str(path)) == data


def test_real_cgroup_files_read_through_roots() -> None:
    roots = SystemRoots()
    if not exists(roots.cgroup_path("cpu", "cpu.stat")):
        pytest.skip("no cgroup v1 cpu hierarchy at /sys/fs/cgroup/cpu")
    stat = read_kv(roots.cgroup_path("cpu", "cpu.stat"))
    assert "nr_periods" in stat
    assert is_dir(roots.cgroup_path("cpu"))


def test_parse_mounts_v1_v2_named_and_escaped() -> None:
    text = (
        "tmpfs /sys/fs/cgroup tmpfs rw 0 0\n"
        "cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,nosuid,cpu,cpuacct 0 0\n"
        "cgroup /sys/fs/cgroup/systemd cgroup rw,xattr,name=systemd 0 0\n"
        "cgroup2 /sys/fs/cgroup/uni\\040fied cgroup2 rw,nsdelegate 0 0\n"
        "garbage\n"
    )
    mounts = parse_mounts(text)
    assert [(m.mountpoint, m.version, sorted(m.controllers)) for m in mounts] == [
        ("/sys/fs/cgroup/cpu,cpuacct", 1, ["cpu", "cpuacct"]),
        ("/sys/fs/cgroup/systemd", 1, []),
        ("/sys/fs/cgroup/uni fied", 2, []),
    ]


def test_read_cgroup_mounts_missing_proc_is_empty(tmp_path: Path) -> None:
    assert read_cgroup_mounts(SystemRoots(proc=str(tmp_path))) == []
    (tmp_path / "self").mkdir()
    (tmp_path / "self" / "mounts").write_text("cgroup2 /x cgroup2 rw 0 0\n")
    assert [m.mountpoint for m in read_cgroup_mounts(SystemRoots(proc=str(tmp_path)))] == ["/x"]
