"""Every check of `evidence verify`, registered in one place. A new check is one entry here."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from verifier.checks import (
    checksums,
    completeness,
    consistency,
    leaks,
    manifest,
    output_hashes,
    profile,
    request_bodies,
    safety,
    schema,
    servers,
    signature,
    telemetry,
)
from verifier.checks.context import BundleContext
from verifier.model import Finding, Severity

Check = Callable[[BundleContext], Iterable[Finding]]

CHECKS: tuple[tuple[str, Check], ...] = (
    ("safety", safety.check_safety),
    ("checksums", checksums.check_checksums),
    ("signature", signature.check_signature),
    ("schema", schema.check_schema),
    ("output-hash", output_hashes.check_output_hashes),
    ("request-body", request_bodies.check_request_bodies),
    ("manifest", manifest.check_manifest),
    ("profile", profile.check_profile),
    ("completeness", completeness.check_completeness),
    ("servers", servers.check_servers),
    ("consistency", consistency.check_consistency),
    ("telemetry", telemetry.check_telemetry),
    ("leaks", leaks.check_leaks),
)


def run_checks(context: BundleContext) -> list[Finding]:
    """Every check, each on its own: one that fails unexpectedly becomes an error finding
    (the bundle is then not verified), and the others still run."""
    findings: list[Finding] = []
    for name, check in CHECKS:
        try:
            findings.extend(check(context))
        except Exception as exc:  # fail closed, and keep the rest of the report
            findings.append(internal_error(name, exc))
    return findings


def internal_error(check: str, exc: Exception) -> Finding:
    return Finding(
        check,
        Severity.ERROR,
        f"internal error in this check ({type(exc).__name__}): the bundle is not verified; "
        "please report this input as a bug in evidence",
    )
