"""`evidence schema show --resolved`: schemas a validator without this tool can use alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator
from typer.testing import CliRunner

from verifier import layout, schemas
from verifier.cli import app

REPO = Path(__file__).resolve().parent.parent
SEED = REPO / "sample_bundles" / "seed-mlxcel"
DOCUMENTS = {
    "experiment": SEED / layout.EXPERIMENT,
    "model-manifest": SEED / layout.MODEL_MANIFEST,
    "redaction-ledger": SEED / layout.REDACTION_LEDGER,
    "record": SEED / layout.record_path("sdpa-det-0", 1),
}


def _resolved(name: str) -> dict[str, object]:
    result = CliRunner().invoke(app, ["schema", "show", name, "--resolved"])
    assert result.exit_code == 0, result.output
    schema = json.loads(result.stdout)
    Draft202012Validator.check_schema(schema)
    return schema  # type: ignore[no-any-return]


@pytest.mark.parametrize("name", sorted(DOCUMENTS))
def test_resolved_schemas_validate_the_samples_without_the_tool_registry(name: str) -> None:
    validator = Draft202012Validator(_resolved(name))  # no registry: only what it embeds
    document = json.loads(DOCUMENTS[name].read_text())
    assert list(validator.iter_errors(document)) == []
    document["schema_version"] = "one"
    assert list(validator.iter_errors(document))  # the embedded common $defs are applied


def test_the_resolved_report_schema_checks_a_real_report() -> None:
    validator = Draft202012Validator(_resolved("report"))
    result = CliRunner().invoke(app, ["verify", str(SEED), "--format", "json"])
    report = json.loads(result.stdout)
    assert list(validator.iter_errors(report)) == []
    report["bundles"][0]["classification"]["conditions"][0]["arms"] = {"opt-out": {}}
    assert [e.validator for e in validator.iter_errors(report)] == ["enum"]


def test_every_schema_resolves() -> None:
    for name in schemas.load_all():
        _resolved(name)
