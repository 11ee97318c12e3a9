"""The one exception tree of hookserver.

Every layer raises its own types from here and translates errors from the layer below once, at its
boundary (`raise ... from exc`), so callers catch a base class rather than a list of leaves:

    HookServerError
    ├── ConfigError                 bad config file, flag or environment value (names file, field, value)
    ├── InputError                  bad input from a caller: names the field
    │   ├── QuantityError           a Kubernetes quantity that does not parse or is out of range
    │   ├── AnnotationError         a malformed extended-resource-spec annotation
    │   └── UnknownQoSClassError    a koordinator.sh/qosClass value we do not know
    ├── HookError                   a hook plugin failed (wraps the cause)
    │   └── HookTimeout             a hook was interrupted: it ran past its call's deadline
    ├── ExecutorError               a cgroup or sysctl write failed (names the file and the value)
    │   ├── PathEscapeError         a cgroup path would leave the cgroup root ('..', symlinks)
    │   ├── CgroupNotFoundError     the cgroup directory does not exist
    │   └── UnsupportedResourceError  the file does not exist on this kernel or cgroup version
    ├── WireError                   malformed gRPC / ttrpc / mux frames, oversized messages
    ├── StoreError                  the state store was used wrongly
    ├── SystemFileError             a /proc, /sys or cgroup file could not be read or did not parse (names the file)
    ├── CheckpointCorrupt           a checkpoint file did not decode (it is set aside, never fatal)
    ├── SystemdError                systemd's D-Bus API could not be used
    │   ├── SystemdUnavailable      no socket, refused, closed, garbage on the wire or no answer in time
    │   └── SystemdCallError        systemd answered with an error (its D-Bus error name and message)
    └── InformerError               the apiserver or kubelet source failed
"""

from __future__ import annotations

__all__ = [
    "AnnotationError",
    "CgroupNotFoundError",
    "CheckpointCorrupt",
    "ConfigError",
    "ExecutorError",
    "HookError",
    "HookTimeout",
    "HookServerError",
    "InformerError",
    "InputError",
    "PathEscapeError",
    "QuantityError",
    "StoreError",
    "SystemFileError",
    "SystemdCallError",
    "SystemdError",
    "SystemdUnavailable",
    "UnknownQoSClassError",
    "UnsupportedResourceError",
    "WireError",
]


class HookServerError(Exception):
    """Base of every error hookserver raises on purpose."""


class ConfigError(HookServerError):
    """A configuration source (file, flag, environment) holds a value we cannot use."""


class InputError(HookServerError):
    """A caller sent input we cannot use. `field` names where it was found."""

    def __init__(self, message: str, *, field: str = "") -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field


class QuantityError(InputError):
    """A Kubernetes quantity string that does not parse, or that is negative where it may not be."""


class AnnotationError(InputError):
    """The extended-resource-spec annotation is not the JSON shape koord-manager writes."""


class UnknownQoSClassError(InputError):
    """A koordinator.sh/qosClass label that names no class we know."""


class HookError(HookServerError):
    """A hook plugin raised while computing its values."""

    def __init__(self, message: str, *, plugin: str = "", field: str = "") -> None:
        super().__init__(message)
        self.plugin = plugin
        self.field = field


class HookTimeout(HookError):
    """Raised inside a hook that ran past its call's deadline (`hookserver.hooks.deadline`)."""


class ExecutorError(HookServerError):
    """A write through the resource executor failed. The message names the file and the value."""

    def __init__(self, message: str, *, path: str = "", value: str = "") -> None:
        super().__init__(message)
        self.path = path
        self.value = value


class PathEscapeError(ExecutorError):
    """A cgroup path that would resolve outside the configured cgroup root."""


class CgroupNotFoundError(ExecutorError):
    """The cgroup directory does not exist (the pod may already be gone)."""


class UnsupportedResourceError(ExecutorError):
    """The cgroup file does not exist for this kernel, controller or cgroup version."""


class WireError(HookServerError):
    """A frame or message on a socket that does not follow the protocol."""


class StoreError(HookServerError):
    """The state store was asked for something it cannot do."""


class SystemFileError(HookServerError):
    """A /proc, /sys or cgroup file that exists but could not be read or parsed. Names the file."""

    def __init__(self, message: str, *, path: str = "") -> None:
        super().__init__(message)
        self.path = path


class CheckpointCorrupt(HookServerError):
    """A checkpoint file did not decode. The caller sets it aside and carries on."""

    def __init__(self, message: str, *, path: str = "") -> None:
        super().__init__(message)
        self.path = path


class RecorderUnavailable(HookServerError):
    """The flight recorder's file could not be opened or set up (a full disk, a read-only state dir, a file that
    is not SQLite). The agent runs without the recorder and says why; it never stops for it."""

    def __init__(self, message: str, *, path: str = "") -> None:
        super().__init__(message)
        self.path = path


class SystemdError(HookServerError):
    """systemd's D-Bus API (hookserver.systemd) could not be used for a call."""


class SystemdUnavailable(SystemdError):
    """No systemd to talk to: the socket is missing or refuses, closed mid-call, spoke garbage or did not answer
    within the call's timeout. A state of the node, reported once, not an error per write."""


class SystemdCallError(SystemdError):
    """systemd answered a call with a D-Bus error. `name` is the error name
    (`org.freedesktop.systemd1.NoSuchUnit`, `org.freedesktop.DBus.Error.InvalidArgs`, ...)."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"{name}: {message}" if message else name)
        self.name = name
        self.detail = message


class InformerError(HookServerError):
    """The apiserver or kubelet source failed in a way the informer reports.

    `status` is the HTTP status (or the watch ERROR event's Status code), 0 for transport failures;
    the informer relists on 410 and treats 404 on a custom resource as "CRD not installed".
    `retry_after_s` is the server's Retry-After (429 while it is overloaded or loading its caches), 0 if none.
    """

    def __init__(self, message: str, *, status: int = 0, reason: str = "", retry_after_s: float = 0.0) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.retry_after_s = retry_after_s
