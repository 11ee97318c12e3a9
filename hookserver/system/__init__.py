"""System layer: configurable roots and the only readers of /proc, /sys and cgroup files."""

from hookserver.system.roots import SystemRoots

__all__ = ["SystemRoots"]
