"""Hook plugins. Each defines only the stage methods it handles (see hookserver.hooks.registry)."""

from hookserver.hooks.plugins.batchresource import BatchResourcePlugin

__all__ = ["BatchResourcePlugin", "default_plugins"]


def default_plugins() -> list[object]:
    """The plugins the daemon registers by default (koordlet's default gates that apply here)."""
    return [BatchResourcePlugin()]
