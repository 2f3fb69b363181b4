"""A model's files on disk (a folder, one file, or a Hugging Face snapshot) and their digests.

Shared by capture (which writes the manifest) and verify (which rehashes against it).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from verifier.errors import EvidenceError

_HF_REPO_DIR = re.compile(r"^models--(.+)$")
CHUNK = 1 << 20


class ModelFilesError(EvidenceError):
    """The model's files cannot be listed safely."""


@dataclass(frozen=True)
class HfSnapshot:
    repo_id: str
    revision: str
    repo_dir: Path  # .../models--ORG--NAME: links may point anywhere inside it, nowhere else


def detect_hf_snapshot(path: Path) -> HfSnapshot | None:
    """`.../models--ORG--NAME/snapshots/REV[/...]` gives repo ORG/NAME at revision REV."""
    parts = path.absolute().parts
    for i in range(len(parts) - 2):
        match = _HF_REPO_DIR.match(parts[i])
        if match and parts[i + 1] == "snapshots":
            repo_id = match.group(1).replace("--", "/", 1)
            return HfSnapshot(repo_id, parts[i + 2], Path(*parts[: i + 1]))
    return None


def _resolve(path: Path, snapshot: HfSnapshot | None) -> Path:
    """A regular file as is; a link only when it stays inside the snapshot's own repo dir."""
    if path.is_symlink():
        target = path.resolve()
        if snapshot is None or not target.is_relative_to(snapshot.repo_dir.resolve()):
            raise ModelFilesError(
                f"{path} is a link to {target}, outside the model's own Hugging Face cache "
                "folder; give a directory of regular files"
            )
        path = target
    if not path.is_file():
        raise ModelFilesError(f"{path} is not a regular file")
    return path


def model_files(path: Path) -> dict[str, Path]:
    """Every file of the model by its relative name (hidden folders skipped), links resolved."""
    snapshot = detect_hf_snapshot(path)
    if not path.exists():
        raise ModelFilesError(f"the model {path} does not exist")
    if not path.is_dir():
        return {path.name: _resolve(path, snapshot)}
    found: dict[str, Path] = {}
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in dirnames:
            if (Path(dirpath) / name).is_symlink():
                raise ModelFilesError(f"{Path(dirpath) / name} is a linked folder; refusing it")
        for name in sorted(filenames):
            full = Path(dirpath) / name
            found[full.relative_to(path).as_posix()] = _resolve(full, snapshot)
    return dict(sorted(found.items()))


def sha256_file(path: Path, on_bytes: Callable[[int], None] | None = None) -> str:
    """Lowercase hex SHA-256 of a file, read in 1 MiB chunks; `on_bytes` hears of each."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
            if on_bytes is not None:
                on_bytes(len(chunk))
    return digest.hexdigest()
