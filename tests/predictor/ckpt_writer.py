"""A subprocess for the kill -9 test: writes checkpoint rounds of 200 models in a loop until killed.

Prints "ready" once the first full round is on disk, so the parent kills it mid-write, not before.
"""

from __future__ import annotations

import sys

from hookserver.predictor.checkpoint import Checkpointer, encode_checkpoint
from hookserver.predictor.models import ModelTable


def main(directory: str) -> None:
    table = ModelTable(cpu_half_life_s=43200.0, memory_half_life_s=86400.0)
    checkpointer = Checkpointer(directory)
    checkpointer.ensure_dir()
    rounds = 0
    ts = 1_800_000_000.0
    while True:
        for i in range(200):
            uid = f"pod-{i:04d}"
            model = table.new_model(uid)
            for k in range(rounds % 50 + 1):
                model.add(0.1 * ((i + k) % 40), float((i + k) % 64) * 2**26, ts + k * 60.0)
            checkpointer.save(uid, encode_checkpoint(model))
        checkpointer.sync_dir()
        rounds += 1
        if rounds == 1:
            print("ready", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
