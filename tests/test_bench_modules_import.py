"""Every benchmark module `make bench` runs imports: a helper renamed in one bench must not break another's
import (bench_nri_sync imported `_reap` from bench_nri after it had become `common.stop_process`, and `make bench`
stopped at that module)."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import tests.bench as package

MODULES = sorted(m.name for m in pkgutil.iter_modules(package.__path__) if m.name.startswith("bench_"))


def test_the_bench_modules_are_found() -> None:
    assert {"bench_nri", "bench_nri_busy", "bench_nri_sync", "bench_nri_go"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_each_bench_module_imports_and_has_a_run(name: str) -> None:
    module = importlib.import_module(f"tests.bench.{name}")
    assert callable(getattr(module, "run", None)), f"tests/bench/{name}.py has no run()"
