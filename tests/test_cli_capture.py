"""capture's output without a terminal, and what a failed capture tells the user."""

from __future__ import annotations

from pathlib import Path

import pytest

from verifier.capture import CaptureSummary, RequestEvent
from verifier.cli import capture_cmd


def test_without_a_terminal_each_request_is_one_plain_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    sink = capture_cmd.PlainProgress()
    sink.begin(2)
    sink.note("default: starting server 1 (cache on)")
    for status, digest in ((200, "80b874fb77b29e1b"), (500, None)):
        sink.request_done(RequestEvent("default", "cycle-1", "cold", 1, 2, status, digest, 0, 0.25))
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "2 requests to send",
        "default: starting server 1 (cache on)",
        "request 1/2: default cycle-1 cold, cached 0, 80b874fb77b2, 0.2 s",
        "request 2/2: default cycle-1 cold, cached 0, no hash, HTTP 500, 0.2 s",
    ]


def test_a_failed_capture_says_where_its_folder_is_and_how_to_retry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capture_cmd._print_summary(CaptureSummary(output=tmp_path / "raw", outcome="failed"))
    err = " ".join(capsys.readouterr().err.split())
    assert f"kept for diagnosis in {tmp_path / 'raw'}" in err
    assert "a retry needs a new --output" in err and "Next:" not in err
