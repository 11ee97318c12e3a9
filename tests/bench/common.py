"""Shared helpers for benchmarks: latency statistics and the printed table."""

from __future__ import annotations

import os
import statistics
import subprocess
from pathlib import Path
from dataclasses import dataclass

__all__ = ["BenchRow", "percentile", "print_rows", "summarize"]


@dataclass(frozen=True)
class BenchRow:
    area: str
    name: str
    value: str
    note: str = ""


def child_pythonpath(tree: Path | str) -> str:
    """PYTHONPATH for a child that runs the code in `tree`: the tree first, then whatever the caller had (a
    machine whose packages come from a `--target` folder on PYTHONPATH, not from the venv, keeps them)."""
    inherited = os.environ.get("PYTHONPATH", "")
    return f"{tree}{os.pathsep}{inherited}" if inherited else str(tree)


def percentile(samples: list[float], pct: float) -> float:
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, int(round(pct / 100 * (len(ordered) - 1)))))
    return ordered[index]


def summarize(samples_s: list[float]) -> dict[str, float]:
    """p50, p99 and mean in milliseconds."""
    return {
        "p50_ms": percentile(samples_s, 50) * 1000,
        "p99_ms": percentile(samples_s, 99) * 1000,
        "mean_ms": statistics.fmean(samples_s) * 1000 if samples_s else float("nan"),
    }


def print_rows(rows: list[BenchRow]) -> None:
    width_area = max((len(r.area) for r in rows), default=4)
    width_name = max((len(r.name) for r in rows), default=4)
    width_value = max((len(r.value) for r in rows), default=5)
    for r in rows:
        print(f"{r.area:<{width_area}}  {r.name:<{width_name}}  {r.value:>{width_value}}  {r.note}")


def stop_process(proc: subprocess.Popen[bytes] | subprocess.Popen[str], *, grace_s: float = 10.0) -> None:
    """SIGTERM a bench's child (if it still runs), wait up to `grace_s` for it, then SIGKILL and reap it."""
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
