"""TCNetworkQoS on the real kernel: a veth pair between two network namespaces this test creates (and always
deletes), the whole runner round with `tc -n <ns>`, the tree read back with `tc -j`, a shaping check (a TCP
loop across the veth for 2 s lands within 20 % of the class's ceiling; unshaped it runs at Gbit/s), the undo
when NodeSLO drops the bandwidth, and `hookserver cleanup` run inside the namespace.

Skips with the reason where `ip netns`, `tc` or the htb qdisc are missing. This host's kernel has no `cgroup`
classifier (cls_cgroup) and no net_cls hierarchy: the filter commands fail there once, are reported, and are
not retried every round (unclassified traffic is the system class's, which is what the shaping check measures).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from hookserver.executor.netcmd import TcExecutor
from hookserver.system.tc import parse_classes, parse_root_qdisc
from qos.isolation import TCNetworkQoS
from qos.snapshot.tc_reader import TcReader
from tests.qos.part2_stack import Stack, build_stack

pytestmark = pytest.mark.cgroup

REPO = Path(__file__).resolve().parents[2]
LOOP = """
import socket, sys, time
role, host, secs = sys.argv[1], sys.argv[2], float(sys.argv[3])
if role == "recv":
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((host, 5201)); s.listen(1)
    print("ready", flush=True)
    c, _ = s.accept(); n = 0; t0 = None
    while True:
        b = c.recv(1 << 16)
        if not b: break
        if t0 is None: t0 = time.monotonic()
        n += len(b)
    print(n * 8 / (time.monotonic() - t0), flush=True)
else:
    c = socket.create_connection((host, 5201)); buf = b"x" * (1 << 16); end = time.monotonic() + secs
    while time.monotonic() < end: c.sendall(buf)
    c.close()
"""


def _sh(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=30, check=False)


class Pair:
    def __init__(self) -> None:
        tag = uuid.uuid4().hex[:6]
        self.a, self.b = f"hsqa{tag}", f"hsqb{tag}"
        self.dev = "hsva"

    def make(self) -> str:
        steps = [("ip", "netns", "add", self.a), ("ip", "netns", "add", self.b),
                 ("ip", "link", "add", self.dev, "netns", self.a, "type", "veth", "peer", "name", "hsvb", "netns", self.b),
                 ("ip", "-n", self.a, "addr", "add", "10.239.0.1/24", "dev", self.dev),
                 ("ip", "-n", self.b, "addr", "add", "10.239.0.2/24", "dev", "hsvb"),
                 ("ip", "-n", self.a, "link", "set", self.dev, "up"), ("ip", "-n", self.b, "link", "set", "hsvb", "up")]
        for step in steps:
            done = _sh(*step)
            if done.returncode != 0:
                return f"{' '.join(step)}: {done.stderr.strip()}"
        probe = _sh("tc", "-n", self.a, "qdisc", "add", "dev", self.dev, "root", "handle", "9:", "htb")
        if probe.returncode != 0:
            return f"no htb qdisc in this kernel: {probe.stderr.strip()}"
        _sh("tc", "-n", self.a, "qdisc", "del", "dev", self.dev, "root")
        return ""

    def remove(self) -> None:
        for ns in (self.a, self.b):
            _sh("ip", "netns", "del", ns)

    def tc_json(self, *args: str) -> str:
        return _sh("tc", "-n", self.a, "-j", *args, "dev", self.dev).stdout

    def throughput_bps(self, seconds: float = 2.0) -> float:
        recv = subprocess.Popen(["ip", "netns", "exec", self.b, sys.executable, "-c", LOOP, "recv", "10.239.0.2", "0"],
                                stdout=subprocess.PIPE, text=True)
        try:
            assert recv.stdout is not None and recv.stdout.readline().strip() == "ready"
            send = _sh("ip", "netns", "exec", self.a, sys.executable, "-c", LOOP, "send", "10.239.0.2", str(seconds))
            assert send.returncode == 0, send.stderr
            out, _ = recv.communicate(timeout=30)
        finally:
            recv.kill()
        return float(out.strip().splitlines()[-1])


@pytest.fixture
def pair() -> Iterator[Pair]:
    if os.geteuid() != 0:
        pytest.skip("needs root for network namespaces")
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (iproute2)")
    p = Pair()
    try:
        why = p.make()
        if why:
            pytest.skip(why)
        yield p
    finally:
        p.remove()


SLO = {"systemStrategy": {"totalNetworkBandwidth": "40M"},
       "resourceQOSStrategy": {"lsClass": {"networkQOS": {"enable": True, "egressRequest": 25, "egressLimit": "30M"}},
                               "beClass": {"networkQOS": {"enable": True, "egressRequest": "5M", "egressLimit": 50}}}}


def _stack(tmp_path: Path, p: Pair) -> Stack:
    cg = tmp_path / "cg"
    (cg / "cpu").mkdir(parents=True, exist_ok=True)
    stack = build_stack(str(cg), TCNetworkQoS(), gates={"TCNetworkQoS": True}, state_dir=str(tmp_path / "state"), spec=SLO)
    reader = TcReader(interface=p.dev, netns=p.a, max_age_s=60.0)  # re-read only after its own changes
    stack.reader.tc = reader
    stack.runner.net_commands = TcExecutor(store=stack.store, originals=stack.originals, netns=p.a,
                                           on_change=reader.invalidate)
    return stack


def test_the_tree_is_built_read_back_shapes_and_is_removed(pair: Pair, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    unshaped = pair.throughput_bps(1.0)
    stack = _stack(tmp_path, pair)
    stack.tick(5)
    assert parse_root_qdisc(pair.tc_json("qdisc", "show")) == ("htb", "1:")
    qdisc = json.loads(pair.tc_json("qdisc", "show"))[0]
    assert qdisc["options"]["default"] == "0x2"
    classes = parse_classes(pair.tc_json("class", "show"))
    got = {cid: (c.parent, c.rate_bps, c.ceil_bps, c.prio) for cid, c in classes.items()}
    assert got == {"1:1": ("root", 40_000_000, 40_000_000, 0), "1:2": ("1:1", 25_000_000, 40_000_000, 1),
                   "1:3": ("1:1", 10_000_000, 30_000_000, 2), "1:4": ("1:1", 5_000_000, 20_000_000, 3)}
    assert stack.originals.section("tc") == {pair.dev: "noqueue"}
    filters = _sh("tc", "-n", pair.a, "-j", "filter", "show", "dev", pair.dev, "parent", "1:").stdout
    writes = [w for w in stack.store.audit.writes() if w.path.startswith("tc filter")]
    if writes and not writes[0].ok:  # this kernel has no cgroup classifier: reported once, then held
        assert "classifier not found" in writes[0].error
        stack.tick(5)
        again = [w for w in stack.store.audit.writes() if w.path.startswith("tc filter")][len(writes):]
        assert again and all(w.skipped and "unsupported here" in w.error for w in again)
    else:
        assert {e["pref"] for e in json.loads(filters) if e.get("kind") == "cgroup"} == {1, 2, 3}

    # Unclassified traffic is the system class's: at most its ceiling, 40 Mbit/s (within 20 %).
    shaped = pair.throughput_bps(2.0)
    assert 0.8 * 40e6 <= shaped <= 1.2 * 40e6, (shaped, unshaped)
    assert unshaped > 2 * 40e6  # the veth alone is much faster: the limit is the htb's

    stack.tick(5)  # nothing changed: no tc command but the filters this kernel cannot take (if so)
    planned = [c["command"] for c in stack.runner.status_of["TCNetworkQoS"].last_plan.get("commands", [])]
    assert all(c.startswith(f"tc filter add dev {pair.dev}") and c.endswith("cgroup") for c in planned), planned

    stack.set_slo({})  # no totalNetworkBandwidth: disabled, the htb goes
    stack.tick(5)
    assert parse_root_qdisc(pair.tc_json("qdisc", "show"))[0] == "noqueue"
    assert stack.originals.section("tc") == {}

    # On again, then `hookserver cleanup` (run in the namespace, as on a node) removes it.
    stack.set_slo(SLO)
    stack.tick(5)
    assert parse_root_qdisc(pair.tc_json("qdisc", "show"))[0] == "htb"
    code = ("import sys; from hookserver.cli.serve import main; sys.exit(main(sys.argv[1:]))")
    done = _sh("ip", "netns", "exec", pair.a, "env", f"PYTHONPATH={REPO}", sys.executable, "-c", code, "cleanup",
               "--state-dir", str(tmp_path / "state"), "--sys-root", str(tmp_path / "sys"), "--cgroup-root",
               str(tmp_path / "cg"), "--cgroup-driver", "cgroupfs", "--hook-socket", str(tmp_path / "h.sock"),
               "--debug-socket", str(tmp_path / "d.sock"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"restored  tc root qdisc of {pair.dev} (the htb removed; was noqueue)" in done.stdout
    assert parse_root_qdisc(pair.tc_json("qdisc", "show"))[0] == "noqueue"
