"""Fuzzed input at every entry point: the hypothesis tests of `make test` (tests/test_fuzz_inputs.py: proxy
requests, NodeSLO and slo-controller-config documents, checkpoints, annotations, quantities, pods and the
kubelet's pod list; tests/nri: NRI/ttrpc frames) run again with many more examples.

Why in a subprocess: pytest owns its process (plugins, capture), and a crash in a parser must fail one row of
the table, not the campaign.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

from tests.soak.agent import ROOT
from tests.soak.campaign import Campaign
from tests.soak.report import Row

__all__ = ["fuzz"]

_FILES = ("tests/test_fuzz_inputs.py", "tests/nri/test_server_fuzz.py", "tests/nri/test_wire.py")


def fuzz(c: Campaign, examples: int) -> Row:
    row = Row("fuzzed input (hypothesis)")
    started = time.monotonic()
    env = dict(os.environ, SOAK_FUZZ_EXAMPLES=str(examples))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *_FILES], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=1800, check=False)
    tail = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr[-200:]
    passed = int(m.group(1)) if (m := re.search(r"(\d+) passed", tail)) else 0
    failed = int(m.group(1)) if (m := re.search(r"(\d+) failed", tail)) else 0
    row.injected = passed + failed
    row.notes.append(f"{examples} examples per parser test; pytest: {tail}")
    if proc.returncode != 0:
        row.violations.append(f"fuzz failures ({failed}): {tail}; rerun: SOAK_FUZZ_EXAMPLES={examples} "
                              f"pytest {' '.join(_FILES)}")
        row.lost.append(f"{failed} parser tests failed")
    row.metric = "n/a (parsers in-process)"
    row.seconds = time.monotonic() - started
    _ = c
    return row
