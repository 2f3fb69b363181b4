"""Hash a model directory or file into a manifest; follow Hugging Face snapshot links safely."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verifier.errors import CaptureError
from verifier.modelfiles import ModelFilesError, detect_hf_snapshot, model_files, sha256_file
from verifier.schemas import SCHEMA_VERSION

WEIGHT_SUFFIXES = (".safetensors", ".gguf", ".bin", ".npz", ".pt", ".pth")
CONFIG_NAMES = ("config.json", "params.json")


@dataclass(frozen=True)
class ManifestFile:
    path: str
    size: int
    sha256: str


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


def hash_model(
    path: Path, repo_id: str | None = None, revision: str | None = None
) -> ModelManifest:
    """Hash every file of the model (hidden folders skipped); never downloads anything."""
    snapshot = detect_hf_snapshot(path)
    try:
        found = model_files(path)
    except ModelFilesError as exc:
        raise CaptureError(exc.message) from None
    if not found:
        raise CaptureError(f"the model directory {path} holds no files")
    files = [
        ManifestFile(name, real.stat().st_size, sha256_file(real)) for name, real in found.items()
    ]
    return ModelManifest(
        path,
        repo_id or (snapshot.repo_id if snapshot else None),
        revision or (snapshot.revision if snapshot else None),
        tuple(files),
    )
