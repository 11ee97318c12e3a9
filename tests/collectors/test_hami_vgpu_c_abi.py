"""The shared region's layout as a C compiler lays it out: a small C program (tests/fixtures/hami_region)
fills HAMi-core's structs field by field and writes the file; hookserver's reader must get its numbers back.
This checks the offsets in `hookserver.system.hami_cache` against the compiler, not against a second copy
of the same arithmetic. Skipped, with the reason, where no C compiler exists."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from hookserver.system import hami_cache
from hookserver.system.hami_cache import read_entry
from tests.collectors.fake_nvml import compiler

SOURCE = Path(__file__).resolve().parents[1] / "fixtures" / "hami_region" / "write_region.c"
GiB, MiB = 1 << 30, 1 << 20
ENTRY = "0b6f1c2e-aaaa-4c1e-9d0a-000000000001_infer"


@pytest.fixture(scope="module")
def c_region(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int]]:
    cc = compiler()
    if cc is None:
        pytest.skip("no C compiler ($CC, cc, gcc or clang) to build the region writer")
    base = tmp_path_factory.mktemp("hami-c")
    exe = base / "write_region"
    built = subprocess.run([cc, "-O1", "-Wall", "-Wextra", "-Werror", "-o", str(exe), str(SOURCE), "-lpthread"],
                           capture_output=True, text=True, check=False)
    assert built.returncode == 0, built.stderr
    root = base / "containers"
    (root / ENTRY).mkdir(parents=True)
    done = subprocess.run([str(exe), str(root / ENTRY / f"{ENTRY}.cache")], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return root, json.loads(done.stdout)


def test_the_compilers_layout_is_the_readers(c_region: tuple[Path, dict[str, int]]) -> None:
    _root, layout = c_region
    assert layout["size"] == hami_cache.REGION_SIZE
    assert layout["slot"] == hami_cache.SLOT_SIZE
    assert (layout["uuids"], layout["limit"], layout["sm_limit"], layout["procs"]) == (64, 1600, 1728, 1856)
    assert layout["proc_num"] == 1856 + 1024 * layout["slot"]
    assert (layout["status"], layout["sm_util"], layout["total"]) == (1928, 1176, 40)


def test_the_reader_gets_the_c_programs_numbers(c_region: tuple[Path, dict[str, int]]) -> None:
    root, _layout = c_region
    region = read_entry(str(root), ENTRY)
    assert (region.major, region.minor, region.processes, region.last_kernel_time) == (1, 2, 2, 1_700_000_123)
    d0, d1 = region.devices
    assert (d0.uuid, d1.uuid) == ("GPU-11111111-2222-3333-4444-555555555555", "GPU-66666666-7777-8888-9999-000000000000")
    # Slots 0 (running) and 1 (suspended); slot 2 is free and slot 3 lies beyond proc_num.
    assert (d0.memory_used_bytes, d0.sm_util_percent) == (4 * GiB, 35)
    assert (d1.memory_used_bytes, d1.sm_util_percent) == (GiB + 512 * MiB, 5)
    assert (d0.memory_limit_bytes, d0.sm_limit_percent, d1.memory_limit_bytes, d1.sm_limit_percent) == (
        8 * GiB, 40, 6 * GiB, 30)
