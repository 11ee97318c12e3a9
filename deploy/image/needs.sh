#!/usr/bin/env bash
# needs.sh [TOOL[:PACKAGE]...] — install the host tools a build needs, the way `make test` makes its own venv.
#
# Why: a fresh clone on a fresh Debian/Ubuntu machine must build with one make target alone. `make image` needs
# only mmdebstrap beyond what `make test` needs (the default); `make vm-e2e` also names QEMU and e2fsprogs
# (e.g. `needs.sh mmdebstrap qemu-system-x86_64:qemu-system-x86 mkfs.ext4:e2fsprogs`). Each TOOL missing from
# PATH has its PACKAGE (default: the tool's name) installed when apt-get exists (root: the builds need root
# anyway); without apt-get the message names the packages to install. APT_GET overrides the installer (tests
# point it at a stand-in); NEEDS_FOR names the target in messages.
set -euo pipefail
APT_GET=${APT_GET:-apt-get}
FOR=${NEEDS_FOR:-make image}
[[ $# == 0 ]] && set -- mmdebstrap
tools=() packages=()
for need in "$@"; do
  tool=${need%%:*}
  package=${need#*:}
  command -v "$tool" >/dev/null 2>&1 && continue
  tools+=("$tool")
  [[ " ${packages[*]} " == *" $package "* ]] || packages+=("$package")
done
[[ ${#tools[@]} == 0 ]] && exit 0
if ! command -v "$APT_GET" >/dev/null 2>&1; then
  echo "$FOR: ${tools[*]} missing and no apt-get here: install the package(s) ${packages[*]}" >&2
  exit 1
fi
echo "$FOR: installing ${packages[*]} (apt-get; once per machine)" >&2
export DEBIAN_FRONTEND=noninteractive
"$APT_GET" update -q >/dev/null
"$APT_GET" install -y -q --no-install-recommends "${packages[@]}" >/dev/null
for tool in "${tools[@]}"; do
  command -v "$tool" >/dev/null 2>&1 || { echo "$FOR: $tool still missing after apt-get install" >&2; exit 1; }
done
