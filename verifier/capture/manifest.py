"""Capture's model manifest: the shared hasher of `verifier.modelfiles`, errors as CaptureError."""

from __future__ import annotations

from pathlib import Path

from verifier.errors import CaptureError
from verifier.modelfiles import (
    CONFIG_NAMES,
    WEIGHT_SUFFIXES,
    ByteProgress,
    ManifestFile,
    ModelFilesError,
    ModelManifest,
)
from verifier.modelfiles import hash_model as _hash_model

__all__ = ["CONFIG_NAMES", "WEIGHT_SUFFIXES", "ManifestFile", "ModelManifest", "hash_model"]


def hash_model(
    path: Path,
    repo_id: str | None = None,
    revision: str | None = None,
    progress: ByteProgress | None = None,
) -> ModelManifest:
    """Hash every file of the model (hidden folders skipped); never downloads anything."""
    try:
        return _hash_model(path, repo_id, revision, progress)
    except ModelFilesError as exc:
        raise CaptureError(exc.message) from None
