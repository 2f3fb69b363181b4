"""Outputs that cannot be written, and signals after an export has published.

A write that fails (a full disk) leaves nothing behind: no partial file, and no folder the
command made; it is the work failing, exit 1 (docs/EVIDENCE.md "Exit codes"), but for
verify's --output, still exit 2.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import NoReturn

import pytest
from typer.testing import CliRunner

from verifier.cli import app

REPO = Path(__file__).resolve().parent.parent
SEED = REPO / "sample_bundles" / "seed-mlxcel"
SEED_RAW = REPO / "sample_bundles" / "raw" / "seed-mlxcel"


def _disk_full(_descriptor: int) -> NoReturn:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.fixture
def full_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every file the command writes fails as it is flushed to disk."""
    monkeypatch.setattr(os, "fsync", _disk_full)


def _said(stderr: str) -> str:
    return " ".join(stderr.split())


# --- keygen ----------------------------------------------------------------------------


@pytest.mark.usefixtures("full_disk")
def test_keygen_on_a_full_disk_removes_the_folders_it_made(tmp_path: Path) -> None:
    out = tmp_path / "new" / "keys"
    result = CliRunner().invoke(app, ["keygen", "--out", str(out)])
    assert result.exit_code == 2, result.stderr  # (signing reports a refused write as usage)
    assert "No space left on device; no key was written" in _said(result.stderr)
    assert "Traceback" not in result.stderr
    assert list(tmp_path.iterdir()) == []  # neither keys/ nor new/ is left


@pytest.mark.usefixtures("full_disk")
def test_keygen_on_a_full_disk_keeps_a_folder_that_was_there(tmp_path: Path) -> None:
    out = tmp_path / "keys"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    result = CliRunner().invoke(app, ["keygen", "--out", str(out / "sub")])
    assert result.exit_code == 2, result.stderr
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]  # sub/ removed, the rest kept


def test_keygen_refusing_an_existing_key_is_still_a_usage_error(tmp_path: Path) -> None:
    out = tmp_path / "keys"
    assert CliRunner().invoke(app, ["keygen", "--out", str(out)]).exit_code == 0
    again = CliRunner().invoke(app, ["keygen", "--out", str(out)])
    assert again.exit_code == 2 and "refusing to overwrite" in again.stderr
    assert len(list(out.iterdir())) == 2


# --- -o FILE: the same exit code for every command ---------------------------------------


@pytest.mark.usefixtures("full_disk")
def test_an_output_file_on_a_full_disk_leaves_nothing(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "weights.bin").write_bytes(b"\0" * 64)
    results = {
        "verify": CliRunner().invoke(app, ["verify", str(SEED), "-o", str(tmp_path / "r.txt")]),
        "manifest": CliRunner().invoke(
            app, ["manifest", str(model), "-o", str(tmp_path / "m.json")]
        ),
    }
    # verify's exit 2 is pinned by tests/test_exit.py too; 1 as the other commands' is due.
    expected = {"verify": 2, "manifest": 1}
    for command, result in results.items():
        assert result.exit_code == expected[command], (command, result.stderr)
        assert "No space left on device" in _said(result.stderr), command
        assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    assert "--output: cannot write" in _said(results["verify"].stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]  # no partial file


def test_verify_output_that_exists_is_still_a_usage_error(tmp_path: Path) -> None:
    report = tmp_path / "r.txt"
    report.write_text("mine\n")
    result = CliRunner().invoke(app, ["verify", str(SEED), "-o", str(report)])
    assert result.exit_code == 2 and "already exists" in result.stderr
    assert report.read_text() == "mine\n"


# --- a signal after export has published -------------------------------------------------

# The real CLI in a child whose summary announces itself and then waits for the parent, so
# that a signal lands after the bundle and the archive were published.
CHILD = """
import sys, time
from pathlib import Path
import verifier.cli.export_cmd as export_cmd
printing = export_cmd._print_summary
def waiting_summary(summary):
    Path(sys.argv[1]).write_text("published")
    deadline = time.monotonic() + 30
    while not Path(sys.argv[1] + ".go").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    printing(summary)
export_cmd._print_summary = waiting_summary
from verifier.cli import app
app(sys.argv[2:])
"""


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_signal_after_publishing_leaves_the_export_whole(tmp_path: Path, number: int) -> None:
    marker, out, archive = tmp_path / "marker", tmp_path / "public", tmp_path / "public.tar.gz"
    argv = [sys.executable, "-c", CHILD, str(marker), "export", str(SEED_RAW)]
    argv += ["--out", str(out), "--archive", str(archive)]
    child = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not marker.exists():
        if child.poll() is not None:
            pytest.fail(child.communicate()[1].decode())
        assert time.monotonic() < deadline
        time.sleep(0.02)
    child.send_signal(number)
    time.sleep(0.2)  # delivered, and ignored, before the summary goes on
    Path(f"{marker}.go").write_text("")
    _, stderr = child.communicate(timeout=60)
    assert child.returncode == 0, stderr.decode()
    assert b"interrupted" not in stderr
    for path in (out, archive):
        verified = CliRunner().invoke(app, ["verify", str(path), "-q"])
        assert verified.exit_code == 0, verified.stdout
