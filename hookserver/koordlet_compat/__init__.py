"""koordlet compatibility: koordlet's vocabulary at its boundary, so hookserver starts where koordlet did.

`gates`: every koordlet feature gate with koordlet's default (which ones hookserver implements is decided by
what its components register, in `hookserver.featuregates`). `flags`: koordlet's command-line flags, read as Go reads them and
mapped onto hookserver's settings or reported as ignored, and the settings a koordlet DaemonSet's mounts expect.

A leaf, like `podclass` or `kubewire`: it imports no area, store or front door (an import-linter contract keeps
it so), so any layer may use it.
"""

from hookserver.koordlet_compat.flags import (
    KOORDLET_DEFAULTS,
    KOORDLET_FLAGS,
    KoordletArgs,
    KoordletFlag,
    UsedFlag,
    split_koordlet_args,
)
from hookserver.koordlet_compat.gates import KOORDLET_GATES, KoordletGate, closest_gate, koordlet_gate

__all__ = [
    "KOORDLET_DEFAULTS",
    "KOORDLET_FLAGS",
    "KOORDLET_GATES",
    "KoordletArgs",
    "KoordletFlag",
    "KoordletGate",
    "UsedFlag",
    "closest_gate",
    "koordlet_gate",
    "split_koordlet_args",
]
