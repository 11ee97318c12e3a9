"""A faster `__init__` for the frozen slots dataclasses built on every hook call.

A frozen dataclass's generated `__init__` stores each field with `object.__setattr__(self, "name", value)`:
a Python-level call plus an attribute lookup by name, per field, because the class's own `__setattr__`
refuses assignment. The hot path builds several such records per call (the request, each hook's outcome,
the stage outcome, the dispatch result), and those stores were about a sixth of the whole hook path
(measured in-process: 0.97 us for a 7-field frozen record against 0.36 us this way).

`fast_frozen_init` replaces that `__init__` with one that stores through each slot's member descriptor
(`Cls.__dict__[name].__set__`, a C call that skips the name lookup and the frozen check). Everything else
stays the dataclass's own: the fields, defaults and default factories, keyword-only fields, `__eq__`,
`__hash__`, `__repr__`, pickling, and assignment after construction still raising `FrozenInstanceError`.
Only classes where that is all there is qualify: frozen, slotted, no `__post_init__`, no `InitVar`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

__all__ = ["fast_frozen_init"]

_C = TypeVar("_C", bound=type)


class _Factory:
    """The default of a parameter whose field has a default factory (the factory runs per call)."""

    __slots__ = ("factory",)

    def __init__(self, factory: Any) -> None:
        self.factory = factory

    def __repr__(self) -> str:
        return "<factory>"


def fast_frozen_init(cls: _C) -> _C:
    """Class decorator, applied above `@dataclass(frozen=True, slots=True)`."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen:
        raise TypeError(f"{cls.__name__}: fast_frozen_init is for frozen dataclasses")
    if "__slots__" not in cls.__dict__:
        raise TypeError(f"{cls.__name__}: fast_frozen_init needs slots=True (it stores through slot descriptors)")
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__}: fast_frozen_init does not run __post_init__")
    all_fields = getattr(cls, dataclasses._FIELDS)  # type: ignore[attr-defined]
    if any(f._field_type is dataclasses._FIELD_INITVAR for f in all_fields.values()):  # type: ignore[attr-defined]
        raise TypeError(f"{cls.__name__}: fast_frozen_init does not take InitVar fields")
    fields = dataclasses.fields(cls)
    scope: dict[str, Any] = {"_new_factory": _Factory}
    positional: list[str] = []
    keyword: list[str] = []
    body: list[str] = []
    for f in fields:
        setter = f"_set_{f.name}"
        scope[setter] = cls.__dict__[f.name].__set__
        if f.default is not dataclasses.MISSING:
            scope[f"_dflt_{f.name}"] = f.default
            default = f"=_dflt_{f.name}"
        elif f.default_factory is not dataclasses.MISSING:
            scope[f"_dflt_{f.name}"] = _Factory(f.default_factory)
            default = f"=_dflt_{f.name}"
        else:
            default = ""
        if not f.init:
            if f.default is not dataclasses.MISSING:
                body.append(f"    {setter}(self, _dflt_{f.name})")
            elif f.default_factory is not dataclasses.MISSING:
                body.append(f"    {setter}(self, _dflt_{f.name}.factory())")
            continue
        (keyword if f.kw_only else positional).append(f"{f.name}{default}")
        if f.default_factory is not dataclasses.MISSING:
            body.append(f"    {setter}(self, {f.name}.factory() if {f.name} is _dflt_{f.name} else {f.name})")
        else:
            body.append(f"    {setter}(self, {f.name})")
    signature = ", ".join(["self", *positional, *(["*", *keyword] if keyword else [])])
    source = f"def __init__({signature}) -> None:\n" + ("\n".join(body) or "    pass") + "\n"
    exec(source, scope)  # noqa: S102 - generated from the class's own field names, as dataclasses does
    init = scope["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    setattr(cls, "__init__", init)  # noqa: B010 - replacing the method is the point
    return cls
