"""The busy bench's instruments (tests/bench/bench_nri_busy.py) report what happened: the per-thread CPU account
read from /proc, the thread names it is labelled with, and the GC-pause log written out at the daemon's stop; and the
cgroup tree it makes for its pods (each v1 controller's, or the one v2 tree where v1 is not writable)."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from tests.bench import bench_nri_busy as bench

needs_schedstat = pytest.mark.skipif(not os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/schedstat"),
                                     reason="no /proc/<pid>/task/<tid>/schedstat (CONFIG_SCHEDSTATS off)")


def _burn(seconds: float, burnt: threading.Event, release: threading.Event) -> None:
    until = time.thread_time() + seconds
    while time.thread_time() < until:
        pass
    burnt.set()
    release.wait(10)  # alive until read: an ended thread's /proc entry is gone


@needs_schedstat
def test_the_cpu_account_charges_the_thread_that_burnt_it_and_names_it(tmp_path: Path) -> None:
    account = bench._ThreadCpu(os.getpid())
    burnt, release = threading.Event(), threading.Event()
    worker = threading.Thread(target=_burn, args=(0.08, burnt, release), name="burner_7")
    (tmp_path / "threads.json").write_text(json.dumps({"1": "ended-earlier"}))  # what the SIGTERM dump wrote
    before = account.read()
    worker.start()
    try:
        assert burnt.wait(10)
        account.add(before)
        bench._dump_thread_names(tmp_path / "threads.json")  # while the burner is alive, as the daemon does at stop
    finally:
        release.set()
        worker.join()

    assert worker.native_id is not None
    burnt_ns = account.ns[worker.native_id]
    assert 0.06e9 <= burnt_ns <= 2e9  # ~80 ms of CPU, read from outside the thread
    assert account.ns.get(os.getpid(), 0) < burnt_ns  # the main thread only waited for it
    names = account.names(tmp_path / "threads.json")
    summary = account.summary(calls=100, names=names)
    account.write_rounds(tmp_path / "cpu-rounds.txt", names)
    # per call: ~800 µs for the burner, under its name without the serial number
    assert "burner " in summary and "event loop" not in summary.split("other threads")[1]
    assert json.loads((tmp_path / "threads.json").read_text())["1"] == "ended-earlier"  # merged, not overwritten
    rounds = (tmp_path / "cpu-rounds.txt").read_text().splitlines()
    assert len(rounds) == 1 and rounds[0].startswith("round 0: loop ") and "burner" in rounds[0]


def test_every_collection_reaches_the_file_at_close_with_the_thread_that_ran_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bench, "SAMPLE_S", 0.0)  # no sampling thread: only the GC callback
    out = tmp_path / "samples.jsonl"
    sampler = bench._Sampler(out)
    assert sampler._on_gc in __import__("gc").callbacks  # registered; taken off so that only the scripted
    __import__("gc").callbacks.remove(sampler._on_gc)    # collections below count (a real one on a thread another
    # test left running once slipped in: three entries, not two)
    sampler._on_gc("start", {"generation": 1})
    sampler._gc_start -= 0.005  # a 5 ms collection, on this (the main, "loop") thread
    sampler._on_gc("stop", {"generation": 1})
    other = threading.Thread(target=lambda: (sampler._on_gc("start", {"generation": 0}),
                                             sampler._on_gc("stop", {"generation": 0})))
    other.start()
    other.join()
    sampler.close()

    lines = [json.loads(line)["gc"] for line in out.read_text().splitlines()]
    assert [(g[2], g[3]) for g in lines] == [(1, True), (0, False)]
    assert 0.004 <= lines[0][1] - lines[0][0] < 1.0
    assert sampler._on_gc not in __import__("gc").callbacks
    # Only the loop's collection that fell inside a call counts as the loop's.
    call = (lines[0][0] - 0.001, 0.01)
    assert "inside a call: 1 (" in bench._gc_on_loop([call], out)
    assert "inside a call: 0 (" in bench._gc_on_loop([(lines[0][1] + 1, 0.01)], out)


def test_a_waves_start_is_told_apart_from_its_rest() -> None:
    per_round = bench.CALLS_PER_ROUND

    def run(first_s: float, rest_s: float) -> dict[str, object]:
        calls = [(float(i), first_s if i % per_round == 0 else rest_s) for i in range(per_round * 4)]
        return {"nri": calls, "nri_wall": 1.0}

    value, note = bench._wave_parts("nri", run(0.0003, 0.0001), run(0.0009, 0.0001))
    assert value == "first call 0.300 / 0.900 ms; rest p99 1.00"  # only the first calls differ
    value, _ = bench._wave_parts("nri", run(0.0003, 0.0001), run(0.0003, 0.0002))
    assert value.endswith("rest p99 2.00")


def test_the_pods_tree_on_v2_is_one_tree_with_cpu_and_memory_given_to_the_children(tmp_path: Path) -> None:
    root = str(tmp_path)  # a plain directory stands in for the unified hierarchy: the bench only mkdirs and writes
    made, pods, ctrs = bench._make_tree("v2", root, "hookserver-bench-t")
    assert len(pods) == len(ctrs) == bench.PODS
    pod_dir = tmp_path / "hookserver-bench-t" / f"pod{pods[0].uid}"
    assert (pod_dir / ctrs[0].id).is_dir()
    assert pods[0].linux.cgroup_parent == f"/hookserver-bench-t/pod{pods[0].uid}"
    for delegated in (tmp_path, tmp_path / "hookserver-bench-t", pod_dir):
        assert (delegated / "cgroup.subtree_control").read_text() == "+cpu +memory"
    assert not (pod_dir / ctrs[0].id / "cgroup.subtree_control").exists()  # a leaf gives nothing away
    assert len(made) == 1 + 2 * bench.PODS  # the top, and each pod's and container's directory, parents first
    assert made[0] == f"{root}/hookserver-bench-t"
    for path in made:  # the files the stand-in left would block rmdir on a real tree: clear them first here
        for leftover in Path(path).glob("cgroup.subtree_control"):
            leftover.unlink()
    bench._remove_tree(made)
    assert not (tmp_path / "hookserver-bench-t").exists()


def test_v1_gives_each_controller_its_own_tree() -> None:
    dirs = bench._pod_dirs("v1", "/sys/fs/cgroup", "top", "top/podu", "c1")
    assert dirs[:3] == ["/sys/fs/cgroup/cpu/top", "/sys/fs/cgroup/cpu/top/podu", "/sys/fs/cgroup/cpu/top/podu/c1"]
    assert {d.split("/")[4] for d in dirs} == set(bench.CONTROLLERS)
    assert bench._pod_dirs("v2", "/sys/fs/cgroup", "top", "top/podu", "c1") == [
        "/sys/fs/cgroup/top", "/sys/fs/cgroup/top/podu", "/sys/fs/cgroup/top/podu/c1"]


def test_the_whole_process_cpu_counts_every_thread() -> None:
    account = bench._ThreadCpu(os.getpid())
    before = account.process_cpu_s()
    burnt, release = threading.Event(), threading.Event()
    worker = threading.Thread(target=_burn, args=(0.1, burnt, release))
    worker.start()
    try:
        assert burnt.wait(10)
    finally:
        release.set()
        worker.join()
    assert account.process_cpu_s() - before >= 0.08  # the other thread's 100 ms, in clock ticks
    assert bench._ThreadCpu(2**22 + 12345).process_cpu_s() == 0.0  # no such process: nothing, no error


def test_a_bad_cgroup_mode_or_switch_interval_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.bench import bench_nri

    monkeypatch.setattr(bench, "CGROUP_MODE", "v3")
    assert bench._layout() == ("", "HOOKSERVER_BENCH_CGROUP must be v1, v2 or auto, got 'v3'")
    assert bench_nri.switch_interval_ms({}, 1.0) == 1.0
    assert bench_nri.switch_interval_ms({"HOOKSERVER_BENCH_SWITCH_MS": "0.5"}, 1.0) == 0.5
    for bad in ("fast", "0", "-1", "nan", "500"):
        with pytest.raises(SystemExit, match="HOOKSERVER_BENCH_SWITCH_MS"):
            bench_nri.switch_interval_ms({"HOOKSERVER_BENCH_SWITCH_MS": bad}, 1.0)


def test_v2_delegation_writes_only_what_is_missing(tmp_path: Path) -> None:
    control = tmp_path / "cgroup.subtree_control"
    control.write_text("cpu memory io\n")  # a host root that delegates already: left alone
    bench._delegate(str(tmp_path))
    assert control.read_text() == "cpu memory io\n"
    control.write_text("cpu io\n")
    bench._delegate(str(tmp_path))
    assert control.read_text() == "+memory"


def test_the_pinning_spec_names_both_sides_or_is_refused_by_name() -> None:
    assert bench._pin("off", {0, 1}) is None
    assert bench._pin("auto", {0, 1}) == ({0}, {1})
    assert bench._pin("auto", {3, 5, 9}) == ({3}, {5, 9})  # the CPUs this process may use, whichever they are
    assert bench._pin("auto", {2}) is None  # one CPU: nothing to pin
    assert bench._pin("0:1", {0, 1}) == ({0}, {1})
    assert bench._pin("0:1,2,3", {0, 1, 2, 3}) == ({0}, {1, 2, 3})
    with pytest.raises(SystemExit, match="outside those this process may use"):
        bench._pin("0:5", {0, 1})
    for bad in ("", "0-1", "0:1:2", "0", "a:b"):
        with pytest.raises(SystemExit, match="HOOKSERVER_BENCH_PIN"):
            bench._pin(bad, {0, 1})


def test_restoring_the_affinity_reaches_threads_started_while_pinned() -> None:
    saved = os.sched_getaffinity(0)
    if len(saved) < 2:
        pytest.skip("one CPU: nothing to pin")
    first = {min(saved)}
    stop = threading.Event()
    started = threading.Event()
    tids: list[int] = []

    def worker() -> None:
        tids.append(threading.get_native_id())
        started.set()
        stop.wait(5)

    os.sched_setaffinity(0, first)
    try:
        thread = threading.Thread(target=worker, daemon=True)  # a failed assertion must not hold the run 5 s
        thread.start()
        started.wait(5)
        assert os.sched_getaffinity(tids[0]) == first  # inherited the pin
    finally:
        bench._restore_affinity(saved)
    try:
        assert os.sched_getaffinity(0) == saved and os.sched_getaffinity(tids[0]) == saved
    finally:
        stop.set()
        thread.join(5)
