"""The fake `libnvidia-ml.so.1` (tests/fixtures/fake_nvml/fake_nvml.c): build it, write its JSON fixture, and
run code against it through pynvml's real ctypes path.

pynvml loads the library with `CDLL("libnvidia-ml.so.1")`, which the dynamic loader resolves through
LD_LIBRARY_PATH, and the loader reads LD_LIBRARY_PATH once, when the process starts; pynvml also keeps the
loaded library in a module global. So the code under test runs in a child Python process started with the
fake's directory on LD_LIBRARY_PATH (`run_worker`), exactly as a node's agent finds the driver's library,
and no test in the parent process can end up talking to the fake (or the fake to a real GPU's library).

The test-facing fixture is JSON (`write_fixture`); the C library re-reads it when it changes, so a test
rewrites it between two steps of one child to make a GPU raise an XID, stop answering or disappear.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

__all__ = [
    "FIXTURE_ENV",
    "add_pci_device",
    "GiB",
    "SOURCE",
    "build_fake_nvml",
    "compiler",
    "fake_gpu",
    "fake_nvml_lib",
    "run_worker",
    "worker_env",
    "write_fixture",
]

SOURCE = Path(__file__).resolve().parents[1] / "fixtures" / "fake_nvml" / "fake_nvml.c"
FIXTURE_ENV = "FAKE_NVML_FIXTURE"
GiB = 1 << 30
_REPO = Path(__file__).resolve().parents[2]


def compiler() -> str | None:
    """The C compiler to build the fake with: $CC, else cc, gcc or clang on PATH."""
    for name in (os.environ.get("CC", ""), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return name
    return None


def build_fake_nvml(dest: Path) -> Path:
    """Compile the fake into `dest/libnvidia-ml.so.1` (soname as the driver's) and return `dest`."""
    cc = compiler()
    if cc is None:
        raise FileNotFoundError("no C compiler ($CC, cc, gcc or clang) on PATH")
    dest.mkdir(parents=True, exist_ok=True)
    out = dest / "libnvidia-ml.so.1"
    cmd = [cc, "-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror", "-Wl,-soname,libnvidia-ml.so.1",
           "-o", str(out), str(SOURCE), "-lpthread"]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"building the fake NVML library failed: {' '.join(cmd)}\n{done.stderr}")
    return dest


@pytest.fixture(scope="session")
def fake_nvml_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory holding the compiled fake, built once per test session."""
    if compiler() is None:
        pytest.skip("no C compiler ($CC, cc, gcc or clang) on PATH: the fake libnvidia-ml.so.1 cannot be built")
    return build_fake_nvml(tmp_path_factory.mktemp("fake_nvml"))


def fake_gpu(
    index: int,
    *,
    uuid: str = "",
    name: str = "NVIDIA H100 80GB HBM3",
    minor: int | None = None,
    bus: int | None = None,
    memory_total: int = 80 * GiB,
    memory_used: int = 0,
    utilization_gpu: int = 0,
    utilization_memory: int = 0,
    processes: Sequence[tuple[int, int]] = (),
    samples: Sequence[tuple[int, int, int]] = (),
    **extra: Any,
) -> dict[str, Any]:
    """One device of the fixture. processes: (pid, used bytes); samples: (pid, timestamp us, SM %)."""
    bus = 0x17 + 0x10 * index if bus is None else bus
    return {
        "uuid": uuid or f"GPU-{index:08x}-fake-0000-0000-{index:012x}",
        "name": name,
        "minor": index if minor is None else minor,
        "bus_id": f"00000000:{bus:02X}:00.0",
        "memory_total": memory_total,
        "memory_used": memory_used,
        "utilization_gpu": utilization_gpu,
        "utilization_memory": utilization_memory,
        "processes": [{"pid": pid, "used_memory": used} for pid, used in processes],
        "process_utilization": [{"pid": pid, "timestamp": ts, "sm": sm} for pid, ts, sm in samples],
        **extra,
    }


def add_pci_device(sys_root: Path, bdf: str, *, root: str, numa_node: int) -> None:
    """A PCI device in a fixture sysfs tree as the kernel lays it out: the device directory below its root
    complex and a bridge (`devices/pci0000:16/0000:16:01.0/0000:17:00.0`, with `numa_node`), and the
    `bus/pci/devices/<bdf>` symlink pointing at it."""
    domain, bus = root.removeprefix("pci").split(":")
    device_dir = sys_root / "devices" / root / f"{domain}:{bus}:01.0" / bdf
    device_dir.mkdir(parents=True, exist_ok=True)
    (device_dir / "numa_node").write_text(f"{numa_node}\n")
    links = sys_root / "bus" / "pci" / "devices"
    links.mkdir(parents=True, exist_ok=True)
    link = links / bdf
    if not link.is_symlink():
        link.symlink_to(os.path.relpath(device_dir, links))


def write_fixture(path: Path, fixture: dict[str, Any]) -> None:
    """Replace the fixture atomically (temporary file, then rename): the library never reads half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".fixture-")
    with os.fdopen(fd, "w") as f:
        json.dump(fixture, f)
    os.replace(tmp, path)


def worker_env(lib_dir: Path, fixture: Path) -> dict[str, str]:
    """The environment of a child that must load the fake as `libnvidia-ml.so.1`."""
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (str(lib_dir), env.get("LD_LIBRARY_PATH", "")) if p)
    env[FIXTURE_ENV] = str(fixture)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_REPO), env.get("PYTHONPATH", "")) if p)
    return env


def run_worker(lib_dir: Path, fixture: Path, spec: dict[str, Any], *, timeout_s: float = 60.0) -> dict[str, Any]:
    """Run `tests.collectors.fake_nvml_worker` on `spec` in a child loading the fake; its JSON report."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.collectors.fake_nvml_worker"],
        input=json.dumps(spec), capture_output=True, text=True, env=worker_env(lib_dir, fixture),
        cwd=_REPO, timeout=timeout_s, check=False,
    )
    if done.returncode != 0:
        raise AssertionError(f"the NVML worker failed (rc {done.returncode}):\n{done.stderr}")
    report: dict[str, Any] = json.loads(done.stdout)
    return report
