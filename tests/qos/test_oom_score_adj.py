"""OOMScoreAdj's planner on scripted snapshots: koordlet's annotation rules (spec map over pod default, range),
the kubelet floor, which pods and processes get a write, the originals' keys, and the undo when disabled."""

from __future__ import annotations

import dataclasses
from types import MappingProxyType

import pytest

from qos.isolation.oom_score_adj import KUBELET_POD_MIN, AnnotationProblem, OOMScoreAdj, target_score
from qos.snapshot.kernel import OOMFacts, ProcessScore
from qos.snapshot.oom_reader import ANNOTATION_OOM_SCORE_ADJ as DEFAULT
from qos.snapshot.oom_reader import ANNOTATION_OOM_SCORE_ADJ_SPEC as SPEC
from tests.qos.helpers import pod, snapshot
from tests.qos.part2_helpers import container, kernel, pod_kernel


@pytest.mark.parametrize(("annotations", "name", "want"), [
    ({}, "c1", None),
    ({DEFAULT: "-500"}, "c1", -500),
    ({DEFAULT: " 300 "}, "c1", 300),
    ({DEFAULT: "-500", SPEC: '{"c1": 200}'}, "c1", 200),
    ({DEFAULT: "-500", SPEC: '{"c1": 200}'}, "c2", -500),
    ({SPEC: '{"c1": 200}'}, "c2", None),
    ({DEFAULT: "", SPEC: ""}, "c1", None),
    ({DEFAULT: "-1000"}, "c1", -1000),
    ({DEFAULT: "1000"}, "c1", 1000),
])
def test_target_score_follows_koordlet_order(annotations: dict[str, str], name: str, want: int | None) -> None:
    assert target_score(annotations, name) == want


@pytest.mark.parametrize(("annotations", "says"), [
    ({DEFAULT: "abc"}, "is not an integer"),
    ({DEFAULT: "1001"}, "outside [-1000, 1000]"),
    ({DEFAULT: "-1001"}, "outside [-1000, 1000]"),
    ({SPEC: "{not json"}, "is not JSON"),
    ({SPEC: "[1, 2]"}, "not a map"),
    ({SPEC: '{"c1": "5"}'}, "is not an integer"),
    ({SPEC: '{"c1": true}'}, "is not an integer"),
    ({SPEC: '{"c1": 2.5}'}, "is not an integer"),
])
def test_bad_annotations_are_a_clear_problem(annotations: dict[str, str], says: str) -> None:
    with pytest.raises(AnnotationProblem, match=says.replace("[", r"\[").replace("]", r"\]")):
        target_score(annotations, "c1")


def _snap(annotations: dict[str, str], procs: tuple[ProcessScore, ...], *, phase: str = "Running",
          originals: dict[str, str] | None = None, read: tuple[str, ...] = ("pods", "oom"), can_lower: bool = True,
          ) -> object:
    p = dataclasses.replace(pod("web", "LS", annotations=annotations), phase=phase)
    c = container("web", "c1")
    facts = OOMFacts(processes=MappingProxyType({c.id: procs}), originals=MappingProxyType(originals or {}),
                     can_lower=can_lower)
    return snapshot(pods=(p,), kernel=kernel(pod_kernel("web", c), read=read, oom=facts))


def test_each_process_not_at_the_value_gets_a_recorded_write() -> None:
    procs = (ProcessScore(pid=41, start_ticks=900, score=0), ProcessScore(pid=42, start_ticks=950, score=-500))
    plan = OOMScoreAdj().plan(_snap({DEFAULT: "-500"}, procs), None)  # type: ignore[arg-type]
    assert [(f.root, f.path, f.value, f.original, f.original_key) for f in plan.files] == [
        ("proc", "41/oom_score_adj", "-500", "record", ("oom_score_adj", "41@900")),
    ]
    assert plan.numbers["at_value"] == 1 and plan.numbers["containers"] == 1


def test_below_the_kubelet_floor_is_raised_and_said() -> None:
    procs = (ProcessScore(pid=41, start_ticks=900, score=0),)
    plan = OOMScoreAdj().plan(_snap({DEFAULT: "-1000"}, procs), None)  # type: ignore[arg-type]
    assert [f.value for f in plan.files] == [str(KUBELET_POD_MIN)]
    assert any("-1000 raised to -997" in n for n in plan.notes)


def test_a_bad_annotation_leaves_the_container_alone_with_a_note() -> None:
    procs = (ProcessScore(pid=41, start_ticks=900, score=0),)
    plan = OOMScoreAdj().plan(_snap({SPEC: "{oops"}, procs), None)  # type: ignore[arg-type]
    assert plan.files == ()
    assert any(n.startswith("default/web/c1: ") and "left alone" in n for n in plan.notes)


@pytest.mark.parametrize("phase", ["Succeeded", "Failed", "Unknown"])
def test_only_running_or_pending_pods(phase: str) -> None:
    procs = (ProcessScore(pid=41, start_ticks=900, score=0),)
    assert OOMScoreAdj().plan(_snap({DEFAULT: "5"}, procs, phase=phase), None).files == ()  # type: ignore[arg-type]
    assert len(OOMScoreAdj().plan(_snap({DEFAULT: "5"}, procs, phase="Pending"), None).files) == 1  # type: ignore[arg-type]


def test_without_the_processes_read_it_plans_nothing() -> None:
    procs = (ProcessScore(pid=41, start_ticks=900, score=0),)
    plan = OOMScoreAdj().plan(_snap({DEFAULT: "5"}, procs, read=("pods",)), None)  # type: ignore[arg-type]
    assert plan.skipped and plan.files == ()


def test_disabled_restores_every_live_original_and_forgets_it() -> None:
    snap = _snap({}, (), originals={"41@900": "0", "7@12": "-100"})
    plan = OOMScoreAdj().plan_disabled(snap, None, "feature gate OOMScoreAdj is off")  # type: ignore[arg-type]
    assert [(f.path, f.value, f.original, f.original_key) for f in plan.files] == [
        ("41/oom_score_adj", "0", "restore", ("oom_score_adj", "41@900")),
        ("7/oom_score_adj", "-100", "restore", ("oom_score_adj", "7@12")),
    ]
    assert OOMScoreAdj().plan_disabled(_snap({}, ()), None, "off").files == ()  # type: ignore[arg-type]


def test_without_cap_sys_resource_only_raising_is_planned() -> None:
    procs = (ProcessScore(pid=41, start_ticks=900, score=300), ProcessScore(pid=42, start_ticks=901, score=-100))
    plan = OOMScoreAdj().plan(_snap({DEFAULT: "100"}, procs, can_lower=False), None)  # type: ignore[arg-type]
    assert [(f.path, f.value) for f in plan.files] == [("42/oom_score_adj", "100")]
    assert plan.numbers["held"] == 1 and "1 held" in plan.summary
    assert plan.notes == ("default/web/c1: cannot lower oom_score_adj to 100 without CAP_SYS_RESOURCE; "
                          "left where the runtime put it",)
