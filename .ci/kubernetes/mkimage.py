#!/usr/bin/env python3
"""Pack a root filesystem directory as a one-layer image in the docker-archive format (`docker save`'s), which
`ctr images import` loads: no registry and no image builder needed.

usage: mkimage.py ROOTFS_DIR NAME:TAG OUT.tar [COMMAND ...]

The layer is written to a temporary file beside OUT and hashed from there, so a rootfs of a few hundred megabytes
never sits in memory. Owners, modes and links are kept as they are on disk (run as root for a Debian rootfs).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import sys
import tarfile
import tempfile
from pathlib import Path

SEARCH_PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def write_layer(rootfs: Path, layer: Path) -> str:
    """The rootfs as an uncompressed tar at `layer`; returns its sha256 hex digest (the image's diff id)."""
    with tarfile.open(layer, "w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(os.listdir(rootfs)):
            tar.add(rootfs / name, arcname=name)
    digest = hashlib.sha256()
    with layer.open("rb") as written:
        while chunk := written.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def image_config(diff_id: str, command: list[str]) -> bytes:
    """The image's config: one layer, a search path, and its command when one is given."""
    config = {"architecture": "amd64", "os": "linux",
              "config": {"Cmd": command or None, "Env": [SEARCH_PATH]},
              "rootfs": {"type": "layers", "diff_ids": [f"sha256:{diff_id}"]},
              "history": [{"created_by": "loopwarden .ci/kubernetes/mkimage.py"}]}
    return json.dumps(config).encode()


def add_bytes(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    member = tarfile.TarInfo(name)
    member.size = len(data)
    archive.addfile(member, io.BytesIO(data))


def pack(rootfs: Path, tag: str, out: Path, command: list[str]) -> None:
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=".mkimage-") as scratch:
        layer = Path(scratch) / "layer.tar"
        diff_id = write_layer(rootfs, layer)
        config = image_config(diff_id, command)
        config_name = hashlib.sha256(config).hexdigest() + ".json"
        manifest = [{"Config": config_name, "RepoTags": [tag], "Layers": [f"{diff_id}/layer.tar"]}]
        partial = out.with_name(out.name + ".partial")
        with tarfile.open(partial, "w") as archive:
            add_bytes(archive, config_name, config)
            archive.add(layer, arcname=f"{diff_id}/layer.tar")
            add_bytes(archive, "manifest.json", json.dumps(manifest).encode())
        partial.replace(out)  # a half-written archive never carries the final name
    print(f"{out}: {tag}, layer sha256:{diff_id} ({out.stat().st_size} bytes)")


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print("usage: mkimage.py ROOTFS_DIR NAME:TAG OUT.tar [COMMAND ...]", file=sys.stderr)
        return 2
    rootfs, tag, out = Path(argv[0]), argv[1], Path(argv[2])
    if not rootfs.is_dir():
        print(f"mkimage.py: {rootfs} is not a directory", file=sys.stderr)
        return 2
    pack(rootfs, tag, out.resolve(), argv[3:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
