"""Which rules judge the bundle: the tool's own copy of the profile it names, never its own."""

from __future__ import annotations

from collections.abc import Iterator

from verifier import layout
from verifier.checks.context import BundleContext
from verifier.model import Finding, Severity

CHECK = "profile"


def check_profile(ctx: BundleContext) -> Iterator[Finding]:
    experiment, choice = ctx.experiment, ctx.rules_choice
    if experiment is None:
        return
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
