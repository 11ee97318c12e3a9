"""One row per fault class, the table printed at the end of `make soak`, and the JSON report.

Why trends as first-vs-last after warm-up: a leak shows as a steady rise over the run, and the targets are
stated that way ("flat within 10 % after warm-up"); a single spike is not growth.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tests.soak.agent import Sample
from tests.soak.traffic import Answer

__all__ = ["Row", "growth_after_warmup", "render", "trend", "write_json"]


def trend(samples: list[Sample], attr: str) -> str:
    """`first->last (+x%)` over the samples after the first fifth (warm-up)."""
    if len(samples) < 2:
        return "-"
    start = samples[len(samples) // 5:]
    first = getattr(start[0], attr)
    last = getattr(start[-1], attr)
    change = (last - first) / first * 100 if first else 0.0
    return f"{first}->{last} ({change:+.0f}%)"


def growth_after_warmup(samples: list[Sample], attr: str) -> float:
    """Relative growth from the mean of the first to the mean of the last quarter after warm-up (the first
    fifth), so one spike at either end does not decide it."""
    start = samples[len(samples) // 5:]
    if len(start) < 8:
        return 0.0
    q = len(start) // 4
    first = sum(getattr(x, attr) for x in start[:q]) / q
    last = sum(getattr(x, attr) for x in start[-q:]) / q
    return (last - first) / first if first else 0.0


@dataclass
class Row:
    fault: str
    injected: int = 0
    answers: list[Answer] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    metric: str = ""
    samples: list[Sample] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def in_time(self) -> int:
        return sum(1 for a in self.answers if a.ok and not a.late)

    @property
    def failed(self) -> int:
        return sum(1 for a in self.answers if not a.ok or a.late)

    @property
    def slowest(self) -> float:
        return max((a.seconds for a in self.answers), default=0.0)

    def as_dict(self) -> dict[str, Any]:
        errors = sorted({a.error for a in self.answers if a.error})[:10]
        return {
            "fault": self.fault, "injected": self.injected, "creations": len(self.answers),
            "in_time": self.in_time, "failed_or_late": self.failed, "slowest_s": round(self.slowest, 4),
            "errors": errors, "lost": self.lost, "metric": self.metric, "rss_kib": trend(self.samples, "rss_kib"),
            "fds": trend(self.samples, "fds"), "threads": trend(self.samples, "threads"),
            "series": trend(self.samples, "series"), "store_pods": trend(self.samples, "pods"),
            "audit": trend(self.samples, "audit"), "notes": self.notes,
            "violations": self.violations, "seconds": round(self.seconds, 1),
            "samples": [asdict(s) for s in self.samples],
        }


_COLUMNS = ("fault", "injected", "in time", "failed/late", "lost", "slowest", "RSS KiB", "fds", "threads",
            "series", "store pods", "metric")


def render(rows: list[Row]) -> str:
    table = [_COLUMNS]
    for r in rows:
        table.append((r.fault, str(r.injected), f"{r.in_time}/{len(r.answers)}", str(r.failed),
                      "; ".join(r.lost) or "nothing", f"{r.slowest * 1000:.0f} ms", trend(r.samples, "rss_kib"),
                      trend(r.samples, "fds"), trend(r.samples, "threads"), trend(r.samples, "series"),
                      trend(r.samples, "pods"), r.metric or "-"))
    widths = [max(len(line[i]) for line in table) for i in range(len(_COLUMNS))]
    out = ["| " + " | ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)) + " |" for line in table]
    out.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        for v in r.violations:
            out.append(f"VIOLATION {r.fault}: {v}")
        for n in r.notes:
            out.append(f"note {r.fault}: {n}")
    return "\n".join(out)


def write_json(path: Path, rows: list[Row], meta: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"meta": meta, "rows": [r.as_dict() for r in rows]}, indent=1))
