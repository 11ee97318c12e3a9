"""`hookctl capacity` over a real debug socket: the table names every term with its source, the JSON is the whole
document, and an agent without the publisher says so."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hookserver.cli.hookctl import main as hookctl_main
from hookserver.debug.server import DebugServer
from hookserver.koord_resources import BATCH_CPU
from tests.capacity.world import GI, World, ls_pod

Ctl = Callable[..., tuple[int, str, str]]


@pytest.fixture
def ctl(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Iterator[Ctl]:
    world = World()
    world.add_pod(ls_pod("web", cpu="2"), 1.0, 2.0 * GI)
    world.add_pod(ls_pod("batch", cpu="1", priority_class="koord-batch"), 0.5, 1.0 * GI)
    publisher = world.publisher()
    world.sample(30)
    publisher.tick()
    with_publisher = DebugServer(str(tmp_path / "d.sock"), store=world.store,
                                 providers={"capacity": lambda args: publisher.view()})
    without = DebugServer(str(tmp_path / "none.sock"), store=world.store, providers={})
    with_publisher.start()
    without.start()

    def run(*argv: str, socket: str = "d.sock") -> tuple[int, str, str]:
        capsys.readouterr()
        rc = hookctl_main(["--socket", str(tmp_path / socket), *argv])
        out = capsys.readouterr()
        return rc, out.out, out.err

    yield run
    with_publisher.stop(0.1)
    without.stop(0.1)


def test_the_table_explains_the_offer(ctl: Ctl) -> None:
    rc, out, _ = ctl("capacity")
    assert rc == 0, out
    lines = out.splitlines()
    assert lines[0] == "state:     published: kubernetes.io/batch-cpu appears"
    # 8000 - 3200 - max(500, 500) - 1000 (web's usage; the batch pod is not high-priority) = 3300
    assert "kubernetes.io/batch-cpu (usage): max(8000 - 3200 - 500 - 1000, 0) = 3300m" in out
    assert any(line.strip().startswith("safety margin") and "reclaimThresholdPercent 60" in line for line in lines)
    web = next(line for line in lines if "ns/web" in line)
    assert "usage" in web and "koord-prod" in web
    assert "skipped:koord-batch" in next(line for line in lines if "ns/batch" in line)
    assert any(line.startswith("next write:") for line in lines)


def test_json_is_the_whole_document(ctl: Ctl) -> None:
    rc, out, _ = ctl("capacity", "-o", "json")
    doc = json.loads(out)
    assert rc == 0 and doc["offer"][BATCH_CPU] == "3300"
    assert {o["resource"] for o in doc["formula"]} >= {BATCH_CPU, "kubernetes.io/mid-memory"}
    assert doc["sums"]["hp_used"] == {"cpu_milli": 1000, "memory_bytes": 2 * GI}


def test_an_agent_without_the_publisher_says_so(ctl: Ctl) -> None:
    rc, out, err = ctl("capacity", socket="none.sock")
    assert rc == 1 and out == ""
    assert "capacity publisher is not running (capacity.enabled: false)" in err
