"""Every errno the executor maps becomes the right ExecutorError naming errno, file and value; none raise."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from hookserver.errors import CgroupNotFoundError, ExecutorError, PathEscapeError, UnsupportedResourceError
from hookserver.executor import CgroupResource, CgroupWrite, OsCgroupFiles, ResourcePlan
from hookserver.executor.fileio import ERRNO_MAP, translate_os_error

from tests.executor.conftest import Tree, make_executor

POD = "/kubepods/pod-1"


class Failing(OsCgroupFiles):
    def __init__(self, code: int, *, on: str = "write") -> None:
        self.code, self.on = code, on

    def read(self, path: str) -> str:
        if self.on == "read":
            raise OSError(self.code, "boom")
        return super().read(path)

    def write(self, path: str, data: str) -> None:
        raise OSError(self.code, "boom")


EXPECTED: dict[int, type[ExecutorError]] = {
    errno.ENOENT: UnsupportedResourceError,  # with the directory present
    errno.ENOTDIR: CgroupNotFoundError,
    errno.ENODEV: CgroupNotFoundError,
    errno.ELOOP: PathEscapeError,
    errno.EOPNOTSUPP: UnsupportedResourceError,
    errno.ENOTSUP: UnsupportedResourceError,
    errno.EISDIR: UnsupportedResourceError,
    errno.EINVAL: ExecutorError,
    errno.EBUSY: ExecutorError,
    errno.EPERM: ExecutorError,
    errno.EACCES: ExecutorError,
    errno.EROFS: ExecutorError,
    errno.ENOSPC: ExecutorError,
    errno.ERANGE: ExecutorError,
    errno.EIO: ExecutorError,
    errno.EAGAIN: ExecutorError,
    errno.EINTR: ExecutorError,
}


def test_map_is_exactly_the_documented_set() -> None:
    assert set(ERRNO_MAP) == set(EXPECTED)
    for code, cls in EXPECTED.items():
        assert ERRNO_MAP[code] is cls, errno.errorcode[code]


@pytest.mark.parametrize("code", sorted(EXPECTED), ids=lambda c: errno.errorcode[c])
def test_every_mapped_errno_is_reported_with_name_path_value(v1tree: Tree, code: int) -> None:
    v1tree.cgroup(POD)
    ex, store = make_executor(v1tree, files=Failing(code))
    report = ex.apply(ResourcePlan.single([CgroupWrite(POD, CgroupResource.MEMORY_LIMIT, 1 << 30)]))
    (result,) = report.results
    assert not result.ok
    assert result.error.startswith(EXPECTED[code].__name__ + ":")
    assert errno.errorcode[code] in result.error
    assert "memory.limit_in_bytes" in result.error and repr(str(1 << 30)) in result.error
    assert store.audit.writes()[0].error == result.error


@pytest.mark.parametrize("code", sorted(EXPECTED), ids=lambda c: errno.errorcode[c])
def test_read_errors_are_mapped_too(v1tree: Tree, code: int) -> None:
    v1tree.cgroup(POD)
    ex, _ = make_executor(v1tree, files=Failing(code, on="read"))
    (result,) = ex.apply(ResourcePlan.single([CgroupWrite(POD, CgroupResource.CPU_SHARES, 512)])).results
    assert result.error.startswith(EXPECTED[code].__name__ + ":") and errno.errorcode[code] in result.error


def test_enoent_dir_vs_file(tmp_path: Path) -> None:
    (tmp_path / "cg").mkdir()
    gone = translate_os_error(OSError(errno.ENOENT, "x"), op="write", path=str(tmp_path / "nodir" / "f"), value="1")
    missing = translate_os_error(OSError(errno.ENOENT, "x"), op="write", path=str(tmp_path / "cg" / "f"), value="1")
    assert isinstance(gone, CgroupNotFoundError) and isinstance(missing, UnsupportedResourceError)
    assert gone.path.endswith("/nodir/f") and gone.value == "1"


def test_unknown_errno_falls_back_to_executor_error() -> None:
    err = translate_os_error(OSError(errno.EXDEV, "cross"), op="write", path="/x/y", value="v")
    assert type(err) is ExecutorError and "EXDEV" in str(err) and "/x/y='v'" in str(err)


def test_ebusy_is_reported_once_not_retried(v1tree: Tree) -> None:
    v1tree.cgroup(POD)
    files = Failing(errno.EBUSY)
    calls: list[str] = []
    original = files.write

    def counting(path: str, data: str) -> None:
        calls.append(path)
        original(path, data)

    files.write = counting  # type: ignore[method-assign]
    ex, _ = make_executor(v1tree, files=files)
    report = ex.apply(ResourcePlan.single([CgroupWrite(POD, CgroupResource.MEMORY_LIMIT, 1 << 20)]))
    assert len(calls) == 1 and "usage too high" in report.errors[0].error
