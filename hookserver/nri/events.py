"""NRI events, subscription masks, and the mapping between events and hook stages.

The mask we subscribe to is derived, never configured: the stages the hook registry reports (its
plugins' stage methods, minus disabled stages) map to events, plus the events the store needs for
bookkeeping, intersected with what the runtime accepts. Bit for event e is 1 << (e - 1).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable

from hookserver.hooks.stages import Stage

__all__ = [
    "BOOKKEEPING_EVENTS",
    "EVENT_STAGES",
    "Event",
    "MASK_V010",
    "MASK_V03",
    "NRI_VERSION",
    "STAGE_EVENTS",
    "event_bit",
    "mask_of",
    "mask_words",
    "subscription_mask",
    "valid_mask_for",
]


class Event(enum.IntEnum):
    """Event numbers on the wire (StateChangeEvent.event); names in words as NRI prints them."""

    RUN_POD_SANDBOX = 1
    STOP_POD_SANDBOX = 2
    REMOVE_POD_SANDBOX = 3
    CREATE_CONTAINER = 4
    POST_CREATE_CONTAINER = 5
    START_CONTAINER = 6
    POST_START_CONTAINER = 7
    UPDATE_CONTAINER = 8
    POST_UPDATE_CONTAINER = 9
    STOP_CONTAINER = 10
    REMOVE_CONTAINER = 11
    UPDATE_POD_SANDBOX = 12
    POST_UPDATE_POD_SANDBOX = 13
    VALIDATE_CONTAINER_ADJUSTMENT = 14

    @property
    def bit(self) -> int:
        return event_bit(self)

    @property
    def word(self) -> str:
        """`RunPodSandbox`, `CreateContainer`, ...: the rpc name of the event."""
        return "".join(part.capitalize() for part in self.name.split("_"))


# What RegisterPluginRequest.NRI_version (field 3, a string, nri v0.12) says we speak: the newest nri whose
# plugin-facing api.proto the plugin side was checked against (its dedicated per-event rpcs, Configure's
# NRI_version, the split Synchronize). The runtime logs it ("registered ... with NRI version v0.12.2") and,
# like the Go stub's, the value is the module version with its "v".
NRI_VERSION = "v0.12.2"

# Events 1-11: nri v0.3-v0.9 (containerd 1.7, 2.0, 2.1). Events 1-14: nri v0.10+ (containerd 2.2+).
MASK_V03 = 0x7FF
MASK_V010 = 0x3FFF

# Which event runs which hook stage.
STAGE_EVENTS: dict[Stage, Event] = {
    Stage.PRE_RUN_POD_SANDBOX: Event.RUN_POD_SANDBOX,
    Stage.POST_STOP_POD_SANDBOX: Event.STOP_POD_SANDBOX,
    Stage.PRE_REMOVE_RUN_POD_SANDBOX: Event.REMOVE_POD_SANDBOX,
    Stage.PRE_CREATE_CONTAINER: Event.CREATE_CONTAINER,
    Stage.PRE_START_CONTAINER: Event.START_CONTAINER,
    Stage.POST_START_CONTAINER: Event.POST_START_CONTAINER,
    Stage.PRE_UPDATE_CONTAINER_RESOURCES: Event.UPDATE_CONTAINER,
    Stage.POST_STOP_CONTAINER: Event.STOP_CONTAINER,
}
EVENT_STAGES: dict[Event, Stage] = {event: stage for stage, event in STAGE_EVENTS.items()}

# Always subscribed, whatever the hooks: the store must forget stopped and removed pods/containers.
BOOKKEEPING_EVENTS = frozenset(
    {Event.STOP_POD_SANDBOX, Event.REMOVE_POD_SANDBOX, Event.STOP_CONTAINER, Event.REMOVE_CONTAINER}
)


def event_bit(event: Event | int) -> int:
    return 1 << (int(event) - 1)


def mask_of(events: Iterable[Event]) -> int:
    mask = 0
    for event in events:
        mask |= event_bit(event)
    return mask


def mask_words(mask: int) -> list[str]:
    """The events of a mask in words, lowest bit first; unknown bits as `0x...`."""
    words = [e.word for e in Event if mask & e.bit]
    rest = mask & ~mask_of(Event)
    if rest:
        words.append(f"{rest:#x}")
    return words


def subscription_mask(stages: Iterable[Stage], valid_mask: int) -> int:
    """Events for the registry's stages plus bookkeeping, within what the runtime accepts."""
    wanted = mask_of(STAGE_EVENTS[s] for s in stages if s in STAGE_EVENTS) | mask_of(BOOKKEEPING_EVENTS)
    return wanted & valid_mask


_VERSION = re.compile(r"^v?(\d+)\.(\d+)")


def _version(text: str) -> tuple[int, int] | None:
    match = _VERSION.match(text.strip())
    return (int(match.group(1)), int(match.group(2))) if match else None


def valid_mask_for(runtime_name: str, runtime_version: str, nri_version: str = "") -> int:
    """The events this runtime accepts: 1-14 only for runtimes known to carry nri >= v0.10, else 1-11.

    Only the NRI version (sent from v0.12) or a containerd >= 2.2 version string widens it; an
    unknown runtime gets the conservative set, since one bit too many makes Configure fail.
    """
    nri = _version(nri_version) if nri_version else None
    if nri is not None:
        return MASK_V010 if nri >= (0, 10) else MASK_V03
    version = _version(runtime_version)
    if runtime_name in ("containerd", "v2") and version is not None and version >= (2, 2):
        return MASK_V010
    return MASK_V03
