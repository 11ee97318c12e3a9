"""`hookctl explain` names the pod's core-scheduling cookie group (CoreSched) beside its cpuset, under the
NodeSLO the agent has now, or says why the pod has none."""

from __future__ import annotations

from typing import Any

from hookserver.slo.document import spec_from_json
from tests.debug.conftest import ServerFactory, World

CORE_SCHED = {"resourceQOSStrategy": {"policies": {"cpuPolicy": "coreSched"},
                                      "lsClass": {"cpuQOS": {"enable": True}}}}


def _core_sched(ctl: Any, server: Any, key: str) -> dict[str, Any]:
    doc = ctl("--socket", server.socket_path, "explain", key, "-o", "json").json()
    section: dict[str, Any] = doc["cpu"]["core_sched"]
    return section


def test_explain_names_the_cookie_group_or_why_none(world: World, make_server: ServerFactory, ctl: Any) -> None:
    server = make_server()
    assert _core_sched(ctl, server, "web/frontend-1") == {
        "group": None, "why": "NodeSLO cpuPolicy is groupIdentity, not coreSched"}
    resolved = spec_from_json(CORE_SCHED, origin="test")
    world.store.set_node_slo(resolved.spec, resolved.sources)
    # LS is a core expeller by koordinator's default: its group carries the suffix.
    assert _core_sched(ctl, server, "web/frontend-1") == {
        "group": "-expeller", "why": "LS pod, cookie shared with every pod of group '-expeller'"}
    be = _core_sched(ctl, server, "batch/be-job-0")
    assert be["group"] is None and "core scheduling is off for this pod (BE cpuQOS" in be["why"]
