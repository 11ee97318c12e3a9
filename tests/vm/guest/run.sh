#!/bin/sh
# run.sh — the VM tier's guest driver, run at boot by the image's vm-driver unit from the read-only project share.
#
# Runs the guest tests (tests/vm/guest) with the guest's python3 and the image's /opt/pydeps, the project from
# the share, and leaves in /mnt/out what the host-side test reads: junit.xml, pytest.log, rc, timings.json
# (written by the tests) and the boot's journal. Nothing is written into the share: no byte-code, no caches.
OUT=/mnt/out
up() { cut -d' ' -f1 /proc/uptime; }
echo "driver_start_uptime_s $(up)" >"$OUT/uptime.txt"
# The project's Python tree, with the host's byte-code, arrives as one tar (boot.sh packs it into the results
# share) and is unpacked on the guest's tmpfs: importing over 9p, or copying file by file, stats every path
# through the emulated virtio ring (a minute and more of each run).
mkdir -p /run/project
tar -C /run/project -xf "$OUT/project.tar" || exit 1
echo "project_copied_uptime_s $(up)" >>"$OUT/uptime.txt"
# Every 15 s the busiest processes, at top priority: a guest that stops making progress still says who spins.
( while sleep 15; do echo "== $(up)"; ps -eo pid,ni,pcpu,etime,args --sort=-pcpu | head -8 | cut -c1-160; done \
  >"$OUT/ps.txt" 2>&1 ) &
renice -n -20 $! >/dev/null 2>&1
export CRI_SUBSET_PB2="$OUT/cri_subset_pb2.py"  # compiled by boot.sh: the guest has no grpcio-tools
export PYTHONPATH=/run/project:/opt/pydeps PYTHONDONTWRITEBYTECODE=1 VM_TIER_OUT="$OUT" HOME=/root
# Only the plugins the guest tests use: no hypothesis plugin to import at start.
export PYTEST_DISABLE_PLUGIN_AUTOLOAD=1
cd /run/project || exit 1
TESTS=tests/vm/guest
[ -f "$OUT/select" ] && TESTS=$(cat "$OUT/select")
limit=$(cat "$OUT/guest-timeout-s" 2>/dev/null || echo 300)
# shellcheck disable=SC2086
timeout "$limit" python3 -m pytest -q -p no:cacheprovider -rs --junitxml="$OUT/junit.xml" $TESTS \
  >"$OUT/pytest.log" 2>&1
rc=$?
echo "$rc" >"$OUT/rc"
echo "driver_end_uptime_s $(up)" >>"$OUT/uptime.txt"
journalctl -b --no-pager -o short-monotonic >"$OUT/journal.txt" 2>&1
systemd-analyze blame --no-pager 2>/dev/null | head -25 >"$OUT/boot-blame.txt"
exit "$rc"
