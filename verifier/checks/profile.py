"""Which rules judge the bundle: the tool's own copy of the profile it names, never its own."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from verifier import layout
from verifier.checks.context import BundleContext
from verifier.model import Finding, Severity
from verifier.schemas import SCHEMA_VERSION

CHECK = "profile"
_NEWEST_MINOR = int(SCHEMA_VERSION.partition(".")[2])  # the newest format this tool reads


def check_profile(ctx: BundleContext) -> Iterator[Finding]:
    experiment, choice = ctx.experiment, ctx.rules_choice
    if experiment is None:
        return
    yield from _other_versions_fields(experiment.document, experiment.schema_minor)
    if experiment.schema_minor > _NEWEST_MINOR:
        yield Finding(
            CHECK,
            Severity.WARNING,
            f"the bundle is written in format {experiment.document.get('schema_version')}, "
            f"newer than this tool's {SCHEMA_VERSION}: it is judged as {SCHEMA_VERSION}, and "
            "what the newer format adds is not read (upgrade evidence to read it)",
            file=layout.EXPERIMENT,
            pointer="/schema_version",
        )
    if choice.copy_differs and choice.rules is not None:
        yield Finding(
            CHECK,
            Severity.ERROR,
            f"the bundle carries rules for {choice.rules.key} that differ from this tool's: "
            "a bundle cannot choose the rules it is judged by",
            file=layout.EXPERIMENT,
            pointer="/profile_rules",
        )
    if choice.rules is None:
        yield Finding(
            CHECK, Severity.WARNING, choice.note, file=layout.EXPERIMENT, pointer="/server"
        )
    else:
        yield Finding(CHECK, Severity.INFO, choice.note, file=layout.EXPERIMENT, pointer="/server")


# Where each format keeps its copy of the rules: schema 1.0 the telemetry map and the
# opt-out fields, schema 1.1 the profile version and profile_rules. A document that holds
# the other format's copy is not the version it says, and the copy verify would not read
# is one more account of the rules that nothing checks: an error either way.
_RULES_OF_1_0 = ("telemetry", "opt_out_fields")
_RULES_OF_1_1 = ("profile_version", "profile_rules")


def _other_versions_fields(document: dict[str, Any], minor: int) -> Iterator[Finding]:
    stray = _RULES_OF_1_1 if minor == 0 else _RULES_OF_1_0
    for name in stray:
        if name in document:
            yield Finding(
                CHECK,
                Severity.ERROR,
                f"a schema 1.{min(minor, 1)} experiment carries {name}, which only schema "
                f"1.{1 if minor == 0 else 0} writes: it is not the version it says, or it "
                "carries a second account of the rules that judge it",
                file=layout.EXPERIMENT,
                pointer=f"/{name}",
            )
