"""`evidence capture` through typer's CliRunner, with the fake mlxcel-server."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from verifier.cli import app


def test_capture_command_runs_and_summarizes(
    fake_binary: Path, model_dir: Path, tmp_path: Path, free_port: int
) -> None:
    request = tmp_path / "request.json"
    request.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}))
    output = tmp_path / "raw"
    args = [
        "capture", "--server-profile", "mlxcel", "--binary", str(fake_binary),
        "--model", str(model_dir), "--output", str(output), "--request", str(request),
        "--cycles", "1", "--max-tokens", "16", "--port", str(free_port),
        "--condition", "det0:MLXCEL_SDPA_DETERMINISTIC=0", "--wall-timeout", "60",
    ]  # fmt: skip
    result = CliRunner().invoke(app, args, env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    # 11 protocol requests and the 2 diagnostic ones (logprobs on, --localize by default)
    assert "capture completed" in result.output and "13 requests" in result.output
    run = json.loads((output / "run.json").read_text())
    assert run["request_body"] == {
        "messages": [{"role": "user", "content": "hi"}],
        "model": "cache-repro",
        "max_tokens": 16,
    }
    assert run["argv"]

    again = CliRunner().invoke(app, args, env={"COLUMNS": "120"})
    assert again.exit_code == 2 and "already exists" in again.output


def test_usage_errors_exit_2(model_dir: Path, tmp_path: Path) -> None:
    args = ["capture", "--server-profile", "mlxcel", "--model", str(model_dir)]
    result = CliRunner().invoke(app, [*args, "--output", str(tmp_path / "o")])
    assert result.exit_code == 2 and "exactly one of --binary" in result.output
    bad = CliRunner().invoke(
        app, [*args, "--output", str(tmp_path / "o"), "--url", "http://x", "--condition", "B:X=1"]
    )
    assert bad.exit_code == 2 and "condition name" in bad.output
    assert not (tmp_path / "o").exists()
