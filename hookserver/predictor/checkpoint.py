"""Model checkpoints: one JSON file per model, written atomically, restored at start, bad files set aside.

Contents are koordlet's `ModelCheckpoint`: `{"UID", "CPU": {referenceTimestamp, bucketWeights, totalWeight},
"Memory": {...}, "LastUpdated"}` plus our `FirstSample` and `Samples` (model age and sample count for `hookctl
predict`), bucket weights scaled so the largest is 10000. File names are not koordlet's: koordlet names a file
`<uid>`, we name it `<uid>.json`. `read_koordlet_dir` reads koordlet's directory as it is (a swap keeps the
models without a copy): read-only there, for models we have no checkpoint of, and a bad file is reported and
left where it is, since that directory is koordlet's.

A write goes to `<uid>.json.tmp`, is fsynced, then renamed over `<uid>.json`; the directory is fsynced once per
round. A kill -9 at any moment leaves the old file or the new one, plus at worst a `*.tmp` that `restore()`
removes. A file that does not decode (corrupt, truncated, foreign, unreadable) is moved to `rejected/` and
reported, never fatal: the model simply starts fresh.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hookserver.errors import CheckpointCorrupt
from hookserver.predictor.histogram import HistogramCheckpoint, format_go_time, parse_go_time
from hookserver.predictor.models import Model, ModelTable

__all__ = [
    "CheckpointProblem",
    "Checkpointer",
    "RestoreResult",
    "decode_checkpoint",
    "encode_checkpoint",
    "read_koordlet_dir",
]

log = logging.getLogger(__name__)

SUFFIX = ".json"
TMP_SUFFIX = ".tmp"
REJECTED_DIR = "rejected"
MAX_FILE_BYTES = 1 << 20
_UID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,252}")


@dataclass(frozen=True, slots=True)
class CheckpointProblem:
    file: str
    reason: str  # corrupt | foreign | unreadable | io
    detail: str
    set_aside_to: str = ""
    at: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"file": self.file, "reason": self.reason, "detail": self.detail, "set_aside_to": self.set_aside_to,
                "at": self.at}


@dataclass(slots=True)
class RestoreResult:
    models: list[Model] = field(default_factory=list)
    problems: list[CheckpointProblem] = field(default_factory=list)
    tmp_removed: int = 0


def encode_checkpoint(model: Model) -> bytes:
    doc = {
        "UID": model.uid,
        "CPU": model.cpu.save().to_json(),
        "Memory": model.memory.save().to_json(),
        "LastUpdated": format_go_time(model.last_updated),
        "FirstSample": format_go_time(model.first_sample),
        "Samples": model.samples,
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def decode_checkpoint(data: bytes, *, name: str, table: ModelTable, koordlet_name: bool = False) -> Model:
    """A model from a checkpoint file's bytes. CheckpointCorrupt says what is wrong, prefixed by `foreign:`
    when the file is valid JSON of another shape. `koordlet_name`: the file is named `<uid>` as koordlet names
    it (koordlet takes the UID from the name, so the name must be a UID and the document's UID must agree)."""
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CheckpointCorrupt(f"{name}: not JSON ({exc})") from None
    if not isinstance(doc, Mapping) or not {"UID", "CPU", "Memory"} <= doc.keys():
        raise CheckpointCorrupt(f"foreign: {name}: not a model checkpoint (needs UID, CPU and Memory)")
    uid = doc["UID"]
    if not isinstance(uid, str) or not _UID.fullmatch(uid):
        raise CheckpointCorrupt(f"foreign: {name}: UID {str(uid)[:80]!r} is not a model UID")
    expected = uid if koordlet_name else uid + SUFFIX
    if name != expected:
        raise CheckpointCorrupt(f"foreign: {name}: holds UID {uid!r}, expected file {expected}")
    model = table.new_model(uid)
    model.cpu.load(HistogramCheckpoint.from_json(doc["CPU"], where=f"{name}: CPU"), where=f"{name}: CPU")
    model.memory.load(HistogramCheckpoint.from_json(doc["Memory"], where=f"{name}: Memory"), where=f"{name}: Memory")
    model.last_updated = parse_go_time(doc.get("LastUpdated", "0001-01-01T00:00:00Z"), where=f"{name}: LastUpdated")
    first = doc.get("FirstSample")
    model.first_sample = model.last_updated if first is None else parse_go_time(first, where=f"{name}: FirstSample")
    samples = doc.get("Samples", 0)
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 0:
        raise CheckpointCorrupt(f"{name}: Samples must be a non-negative integer, got {samples!r}")
    model.samples = samples
    if not math.isfinite(model.last_updated):
        raise CheckpointCorrupt(f"{name}: LastUpdated is not a finite time")
    return model


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


class Checkpointer:
    """Reads and writes one directory of model checkpoints. Blocking I/O: call from a worker thread."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def path_of(self, uid: str) -> str:
        if not _UID.fullmatch(uid):
            raise CheckpointCorrupt(f"model UID {uid[:80]!r} cannot name a checkpoint file")
        return os.path.join(self.directory, uid + SUFFIX)

    def ensure_dir(self) -> None:
        os.makedirs(self.directory, mode=0o700, exist_ok=True)

    def save(self, uid: str, data: bytes) -> None:
        """Write atomically (tmp, fsync, rename). OSError / CheckpointCorrupt to the caller, who counts it; a
        failed write removes its temporary file (found by `make soak` on a full state dir)."""
        path = self.path_of(uid)
        tmp = path + TMP_SUFFIX
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            try:
                view = memoryview(data)
                while view:
                    written = os.write(fd, view)
                    view = view[written:]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, path)
        except OSError:
            # A half-written file must not hold the space of a full disk (one per model, until a restart).
            _unlink_quietly(tmp)
            raise

    def sync_dir(self) -> None:
        """Make the renames of a round durable."""
        fd = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def remove(self, uid: str) -> bool:
        try:
            os.unlink(self.path_of(uid))
        except FileNotFoundError:
            return False
        return True

    def restore(self, table: ModelTable, *, now: float) -> RestoreResult:
        """Every valid checkpoint as a model; `*.tmp` leftovers removed; bad files set aside and reported."""
        result = RestoreResult()
        try:
            entries = list(os.scandir(self.directory))
        except FileNotFoundError:
            return result
        except OSError as exc:
            result.problems.append(CheckpointProblem(self.directory, "unreadable", str(exc), at=now))
            return result
        for entry in sorted(entries, key=lambda e: e.name):
            try:
                if entry.is_dir(follow_symlinks=False):
                    continue
            except OSError:
                continue
            if entry.name.endswith(TMP_SUFFIX):
                try:
                    os.unlink(entry.path)
                    result.tmp_removed += 1
                except OSError as exc:
                    result.problems.append(CheckpointProblem(entry.name, "io", f"cannot remove: {exc}", at=now))
                continue
            try:
                model = self._load(entry, table)
            except CheckpointCorrupt as exc:
                text = str(exc)
                reason = "foreign" if text.startswith("foreign: ") else "corrupt"
                result.problems.append(self._set_aside(entry.name, reason, text.removeprefix("foreign: "), now))
                continue
            except OSError as exc:
                result.problems.append(self._set_aside(entry.name, "unreadable", str(exc), now))
                continue
            result.models.append(model)
        return result

    def _load(self, entry: os.DirEntry[str], table: ModelTable) -> Model:
        if not entry.name.endswith(SUFFIX):
            raise CheckpointCorrupt(f"foreign: {entry.name}: not a *{SUFFIX} checkpoint file")
        if not entry.is_file(follow_symlinks=False):
            raise CheckpointCorrupt(f"foreign: {entry.name}: not a regular file")
        with open(entry.path, "rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:
            raise CheckpointCorrupt(f"foreign: {entry.name}: larger than {MAX_FILE_BYTES} bytes")
        return decode_checkpoint(data, name=entry.name, table=table)

    def _set_aside(self, name: str, reason: str, detail: str, now: float) -> CheckpointProblem:
        source = os.path.join(self.directory, name)
        target_dir = os.path.join(self.directory, REJECTED_DIR)
        target = os.path.join(target_dir, name)
        try:
            os.makedirs(target_dir, mode=0o700, exist_ok=True)
            os.replace(source, target)
        except OSError as exc:
            log.warning("checkpoint %s (%s): could not set it aside: %s", source, reason, exc)
            target = ""
        log.warning("checkpoint %s is %s and was set aside%s: %s", source, reason,
                    f" to {target}" if target else "", detail)
        return CheckpointProblem(name, reason, detail, target, now)


def read_koordlet_dir(directory: str, table: ModelTable, *, skip: set[str], now: float) -> RestoreResult:
    """Models from koordlet's checkpoint directory (`<uid>` files, koordlet's JSON), except the UIDs in `skip`
    (we have our own, newer by construction: ours are written after the swap). Read only: `*.tmp` files and
    files that do not decode are left in place (that directory is koordlet's, and a rollback to koordlet must
    find it as it was); each bad file is a problem, reported, never fatal. A missing directory is no problem."""
    result = RestoreResult()
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return result
    except OSError as exc:
        result.problems.append(CheckpointProblem(directory, "unreadable", str(exc), at=now))
        return result
    for entry in entries:
        if entry.name.endswith(TMP_SUFFIX) or entry.name in skip:
            continue
        where = os.path.join(directory, entry.name)
        try:
            if not entry.is_file(follow_symlinks=False):
                continue
            with open(entry.path, "rb") as handle:
                data = handle.read(MAX_FILE_BYTES + 1)
            if len(data) > MAX_FILE_BYTES:
                raise CheckpointCorrupt(f"foreign: {entry.name}: larger than {MAX_FILE_BYTES} bytes")
            if not _UID.fullmatch(entry.name):
                raise CheckpointCorrupt(f"foreign: {entry.name}: not a model UID")
            result.models.append(decode_checkpoint(data, name=entry.name, table=table, koordlet_name=True))
        except CheckpointCorrupt as exc:
            text = str(exc)
            reason = "foreign" if text.startswith("foreign: ") else "corrupt"
            log.warning("koordlet checkpoint %s is %s and was skipped (left in place): %s", where, reason,
                        text.removeprefix("foreign: "))
            result.problems.append(CheckpointProblem(where, reason, text.removeprefix("foreign: "), at=now))
        except OSError as exc:
            log.warning("koordlet checkpoint %s is unreadable and was skipped: %s", where, exc)
            result.problems.append(CheckpointProblem(where, "unreadable", str(exc), at=now))
    return result
