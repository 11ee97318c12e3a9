"""Benchmarks. `make bench` runs every `bench_*.py` module's `run()` and prints their tables.

Each `run()` returns a list of `BenchRow`s measured side by side in the same process and run, so the
ratios compare like with like (same socket type, same machine load).
"""
