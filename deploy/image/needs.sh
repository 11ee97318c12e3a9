#!/usr/bin/env bash
# needs.sh — install what `make image` needs on this machine, the way `make test` makes its own venv.
#
# Why: a fresh clone on a fresh Debian/Ubuntu machine must build the image with `make image` alone; the only
# host tool the build needs that such a machine lacks is mmdebstrap (the rest: bash, tar, chroot, python3.11,
# pip, are what `make test` already needs). When a tool is missing and apt-get exists it is installed
# (root: build-rootfs.sh needs root anyway); without apt-get the message names the package to install.
# APT_GET overrides the installer (tests point it at a stand-in).
set -euo pipefail
APT_GET=${APT_GET:-apt-get}
missing=()
command -v mmdebstrap >/dev/null 2>&1 || missing+=(mmdebstrap)
[[ ${#missing[@]} == 0 ]] && exit 0
if ! command -v "$APT_GET" >/dev/null 2>&1; then
  echo "make image: ${missing[*]} missing and no apt-get here: install the package(s) ${missing[*]}" >&2
  exit 1
fi
echo "make image: installing ${missing[*]} (apt-get; once per machine)" >&2
export DEBIAN_FRONTEND=noninteractive
"$APT_GET" update -q >/dev/null
"$APT_GET" install -y -q --no-install-recommends "${missing[@]}" >/dev/null
for tool in "${missing[@]}"; do
  command -v "$tool" >/dev/null 2>&1 || { echo "make image: $tool still missing after apt-get install" >&2; exit 1; }
done
