"""`evidence export` through typer's CliRunner: summary on stderr, exit codes, help."""

from __future__ import annotations

from pathlib import Path

import pytest
from rawfactory import RawFactory
from typer.testing import CliRunner

from verifier.cli import app

ENV = {"COLUMNS": "120"}


def test_export_prints_a_redaction_summary_on_stderr(factory_raw: Path, tmp_path: Path) -> None:
    out = tmp_path / "public"
    result = CliRunner().invoke(
        app,
        ["export", str(factory_raw), "--out", str(out), "--archive", str(tmp_path / "p.tar.gz")],
        env=ENV,
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ""
    assert "private-path" in result.stderr and "process-map" in result.stderr
    assert "verdict cache-state-dependent" in result.stderr
    assert (out / "SHA256SUMS").is_file() and (tmp_path / "p.tar.gz").is_file()


def test_existing_out_is_a_usage_error(factory_raw: Path, tmp_path: Path) -> None:
    (tmp_path / "public").mkdir()
    result = CliRunner().invoke(
        app, ["export", str(factory_raw), "--out", str(tmp_path / "public")], env=ENV
    )
    assert result.exit_code == 2
    assert "already exists" in result.stderr


def test_refused_export_exits_1_without_a_traceback(tmp_path: Path) -> None:
    f = RawFactory()
    f.exchanges()[0]["response"]["body"]["choices"][0]["message"]["content"] = "see ~alice/notes"
    raw = f.write(tmp_path / "raw")
    result = CliRunner().invoke(app, ["export", str(raw), "--out", str(tmp_path / "p")], env=ENV)
    assert result.exit_code == 1
    assert "records/c1/001.json/response/choices/0/message/content" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "p").exists()


def test_missing_raw_directory_is_reported(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["export", str(tmp_path / "nope"), "--out", str(tmp_path / "p")], env=ENV
    )
    assert result.exit_code == 2
    assert "is not a raw capture directory" in result.stderr


def test_help_teaches_the_options() -> None:
    result = CliRunner().invoke(app, ["export", "--help"], env=ENV)
    assert result.exit_code == 0
    for option in ("--out", "--archive", "--sign-key", "--private-path", "--keep-env", "--allow"):
        assert option in result.stdout


def test_allow_keeps_a_declared_value_and_the_ledger_says_so(tmp_path: Path) -> None:
    f = RawFactory()
    f.exchanges()[0]["response"]["body"]["choices"][0]["message"]["content"] = "ask 10.9.8.7"
    raw = f.write(tmp_path / "raw")
    refused = CliRunner().invoke(app, ["export", str(raw), "--out", str(tmp_path / "p")], env=ENV)
    assert refused.exit_code == 1 and "--allow VALUE" in refused.stderr
    assert "10.9.8.7" not in refused.stderr
    out = tmp_path / "q"
    args = ["export", str(raw), "--out", str(out), "--allow", "10.9.8.7"]
    result = CliRunner().invoke(app, args, env=ENV)
    assert result.exit_code == 0, result.stderr
    assert "10.9.8.7" not in (out / "redaction-ledger.json").read_text()
    assert "ask 10.9.8.7" in (out / "records/c1/001.json").read_text()


def test_output_paths_that_cannot_be_are_said_plainly(factory_raw: Path, tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    cases = {
        "-": "export writes files, not to standard output",
        str(tmp_path / "afile" / "p.tar.gz"): "afile is not a directory",
        str(tmp_path / "nodir" / "p.tar.gz"): "nodir does not exist; create it first",
    }
    for archive, said in cases.items():
        out = tmp_path / "public"
        result = CliRunner().invoke(
            app, ["export", str(factory_raw), "--out", str(out), "--archive", archive], env=ENV
        )
        assert result.exit_code == 2, (archive, result.stderr)
        assert said in result.stderr.replace("\n", " ") and not out.exists()
    assert not (tmp_path / "-").exists()


def test_a_place_that_refuses_the_files_is_no_bug(
    factory_raw: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk full, a read-only or odd file system (/proc): the error says where, exit 1,
    and nothing is left behind."""
    import verifier.export.exporter as exporter

    def refuses(*_args: object, **kwargs: object) -> tuple[int, str]:
        raise OSError(28, "No space left on device", f"{kwargs['dir']}/.p.tar.gz.partial")

    monkeypatch.setattr(exporter.tempfile, "mkstemp", refuses)
    out, archive = tmp_path / "public", tmp_path / "p.tar.gz"
    result = CliRunner().invoke(
        app, ["export", str(factory_raw), "--out", str(out), "--archive", str(archive)], env=ENV
    )
    assert result.exit_code == 1, result.stderr
    assert f"cannot write in {tmp_path}: No space left on device" in result.stderr.replace("\n", "")
    assert "bug" not in result.stderr and sorted(tmp_path.iterdir()) == [factory_raw]
