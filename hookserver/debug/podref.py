"""Parse and validate the `NAMESPACE/NAME` a user types for `hookctl explain`.

Both ends use this: hookctl, to fail before dialing with a message that names the argument, and the
debug server, because a client other than hookctl may send anything in the two request fields.
The rules are the Kubernetes ones (a namespace is a DNS label, a pod name a DNS subdomain), so a
typo is told apart from a pod that simply is not there.
"""

from __future__ import annotations

import re

from hookserver.errors import InputError

__all__ = ["parse_pod_key", "validate_pod_ref"]

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_MAX_NAMESPACE = 63
_MAX_NAME = 253


def _shown(value: str) -> str:
    """The value as the message quotes it: repr, cut short so one bad argument keeps one line."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def validate_pod_ref(namespace: str, name: str) -> tuple[str, str]:
    """Return (namespace, name) unchanged, or raise InputError naming the bad field."""
    if not namespace:
        raise InputError("is empty: give the pod as NAMESPACE/NAME", field="namespace")
    if len(namespace) > _MAX_NAMESPACE or not _DNS_LABEL.fullmatch(namespace):
        raise InputError(
            f"{_shown(namespace)} is not a valid namespace (lower-case letters, digits and '-', "
            f"at most {_MAX_NAMESPACE} characters)",
            field="namespace",
        )
    if not name:
        raise InputError("is empty: give the pod as NAMESPACE/NAME", field="name")
    if len(name) > _MAX_NAME or not _DNS_SUBDOMAIN.fullmatch(name):
        raise InputError(
            f"{_shown(name)} is not a valid pod name (lower-case letters, digits, '-' and '.', "
            f"at most {_MAX_NAME} characters)",
            field="name",
        )
    return namespace, name


def parse_pod_key(text: str) -> tuple[str, str]:
    """`"default/web-0"` -> `("default", "web-0")`; anything else raises InputError."""
    if text.count("/") != 1:
        raise InputError(f"{_shown(text)} is not NAMESPACE/NAME (exactly one '/')", field="pod")
    namespace, name = text.split("/")
    return validate_pod_ref(namespace, name)
