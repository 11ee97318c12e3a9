"""The HTML report: its charts are in the page, and a real headless Chromium renders every one of them.

The browser test runs when Chromium and plotly are installed (`make replay-check` installs both) and is
skipped, with the reason, on a machine without them.
"""

from __future__ import annotations

import re
import shutil
import struct
import subprocess

import pytest

from hookserver.recorder.reader import Recording
from hookserver.recorder.replay import ReplayConfig, replay
from hookserver.recorder.summary import compare
from hookserver.recorder.proposal import Proposal

from tests.recorder.helpers import small_recording

plotly = pytest.importorskip("plotly", reason="the report needs the optional extra: pip install 'hookserver[report]'")

from hookserver.recorder.report_html import CHARTS, render_html  # noqa: E402 - after the skip


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> str:
    d = tmp_path_factory.mktemp("report")
    rec = Recording(small_recording(str(d / "r.sqlite"), hours=1, start_hour=7))
    recorded = replay(rec, ReplayConfig("recorded"))
    proposal = Proposal(slo={"resourceUsedThresholdWithBE": {"memoryEvictThresholdPercent": 60}})
    proposed = replay(rec, ReplayConfig("proposed", proposal, as_recorded=False))
    path = d / "report.html"
    path.write_text(render_html(compare("node-a", recorded, proposed)), encoding="utf-8")
    return str(path)


def test_the_page_is_self_contained_and_holds_every_chart(page: str) -> None:
    text = open(page, encoding="utf-8").read()
    # opens offline: no script or stylesheet fetched (plotly.js is inlined; its source names a CDN only as a
    # default for map data the report does not draw)
    assert not re.search(r"<script[^>]+src=", text) and not re.search(r"<link[^>]+href=\"http", text)
    for name in CHARTS:
        assert f'id="chart-{name}"' in text
    assert "EvictPodByNodeMemoryUsage" in text  # the proposed config's evictions are listed


def test_chromium_renders_every_chart(page: str, tmp_path) -> None:
    chromium = _chromium()
    if chromium is None:
        pytest.skip("no Chromium on this machine (make replay-check installs Debian's chromium)")
    flags = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--virtual-time-budget=20000"]
    dom = subprocess.run([*flags, "--dump-dom", f"file://{page}"], capture_output=True, text=True, timeout=120).stdout
    for name in CHARTS:
        # Plotly marks a div it has drawn with js-plotly-plot and fills it with its SVG layers
        div = re.search(rf'<div id="chart-{name}"[^>]*class="[^"]*js-plotly-plot', dom)
        assert div is not None, f"chart {name} was not drawn"
        section = dom[div.start():]
        nxt = section.find("<section", 1)
        assert "main-svg" in section[:nxt if nxt > 0 else None], f"chart {name} has no SVG"
    shot = tmp_path / "report.png"
    subprocess.run([*flags, "--window-size=1280,2400", f"--screenshot={shot}", f"file://{page}"],
                   capture_output=True, timeout=120, check=True)
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (1280, 2400) and len(data) > 50_000  # a drawn page, not a blank one


def _page_of(rec: Recording, proposal: Proposal) -> str:
    recorded = replay(rec, ReplayConfig("recorded"))
    proposed = replay(rec, ReplayConfig("proposed", proposal, as_recorded=False))
    return render_html(compare("node-a", recorded, proposed, proposal=proposal.describe(rec)))


def test_the_page_names_the_proposal_and_marks_what_it_assumed(tmp_path) -> None:
    """Before: a saved page never said what "proposed" was, identical lines hid each other, BE CPU used was not
    shown, and a run without evictions had an empty evictions chart spanning nothing."""
    slo = {"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressThresholdPercent": 65,
                                           "memoryEvictThresholdPercent": 95}}
    rec = Recording(small_recording(str(tmp_path / "r.sqlite"), hours=0.5, pods=20, start_hour=7, slo=slo))
    try:
        null = _page_of(rec, Proposal())
        looser = _page_of(rec, Proposal(slo={"resourceUsedThresholdWithBE": {"cpuSuppressThresholdPercent": 95}}))
    finally:
        rec.close()
    assert "none: every field as recorded" in null and "<b>No change:</b>" in null
    assert "Counterfactual" not in null and "#f4cccc" not in null
    assert "cpuSuppressThresholdPercent 65 -&gt; 95" in looser and "<b>No change:</b>" not in looser
    assert "Counterfactual" in looser and "#f4cccc" in looser  # the frames shaded in the charts
    for page in (null, looser):
        assert "BE pods' CPU used (recorded)" in page and '"dash":"dash"' in page
        assert "no evictions in either run" in page
        assert page.count('"yaxis":{"title":{"text"') >= len(CHARTS) - 2  # the two prediction charts may be empty
