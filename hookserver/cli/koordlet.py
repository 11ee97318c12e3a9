"""`koordlet`: hookserver answering to koordlet's entry point, for a koordinator DaemonSet whose image was swapped.

The chart runs `command: ["/koordlet"]` with koordlet's flags only (no subcommand). This is `hookserver serve`
with those flags, over koordlet's daemonset defaults (`hookserver.koordlet_compat.flags.KOORDLET_DEFAULTS`:
the socket, registration directory, cgroup, /sys and NRI paths that DaemonSet mounts), so what koordlet found
without a flag, hookserver finds too. The image links `/koordlet` to this console script.
"""

from __future__ import annotations

import sys

from hookserver.cli import serve

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    return serve.main(["serve", *args], koordlet_defaults=True)


if __name__ == "__main__":
    sys.exit(main())
