#!/usr/bin/env bash
# boot.sh IMAGE_DIR RESULTS_DIR — boot the VM tier's guest once and wait for it to power itself off.
#
# Why this shape: KVM is unusable on the machines this runs on, so QEMU emulates (TCG); the guest gets no
# network (-nic none) and sees the project read-only over 9p (tag "project") plus RESULTS_DIR read-write (tag
# "out"), where its driver (tests/vm/guest/run.sh) leaves the pytest report. The image is opened with
# snapshot=on, so a run never changes the cached image and every boot starts from the same disk. The serial
# console goes to RESULTS_DIR/console.log. VM_TIMEOUT_S (default 420) bounds the whole boot: a guest that
# hangs is killed and the host-side test reports what the console shows.
set -euo pipefail
IMAGE=${1:?usage: boot.sh IMAGE_DIR RESULTS_DIR}
RESULTS=${2:?usage: boot.sh IMAGE_DIR RESULTS_DIR}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
mkdir -p "$RESULTS"
for f in rootfs.ext4 vmlinuz initrd.img; do
  [[ -f $IMAGE/$f ]] || { echo "boot.sh: $IMAGE/$f is missing (tests/vm/build-image.sh builds it)" >&2; exit 1; }
done
# The guest imports the project from the share: byte-code compiled here (gitignored __pycache__, the same
# CPython 3.11) saves it compiling every module under TCG at each boot. PYTHON: the host's 3.11 interpreter.
"${PYTHON:-python3}" -m compileall -q -j 0 "$ROOT/hookserver" "$ROOT/qos" "$ROOT/collectors" "$ROOT/tests" >/dev/null || true
# A previous run's results must not pass for this one's.
find "$RESULTS" -mindepth 1 -maxdepth 1 -type f -delete
# The static busybox the guest's containerd tests build their image from (VM_BUSYBOX: the host's, from apt):
# the guest has no apt and no network.
if [[ -n ${VM_BUSYBOX:-} ]]; then cp "$VM_BUSYBOX" "$RESULTS/busybox"; fi
# The CRI messages the guest's containerd tests speak, compiled here (the guest has no grpcio-tools).
(cd "$ROOT" && "${PYTHON:-python3}" -c 'import sys; from pathlib import Path; from tests.containerd.cri import compile_cri_proto; compile_cri_proto(Path(sys.argv[1]))' "$RESULTS") \
  || { echo "boot.sh: compiling tests/containerd/cri_subset.proto failed" >&2; exit 1; }
# VM_GUEST_TESTS: which guest tests to run (pytest node ids, space-separated; default all of tests/vm/guest), for
# working on one of them without a whole run.
if [[ -n ${VM_GUEST_TESTS:-} ]]; then printf '%s\n' "$VM_GUEST_TESTS" >"$RESULTS/select"; fi
# The guest's pytest budget (run.sh reads it here; 300 s by default): a machine busy with other work runs the
# emulated guest several times slower (daemon-reloads of 10-25 s instead of 2-3 s were seen at a load of 7).
echo "${VM_GUEST_TIMEOUT_S:-300}" >"$RESULTS/guest-timeout-s"
# The Python tree the guest runs, as one file (tests/vm/guest/run.sh unpacks it): see run.sh for why.
tar -C "$ROOT" --exclude='*.sqlite' -cf "$RESULTS/project.tar" pyproject.toml hookserver qos collectors tests
# shellcheck disable=SC2086
rc=0
timeout --kill-after=5 "${VM_TIMEOUT_S:-420}" qemu-system-x86_64 \
  -accel tcg,thread=multi -smp "${VM_CPUS:-2}" -m "${VM_MEMORY_MB:-2048}" \
  -nographic -monitor none -serial "file:$RESULTS/console.log" -nic none -no-reboot \
  -kernel "$IMAGE/vmlinuz" -initrd "$IMAGE/initrd.img" \
  -append "root=/dev/vda rw console=ttyS0 quiet panic=-1 systemd.show_status=false ${VM_APPEND:-}" \
  -drive "file=$IMAGE/rootfs.ext4,if=virtio,format=raw,snapshot=on" \
  -virtfs "local,path=$ROOT,mount_tag=project,security_model=none,readonly=on" \
  -virtfs "local,path=$RESULTS,mount_tag=out,security_model=none" || rc=$?
rm -f "$RESULTS/project.tar"
exit "$rc"
