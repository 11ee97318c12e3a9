"""Each of the agent's state writers, alone in a child process that writes in a loop until it is killed.

Why apart from the daemon: in the daemon these writes take microseconds a few times a second, so even a
thousand kills of the agent land inside few of them; a writer that does nothing else is killed mid-write on
almost every try, and then the real loader (the one the agent runs at start) must accept what is left.

`python -m tests.soak.writers KIND DIR` writes forever; `load(KIND, DIR)` is what a restarted agent does.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from hookserver.capacity.sinks import write_document
from hookserver.predictor.checkpoint import Checkpointer, encode_checkpoint
from hookserver.predictor.models import ModelTable
from hookserver.predictor.reporter import FileStatusSink
from hookserver.proxy.registration import Registration
from hookserver.store.originals import NodeOriginals

__all__ = ["KINDS", "load"]

KINDS = ("originals", "checkpoint", "nodemetric", "capacity", "registration")


def _table() -> ModelTable:
    return ModelTable(cpu_half_life_s=43200.0, memory_half_life_s=86400.0)


def write_forever(kind: str, directory: str) -> None:
    i = 0
    originals = NodeOriginals(directory) if kind == "originals" else None
    table = _table()
    while True:
        i += 1
        if originals is not None:
            key = f"cpu:soak/pod{i % 50}/cpu.shares"
            if originals.get("cgroup", key) is None:
                originals.record("cgroup", key, str(i))
            else:
                originals.forget("cgroup", key)
        elif kind == "checkpoint":
            model = table.new_model(f"uid-{i % 20}")
            model.cpu.add_sample(0.001 * i, 1.0, time.time())
            Checkpointer(directory).save(model.uid, encode_checkpoint(model))
        elif kind == "nodemetric":
            FileStatusSink(os.path.join(directory, "nodemetric.json"), node_name="soak").deliver({"i": i})
        elif kind == "capacity":
            write_document(os.path.join(directory, "capacity.json"), node_name="soak",
                           values={"kubernetes.io/batch-cpu": str(i)}, report={"i": i})
        elif kind == "registration":
            Registration.build(directory=directory, name="hookserver", remote_endpoint=f"/run/{i}.sock",
                               failure_policy="Ignore", runtime_hooks=["PreRunPodSandbox"]).write()


def load(kind: str, directory: str) -> list[str]:
    """What a restarted agent does with the directory; returns the problems it reported (set aside, corrupt)."""
    if kind == "originals":
        problem = NodeOriginals(directory).problem
        return [problem] if problem else []
    if kind == "checkpoint":
        result = Checkpointer(directory).restore(_table(), now=time.time())
        return [f"{p.file}: {p.reason}: {p.detail}" for p in result.problems]
    name = {"nodemetric": "nodemetric.json", "capacity": "capacity.json", "registration": "hookserver.json"}[kind]
    path = Path(directory) / name
    if not path.exists():
        return []
    try:
        json.loads(path.read_bytes())
    except ValueError as exc:
        return [f"{path}: {exc}"]
    return []


if __name__ == "__main__":
    os.write(1, b"ready\n")
    write_forever(sys.argv[1], sys.argv[2])
