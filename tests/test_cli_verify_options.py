"""verify's conventions for scripts: --quiet, --output FILE, --require-signature."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from verifier import schemas
from verifier.cli import app

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_bundles"
SEED = SAMPLES / "seed-mlxcel"
TAMPERED = REPO / "sample_bundles" / "negative" / "tampered-output"
KEY = REPO / "sample_bundles" / "keys" / "evidence-signing-key.pub.pem"


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["verify", *args], env={"COLUMNS": "100"})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def test_quiet_prints_one_verdict_line_per_bundle_and_nothing_else() -> None:
    code, out, err = run(str(SEED), str(TAMPERED), "--quiet")
    assert code == 1
    assert out == f"cache-state-dependent {SEED}\ninvalid {TAMPERED}\n"
    assert err == ""


def test_output_writes_the_report_to_a_file_and_nothing_to_stdout(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    code, out, err = run(str(SEED), "--format", "json", "--output", str(target))
    assert code == 0 and out == ""
    assert schemas.validate(json.loads(target.read_text()), "report") == []
    assert "report written to" in err
    code, _, err = run(str(SEED), "--output", str(tmp_path / "missing" / "report.txt"))
    assert code == 2 and "is not a directory" in err


def test_output_never_replaces_a_file_not_even_the_bundle(tmp_path: Path) -> None:
    archive = tmp_path / "bundle.tar.gz"
    archive.write_bytes((SAMPLES / "llama-cpp-real.tar.gz").read_bytes())
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    for target in (archive, notes):
        before = target.read_bytes()
        code, out, err = run(str(archive), "--quiet", "--output", str(target))
        assert code == 2 and "already exists" in err and out == ""
        assert target.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle.tar.gz", "notes.txt"]


def test_require_signature_fails_an_unchecked_or_unsigned_bundle() -> None:
    assert run(str(SEED), "--require-signature", "--key", str(KEY))[0] == 0
    code, out, _ = run(str(SEED), "--require-signature")
    assert code == 1
    assert "verdict: invalid" in out and "--require-signature asks for" in out
    assert "signature      failed: the bundle is signed, but no --key was given" in out
    code, out, _ = run(str(SEED), "--require-signature", "--format", "json")
    (bundle,) = json.loads(out)["bundles"]
    assert not bundle["verified"] and bundle["exit_code"] == 1
    assert run(str(SEED))[0] == 0  # without the flag an unchecked signature is said, not failed
