"""`fast_frozen_init` keeps every behaviour of the dataclass-generated `__init__` it replaces."""

from __future__ import annotations

import dataclasses
import pickle
from dataclasses import dataclass, field

import pytest

from hookserver.dispatch import DispatchResult
from hookserver.fastinit import fast_frozen_init
from hookserver.hooks.context import ContainerRequest, PodRequest
from hookserver.hooks.outcome import HookOutcome, HookResult, StageOutcome
from hookserver.resources import Resources


@dataclass(frozen=True, slots=True)
class Plain:
    a: int
    b: str = "b"
    c: list[int] = field(default_factory=list)
    d: int = field(default=4, init=False)
    e: list[int] = field(default_factory=lambda: [5], init=False)
    f: int = field(default=6, kw_only=True)


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class Fast:
    a: int
    b: str = "b"
    c: list[int] = field(default_factory=list)
    d: int = field(default=4, init=False)
    e: list[int] = field(default_factory=lambda: [5], init=False)
    f: int = field(default=6, kw_only=True)


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [((1,), {}), ((1, "x"), {}), ((1, "x", [2]), {"f": 9}), ((), {"a": 3, "c": [7], "b": "y"})],
)
def test_same_values_as_the_dataclass_init(args: tuple[object, ...], kwargs: dict[str, object]) -> None:
    plain, fast = Plain(*args, **kwargs), Fast(*args, **kwargs)  # type: ignore[arg-type]
    assert dataclasses.astuple(plain) == dataclasses.astuple(fast)
    assert repr(fast) == repr(plain).replace("Plain(", "Fast(")


def test_factories_run_per_instance_and_frozen_still_holds() -> None:
    one, two = Fast(1), Fast(2)
    assert one.c is not two.c and one.e is not two.e and one.e == [5]
    with pytest.raises(dataclasses.FrozenInstanceError):
        one.a = 5  # type: ignore[misc]
    assert Fast(1, "x") == Fast(1, "x") and Fast(1, "x") != Fast(1, "y")

    @fast_frozen_init
    @dataclass(frozen=True, slots=True)
    class Key:
        a: int
        b: str = ""

    assert hash(Key(1, "x")) == hash(Key(1, "x")) and {Key(1): 1}[Key(1)] == 1
    assert pickle.loads(pickle.dumps(Fast(1, "x", f=2))) == Fast(1, "x", f=2)


def test_signature_errors_match() -> None:
    with pytest.raises(TypeError):
        Fast()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Fast(1, "b", [], 9)  # type: ignore[call-arg]  # f is keyword-only
    with pytest.raises(TypeError):
        Fast(1, d=3)  # type: ignore[call-arg]  # init=False


def test_refuses_what_it_cannot_keep() -> None:
    @dataclass(frozen=True)
    class NoSlots:
        a: int

    @dataclass(slots=True)
    class NotFrozen:
        a: int

    @dataclass(frozen=True, slots=True)
    class PostInit:
        a: int

        def __post_init__(self) -> None:
            raise AssertionError

    for cls in (NoSlots, NotFrozen, PostInit):
        with pytest.raises(TypeError):
            fast_frozen_init(cls)


def test_the_hot_path_records_use_it() -> None:
    # Their __init__ is the generated fast one, and replace() (used on requests) still works.
    pod = PodRequest(namespace="ns", name="p", uid="u")
    request = ContainerRequest(pod=pod, name="c")
    assert dataclasses.replace(request, cgroup_parent="/x").cgroup_parent == "/x"
    for cls in (PodRequest, ContainerRequest, HookResult, HookOutcome, StageOutcome, DispatchResult, Resources):
        code = cls.__init__.__code__
        # The dataclass's own stores through `object.__setattr__`; the fast one never looks it up.
        assert code.co_filename == "<string>" and "__setattr__" not in code.co_names, cls


@pytest.mark.parametrize("name", Resources.__slots__)
def test_resources_with_any_one_field_set_is_not_empty(name: str) -> None:
    # `is_empty` names each field (it runs for every decision of a sync): a field added later must be named too.
    value = "0-1" if name.startswith("cpuset") else 0
    assert not Resources(**{name: value}).is_empty()
    assert Resources().is_empty()
    assert Resources(**{name: value}).as_dict() == {name: value}
