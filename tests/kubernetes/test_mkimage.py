"""`.ci/kubernetes/mkimage.py`: a directory packed as the one-layer docker-archive the cluster's images are
loaded from (`ctr images import`); runs without a cluster."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

from tests.support.paths import ROOT

MKIMAGE = ROOT / ".ci" / "kubernetes" / "mkimage.py"


def test_a_directory_becomes_an_image_whose_layer_matches_its_config(tmp_path: Path) -> None:
    rootfs = tmp_path / "rootfs"
    (rootfs / "bin").mkdir(parents=True)
    (rootfs / "bin" / "hello").write_text("#!/bin/sh\necho hello\n")
    (rootfs / "bin" / "hello").chmod(0o755)
    out = tmp_path / "image.tar"
    subprocess.run([sys.executable, str(MKIMAGE), str(rootfs), "localhost/x:1", str(out), "/bin/hello"],
                   check=True, capture_output=True, timeout=30)

    with tarfile.open(out) as archive:
        [entry] = json.load(archive.extractfile("manifest.json"))  # type: ignore[arg-type]
        config = json.load(archive.extractfile(entry["Config"]))  # type: ignore[arg-type]
        layer = archive.extractfile(entry["Layers"][0]).read()  # type: ignore[union-attr]
    assert entry["RepoTags"] == ["localhost/x:1"]
    assert config["rootfs"]["diff_ids"] == [f"sha256:{hashlib.sha256(layer).hexdigest()}"]
    assert config["config"]["Cmd"] == ["/bin/hello"]
    with tarfile.open(fileobj=io.BytesIO(layer)) as files:
        hello = files.getmember("bin/hello")
    assert hello.mode == 0o755 and not list(tmp_path.glob(".mkimage-*"))


def test_a_missing_directory_is_one_line_of_error(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(MKIMAGE), str(tmp_path / "nowhere"), "x:1", str(tmp_path / "o.tar")],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [f"mkimage.py: {tmp_path / 'nowhere'} is not a directory"]
