"""`verify --model-dir`: the real sample's model, rehashed from a folder or an HF snapshot."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from make_tiny_model import write_tiny_model

from verifier.checks.context import VerifyOptions
from verifier.verify import verify_path

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "sample_bundles" / "llama-cpp-real.tar.gz"


def manifest_findings(model_dir: Path) -> list[tuple[str, str]]:
    result = verify_path(SAMPLE, VerifyOptions(model_dir=model_dir))
    return [(f.severity, f.message) for f in result.findings if f.check == "manifest"]


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("plain")
    write_tiny_model(folder / "tiny.gguf", seed=0)  # the sample's model, byte for byte
    return folder


def test_matching_folder_with_progress(model: Path) -> None:
    assert manifest_findings(model) == []
    seen: list[tuple[int, int]] = []
    verify_path(
        SAMPLE, VerifyOptions(model_dir=model, progress=lambda _, d, t: seen.append((d, t)))
    )
    size = (model / "tiny.gguf").stat().st_size
    assert seen and seen[-1] == (size, size)


def test_hugging_face_snapshot_with_links_to_blobs(model: Path, tmp_path: Path) -> None:
    repo = tmp_path / "hub" / "models--org--tiny"
    (repo / "blobs").mkdir(parents=True)
    blob = repo / "blobs" / "0123abcd"
    blob.write_bytes((model / "tiny.gguf").read_bytes())
    snapshot = repo / "snapshots" / "rev1"
    snapshot.mkdir(parents=True)
    os.symlink("../../blobs/0123abcd", snapshot / "tiny.gguf")
    assert manifest_findings(snapshot) == []


def test_missing_extra_and_mismatched(model: Path, tmp_path: Path) -> None:
    assert manifest_findings(tmp_path) == [
        ("error", "tiny.gguf is in the manifest but not in --model-dir")
    ]
    changed = tmp_path / "changed"
    changed.mkdir()
    data = bytearray((model / "tiny.gguf").read_bytes())
    data[-1] ^= 1
    (changed / "tiny.gguf").write_bytes(bytes(data))
    (changed / "notes.txt").write_text("extra")
    findings = manifest_findings(changed)
    assert ("error", "tiny.gguf in --model-dir does not match the manifest") in findings
    assert ("warning", "notes.txt is in --model-dir but not in the manifest") in findings


def test_link_outside_a_snapshot_is_refused(model: Path, tmp_path: Path) -> None:
    os.symlink(model / "tiny.gguf", tmp_path / "tiny.gguf")
    ((severity, message),) = manifest_findings(tmp_path)
    assert severity == "error" and "outside the model's own" in message
