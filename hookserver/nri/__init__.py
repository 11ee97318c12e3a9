"""Front door (layer: front doors): hookserver as an NRI plugin of containerd / CRI-O.

ttrpc and the NRI connection multiplexer are implemented here in asyncio (`ttrpc`, `mux`, `conn`);
`handlers` serves the Plugin service by translating NRI messages (`translate`) into the hook
contexts every front door shares and calling `HookDispatcher`; `plugin` owns the connection
lifecycle (dial or inherited socket, register, reconnect with backoff). The event mask is derived
from the hook registry (`events`). Protobuf types do not leave this package.
"""

from hookserver.nri.events import Event, mask_words, subscription_mask, valid_mask_for
from hookserver.nri.plugin import Dial, NriPlugin
from hookserver.nri.status import ConnState

__all__ = [
    "ConnState",
    "Dial",
    "Event",
    "NriPlugin",
    "mask_words",
    "subscription_mask",
    "valid_mask_for",
]
