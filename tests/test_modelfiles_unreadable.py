"""A model folder that cannot be listed is an error, not a manifest without its files: os.walk
left such a folder out silently, and `evidence manifest` wrote a manifest that lacked every
file in it, exit 0 (audit_i r1)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from verifier.capture.manifest import hash_model as capture_hash_model
from verifier.cli import app
from verifier.errors import CaptureError
from verifier.modelfiles import ModelFilesError, model_files


@pytest.fixture
def model(tmp_path: Path) -> Path:
    folder = tmp_path / "model"
    (folder / "shards").mkdir(parents=True)
    (folder / "config.json").write_text("{}\n", "utf-8")
    (folder / "model-00001-of-00002.safetensors").write_bytes(os.urandom(1000))
    (folder / "shards" / "model-00002-of-00002.safetensors").write_bytes(os.urandom(1000))
    return folder


@pytest.fixture
def shards_unlistable(model: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """os.scandir refuses the shards/ folder, as the OS does for mode 000 without
    CAP_DAC_OVERRIDE (the tests may run as root, which reads it anyway)."""
    scandir = os.scandir
    refused = model / "shards"

    def refusing(path: Any = ".") -> Any:
        if Path(os.fsdecode(path)) == refused:
            raise PermissionError(13, "Permission denied", os.fsdecode(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", refusing)
    yield refused


def test_an_unlistable_folder_is_an_error(shards_unlistable: Path, model: Path) -> None:
    with pytest.raises(ModelFilesError, match=r"cannot list .*shards: Permission denied"):
        model_files(model)


def test_an_unlistable_hidden_folder_is_skipped_as_before(
    model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hidden folders (.git) are not walked, so one that cannot be listed is no error."""
    (model / ".git").mkdir()
    scandir = os.scandir

    def refusing(path: Any = ".") -> Any:
        if Path(os.fsdecode(path)).name == ".git":
            raise PermissionError(13, "Permission denied", os.fsdecode(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", refusing)
    assert "shards/model-00002-of-00002.safetensors" in model_files(model)


def test_an_unlistable_model_folder_itself_is_an_error(
    model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scandir = os.scandir

    def refusing(path: Any = ".") -> Any:
        if Path(os.fsdecode(path)) == model:
            raise PermissionError(13, "Permission denied", os.fsdecode(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", refusing)
    with pytest.raises(ModelFilesError, match=r"cannot list .*model: Permission denied"):
        model_files(model)


def test_manifest_refuses_and_writes_nothing(
    shards_unlistable: Path, model: Path, tmp_path: Path
) -> None:
    output = tmp_path / "manifest.json"
    result = CliRunner().invoke(
        app, ["manifest", str(model), "-o", str(output)], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit)
    assert "cannot list" in result.output and "shards" in result.output
    assert "internal error" not in result.output and "Traceback" not in result.output
    assert not output.exists()


def test_capture_manifest_refuses(shards_unlistable: Path, model: Path) -> None:
    with pytest.raises(CaptureError, match="cannot list"):
        capture_hash_model(model)


@pytest.mark.skipif(os.geteuid() == 0, reason="root lists a mode-000 folder anyway")
def test_a_mode_000_folder_is_an_error(model: Path) -> None:
    shards = model / "shards"
    shards.chmod(0)
    try:
        with pytest.raises(ModelFilesError, match="cannot list"):
            model_files(model)
    finally:
        shards.chmod(0o755)
