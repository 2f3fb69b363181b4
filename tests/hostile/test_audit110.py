"""What a fresh-eyed audit of hostile inputs (helper-110, 2026-12-07) found: a path that is
not UTF-8 crashing `verify -o`, a file `-o` removed that it had not made, gzip members
without end, and a manifest labelled with a revision it did not hash."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from verifier import atomic
from verifier.bundle.archive import MAX_GZIP_MEMBERS
from verifier.modelfiles import detect_hf_snapshot

REPO = Path(__file__).resolve().parent.parent.parent
SEED = REPO / "sample_bundles" / "seed-mlxcel"


def _evidence(*args: str | bytes, cwd: Path = REPO) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "verifier", *args],
        cwd=cwd, capture_output=True, check=False, timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip


def test_a_report_on_a_bundle_whose_path_is_not_utf8_is_written_to_a_file(tmp_path: Path) -> None:
    """The report holds the path's own bytes, as stdout has them; no internal error."""
    bundle = os.fsencode(tmp_path) + b"/bundle\xff"
    shutil.copytree(SEED, os.fsdecode(bundle))
    for form in ("text", "json", "markdown"):
        target = tmp_path / f"report.{form}"
        done = _evidence("verify", bundle, "-f", form, "-o", str(target))
        assert done.returncode == 0, done.stderr
        assert b"internal error" not in done.stderr
        written = target.read_bytes()
        if form != "text":  # (a text report is laid out for the screen's width)
            assert written == _evidence("verify", bundle, "-f", form).stdout
        assert b"cache-state-dependent" in written
        if form == "json":
            assert b'"source": "' + bundle + b'"' in written


def test_the_temporary_name_of_a_report_passes_over_a_file_it_did_not_make(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = iter(["aaaa", "bbbb"])
    monkeypatch.setattr(atomic.secrets, "token_hex", lambda _n: next(names))
    theirs = tmp_path / f".report.txt.{os.getpid()}.aaaa.partial"
    theirs.write_text("not the tool's")
    atomic.write_new_file(tmp_path / "report.txt", b"the report\n")
    assert (tmp_path / "report.txt").read_bytes() == b"the report\n"
    assert theirs.read_text() == "not the tool's"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["report.txt", theirs.name])


def test_a_failed_write_removes_only_its_own_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(_source: Path, _target: Path) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic, "link_into_place", refuse)
    with pytest.raises(atomic.EvidenceError, match="No space left"):
        atomic.write_new_file(tmp_path / "report.txt", b"x")
    assert list(tmp_path.iterdir()) == []


def _archive_of(folder: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        archive.add(folder, arcname=folder.name)
    return buffer.getvalue()


@pytest.mark.parametrize("extra", [3, MAX_GZIP_MEMBERS + 5])
def test_gzip_members_that_expand_to_nothing_are_counted(tmp_path: Path, extra: int) -> None:
    """A second member is refused; past MAX_GZIP_MEMBERS reading stops (each member of 20
    bytes expands to nothing, so no limit on bytes would ever end it)."""
    path = tmp_path / "b.tar.gz"
    path.write_bytes(_archive_of(SEED) + gzip.compress(b"", mtime=0) * extra)
    done = _evidence("verify", str(path), "-f", "json")
    assert done.returncode == 1, done.stderr
    assert b"Traceback" not in done.stderr
    if extra < MAX_GZIP_MEMBERS:
        report = json.loads(done.stdout)
        messages = [f["message"] for b in report["bundles"] for f in b["findings"]]
        assert any(f"holds {extra + 1} concatenated gzip streams" in m for m in messages)
    else:
        assert f"more than {MAX_GZIP_MEMBERS} concatenated".encode() in done.stderr


def _snapshots(tmp_path: Path) -> Path:
    snapshots = tmp_path / "hub" / "models--org--name" / "snapshots"
    for revision in ("rev1", "rev2"):
        (snapshots / revision).mkdir(parents=True)
        (snapshots / revision / "config.json").write_text(json.dumps({"v": revision}))
    return snapshots


def test_a_snapshot_is_named_by_the_folder_its_path_leads_to(tmp_path: Path) -> None:
    snapshots = _snapshots(tmp_path)
    found = detect_hf_snapshot(snapshots / "rev1" / ".." / "rev2")
    assert found is not None and (found.repo_id, found.revision) == ("org/name", "rev2")
    assert detect_hf_snapshot(snapshots / "rev1" / "..") is None  # every revision: none
    found = detect_hf_snapshot(snapshots / "rev1")
    assert found is not None and found.revision == "rev1"


def test_manifest_labels_the_revision_it_hashed(tmp_path: Path) -> None:
    snapshots = _snapshots(tmp_path)
    done = _evidence("manifest", str(snapshots / "rev1" / ".." / "rev2"))
    assert done.returncode == 0, done.stderr
    manifest = json.loads(done.stdout)
    assert manifest["revision"] == "rev2"
    assert [f["sha256"] for f in manifest["files"]] == [
        hashlib.sha256(b'{"v": "rev2"}').hexdigest()
    ]
    done = _evidence("manifest", str(snapshots / "rev1" / ".."))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["revision"] is None


def test_manifest_of_a_snapshot_whose_names_are_not_utf8(tmp_path: Path) -> None:
    """No repository or revision is read from such names (a plain folder): no crash."""
    snapshot = os.fsencode(tmp_path) + b"/models--org--name\xff/snapshots/rev"
    os.makedirs(snapshot)
    Path(os.fsdecode(snapshot + b"/config.json")).write_text("{}")
    assert detect_hf_snapshot(Path(os.fsdecode(snapshot))) is None
    for output in ((), ("-o", str(tmp_path / "m.json"))):
        done = _evidence("manifest", snapshot, *output)
        assert done.returncode == 0, done.stderr
        assert b"internal error" not in done.stderr
    assert json.loads((tmp_path / "m.json").read_text())["repo_id"] is None
