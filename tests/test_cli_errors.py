"""Errors that say the next step: the wrong kind of directory names what it is and what to run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verifier.cli import app

REPO = Path(__file__).resolve().parent.parent
RAW = REPO / "sample_bundles" / "raw" / "seed-mlxcel"
PUBLIC = REPO / "sample_bundles" / "seed-mlxcel"


def test_verifying_a_raw_capture_says_to_export_it_first() -> None:
    result = CliRunner().invoke(app, ["verify", str(RAW)], env={"COLUMNS": "200"})
    assert result.exit_code == 2
    assert "is a raw capture (private), not a public bundle" in result.stderr
    assert f"evidence export {RAW} --out PUBLIC_DIR" in result.stderr
    assert "leaks" not in result.stdout  # not 150 findings that quote partial secrets


def test_exporting_a_public_bundle_says_to_verify_it(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app, ["export", str(PUBLIC), "--out", str(out)], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 2
    assert f"is a public bundle, not a raw capture: check it with `evidence verify {PUBLIC}`" in (
        result.stderr
    )
    assert not out.exists()


def test_bundle_paths_are_never_rich_markup(tmp_path: Path) -> None:
    odd = tmp_path / "[bold]x[/]"
    result = CliRunner().invoke(app, ["verify", str(odd)], env={"COLUMNS": "200"})
    assert result.exit_code == 2
    assert "[bold]x[/]" in result.stderr and "internal error" not in result.stderr
    result = CliRunner().invoke(app, ["export", str(odd), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "[bold]x[/]" in result.stderr


def test_a_private_key_or_a_non_key_given_to_key_gets_our_message(tmp_path: Path) -> None:
    private = REPO / "sample_bundles" / "keys" / "evidence-signing-key.pem"
    if private.is_file():
        result = CliRunner().invoke(app, ["verify", str(PUBLIC), "--key", str(private)])
        assert result.exit_code == 2 and "is a private key" in result.stderr
    junk = tmp_path / "key.pem"
    junk.write_text("ssh-ed25519 AAAA... user@host\n")
    result = CliRunner().invoke(app, ["verify", str(PUBLIC), "--key", str(junk)])
    assert result.exit_code == 2
    assert "is not a PEM public key: expected a file that starts with" in result.stderr


def test_a_condition_without_its_colon_names_the_missing_part(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        ["capture", "--server-profile", "mlxcel", "--model", str(tmp_path),
         "--output", str(tmp_path / "raw"), "--url", "http://127.0.0.1:9",
         "--condition", "det0=MLXCEL=1"],
        env={"COLUMNS": "200"},
    )  # fmt: skip
    assert result.exit_code == 2
    assert "has no ':' between its name and its settings" in result.stderr
    assert not (tmp_path / "raw").exists()


def test_a_terminal_size_rich_cannot_read_is_ignored_not_a_traceback() -> None:
    import os
    import subprocess
    import sys

    def verify(**sizes: str) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        command = [sys.executable, "-m", "verifier", "verify", "sample_bundles/seed-mlxcel"]
        return subprocess.run(
            command, cwd=REPO, env={**env, **sizes}, capture_output=True, text=True, check=False
        )

    plain = verify()
    for sizes in ({"COLUMNS": "²"}, {"LINES": "³", "COLUMNS": "²⁰"}):
        odd = verify(**sizes)
        assert "Traceback" not in odd.stderr, sizes
        assert (odd.returncode, odd.stdout, odd.stderr) == (
            plain.returncode,
            plain.stdout,
            plain.stderr,
        )


def test_a_closed_standard_output_is_a_usage_error_not_a_lost_report() -> None:
    import subprocess
    import sys

    for extra in ("", "-f json", "-f markdown", "--quiet"):
        done = subprocess.run(
            ["bash", "-c", f"{sys.executable} -m verifier verify sample_bundles/seed-mlxcel "
             f"{extra} >&-"],
            cwd=REPO, capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert done.returncode == 2, (extra, done.stderr)
        assert "standard output is closed" in done.stderr and "Traceback" not in done.stderr


def _shell(command: str, **env: str) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(
        ["bash", "-c", command], cwd=REPO, capture_output=True, text=True, check=False,
        env={**os.environ, **env},
    )  # fmt: skip


EVIDENCE = f"{sys.executable} -m verifier"


@pytest.mark.parametrize(
    "command",
    ["schema list", "schema show report", "manifest sample_bundles/keys",
     "diff sample_bundles/seed-mlxcel sample_bundles/seed-mlxcel"],
)  # fmt: skip
def test_every_command_that_prints_refuses_a_closed_standard_output(command: str) -> None:
    done = _shell(f"{EVIDENCE} {command} >&-")
    assert done.returncode == 2, done.stderr
    assert "standard output is closed" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "command", ["--help", "--version", "verify --help", "schema list",
                "verify sample_bundles/seed-mlxcel", "verify -f json sample_bundles/seed-mlxcel"],
)  # fmt: skip
def test_a_full_standard_output_is_one_line_and_exit_1(command: str) -> None:
    done = _shell(f"{EVIDENCE} {command} > /dev/full")
    assert done.returncode == 1, done.stderr
    assert "could not be written whole: No space left on device" in done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr


def test_a_full_standard_error_loses_no_report() -> None:
    done = _shell(f"{EVIDENCE} verify -f json sample_bundles/seed-mlxcel 2> /dev/full")
    assert done.returncode == 0
    assert json.loads(done.stdout)["bundles"][0]["verdict"] == "cache-state-dependent"


def test_a_stream_that_cannot_encode_the_report_gets_utf_8() -> None:
    for fmt in ("text", "json", "markdown"):
        done = _shell(
            f"{EVIDENCE} verify -f {fmt} sample_bundles/seed-mlxcel", PYTHONIOENCODING="ascii"
        )
        assert done.returncode == 0, done.stderr
        assert "cache-state-dependent" in done.stdout and "Traceback" not in done.stderr


def test_an_interrupt_before_a_command_starts_is_exit_130() -> None:
    probe = (
        "import sys, verifier.cli\n"
        "def stop():\n    raise KeyboardInterrupt\n"
        "verifier.cli.main = stop\n"
        "sys.argv = ['evidence', '--help']\n"
        "from verifier.__main__ import main\nmain()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert done.returncode == 130 and done.stderr == "interrupted\n"


@pytest.mark.parametrize("columns", ["0", "2000000000"])
def test_an_absurd_screen_width_still_gives_a_report_of_sane_size(columns: str) -> None:
    done = _shell(f"{EVIDENCE} verify sample_bundles/seed-mlxcel", COLUMNS=columns)
    assert done.returncode == 0
    assert "verdict: cache-state-dependent" in done.stdout and len(done.stdout) < 100_000
