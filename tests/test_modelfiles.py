"""The parallel model hasher and `evidence manifest`: the plain path's digests, safe writes."""

from __future__ import annotations

import hashlib
import json
import os
import tarfile
import threading
from pathlib import Path

import pytest
from make_tiny_model import write_tiny_model
from typer.testing import CliRunner

from verifier import modelfiles
from verifier.checks.context import VerifyOptions
from verifier.cli import app
from verifier.modelfiles import CHUNK, hash_files, hash_model, model_files
from verifier.schemas import validate
from verifier.verify import verify_path

REPO = Path(__file__).resolve().parent.parent
REAL = REPO / "sample_bundles" / "llama-cpp-real.tar.gz"
SIZES = (0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 17, 5)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    model = tmp_path / "model"
    (model / "sub").mkdir(parents=True)
    for index, size in enumerate(SIZES):
        (model / ("sub" if index % 2 else "") / f"f{index}.bin").write_bytes(
            os.urandom(size) if size else b""
        )
    return model


def plain_digests(model: Path) -> dict[str, tuple[int, str]]:
    """The obvious way: read each file whole and hash it."""
    return {
        name: (len(data := real.read_bytes()), hashlib.sha256(data).hexdigest())
        for name, real in model_files(model).items()
    }


@pytest.mark.parametrize("workers", [1, 2, 5])
def test_parallel_digests_equal_the_plain_path(folder: Path, workers: int) -> None:
    hashed = hash_files(model_files(folder), workers=workers)
    assert {n: (h.size, h.sha256) for n, h in hashed.items()} == plain_digests(folder)
    assert list(hashed) == sorted(hashed)  # in the walker's order, whatever finished first


def test_progress_is_reported_from_the_calling_thread_and_ends_at_the_total(folder: Path) -> None:
    seen: list[tuple[int, int, bool]] = []
    hash_files(
        model_files(folder),
        lambda done, total: seen.append(
            (done, total, threading.current_thread() is threading.main_thread())
        ),
        workers=2,
    )
    total = sum(SIZES)
    assert seen[-1] == (total, total, True)
    assert all(on_main for _, _, on_main in seen)
    assert [done for done, _, _ in seen] == sorted(done for done, _, _ in seen)


def test_a_blob_linked_twice_is_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = tmp_path / "models--org--m"
    (repo / "blobs").mkdir(parents=True)
    (repo / "blobs" / "b1").write_bytes(b"same bytes")
    snapshot = repo / "snapshots" / "r1"
    snapshot.mkdir(parents=True)
    (snapshot / "a.json").symlink_to("../../blobs/b1")
    (snapshot / "b.json").symlink_to("../../blobs/b1")
    reads: list[Path] = []
    real_hash_into = modelfiles._hash_into

    def counting(path: Path, *args: object, **kwargs: object) -> tuple[int, str]:
        reads.append(path)
        return real_hash_into(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(modelfiles, "_hash_into", counting)
    manifest = hash_model(snapshot)
    assert [f.path for f in manifest.files] == ["a.json", "b.json"]
    assert manifest.files[0].sha256 == manifest.files[1].sha256
    assert reads == [(repo / "blobs" / "b1").resolve()]


def test_an_unreadable_file_is_an_error_entry_not_an_exception(folder: Path) -> None:
    files = model_files(folder)
    files["gone.bin"] = folder / "gone.bin"
    hashed = hash_files(files, workers=2)
    assert hashed["gone.bin"].sha256 is None and hashed["gone.bin"].error
    assert hashed["f0.bin"].sha256 == hashlib.sha256(b"").hexdigest()
    with pytest.raises(modelfiles.ModelFilesError, match=r"gone\.bin"):
        modelfiles.hash_model(folder / "gone.bin")


def test_manifest_command_writes_what_verify_reads(tmp_path: Path) -> None:
    """The real sample's model, rebuilt byte for byte, gives the sample's manifest entries."""
    model = tmp_path / "plain"
    model.mkdir()
    write_tiny_model(model / "tiny.gguf", seed=0)
    out = tmp_path / "model-manifest.json"
    result = CliRunner().invoke(
        app, ["manifest", str(model), "--repo-id", "org/tiny", "--revision", "r1", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    written = json.loads(out.read_text())
    assert validate(written, "model-manifest") == []
    assert (written["repo_id"], written["revision"]) == ("org/tiny", "r1")
    with tarfile.open(REAL) as archive:
        handle = archive.extractfile("model-manifest.json")
        assert handle is not None
        published = json.loads(handle.read())
    assert written["files"] == published["files"]
    assert str(tmp_path) not in out.read_text()  # the public form names no host path
    result = verify_path(REAL, VerifyOptions(model_dir=model))
    assert [f for f in result.findings if f.check == "manifest"] == []


def test_manifest_to_stdout_and_from_a_snapshot(tmp_path: Path) -> None:
    repo = tmp_path / "hub" / "models--org--name"
    (repo / "blobs").mkdir(parents=True)
    (repo / "blobs" / "x").write_bytes(b"{}")
    snapshot = repo / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").symlink_to("../../blobs/x")
    result = CliRunner().invoke(app, ["manifest", str(snapshot)])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert (document["repo_id"], document["revision"]) == ("org/name", "abc123")
    assert document["files"] == [
        {"path": "config.json", "size": 2, "sha256": hashlib.sha256(b"{}").hexdigest()}
    ]


def test_manifest_refuses_to_overwrite_and_leaves_the_file(folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "m.json"
    out.write_text("mine")
    result = CliRunner().invoke(app, ["manifest", str(folder), "-o", str(out)])
    assert result.exit_code == 2 and "refusing to overwrite" in result.stderr
    assert out.read_text() == "mine"


def test_manifest_bad_input_is_a_clear_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    for target, message in ((tmp_path / "nope", "does not exist"), (empty, "holds no files")):
        result = CliRunner().invoke(app, ["manifest", str(target)])
        assert result.exit_code == 1 and message in result.stderr
        assert "Traceback" not in result.output
    missing_dir = tmp_path / "no" / "m.json"
    result = CliRunner().invoke(app, ["manifest", str(empty), "-o", str(missing_dir)])
    assert result.exit_code == 2 and "is not a directory" in result.stderr


def test_a_failed_write_leaves_no_partial_file(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out_dir = tmp_path / "out"
    out_dir.mkdir()

    def broken_fsync(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    result = CliRunner().invoke(app, ["manifest", str(folder), "-o", str(out_dir / "m.json")])
    assert result.exit_code == 1 and "No space left on device" in result.stderr
    assert list(out_dir.iterdir()) == []


def test_a_file_name_that_is_not_utf8_is_a_clear_error(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    with open(os.fsencode(model) + b"/bad\xff.bin", "wb") as handle:
        handle.write(b"x")
    out = tmp_path / "m.json"
    result = CliRunner().invoke(app, ["manifest", str(model), "-o", str(out)])
    assert result.exit_code == 1 and "is not UTF-8" in result.stderr
    assert "internal error" not in result.stderr and not out.exists()
