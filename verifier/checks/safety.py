"""Safety of what was read: the reader's refusals and the strict JSON rules."""

from __future__ import annotations

from collections.abc import Iterator

from verifier.checks.context import BundleContext
from verifier.model import Finding, Severity


def check_safety(ctx: BundleContext) -> Iterator[Finding]:
    yield from ctx.bundle.findings
    for path, message in ctx.parse_errors.items():
        yield Finding("safety", Severity.ERROR, f"refused JSON: {message}", file=path)
