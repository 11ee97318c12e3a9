"""CoreSched: koordlet's groups (label, exclusive, none, expeller suffix, SYSTEM untouched), one cookie per group
with a fake prctl (create, share to new processes, clear disabled pods), the cookie cache's expiry, the undo
when NodeSLO turns it off, `hookserver cleanup`, and this host's real answer (no PR_SCHED_CORE: one calm
"unavailable" status line).

The real-kernel run (cookies read back with PR_SCHED_CORE_GET) needs a kernel with core scheduling and SMT:
the SMT VM of tests/vm (two threads per core) is where it belongs; this host answers EINVAL.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from hookserver.cli.cleanup import clear_core_sched_cookies
from hookserver.config import load_settings
from hookserver.executor.coresched import CookieExecutor
from hookserver.slo.document import spec_from_json
from hookserver.system.coresched import LibcCoreSched, unavailable_reason
from qos.isolation.core_sched import COOKIE_EXPIRY_S, CookieCache, CoreSched, pod_group
from qos.snapshot.coresched_reader import CoreSchedReader
from qos.snapshot.kernel import CoreSchedFacts
from tests.qos.fake_coresched import FakeCoreSched
from tests.qos.helpers import pod, snapshot
from tests.qos.part2_helpers import container, kernel, pod_kernel
from tests.qos.part2_stack import add_pod, build_stack

# koordinator's defaults: LSR and LS are core expellers (coreExpeller true), BE is not.
ON = {"resourceQOSStrategy": {"policies": {"cpuPolicy": "coreSched"},
                              "lsClass": {"cpuQOS": {"enable": True}}, "beClass": {"cpuQOS": {"enable": True}}}}


def _snap(pods: list[Any], procs: dict[str, tuple[tuple[int, int], ...]], *, slo: dict[str, Any] = ON,
          now: float = 1000.0) -> Any:
    resolved = spec_from_json(slo, origin="test")
    kps = [pod_kernel(p.name, container(p.name)) for p in pods]
    facts = CoreSchedFacts(processes=MappingProxyType(procs))
    return snapshot(now=now, slo=resolved.spec, pods=tuple(pods),
                    kernel=kernel(*kps, read=("pods", "core_sched"), core_sched=facts))


def test_groups_follow_koordlets_labels_and_classes() -> None:
    snap = _snap([], {})
    assert pod_group(snap, pod("a", "LS")) == "-expeller"
    assert pod_group(snap, pod("b", "LS", labels={"koordinator.sh/core-sched-group-id": "g1"})) == "g1-expeller"
    assert pod_group(snap, pod("c", "LS", labels={"koordinator.sh/core-sched-policy": "exclusive"})) == "uid-c-expeller"
    assert pod_group(snap, pod("d", "LS", labels={"koordinator.sh/core-sched-policy": "none"})) is None
    assert pod_group(snap, pod("e", "BE", labels={"koordinator.sh/core-sched-group-id": "g1"})) == "g1"
    assert pod_group(snap, pod("f", "LSR")) is None  # the LSR class's cpuQOS is off
    assert pod_group(snap, pod("s", "SYSTEM")) is None


def test_a_new_group_gets_a_cookie_and_new_processes_join_it() -> None:
    web, batch = pod("web", "LS"), pod("batch", "BE")
    plan = CoreSched().plan(_snap([web, batch], {"web-c1": ((10, 0), (11, 0)), "batch-c1": ((20, 0),)}), None)
    assert [(o.kind, o.pid, o.to_pids, o.group) for o in plan.cookies] == [
        ("create", 20, (), ""), ("create", 10, (11,), "-expeller")]
    # Next round: the web group holds 0x1001 on pid 10; pid 12 started since and joins it.
    state = CookieCache(MappingProxyType({"-expeller": (0x1001, 999.0)}))
    plan = CoreSched().plan(_snap([web], {"web-c1": ((10, 0x1001), (11, 0x1001), (12, 0))}), state)
    assert [(o.kind, o.pid, o.to_pids) for o in plan.cookies] == [("assign", 10, (12,))]
    assert plan.state.groups["-expeller"] == (0x1001, 1000.0)


def test_a_split_group_is_merged_into_the_remembered_cookie_and_foreign_cookies_are_not_taken() -> None:
    a = pod("a", "LS", labels={"koordinator.sh/core-sched-group-id": "g"})
    b = pod("b", "LS", labels={"koordinator.sh/core-sched-group-id": "g"})
    state = CookieCache(MappingProxyType({"g-expeller": (0x7, 999.0), "other": (0x9, 999.0)}))
    plan = CoreSched().plan(_snap([a, b], {"a-c1": ((1, 0x9), (2, 0x9)), "b-c1": ((3, 0x7),)}), state)
    assert [(o.kind, o.pid, o.to_pids) for o in plan.cookies] == [("assign", 3, (1, 2))]
    # 0x9 belongs to group "other": a group holding only it gets a new cookie instead
    plan = CoreSched().plan(_snap([a], {"a-c1": ((1, 0x9),)}), CookieCache(MappingProxyType({"other": (0x9, 999.0)})))
    assert [o.kind for o in plan.cookies] == ["create"]


def test_disabled_pods_are_cleared_and_the_cache_expires() -> None:
    off = pod("off", "LS", labels={"koordinator.sh/core-sched-policy": "none"})
    sys_pod = pod("sys", "SYSTEM")
    state = CookieCache(MappingProxyType({"gone": (0x5, 1000.0 - COOKIE_EXPIRY_S - 1), "recent": (0x6, 990.0)}))
    plan = CoreSched().plan(_snap([off, sys_pod], {"off-c1": ((5, 0x6), (6, 0)), "sys-c1": ((7, 0x6),)}), state)
    assert [(o.kind, o.to_pids) for o in plan.cookies] == [("clear", (5,))]  # SYSTEM's pid 7 untouched
    assert set(plan.state.groups) == {"recent"}


def test_unavailable_is_one_calm_status_line_and_nothing_else() -> None:
    snap = _snap([pod("web", "LS")], {})
    snap = dataclasses.replace(snap, kernel=dataclasses.replace(snap.kernel, core_sched=CoreSchedFacts(
        problem="this kernel has no core scheduling (prctl PR_SCHED_CORE answers EINVAL)")))
    plan = CoreSched().plan(snap, None)
    assert plan.skipped == "unavailable: this kernel has no core scheduling (prctl PR_SCHED_CORE answers EINVAL)"
    assert plan.cookies == ()


def test_this_hosts_kernel_is_reported_unavailable(tmp_path: Path) -> None:
    """On a kernel without core scheduling (this host), the real prctl says EINVAL and the reader reports it;
    where it has it, the probe passes and the SMT check decides."""
    real = LibcCoreSched()
    reason = unavailable_reason(real, "/sys")
    try:
        real.get(0)
    except OSError:
        assert reason == "this kernel has no core scheduling (prctl PR_SCHED_CORE answers EINVAL)"
    else:
        assert reason in ("", "the node has no SMT (one thread per core): nothing to isolate")
    assert CoreSchedReader(kernel=FakeCoreSched(supported=False)).read({}, str(tmp_path)).problem.startswith(
        "this kernel has no core scheduling")
    smt = tmp_path / "devices" / "system" / "cpu" / "smt"
    smt.mkdir(parents=True)
    (smt / "active").write_text("0\n")
    assert "no SMT" in unavailable_reason(FakeCoreSched(), str(tmp_path))


def _ctr_procs(cg: Path, uid: str, cid: str, pids: str) -> None:
    d = cg / "cpu" / "kubepods" / "burstable" / f"pod{uid}" / cid
    d.mkdir(parents=True, exist_ok=True)
    (d / "cgroup.procs").write_text(pids)


def test_through_the_runner_with_a_fake_prctl_and_cleanup(tmp_path: Path) -> None:
    cg = tmp_path / "cg"
    fake = FakeCoreSched()
    stack = build_stack(str(cg), CoreSched(), gates={"CoreSched": True}, sys_root=str(tmp_path / "sys"), spec=ON)
    stack.reader.core_sched = CoreSchedReader(kernel=fake, sys_root=str(tmp_path / "sys"))
    stack.runner.cookies = CookieExecutor(fake, store=stack.store)
    web = add_pod(stack.store, "web", kube_qos="Burstable", qos="LS", containers={"c": ({}, {})})
    _ctr_procs(cg, web.uid, "webc", "100\n101\n")
    stack.tick()
    assert fake.cookies[100] != 0 and fake.cookies[100] == fake.cookies[101]
    _ctr_procs(cg, web.uid, "webc", "100\n101\n102\n")  # a new process: joins at the next round
    stack.tick()
    assert fake.cookies[102] == fake.cookies[100]
    assert any(w.path == "core-sched -expeller" for w in stack.store.audit.writes())
    stack.set_slo({})  # cpuPolicy no longer coreSched: the cookies this agent gave go
    stack.tick()
    assert {fake.cookies[p] for p in (100, 101, 102)} == {0}

    fake.cookies[101] = 0x77  # as if the agent had died with cookies set: cleanup resets them
    settings = load_settings(overrides={"state_dir": str(tmp_path / "state"), "sys_root": str(tmp_path / "sys"),
                                        "cgroup": {"root": str(cg), "driver": "cgroupfs", "version": "v1"}},
                             environ={})
    lines: list[str] = []
    assert clear_core_sched_cookies(settings, lines, kernel=fake) == 0
    assert lines == ["restored  core-sched cookies of 1 pod processes (back to the default cookie)"]
    assert fake.cookies[101] == 0
    assert clear_core_sched_cookies(settings, [], kernel=FakeCoreSched(supported=False)) == 0


@pytest.mark.parametrize("exited", [True, False])
def test_the_executor_takes_exited_processes_calmly(exited: bool) -> None:
    from hookserver.executor.plan import CookieOp
    from hookserver.store import StateStore

    fake = FakeCoreSched({1: 0x5})
    if exited:
        fake.exited.add(1)
    result = CookieExecutor(fake, store=StateStore()).apply([CookieOp("assign", 1, (2,), group="g")])[0]
    assert result.ok and (result.error == "pid 1 exited" if exited else fake.cookies[2] == 0x5)
