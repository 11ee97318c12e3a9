"""System layer: configurable roots and the only readers of /proc, /sys and cgroup files."""

from hookserver.system.files import exists, is_dir, read_int, read_kv, read_text
from hookserver.system.mounts import CgroupMount, read_cgroup_mounts
from hookserver.system.roots import SystemRoots

__all__ = ["CgroupMount", "SystemRoots", "exists", "is_dir", "read_cgroup_mounts", "read_int", "read_kv", "read_text"]
