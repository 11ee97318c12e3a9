#!/usr/bin/env bash
# can-run.sh — prints why this machine cannot run the VM tier (`make vm-e2e`), or nothing when it can.
#
# Why: `make e2e` runs the VM tier where it can and says why it skips it elsewhere, instead of failing on a
# laptop without root or on another architecture. What it needs: x86_64 (the guest is amd64 under QEMU's
# emulation, no KVM needed), root (mmdebstrap's root mode, chroot), Debian's apt (packages come only through
# apt: the host's tools and the guest's archive), and a CPython 3.11 (the guest's Python: its wheels must match).
PYTHON=${PYTHON:-python3}
[[ $(uname -m) == x86_64 ]] || { echo "the guest is amd64 and this machine is $(uname -m)"; exit 0; }
[[ $(id -u) == 0 ]] || { echo "building the guest image needs root (mmdebstrap, chroot)"; exit 0; }
command -v apt-get >/dev/null 2>&1 || { echo "no apt-get: the image and its tools come from Debian's archive through apt"; exit 0; }
py=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
[[ $py == 3.11 ]] || { echo "$PYTHON is Python ${py:-missing}; the guest's Debian 12 python3 is 3.11"; exit 0; }
exit 0
