"""hookctl's human view of `qos` and `qos plan` (the JSON is the server's document)."""

from __future__ import annotations

from hookserver.debug.render_qos import render_qos, render_qos_plan

DOC = {
    "enabled": True, "dry_run": False, "evictor": "api", "eviction_cooldown_s": 300.0,
    "gates": [{"name": "BEMemoryEvict", "enabled": True, "source": "flag --feature-gates", "default": False}],
    "reconcilers": [{
        "name": "MemoryEvict", "gate": {"name": "BEMemoryEvict", "enabled": True, "source": "flag --feature-gates"},
        "enabled": True, "reason": "threshold 70%", "dry_run": False, "interval_s": 1.0, "last_run": 990.0,
        "last_summary": "memory 72% >= 70%: release 400000000 bytes; evict 2 of 4 BE pod(s)", "errors": 1,
        "last_error": "evict: InformerError: boom", "last_error_at": 995.0, "evictions_last_hour": 2,
    }],
}


def test_qos_table_gates_and_errors() -> None:
    text = render_qos(DOC, now=1000.0)
    assert "MemoryEvict  BEMemoryEvict=true  on" in text and "10s ago" in text and "evict 2 of 4" in text
    assert "last error of MemoryEvict (5s ago): evict: InformerError: boom" in text
    assert "BEMemoryEvict  true   flag --feature-gates  false" in text
    off = render_qos({**DOC, "enabled": False, "dry_run": True}, now=1000.0)
    assert off.startswith("QoS reconcilers are off") and "DRY RUN" in off


def test_plan_view_lists_writes_actions_and_eviction_order() -> None:
    doc = {
        "reconciler": "MemoryEvict", "slo_origin": "file /tmp/x.yaml", "enabled": True, "reason": "threshold 60%",
        "gate": {"name": "BEMemoryEvict", "enabled": False, "source": "default"}, "notes": ["gate off"],
        "plan": {"summary": "memory 72% >= 60%", "numbers": {"release_target": 1200}, "notes": [],
                 "writes": [{"level": 0, "cgroup": "kubepods/besteffort", "file": "cpu.cfs_quota_us", "value": 2000,
                             "reason": "floor"}],
                 "actions": [{"kind": "sysctl", "target": "vm/min_free_kbytes", "value": "1", "reason": "r"}]},
        "would_evict": [{"pod": "ns/a", "reason": "EvictPodByNodeMemoryUsage", "message": "why a",
                         "numbers": {"memory_bytes": 5, "releases": 5.0}}],
    }
    text = render_qos_plan(doc)
    assert "under the NodeSLO from file /tmp/x.yaml" in text and "note: gate off" in text
    assert "cpu.cfs_quota_us" in text and "vm/min_free_kbytes" in text and "ns/a" in text and "why: why a" in text
    assert "RELEASES" not in text
    assert render_qos_plan({"unexpected": 1}) == "unexpected: 1"


def test_qos_table_shows_knob_owners_and_the_originals_cleanup_restores() -> None:
    """The daemon merged `knob_owners` and `originals` into the qos document; the table dropped both."""
    doc = {**DOC, "knob_owners": {"batchresource": ["a", "b"], "CPUSuppress": ["c"]},
           "originals": {"cgroup": {"cpu:kubepods/besteffort/cpu.cfs_quota_us": "-1"}, "sysctl": {}}}
    text = render_qos(doc, now=1000.0)
    assert "knob owners: CPUSuppress (1), batchresource (2); the knobs: -o json" in text
    assert "originals (what `hookserver cleanup` restores):\n  cgroup cpu:kubepods/besteffort/cpu.cfs_quota_us = -1" in text
    empty = render_qos({**DOC, "originals": {"cgroup": {}, "sysctl": {}}}, now=1000.0)
    assert "originals (what `hookserver cleanup` restores): (none recorded)" in empty


def test_gates_accepted_not_implemented_are_shown_apart_with_value_and_source() -> None:
    gates = [
        {"name": "BEMemoryEvict", "enabled": True, "source": "flag --feature-gates", "default": False,
         "implemented": True},
        {"name": "Accelerators", "enabled": True, "source": "flag --feature-gates", "default": False,
         "implemented": False},
        {"name": "NodeTopologyReport", "enabled": True, "source": "default", "default": True, "implemented": False},
        {"name": "AuditEvents", "enabled": False, "source": "default", "default": False, "implemented": False},
    ]
    text = render_qos({**DOC, "gates": gates}, now=1000.0)
    lines = text.splitlines()
    done = lines.index("feature gates:")
    accepted = lines.index("feature gates accepted, not implemented (koordlet's; hookserver does nothing for them):")
    assert done < accepted
    assert any(line.split() == ["BEMemoryEvict", "true", "flag", "--feature-gates", "false"]
               for line in lines[done:accepted])
    below = lines[accepted:]
    assert any(line.split() == ["Accelerators", "true", "flag", "--feature-gates", "false"] for line in below)
    assert any(line.split() == ["NodeTopologyReport", "true", "default", "true"] for line in below)
    assert "also accepted, not implemented, false by default: AuditEvents" in text


def test_a_missing_be_tier_controller_is_one_line_of_hookctl_qos() -> None:
    problem = "cpuset not enabled on kubepods-besteffort.slice (not in kubepods.slice's subtree_control): " \
              "cpuset knobs unavailable there"
    text = render_qos({**DOC, "be_tier_controllers": problem}, now=1000.0)
    assert [line for line in text.splitlines() if "cpuset" in line] == [f"BE tier: {problem} (a state, not an error)"]
    assert "not enabled" not in render_qos(DOC, now=1000.0)
