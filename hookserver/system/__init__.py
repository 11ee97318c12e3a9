"""System layer: configurable roots and the only readers of /proc, /sys and cgroup files."""

from hookserver.system.files import exists, read_int, read_kv, read_text
from hookserver.system.roots import SystemRoots

__all__ = ["SystemRoots", "exists", "read_int", "read_kv", "read_text"]
