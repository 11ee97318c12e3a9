"""systemd's D-Bus API, the part the agent needs: keep what it writes to systemd-owned cgroups (the kubelet's
slices, the runtime's scopes) in the units' own properties, so systemd re-applies the agent's values.

Layer: the node (beside `hookserver.system`); imports nothing of the agent but `hookserver.errors`. `wire` is the
D-Bus message format, `client` the blocking Manager client, `properties` the file -> unit property map, `keeper`
the executor's mirror and `hookserver cleanup`'s restore.
"""

from hookserver.systemd.client import PRIVATE_SOCKET, SYSTEM_BUS_SOCKET, SystemdClient
from hookserver.systemd.keeper import ORIGINALS_SECTION, OriginalsBook, UnitPropertyKeeper, restore_units
from hookserver.systemd.properties import UnitProperty, properties_for, systemd_quota_us, unit_of

__all__ = [
    "ORIGINALS_SECTION",
    "PRIVATE_SOCKET",
    "SYSTEM_BUS_SOCKET",
    "OriginalsBook",
    "SystemdClient",
    "UnitProperty",
    "UnitPropertyKeeper",
    "properties_for",
    "restore_units",
    "systemd_quota_us",
    "unit_of",
]
