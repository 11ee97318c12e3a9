"""Run every benchmark module (tests/bench/bench_*.py) and print one table."""

from __future__ import annotations

import importlib
import pkgutil
import sys

from tests.bench.common import BenchRow, print_rows


def main() -> int:
    import tests.bench as package

    only = set(sys.argv[1:])
    rows: list[BenchRow] = []
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if not info.name.startswith("bench_"):
            continue
        if only and info.name.removeprefix("bench_") not in only:
            continue
        module = importlib.import_module(f"tests.bench.{info.name}")
        print(f"== {info.name}", flush=True)
        module_rows = module.run()
        print_rows(module_rows)
        rows.extend(module_rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
