"""keygen, schema list/show, `python -m verifier`, and the signature checked by stock OpenSSL."""

from __future__ import annotations

import json
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verifier import layout, schemas
from verifier.cli import app

REPO = Path(__file__).resolve().parent.parent
SEED = REPO / "sample_bundles" / "seed-mlxcel"


def test_keygen_writes_a_private_and_a_public_pem(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["keygen", "--out", str(tmp_path / "keys")])
    assert result.exit_code == 0
    private = tmp_path / "keys" / "evidence-signing-key.pem"
    public = tmp_path / "keys" / "evidence-signing-key.pub.pem"
    assert private.read_text().startswith("-----BEGIN PRIVATE KEY-----")
    assert public.read_text().startswith("-----BEGIN PUBLIC KEY-----")
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    again = CliRunner().invoke(app, ["keygen", "--out", str(tmp_path / "keys")])
    assert again.exit_code == 2 and "refusing to overwrite" in again.stderr
    assert private.read_text().startswith("-----BEGIN PRIVATE KEY-----")


def test_schema_list_and_show() -> None:
    listed = CliRunner().invoke(app, ["schema", "list"], env={"COLUMNS": "200"})
    assert listed.exit_code == 0
    for name in ("experiment", "record", "model-manifest", "redaction-ledger", "report"):
        assert name in listed.stdout
    shown = CliRunner().invoke(app, ["schema", "show", "record"])
    assert json.loads(shown.stdout)["$id"] == "urn:evidence:schema:record"
    missing = CliRunner().invoke(app, ["schema", "show", "nope"])
    assert missing.exit_code == 2 and "no schema named" in missing.stderr


def test_every_schema_is_valid_draft_2020_12() -> None:
    from jsonschema import Draft202012Validator

    for schema in schemas.load_all().values():
        Draft202012Validator.check_schema(schema)
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_python_dash_m_verifier_runs_the_cli() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "verifier", "--version"], capture_output=True, text=True, check=True
    )
    assert done.stdout.startswith("evidence ")


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed")
def test_stock_openssl_verifies_the_signature(tmp_path: Path) -> None:
    key = REPO / "sample_bundles" / "keys" / "evidence-signing-key.pub.pem"

    def openssl_verify(sums: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["openssl", "pkeyutl", "-verify", "-pubin", "-inkey", str(key), "-rawin",
             "-in", str(sums), "-sigfile", str(SEED / layout.SIGNATURE)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip

    good = openssl_verify(SEED / layout.SHA256SUMS)
    assert good.returncode == 0, good.stdout + good.stderr
    assert "Signature Verified Successfully" in good.stdout
    tampered = tmp_path / "SHA256SUMS"
    tampered.write_bytes((SEED / layout.SHA256SUMS).read_bytes().replace(b"a", b"b", 1))
    assert openssl_verify(tampered).returncode != 0
