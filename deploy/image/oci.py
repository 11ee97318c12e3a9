"""Write an OCI image from deploy/Containerfile and a rootfs tar, without a container engine.

    python3 deploy/image/oci.py --containerfile deploy/Containerfile --context . \
        --build-arg VERSION=0.1.0 --tag hookserver:0.1.0 --out build/image

Reads the Containerfile subset that a single-layer image from a prepared rootfs needs (FROM scratch, ARG,
ADD <tar> /, ENV, USER, WORKDIR, ENTRYPOINT, CMD, LABEL, EXPOSE); any other instruction is an error that
names the line, so the file can never say more than the image holds. Writes, under --out:

    oci/                         OCI image layout (index.json, oci-layout, blobs/sha256/...)
    <name>-<tag>.oci.tar         the same layout as one tar (oci-archive: `ctr images import`, skopeo)
    <name>-<tag>.docker.tar      docker-archive (`podman load`, `docker load`)
    image.json                   tag, digests, sizes (compressed and uncompressed), build time

Only the standard library: this runs on the build machine before any venv exists.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import re
import shlex
import shutil
import sys
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
_CHUNK = 1 << 20


class ContainerfileError(ValueError):
    pass


@dataclass
class ImageSpec:
    layer_tar: str = ""
    env: dict[str, str] = field(default_factory=dict)
    user: str = ""
    workdir: str = ""
    entrypoint: list[str] = field(default_factory=list)
    cmd: list[str] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    exposed: list[str] = field(default_factory=list)


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Join backslash continuations; drop comments and blank lines. Returns (first line number, text)."""
    out: list[tuple[int, str]] = []
    buf: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if not buf and (not stripped or stripped.startswith("#")):
            continue
        if buf and stripped.startswith("#"):
            continue
        if not buf:
            start = number
        if stripped.endswith("\\"):
            buf.append(stripped[:-1].strip())
            continue
        buf.append(stripped)
        out.append((start, " ".join(part for part in buf if part)))
        buf = []
    if buf:
        out.append((start, " ".join(buf)))
    return out


def _expand(value: str, args: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args.get(m.group(1) or m.group(2), ""), value)


def _pairs(rest: str, args: dict[str, str], where: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for token in shlex.split(rest):
        key, eq, value = token.partition("=")
        if not eq or not key:
            raise ContainerfileError(f"{where}: expected KEY=VALUE, got {token!r}")
        out[key] = _expand(value, args)
    return out


def _exec_form(rest: str, where: str) -> list[str]:
    try:
        value = json.loads(rest)
    except ValueError as exc:
        raise ContainerfileError(f"{where}: use the JSON (exec) form, e.g. [\"/bin/x\", \"arg\"]: {exc}") from exc
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ContainerfileError(f"{where}: expected a JSON list of strings")
    return value


def parse_containerfile(text: str, build_args: dict[str, str], source: str = "Containerfile") -> ImageSpec:
    spec = ImageSpec()
    args: dict[str, str] = {}
    seen_from = False
    for number, line in _logical_lines(text):
        where = f"{source}:{number}"
        instruction, _, rest = line.partition(" ")
        instruction = instruction.upper()
        rest = rest.strip()
        if instruction == "FROM":
            if rest != "scratch":
                raise ContainerfileError(f"{where}: only FROM scratch is supported here (the base is the rootfs tar)")
            seen_from = True
            continue
        if instruction == "ARG":
            name, eq, default = rest.partition("=")
            args[name] = build_args.get(name, default if eq else "")
            continue
        if not seen_from:
            raise ContainerfileError(f"{where}: {instruction} before FROM")
        if instruction == "ADD":
            parts = shlex.split(rest)
            if len(parts) != 2 or parts[1] != "/" or spec.layer_tar:
                raise ContainerfileError(f"{where}: expected exactly one `ADD <rootfs.tar> /`")
            spec.layer_tar = _expand(parts[0], args)
        elif instruction == "ENV":
            spec.env.update(_pairs(rest, args, where))
        elif instruction == "LABEL":
            spec.labels.update(_pairs(rest, args, where))
        elif instruction == "USER":
            spec.user = _expand(rest, args)
        elif instruction == "WORKDIR":
            spec.workdir = _expand(rest, args)
        elif instruction == "ENTRYPOINT":
            spec.entrypoint = _exec_form(rest, where)
        elif instruction == "CMD":
            spec.cmd = _exec_form(rest, where)
        elif instruction == "EXPOSE":
            spec.exposed.extend(p if "/" in p else f"{p}/tcp" for p in rest.split())
        else:
            raise ContainerfileError(f"{where}: {instruction} is not supported by this writer (one rootfs layer)")
    if not seen_from:
        raise ContainerfileError(f"{source}: no FROM line")
    if not spec.layer_tar:
        raise ContainerfileError(f"{source}: no `ADD <rootfs.tar> /`")
    unknown = set(build_args) - set(args)
    if unknown:
        raise ContainerfileError(f"{source}: --build-arg {', '.join(sorted(unknown))} has no ARG line")
    return spec


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


class _Blobs:
    def __init__(self, layout: Path) -> None:
        self.dir = layout / "blobs" / "sha256"
        self.dir.mkdir(parents=True, exist_ok=True)

    def put_bytes(self, data: bytes) -> tuple[str, int]:
        hexdigest = hashlib.sha256(data).hexdigest()
        (self.dir / hexdigest).write_bytes(data)
        return hexdigest, len(data)

    def put_file(self, path: Path) -> tuple[str, int]:
        hexdigest = _sha256_file(path)
        os.replace(path, self.dir / hexdigest)
        return hexdigest, (self.dir / hexdigest).stat().st_size


def _canonical(doc: Any) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def _gzip_layer(src: Path, dst: Path, mtime: int) -> None:
    with src.open("rb") as fin, dst.open("wb") as raw:
        # mtime fixed and no file name in the header: the same tar always gives the same blob.
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=mtime, compresslevel=6) as gz:
            shutil.copyfileobj(fin, gz, _CHUNK)


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes, mtime: int) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), mtime, 0o644
    tar.addfile(info, io.BytesIO(data))


def _add_dir(tar: tarfile.TarFile, root: Path, mtime: int) -> None:
    for path in sorted(root.rglob("*")):
        info = tar.gettarinfo(str(path), arcname=str(path.relative_to(root)))
        info.mtime, info.uid, info.gid, info.uname, info.gname = mtime, 0, 0, "", ""
        if path.is_file():
            with path.open("rb") as fh:
                tar.addfile(info, fh)
        else:
            tar.addfile(info)


def build(
    spec: ImageSpec, *, context: Path, tag: str, out: Path, created_epoch: int
) -> dict[str, Any]:
    name, _, version = tag.rpartition(":")
    if not name or not version or "/" in version:
        raise ContainerfileError(f"--tag must be NAME:TAG, got {tag!r}")
    layer = (context / spec.layer_tar).resolve()
    if not layer.is_file():
        raise ContainerfileError(f"ADD {spec.layer_tar}: {layer} does not exist (run deploy/image/build-rootfs.sh)")
    started = time.monotonic()
    layout = out / "oci"
    shutil.rmtree(layout, ignore_errors=True)
    layout.mkdir(parents=True)
    blobs = _Blobs(layout)

    diff_id = _sha256_file(layer)
    tmp_gz = out / "layer.tar.gz.tmp"
    _gzip_layer(layer, tmp_gz, created_epoch)
    layer_digest, layer_size = blobs.put_file(tmp_gz)

    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(created_epoch))
    runtime: dict[str, Any] = {
        "Env": [f"{k}={v}" for k, v in spec.env.items()],
        "Entrypoint": spec.entrypoint,
        "Cmd": spec.cmd,
        "WorkingDir": spec.workdir or "/",
        "Labels": spec.labels,
    }
    if spec.user:
        runtime["User"] = spec.user
    if spec.exposed:
        runtime["ExposedPorts"] = {port: {} for port in spec.exposed}
    config = {
        "created": created,
        "architecture": "amd64",
        "os": "linux",
        "config": runtime,
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{diff_id}"]},
        "history": [{"created": created, "created_by": f"deploy/image/oci.py: ADD {spec.layer_tar} /"}],
    }
    config_bytes = _canonical(config)
    config_digest, config_size = blobs.put_bytes(config_bytes)
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": f"sha256:{config_digest}", "size": config_size},
        "layers": [{"mediaType": OCI_LAYER_GZIP, "digest": f"sha256:{layer_digest}", "size": layer_size}],
        "annotations": {"org.opencontainers.image.created": created},
    }
    manifest_digest, manifest_size = blobs.put_bytes(_canonical(manifest))
    full_name = name if "/" in name else f"docker.io/library/{name}"
    index = {
        "schemaVersion": 2,
        "mediaType": OCI_INDEX,
        "manifests": [{
            "mediaType": OCI_MANIFEST,
            "digest": f"sha256:{manifest_digest}",
            "size": manifest_size,
            "platform": {"architecture": "amd64", "os": "linux"},
            # ref.name is the OCI layout's tag; containerd's import reads its own annotation for the name.
            "annotations": {
                "org.opencontainers.image.ref.name": version,
                "io.containerd.image.name": f"{full_name}:{version}",
            },
        }],
    }
    (layout / "index.json").write_bytes(_canonical(index))
    (layout / "oci-layout").write_bytes(_canonical({"imageLayoutVersion": "1.0.0"}))

    base = f"{name.rsplit('/', 1)[-1]}-{version}"
    oci_archive = out / f"{base}.oci.tar"
    with tarfile.open(oci_archive, "w", format=tarfile.PAX_FORMAT) as tar:
        _add_dir(tar, layout, created_epoch)

    docker_archive = out / f"{base}.docker.tar"
    with tarfile.open(docker_archive, "w", format=tarfile.PAX_FORMAT) as tar:
        _add_bytes(tar, f"{config_digest}.json", config_bytes, created_epoch)
        info = tar.gettarinfo(str(layer), arcname=f"{diff_id}/layer.tar")
        info.mtime, info.uid, info.gid, info.uname, info.gname = created_epoch, 0, 0, "", ""
        with layer.open("rb") as fh:
            tar.addfile(info, fh)
        docker_manifest = [{"Config": f"{config_digest}.json", "RepoTags": [tag], "Layers": [f"{diff_id}/layer.tar"]}]
        _add_bytes(tar, "manifest.json", json.dumps(docker_manifest).encode(), created_epoch)
        _add_bytes(tar, "repositories", json.dumps({name: {version: diff_id}}).encode(), created_epoch)

    summary = {
        "tag": tag,
        "name": f"{full_name}:{version}",
        "manifest_digest": f"sha256:{manifest_digest}",
        "config_digest": f"sha256:{config_digest}",
        "layer_diff_id": f"sha256:{diff_id}",
        "uncompressed_bytes": layer.stat().st_size,
        "compressed_bytes": layer_size,
        "oci_layout": str(layout),
        "oci_archive": str(oci_archive),
        "docker_archive": str(docker_archive),
        "user": spec.user,
        "entrypoint": spec.entrypoint,
        "write_seconds": round(time.monotonic() - started, 1),
    }
    (out / "image.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--containerfile", required=True)
    parser.add_argument("--context", default=".")
    parser.add_argument("--tag", required=True, help="NAME:TAG, e.g. hookserver:0.1.0")
    parser.add_argument("--out", required=True)
    parser.add_argument("--build-arg", action="append", default=[], metavar="NAME=VALUE")
    ns = parser.parse_args(argv)
    try:
        build_args = dict(a.split("=", 1) for a in ns.build_arg)
    except ValueError:
        print("oci.py: --build-arg must be NAME=VALUE", file=sys.stderr)
        return 2
    try:
        path = Path(ns.containerfile)
        spec = parse_containerfile(path.read_text(), build_args, source=str(path))
        out = Path(ns.out)
        out.mkdir(parents=True, exist_ok=True)
        epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "0") or 0)
        summary = build(spec, context=Path(ns.context), tag=ns.tag, out=out, created_epoch=epoch)
    except (ContainerfileError, OSError) as exc:
        print(f"oci.py: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
