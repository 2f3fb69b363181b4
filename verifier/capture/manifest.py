"""Hash a model directory or file into a manifest; follow Hugging Face snapshot links safely."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verifier.capture.process import sha256_file
from verifier.errors import CaptureError
from verifier.schemas import SCHEMA_VERSION

_HF_REPO_DIR = re.compile(r"^models--(.+)$")
WEIGHT_SUFFIXES = (".safetensors", ".gguf", ".bin", ".npz", ".pt", ".pth")
CONFIG_NAMES = ("config.json", "params.json")


@dataclass(frozen=True)
class ManifestFile:
    path: str
    size: int
    sha256: str


@dataclass(frozen=True)
class HfSnapshot:
    repo_id: str
    revision: str
    repo_dir: Path  # .../models--ORG--NAME: links may point anywhere inside it, nowhere else


@dataclass(frozen=True)
class ModelManifest:
    root: Path
    repo_id: str | None
    revision: str | None
    files: tuple[ManifestFile, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "kind": "evidence.raw-model-manifest",
            "root": str(self.root),
            "repo_id": self.repo_id,
            "revision": self.revision,
            "files": [{"path": f.path, "size": f.size, "sha256": f.sha256} for f in self.files],
        }

    @property
    def model_file(self) -> str | None:
        """The main weights file: `model.safetensors`-like, else the largest weights file."""
        weights = [f for f in self.files if f.path.endswith(WEIGHT_SUFFIXES)]
        named = [f for f in weights if Path(f.path).stem == "model"]
        pool = named or weights
        return max(pool, key=lambda f: f.size).path if pool else None

    @property
    def config_file(self) -> str | None:
        names = {f.path for f in self.files}
        return next((n for n in CONFIG_NAMES if n in names), None)


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
    if not path.is_symlink():
        return path
    target = path.resolve()
    if snapshot is not None and target.is_relative_to(snapshot.repo_dir.resolve()):
        return target
    raise CaptureError(
        f"{path} is a link to {target}, outside the model's own Hugging Face cache folder; "
        "give --model a directory of regular files"
    )


def _entry(path: Path, name: str, snapshot: HfSnapshot | None) -> ManifestFile:
    real = _resolve(path, snapshot)
    if not real.is_file():
        raise CaptureError(f"{path} is not a regular file")
    return ManifestFile(name, real.stat().st_size, sha256_file(real))


def hash_model(
    path: Path, repo_id: str | None = None, revision: str | None = None
) -> ModelManifest:
    """Hash every file of the model (hidden folders skipped); never downloads anything."""
    snapshot = detect_hf_snapshot(path)
    if path.is_dir():
        files = []
        for dirpath, dirnames, filenames in os.walk(path):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for d in dirnames:
                if (Path(dirpath) / d).is_symlink():
                    raise CaptureError(
                        f"{Path(dirpath) / d} is a linked folder; refusing to follow"
                    )
            for name in sorted(filenames):
                full = Path(dirpath) / name
                files.append(_entry(full, full.relative_to(path).as_posix(), snapshot))
    elif path.exists():
        files = [_entry(path, path.name, snapshot)]
    else:
        raise CaptureError(f"the model {path} does not exist")
    if not files:
        raise CaptureError(f"the model directory {path} holds no files")
    files.sort(key=lambda f: f.path)
    return ModelManifest(
        path,
        repo_id or (snapshot.repo_id if snapshot else None),
        revision or (snapshot.revision if snapshot else None),
        tuple(files),
    )
