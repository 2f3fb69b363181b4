"""The table of treatments covers every raw and every public field; a new field is a failure."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rawfactory import RawFactory

from verifier import schemas
from verifier.errors import ExportError
from verifier.export.assemble import (
    FIELDS,
    Treatment,
    assemble,
    public_kind,
    raw_treatment_of,
    treatment_of,
)
from verifier.export.redact import Redactor
from verifier.raw import load_raw

SCHEMAS = Path(schemas.__file__).resolve().parent.parent / "schemas"
RAW_SCHEMAS = {
    "run": "raw-run",
    "server": "raw-server",
    "exchange": "raw-exchange",
    "manifest": "raw-model-manifest",
}
Path_ = tuple[str | int, ...]


def _load(name: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    return document


def _resolve(node: dict[str, Any], root: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Follow a $ref, within the schema or to another one; (node, the schema it is in)."""
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return _resolve(root["$defs"][ref.removeprefix("#/$defs/")], root)
    if isinstance(ref, str) and ref.startswith("urn:evidence:schema:"):
        name, _, pointer = ref.removeprefix("urn:evidence:schema:").partition("#")
        other = _load(name)
        target: Any = other
        for part in pointer.strip("/").split("/"):
            target = target[part]
        return _resolve(target, other)
    return node, root


def schema_fields(node: dict[str, Any], root: dict[str, Any], path: Path_ = ()) -> Iterator[Path_]:
    """Every field a raw schema names, down to values and free-form objects (`*`: any)."""
    node, root = _resolve(node, root)
    for name, child in node.get("properties", {}).items():
        yield from schema_fields(child, root, (*path, name))
    items = node.get("items")
    if isinstance(items, dict):
        yield from schema_fields(items, root, (*path, "*"))
    if "properties" not in node and not isinstance(items, dict):
        yield path
    extra = node.get("additionalProperties")
    free_form = extra is True or isinstance(extra, dict) or node.get("type") == "object"
    if free_form and ("properties" not in node or extra is True):
        yield (*path, "any-member")


def leaves(node: Any, path: Path_ = ()) -> Iterator[Path_]:
    if isinstance(node, dict) and node:
        for key, value in node.items():
            yield from leaves(value, (*path, key))
    elif isinstance(node, list) and node:
        for index, value in enumerate(node):
            yield from leaves(value, (*path, index))
    else:
        yield path


@pytest.mark.parametrize("kind", sorted(RAW_SCHEMAS))
def test_every_field_of_the_raw_schemas_has_a_treatment(kind: str) -> None:
    root = _load(RAW_SCHEMAS[kind])
    missing = [
        "/".join(map(str, path))
        for path in schema_fields(root, root)
        if path and raw_treatment_of(kind, path) is None
    ]
    assert not missing, f"fields of {RAW_SCHEMAS[kind]} without a treatment: {missing}"


def _raw_kind(relative: str) -> str:
    if relative == "run.json":
        return "run"
    if relative == "model-manifest.json":
        return "manifest"
    return "server" if "/servers/" in relative else "exchange"


def test_every_field_of_the_raw_documents_has_a_treatment(seed_raw: Path) -> None:
    documents = dict(RawFactory().documents)
    for path in sorted(seed_raw.rglob("*.json")):
        documents[f"seed:{path.relative_to(seed_raw)}"] = json.loads(path.read_text())
    missing = [
        f"{name}/{'/'.join(map(str, leaf))}"
        for name, document in documents.items()
        for leaf in leaves(document)
        if raw_treatment_of(_raw_kind(name.removeprefix("seed:")), leaf) is None
    ]
    assert not missing
    assert raw_treatment_of("log", ()) is Treatment.DROPPED


def test_every_public_field_has_a_treatment(seed_raw: Path) -> None:
    assembled = assemble(load_raw(seed_raw))
    for file, document in assembled.documents.items():
        for leaf in leaves(document):
            treatment = treatment_of(public_kind(file), leaf)
            assert treatment not in (None, Treatment.DROPPED), (file, leaf)


def test_a_public_field_without_a_treatment_stops_the_export(factory_raw: Path) -> None:
    assembled = assemble(load_raw(factory_raw))
    assembled.documents["experiment.json"]["server"]["not_in_the_table"] = "2"
    with pytest.raises(ExportError, match=r"experiment.json/server/not_in_the_table: this field"):
        Redactor(()).redact_documents(assembled.documents)


def test_a_raw_field_without_a_treatment_is_not_in_the_table() -> None:
    assert raw_treatment_of("run", ("server", "not_in_the_table")) is None
    assert raw_treatment_of("exchange", ("request", "cookies")) is None


@pytest.mark.parametrize(
    ("kind", "path", "treatment"),
    [
        ("record", ("request_body", "messages", 0, "content"), Treatment.EVIDENCE),
        ("record", ("response", "choices", 0, "message", "content"), Treatment.EVIDENCE),
        (
            "record",
            ("response", "choices", 0, "message", "tool_calls", 0, "id"),
            Treatment.EVIDENCE,
        ),
        ("record", ("response", "usage", "prompt_tokens"), Treatment.EVIDENCE),
        ("record", ("response", "system_fingerprint"), Treatment.FREE_TEXT),
        ("record", ("response", "choices", 0, "message", "role"), Treatment.FREE_TEXT),
        ("record", ("telemetry", "after", "metrics", 'x{path="gather"}'), Treatment.EVIDENCE),
        ("record", ("telemetry", "after", "cache_stats", "dir"), Treatment.FREE_TEXT),
        ("record", ("error",), Treatment.FREE_TEXT),
        ("experiment", ("runtime_libraries", 1, "version"), Treatment.EVIDENCE),
        ("experiment", ("hardware", "cudnn_runtime"), Treatment.EVIDENCE),
        ("experiment", ("conditions", 0, "settings", "MLXCEL_X"), Treatment.EVIDENCE),
        ("experiment", ("conditions", 0, "servers", 0, "environment", "MLXCEL_X"), Treatment.PATH),
        ("experiment", ("conditions", 0, "servers", 0, "argv", 3), Treatment.FREE_TEXT),
        ("experiment", ("notes", 0), Treatment.FREE_TEXT),
        ("manifest", ("files", 0, "path"), Treatment.EVIDENCE),
    ],
)
def test_treatments_follow_evidence_md(
    kind: str, path: tuple[str | int, ...], treatment: Treatment
) -> None:
    assert treatment_of(kind, path) is treatment


def test_the_table_names_each_location_once() -> None:
    seen = [(row.raw, row.public) for row in FIELDS]
    assert len(seen) == len(set(seen))
