#!/usr/bin/env bash
# build-rootfs.sh OUT_DIR — the image's root filesystem as OUT_DIR/rootfs.tar (see deploy/Containerfile).
#
#   1. wheels: the project wheel and every dependency as a binary wheel, built/fetched by the host's pip
#      (PyPI or the machine's configured mirrors); the host interpreter must be CPython 3.11 like the
#      image's, so the binary wheels (grpcio, pydantic-core, psutil, PyYAML) match;
#   2. base: mmdebstrap --variant=custom with python3.11, libstdc++ (grpcio's C++ core) and what dpkg
#      needs to configure them; docs (but not the copyright files), man pages and locales are never
#      unpacked;
#   3. install: inside the rootfs (chroot), a venv at /opt/hookserver and `pip install --no-index` from
#      the wheels, pip itself run from its wheel so it does not stay in the image;
#   4. user hookserver (65532:65532), strip (pip/apt/dpkg caches, __pycache__, package test suites,
#      glibc's iconv modules which Python never loads), byte-compile for start-up time;
#   5. a reproducible tar: sorted names, every mtime = SOURCE_DATE_EPOCH, numeric owners.
# Needs root (chroot, files owned by root in the tar) and mmdebstrap (apt-get install mmdebstrap).
set -euo pipefail

OUT=${1:?usage: build-rootfs.sh OUT_DIR}
PYTHON=${PYTHON:-python3}
SUITE=${SUITE:-bookworm}
MIRROR=${MIRROR:-}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
UID_GID=65532

log() { printf '[image %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[[ $(id -u) == 0 ]] || die "needs root (chroot into the rootfs, root-owned files in the layer)"
command -v mmdebstrap >/dev/null || die "mmdebstrap is missing: apt-get install mmdebstrap"
host_py=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
[[ $host_py == 3.11 ]] || die "$PYTHON is Python $host_py; the image's Debian $SUITE python is 3.11 and the binary wheels must match"

VERSION=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$ROOT/hookserver/__init__.py")
[[ -n $VERSION ]] || die "no __version__ in hookserver/__init__.py"
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$ROOT" log -1 --format=%ct 2>/dev/null || echo 0)}

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WHEELS=$OUT/wheels
ROOTFS=$OUT/rootfs
rm -rf "$WHEELS" "$ROOTFS" "$OUT/rootfs.tar"
mkdir -p "$WHEELS"

log "wheels: hookserver $VERSION and its dependencies"
# Built from a copy, so the worktree gets no build/ or egg-info droppings from setuptools.
SRC=$OUT/src
rm -rf "$SRC"
mkdir -p "$SRC"
tar -C "$ROOT" -cf - pyproject.toml hookserver collectors qos | tar -C "$SRC" -xf -
"$PYTHON" -m pip wheel -q --no-cache-dir --only-binary=:all: -w "$WHEELS" "$SRC" 2>&1 \
  | grep -v "^WARNING: Location" >&2 || true
ls "$WHEELS"/hookserver-"$VERSION"-*.whl >/dev/null 2>&1 || die "the hookserver wheel was not built"
"$PYTHON" -m pip download -q --no-cache-dir --no-deps --only-binary=:all: -d "$OUT/pip" pip 2>&1 \
  | grep -v "^WARNING: Location" >&2 || true
PIP_WHEEL=$(ls "$OUT"/pip/pip-*.whl | head -1)
[[ -f $PIP_WHEEL ]] || die "could not fetch pip's wheel"
rm -rf "$SRC"

log "base: Debian $SUITE (mmdebstrap, custom variant)"
mmdebstrap --quiet --variant=custom \
  --include=base-files,base-passwd,dash,coreutils,diffutils,findutils,sed,grep,tar,dpkg,libc-bin,libstdc++6,python3.11-minimal,libpython3.11-stdlib \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-exclude=/usr/share/info/*' --dpkgopt='path-exclude=/usr/share/lintian/*' \
  "$SUITE" "$ROOTFS" ${MIRROR:+"$MIRROR"}

log "install: venv /opt/hookserver from the wheels"
mkdir -p "$ROOTFS/tmp/wheels"
cp "$WHEELS"/*.whl "$PIP_WHEEL" "$ROOTFS/tmp/wheels/"
pip_in=/tmp/wheels/$(basename "$PIP_WHEEL")
chroot "$ROOTFS" /usr/bin/python3.11 -m venv --without-pip /opt/hookserver
chroot "$ROOTFS" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/tmp \
  /opt/hookserver/bin/python "$pip_in/pip" install -q --no-index --no-cache-dir --no-compile \
  --disable-pip-version-check --find-links /tmp/wheels "hookserver==$VERSION"
# kubernetes (>= 35) also ships an asyncio client, kubernetes/aio, with the aiohttp stack under it: about
# 55 MB that hookserver never imports (the informer uses the synchronous ApiClient). `make image-test`
# imports every hookserver module in the image, so a removal that breaks an import fails there.
chroot "$ROOTFS" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/tmp \
  /opt/hookserver/bin/python "$pip_in/pip" uninstall -q -y --disable-pip-version-check \
  aiohttp aiohttp-retry aiosignal aiohappyeyeballs frozenlist multidict yarl propcache
rm -rf "$ROOTFS/opt/hookserver/lib/python3.11/site-packages/kubernetes/aio"
# The venv's own python3 symlink points at /usr/bin/python3.11; keep a plain python3 for operators too.
ln -sf python3.11 "$ROOTFS/usr/bin/python3"

log "user hookserver ($UID_GID:$UID_GID), strip, byte-compile"
grep -q '^hookserver:' "$ROOTFS/etc/passwd" || \
  echo "hookserver:x:$UID_GID:$UID_GID:hookserver:/nonexistent:/usr/sbin/nologin" >>"$ROOTFS/etc/passwd"
grep -q '^hookserver:' "$ROOTFS/etc/group" || echo "hookserver:x:$UID_GID:" >>"$ROOTFS/etc/group"
SITE=$ROOTFS/opt/hookserver/lib/python3.11/site-packages
rm -rf "$ROOTFS/tmp/wheels" "$ROOTFS"/var/cache/* "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/var/log/* \
  "$ROOTFS/usr/lib/x86_64-linux-gnu/gconv" "$ROOTFS/usr/share/info" "$ROOTFS/root/.cache"
# Test suites shipped inside packages (never imported at run time), and the stdlib's own.
find "$SITE" -mindepth 2 -maxdepth 3 -type d \( -name tests -o -name test -o -name e2e_test \) -prune -exec rm -rf {} +
rm -rf "$ROOTFS"/usr/lib/python3.11/{test,unittest/test,idlelib,tkinter,turtledemo,ensurepip,lib2to3/tests}
find "$ROOTFS" -depth -type d -name __pycache__ -exec rm -rf {} +
# Byte-code for start-up time (the kubernetes client is large); unchecked-hash so the fixed mtimes
# of the tar do not make Python recompile (and it could not write as the image's user anyway).
chroot "$ROOTFS" /usr/bin/python3.11 -m compileall -q -j 0 --invalidation-mode unchecked-hash \
  /opt/hookserver/lib/python3.11/site-packages /usr/lib/python3.11 >/dev/null || die "byte-compile failed"
mkdir -p "$ROOTFS/etc/hookserver" "$ROOTFS/var/run/hookserver"
# koordinator's chart runs `command: ["/koordlet"]`: the `koordlet` console script (hookserver serve over
# koordlet's daemonset defaults and flags), so swapping the image in that DaemonSet is enough.
ln -sf /opt/hookserver/bin/koordlet "$ROOTFS/koordlet"
[[ -x $ROOTFS/opt/hookserver/bin/koordlet ]] || die "the koordlet entry point was not installed"
echo "$VERSION" >"$ROOTFS/opt/hookserver/VERSION"

log "tar: $OUT/rootfs.tar"
tar --sort=name --mtime="@$SOURCE_DATE_EPOCH" --clamp-mtime --numeric-owner \
  --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
  -C "$ROOTFS" -cf "$OUT/rootfs.tar" .
log "rootfs $(du -sh "$ROOTFS" | cut -f1), tar $(du -h "$OUT/rootfs.tar" | cut -f1)"
