"""What every check reads: the bundle's files, parsed once, and the typed views built on them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from verifier import layout, schemas
from verifier.bundle.reader import Limits, LoadedBundle
from verifier.errors import InvalidDocument, SchemaVersionError
from verifier.jsonio import MAX_DEPTH, loads_strict
from verifier.proofs import RequestProof, prove_all
from verifier.records import Experiment, Record
from verifier.schemas import SchemaViolation

ProgressCallback = Callable[[str, int, int], None]
"""(description, done, total): how far a long step (hashing a model) has come."""


@dataclass(frozen=True)
class VerifyOptions:
    public_key: Path | None = None
    model_dir: Path | None = None
    limits: Limits = field(default_factory=Limits)
    max_json_depth: int = MAX_DEPTH
    progress: ProgressCallback | None = None


class BundleContext:
    """A loaded bundle and everything derived from it, computed lazily and only once."""

    def __init__(self, bundle: LoadedBundle, options: VerifyOptions) -> None:
        self.bundle = bundle
        self.options = options

    @property
    def files(self) -> Mapping[str, bytes]:
        return self.bundle.files

    @cached_property
    def _parsed(self) -> tuple[dict[str, Any], dict[str, str]]:
        documents: dict[str, Any] = {}
        errors: dict[str, str] = {}
        for path, data in sorted(self.files.items()):
            if not path.endswith(".json"):
                continue
            try:
                documents[path] = loads_strict(data, max_depth=self.options.max_json_depth)
            except InvalidDocument as exc:
                errors[path] = exc.message
        return documents, errors

    @property
    def documents(self) -> dict[str, Any]:
        """Every JSON file that parsed under the strict rules."""
        return self._parsed[0]

    @property
    def parse_errors(self) -> dict[str, str]:
        return self._parsed[1]

    @cached_property
    def schema_violations(self) -> dict[str, list[SchemaViolation]]:
        """Violations per JSON file; a file absent from this map was not validated."""
        result: dict[str, list[SchemaViolation]] = {}
        for path, document in self.documents.items():
            kind = document.get("kind") if isinstance(document, dict) else None
            name = schemas.KIND_TO_SCHEMA.get(kind) if isinstance(kind, str) else None
            if name is None or name.startswith("raw-") or name == "report":
                result[path] = [SchemaViolation("/kind", f"unknown document kind {kind!r}", "kind")]
                continue
            try:
                schemas.check_schema_version(document, where=path)
            except SchemaVersionError as exc:
                result[path] = [SchemaViolation("/schema_version", exc.message, "schema_version")]
                continue
            result[path] = schemas.validate(document, name)
        return result

    def valid(self, path: str) -> Any | None:
        """The document at `path` if it parsed and matches its schema, else None."""
        if path in self.documents and not self.schema_violations.get(path, [None]):
            return self.documents[path]
        return None

    @cached_property
    def experiment(self) -> Experiment | None:
        document = self.valid(layout.EXPERIMENT)
        return Experiment.from_json(document) if document is not None else None

    @cached_property
    def records(self) -> list[Record]:
        """Schema-valid records whose location matches their condition and sequence."""
        found = []
        for path in sorted(self.documents):
            if not path.startswith(layout.RECORDS_DIR + "/"):
                continue
            document = self.valid(path)
            if document is None or document.get("kind") != "evidence.record":
                continue
            if layout.record_path(document["condition"], document["sequence"]) != path:
                continue
            found.append(Record.from_json(path, document))
        return found

    @cached_property
    def proofs(self) -> list[RequestProof]:
        experiment = self.experiment
        if experiment is None:
            return []
        known = {c.id for c in experiment.conditions}
        return prove_all(
            [r for r in self.records if r.condition in known],
            experiment.telemetry,
            {c.id: c.disabled_instances for c in experiment.conditions},
            experiment.opt_out_fields,
        )
