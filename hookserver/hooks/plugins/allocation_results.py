"""The results both device-injection hooks (GPUEnvInject, RDMADeviceInject) give when koord-scheduler's
`scheduling.koordinator.sh/device-allocated` annotation is absent or cannot be used: one wording, one shape."""

from __future__ import annotations

from types import MappingProxyType

from hookserver.hooks.outcome import HookResult
from hookserver.koord_devices import ANNOTATION_DEVICE_ALLOCATED

__all__ = ["NO_ANNOTATION", "allocation_error"]

NO_ANNOTATION = HookResult.skip(f"no {ANNOTATION_DEVICE_ALLOCATED} annotation")


def allocation_error(message: str, text: str) -> HookResult:
    """Not applied, and said loudly: the reason starts with `error:` (so no failure policy refuses the
    container); nothing is injected and the container is still created."""
    return HookResult(
        applied=False,
        reason=f"error: {message}; nothing injected",
        inputs=MappingProxyType({"error": message, "device-allocated": text}),
    )
