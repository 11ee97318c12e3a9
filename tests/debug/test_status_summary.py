"""`hookctl status` fits a screen by default, `-v` shows every field, and the document's times are ISO and its
durations milliseconds wherever they come from (issue 21: 200+ lines; `informer.started_at: 1795649112.42`
and collectors' `last_run_at` epoch floats; `last_duration_s: 0` hid sub-second runs)."""

from __future__ import annotations

from typing import Any

from hookserver.debug.render_status import render_status, status_units

from tests.debug.conftest import ServerFactory

COLLECTORS = {f"c{i}": {"name": f"c{i}", "enabled": True, "interval_s": 1.0, "last_run_at": 1795649112.42 + i,
                        "last_duration_s": 0.000412, "max_duration_s": 0.0009, "runs": 10, "failures": 0,
                        "last_error": ""} for i in range(12)}
INFO = {
    "mode": "standalone", "pid": 42, "uptime_s": 12.5, "plugins": ["BatchResource"], "failure_policy": "Ignore",
    "informer": {"mode": "standalone", "synced": True, "stale": False, "started_at": 1795649112.42},
    "collectors": {"collectors": COLLECTORS},
    "reconciler": {"state": "running", "last_pass": {"at": "2026-11-26T03:05:10.471Z", "duration_ms": 0.1,
                                                     "trigger": "start"}},
    "qos": {"enabled": True, "evictor": "report", "reconcilers": ["CPUSuppress"],
            "be_tier_missing": "no BE tier cgroup (kubepods/besteffort under /sys/fs/cgroup/cpu)"},
    "nri": {"state": "backoff", "reconnects": 3, "last_error": "dial /var/run/nri/nri.sock: ENOENT"},
}


def test_units_iso_times_and_millisecond_durations_everywhere() -> None:
    doc = status_units(INFO)
    assert doc["informer"]["started_at"] == "2026-11-25T23:25:12.420Z"
    c0 = doc["collectors"]["collectors"]["c0"]
    assert c0["last_run_at"].endswith("Z") and c0["last_duration_ms"] == 0.412 and c0["max_duration_ms"] == 0.9
    assert "last_duration_s" not in c0 and c0["interval_s"] == 1.0  # an interval is a setting, not a duration
    assert status_units({"last_run_at": None, "x_at": 0})["last_run_at"] == ""


def test_the_summary_fits_a_screen_and_names_the_problems(make_server: ServerFactory, ctl: Any) -> None:
    server = make_server(info=lambda: INFO)
    short = ctl("--socket", server.socket_path, "status")
    full = ctl("--socket", server.socket_path, "status", "-v")
    assert short.rc == 0 and full.rc == 0, short.err + full.err
    lines = short.out.splitlines()
    assert len(lines) <= 24 and max(len(line) for line in lines) <= 160
    assert len(full.out.splitlines()) > 3 * len(lines)
    assert lines[0].startswith("hookserver ") and "mode standalone" in lines[0]
    assert "started 2026-11-25T23:25:12.420Z" in short.out
    assert "1 of the recent hook calls failed" in short.out  # the fixture store has one failed call
    assert "BE tier: no BE tier cgroup" in short.out
    assert "1795649112" not in full.out and "last_duration_ms: 0.412" in full.out


def test_verbose_is_the_plain_document() -> None:
    assert "informer:" in render_status({"informer": {"mode": "x"}}, verbose=True)


def test_a_synchronized_nri_connection_names_its_runtime() -> None:
    """The NRI line names the runtime once the plugin is synchronized. The NRI status calls that state "ready"
    (nri.status.ConnState); the renderer waited for a "connected" that never comes, so a healthy connection
    to containerd 1.7 read "ready (0 reconnects)" and never said to what."""
    doc = {"nri": {"state": "ready", "reconnects": 0, "runtime": {"name": "containerd", "version": "1.7.24~ds1"}}}
    (line,) = [line for line in render_status(doc).splitlines() if line.startswith("nri:")]
    assert line.split(None, 1)[1] == "ready: connected to containerd 1.7.24~ds1"


def test_a_missing_controller_is_one_calm_line() -> None:
    """Issue 40 item 4: the BE tier without the cpuset controller is one line of the summary, not an error."""
    problem = ("cpuset not enabled on kubepods-besteffort.slice (not in kubepods.slice's subtree_control): "
               "cpuset knobs unavailable there")
    doc = {**INFO, "qos": {**INFO["qos"], "be_tier_missing": "", "be_tier_controllers": problem}}  # type: ignore[dict-item]
    lines = [line for line in render_status(doc).splitlines() if "cpuset" in line]
    assert len(lines) == 1 and "BE tier: cpuset not enabled on kubepods-besteffort.slice" in lines[0]
    assert len(lines[0]) <= 160
    assert not [line for line in render_status(INFO).splitlines() if "not enabled" in line]


def test_the_summary_says_how_systemd_resets_are_handled() -> None:
    kept = render_status(status_units({**INFO, "systemd": {"mode": "unit properties kept through /run/systemd/private"}}))
    assert "systemd:     unit properties kept through /run/systemd/private" in kept.splitlines()
    away = render_status(status_units({**INFO, "systemd": {
        "mode": "not reachable (/run/systemd/private: ENOENT), values restored on reset within 10 s"}}))
    assert "systemd:     not reachable (/run/systemd/private: ENOENT), values restored on reset within 10 s" in away
    assert "systemd:" not in render_status(status_units(INFO))  # an agent without the section: no line
