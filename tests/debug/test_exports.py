"""The public surface of the debug and observability packages is what __all__ says."""

from __future__ import annotations

import importlib

import pytest


@pytest.mark.parametrize("package", ["hookserver.debug", "hookserver.observability"])
def test_all_lists_exactly_the_public_names(package: str) -> None:
    module = importlib.import_module(package)
    exported = set(module.__all__)
    public = {
        name for name, value in vars(module).items()
        if not name.startswith("_") and not getattr(value, "__name__", "").startswith(package + ".")
        and not isinstance(value, type(module))
    }
    assert exported == public
    assert all(hasattr(module, name) for name in exported)
    assert module.__doc__ and "layer" in module.__doc__
