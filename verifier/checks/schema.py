"""Every document against its JSON Schema (every violation, located); required documents."""

from __future__ import annotations

from collections.abc import Iterator

from verifier import layout
from verifier.checks.context import BundleContext
from verifier.model import Finding, Severity

CHECK = "schema"
REQUIRED = (layout.EXPERIMENT, layout.MODEL_MANIFEST, layout.REDACTION_LEDGER)


def check_schema(ctx: BundleContext) -> Iterator[Finding]:
    for path in REQUIRED:
        if path not in ctx.files:
            yield Finding(CHECK, Severity.ERROR, "a required document is missing", file=path)
    for path, violations in ctx.schema_violations.items():
        for violation in violations:
            yield Finding(
                CHECK, Severity.ERROR, violation.message, file=path, pointer=violation.pointer
            )
    record_files = [p for p in ctx.files if p.startswith(layout.RECORDS_DIR + "/")]
    if not record_files:
        yield Finding(
            CHECK, Severity.ERROR, "the bundle has no request record", file=layout.RECORDS_DIR
        )
    experiment = ctx.experiment
    known = {c.id for c in experiment.conditions} if experiment else set()
    for path in sorted(record_files):
        document = ctx.valid(path)
        if document is None:
            continue
        expected = layout.record_path(document["condition"], document["sequence"])
        if expected != path:
            yield Finding(
                CHECK,
                Severity.ERROR,
                "the record's condition and sequence do not match its location",
                file=path,
                expected=expected,
                actual=path,
            )
        elif experiment is not None and document["condition"] not in known:
            yield Finding(
                CHECK,
                Severity.ERROR,
                "the record's condition is not in experiment.json",
                file=path,
                pointer="/condition",
                actual=document["condition"],
            )
    yield from _one_version(ctx)
    for path in sorted(ctx.files):
        if path.endswith(".json") or path in layout.UNSUMMED:
            continue
        yield Finding(
            CHECK,
            Severity.ERROR,
            "an unexpected file: a bundle holds only JSON documents",
            file=path,
        )


def _one_version(ctx: BundleContext) -> Iterator[Finding]:
    """One bundle, one schema version: the rules verify applies follow experiment.json's
    (those since 1.1 among them), so no other document may say another."""
    experiment = ctx.valid(layout.EXPERIMENT)
    if experiment is None:
        return
    version = experiment.get("schema_version")
    for path in sorted(p for p in ctx.files if p.endswith(".json") and p != layout.EXPERIMENT):
        document = ctx.valid(path)
        if document is not None and document.get("schema_version") != version:
            yield Finding(
                CHECK,
                Severity.ERROR,
                "the document's schema version is not experiment.json's: one bundle is "
                "written by one version of the format",
                file=path,
                pointer="/schema_version",
                expected=str(version),
                actual=str(document.get("schema_version")),
            )
