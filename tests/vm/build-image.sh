#!/usr/bin/env bash
# build-image.sh OUT_DIR — the VM tier's Debian 12 guest: OUT_DIR/current/{rootfs.ext4,vmlinuz,initrd.img}.
#
# Why cached: the image is built once (minutes) and reused by every run (seconds). Its directory is named by a
# hash of everything that goes into it (this recipe, tests/vm/image/*, the host's apt sources, the containerd
# package, the Python requirements and the host venv's pinned versions), so a change to any input builds a new
# one and nothing else does. The project itself is NOT in the image: the boot script shares the checkout over
# 9p, so a change to the code or the tests needs no rebuild.
#
#   1. packages: mmdebstrap (variant apt) from the host's own archive and keyring (tests/apt_suite.py, no mirror
#      written anywhere): systemd, dbus, the kernel (linux-image-amd64) with a small initrd (only the virtio
#      and 9p modules: a full one takes TCG 10 s more to unpack at every boot), python3 (3.11, as the host's),
#      runc, and Debian 13's containerd 1.7 (NRI; apt-get download through tests/apt_suite.py) installed with
#      dpkg, not started at boot (the tests that need it start it);
#   2. Python dependencies: the project's runtime requirements plus pytest and hypothesis, as binary wheels
#      installed by the host's pip into /opt/pydeps (same CPython 3.11 and glibc on both sides), at the versions
#      the host venv pins, byte-compiled;
#   3. the driver unit (image/vm-driver.service) enabled, noisy timers and gettys masked, containerd's NRI
#      config (image/containerd-nri.toml);
#   4. an ext4 file system made from the tree (mkfs.ext4 -d), the kernel and initrd beside it.
# Needs root (mmdebstrap root mode, chroot) and mmdebstrap + e2fsprogs (tests/vm/needs.sh).
set -euo pipefail
OUT=${1:?usage: build-image.sh OUT_DIR}
PYTHON=${PYTHON:-python3}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
SIZE=${VM_IMAGE_SIZE:-3G}
PACKAGES=systemd,systemd-sysv,dbus,udev,kmod,procps,linux-image-amd64,initramfs-tools,python3,runc

log() { printf '[vm-image %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[[ $(id -u) == 0 ]] || die "needs root (mmdebstrap, chroot)"
host_py=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
[[ $host_py == 3.11 ]] || die "$PYTHON is Python $host_py; the guest's Debian 12 python3 is 3.11 and the binary wheels must match"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

apt_suite() { (cd "$ROOT" && PYTHONPATH=$ROOT "$PYTHON" -m tests.apt_suite "$@"); }
SUITE=$(. /etc/os-release && echo "${VERSION_CODENAME:?no VERSION_CODENAME in /etc/os-release}")
ls "$OUT"/debs/containerd_*.deb >/dev/null 2>&1 || apt_suite --suite trixie --dest "$OUT/debs" containerd >/dev/null
CONTAINERD_DEB=$(ls "$OUT"/debs/containerd_*.deb 2>/dev/null | head -1)
[[ -n $CONTAINERD_DEB ]] || die "no containerd package from Debian trixie"
REQS=$("$PYTHON" -c 'import tomllib,sys; d=tomllib.load(open(sys.argv[1],"rb")); print("\n".join(d["project"]["dependencies"]+["pytest","hypothesis"]))' "$ROOT/pyproject.toml")
PINS=$("$PYTHON" -m pip freeze --exclude-editable 2>/dev/null)
SOURCES=$(apt_suite --suite "$SUITE" --print-sources)

key=$( { cat "$HERE/build-image.sh" "$HERE"/image/*; echo "$PACKAGES"; echo "$SOURCES"; basename "$CONTAINERD_DEB";
         echo "$REQS"; echo "$PINS"; } | sha256sum | cut -c1-16)
DEST=$OUT/image-$key
if [[ -f $DEST/rootfs.ext4 && -f $DEST/vmlinuz && -f $DEST/initrd.img ]]; then
  ln -sfn "image-$key" "$OUT/current"
  log "cached: $DEST"
  exit 0
fi

start=$(date +%s)
WORK=$OUT/work-$key
rm -rf "$WORK"
mkdir -p "$WORK"
trap 'rm -rf "$WORK"' EXIT
TREE=$WORK/tree
printf '%s\n' "$SOURCES" >"$WORK/sources.list"

log "packages: Debian $SUITE from the host's apt sources"
mmdebstrap --quiet --mode=root --variant=apt --include="$PACKAGES" \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
  "$SUITE" "$TREE" "$WORK/sources.list"

log "containerd: $(basename "$CONTAINERD_DEB")"
cp "$CONTAINERD_DEB" "$TREE/tmp/containerd.deb"
chroot "$TREE" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
  dpkg -i /tmp/containerd.deb >/dev/null
rm -f "$TREE/tmp/containerd.deb"
install -D -m 0644 "$HERE/image/containerd-nri.toml" "$TREE/etc/containerd/config.toml"
chroot "$TREE" systemctl disable containerd.service >/dev/null 2>&1
mkdir -p "$TREE/etc/nri/conf.d" "$TREE/opt/nri/plugins"

log "python dependencies into /opt/pydeps"
printf '%s\n' "$PINS" >"$WORK/pins.txt"
mapfile -t reqs <<<"$REQS"
"$PYTHON" -m pip install -q --no-cache-dir --only-binary=:all: --no-compile --target "$TREE/opt/pydeps" \
  -c "$WORK/pins.txt" "${reqs[@]}" 2>&1 | grep -v "^WARNING: Location" >&2 || true
[[ -d $TREE/opt/pydeps/pydantic && -d $TREE/opt/pydeps/_pytest ]] || die "the Python dependencies did not install"
# Byte-code now (same CPython 3.11 as the guest's): compiling the kubernetes client and pydantic at every import
# under TCG costs the guest tens of seconds a boot. unchecked-hash: the image's files keep their mtimes anyway.
"$PYTHON" -m compileall -q -j 0 --invalidation-mode unchecked-hash "$TREE/opt/pydeps" >/dev/null || die "byte-compile failed"

log "driver unit, quiet boot"
install -D -m 0755 "$HERE/image/vm-driver" "$TREE/usr/local/sbin/vm-driver"
install -D -m 0644 "$HERE/image/vm-driver.service" "$TREE/etc/systemd/system/vm-driver.service"
chroot "$TREE" systemctl enable vm-driver.service >/dev/null 2>&1
for unit in apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer dpkg-db-backup.timer \
            systemd-timesyncd.service getty@tty1.service serial-getty@ttyS0.service man-db.timer; do
  ln -sf /dev/null "$TREE/etc/systemd/system/$unit"
done
echo vm >"$TREE/etc/hostname"
echo '/dev/vda / ext4 rw,noatime 0 1' >"$TREE/etc/fstab"
printf '%s\n' virtio_pci virtio_blk virtio_console 9pnet_virtio 9p ext4 >"$TREE/etc/initramfs-tools/modules"
sed -i 's/^MODULES=.*/MODULES=list/' "$TREE/etc/initramfs-tools/initramfs.conf"
chroot "$TREE" update-initramfs -u -k all >/dev/null 2>&1 || die "update-initramfs failed"
cp "$TREE"/boot/vmlinuz-* "$WORK/vmlinuz"
cp "$TREE"/boot/initrd.img-* "$WORK/initrd.img" || die "no initrd was generated"
rm -rf "$TREE"/var/cache/apt/* "$TREE"/var/lib/apt/lists/*

log "ext4 ($SIZE, sparse)"
mkfs.ext4 -q -F -L vmroot -d "$TREE" "$WORK/rootfs.ext4" "$SIZE"
mkdir -p "$DEST.new"
mv "$WORK/rootfs.ext4" "$WORK/vmlinuz" "$WORK/initrd.img" "$DEST.new/"
rm -rf "$DEST"
mv "$DEST.new" "$DEST"
ln -sfn "image-$key" "$OUT/current"
# Older images (other keys) go: one image is what the tier needs.
find "$OUT" -maxdepth 1 -name 'image-*' ! -name "image-$key" -exec rm -rf {} +
log "built $DEST in $(( $(date +%s) - start )) s ($(du -sh "$DEST" | cut -f1) on disk)"
