"""Every check of `evidence verify`, registered in one place. A new check is one entry here."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable

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


# Checks that read only the bundle's files and documents and whose findings no other step
# reads: verify may run them in a forked child (`verifier.forked`) while it runs the others.
BESIDE: frozenset[str] = frozenset({"checksums", "leaks"})


def run_named(
    context: BundleContext, names: Collection[str] | None = None, *, skip: Collection[str] = ()
) -> dict[str, list[Finding]]:
    """The findings of the named checks (all of them by default) but those in `skip`, by
    check. Each runs on its own: one that fails unexpectedly becomes an error finding (the
    bundle is then not verified), and the others still run."""
    found: dict[str, list[Finding]] = {}
    for name, check in CHECKS:
        if (names is not None and name not in names) or name in skip:
            continue
        items = found[name] = []
        try:
            errors = 0
            for finding in check(context):
                if finding.is_error:
                    if errors == MAX_ERRORS:  # not verified already: the rest are not sought
                        items.append(too_many(name))
                        break
                    errors += 1
                items.append(finding)
        except Exception as exc:  # fail closed, and keep the rest of the report
            items.append(internal_error(name, exc))
    return found


# The errors one check reports at most: a bundle that has more (a protocol declared to plan
# millions of requests, none of them there) is not verified whatever the rest say, and its
# report stays readable. Warnings and notes are all kept: they do not decide alone.
MAX_ERRORS = 1000


def too_many(check: str) -> Finding:
    return Finding(
        check,
        Severity.ERROR,
        f"more than {MAX_ERRORS} errors in this check: the rest are not listed (the bundle is "
        "not verified)",
    )


def in_order(found: dict[str, list[Finding]]) -> list[Finding]:
    """Findings by check, in the registry's order (the report's order)."""
    return [finding for name, _ in CHECKS for finding in found.get(name, ())]


def internal_error(check: str, exc: Exception) -> Finding:
    return Finding(
        check,
        Severity.ERROR,
        f"internal error in this check ({type(exc).__name__}): the bundle is not verified; "
        "please report this input as a bug in evidence",
    )
