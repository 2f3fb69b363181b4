"""A failed, interrupted or killed export leaves no output and no partial file behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from verifier.errors import ExportError
from verifier.export import ExportOptions, export_bundle

REPO = Path(__file__).resolve().parents[2]


def _interrupt(*_args: object, **_kwargs: object) -> None:
    raise KeyboardInterrupt


@pytest.mark.parametrize(
    "step",
    [
        "verifier.export.exporter._build_files",
        "verifier.export.exporter._write_tree",
        "verifier.export.exporter._verify",
        "verifier.export.exporter.build_archive",
        "verifier.export.exporter._publish_file",
    ],
)
def test_interrupt_at_any_step_leaves_nothing(
    factory_raw: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    monkeypatch.setattr(step, _interrupt)
    with pytest.raises(KeyboardInterrupt):
        export_bundle(
            ExportOptions(factory_raw, tmp_path / "public", archive=tmp_path / "public.tar.gz")
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["raw"]


# Runs the real CLI in a child whose verification step announces itself and then waits, so
# the parent can signal it at a known point: after the bundle was written beside --out.
CHILD = """
import sys, time
from pathlib import Path
import verifier.export.exporter as exporter
def slow_verify(path, key):
    Path(sys.argv[1]).write_text("writing done")
    time.sleep(60)
exporter._verify = slow_verify
from verifier.cli import app
app(sys.argv[2:])
"""


def _start(tmp_path: Path, raw: Path) -> tuple[subprocess.Popen[bytes], Path]:
    marker = tmp_path / "marker"
    argv = [sys.executable, "-c", CHILD, str(marker), "export", str(raw)]
    argv += ["--out", str(tmp_path / "public"), "--archive", str(tmp_path / "public.tar.gz")]
    child = subprocess.Popen(argv, cwd=REPO, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not marker.exists():
        if child.poll() is not None:
            pytest.fail(child.communicate()[1].decode())
        assert time.monotonic() < deadline
        time.sleep(0.02)
    return child, marker


def _left(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in tmp_path.iterdir() if p.name not in ("raw", "marker"))


def test_sigint_mid_export_cleans_up(factory_raw: Path, tmp_path: Path) -> None:
    child, _ = _start(tmp_path, factory_raw)
    assert any(".partial-" in name for name in _left(tmp_path))
    child.send_signal(signal.SIGINT)
    _, stderr = child.communicate(timeout=30)
    assert child.returncode == 130, stderr
    assert b"interrupted" in stderr
    assert _left(tmp_path) == []


def test_sigkill_leaves_no_output_and_the_next_export_clears_the_leftover(
    factory_raw: Path, tmp_path: Path
) -> None:
    child, marker = _start(tmp_path, factory_raw)
    os.kill(child.pid, signal.SIGKILL)
    child.communicate(timeout=30)
    left = _left(tmp_path)
    assert left and all(name.startswith(".public.partial-") for name in left)
    marker.unlink()
    export_bundle(ExportOptions(factory_raw, tmp_path / "public"))
    assert _left(tmp_path) == ["public"]


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGHUP])  # SIGHUP: terminal closed
def test_sigterm_mid_export_cleans_up(factory_raw: Path, tmp_path: Path, number: int) -> None:
    child, _ = _start(tmp_path, factory_raw)
    assert any(".partial-" in name for name in _left(tmp_path))
    child.send_signal(number)
    _, stderr = child.communicate(timeout=30)
    assert child.returncode == 130, stderr
    assert _left(tmp_path) == []  # no .partial folder stays


def test_links_out_of_the_raw_directory_are_never_followed(
    factory_raw: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere"
    servers = next(factory_raw.glob("conditions/*/servers"))
    servers.rename(outside)
    servers.symlink_to(outside, target_is_directory=True)
    with pytest.raises(ExportError, match="symbolic link"):
        export_bundle(ExportOptions(factory_raw, tmp_path / "public"))
    assert not (tmp_path / "public").exists()


def test_a_huge_binary_log_is_never_read(factory_raw: Path, tmp_path: Path) -> None:
    log = next(factory_raw.glob("conditions/*/servers/*.log"))
    with log.open("wb") as stream:  # 64 MiB of bytes that are not UTF-8
        stream.write(b"\xff\xfe\x00" * (64 * 1024 * 1024 // 3))
    summary = export_bundle(ExportOptions(factory_raw, tmp_path / "public"))
    assert summary.records > 0
