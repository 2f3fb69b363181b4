"""Verify one bundle: read it safely, run every check, classify what the evidence supports."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from verifier import layout
from verifier.bundle.reader import read_bundle
from verifier.checks import BESIDE, in_order, internal_error, run_named
from verifier.checks.context import BundleContext, EachAlone, VerifyOptions
from verifier.classify import Classification, ProtocolContext, classify
from verifier.collector import fewer_collections
from verifier.errors import InvalidDocument, UsageError
from verifier.jsonio import loads_strict
from verifier.model import Finding, Verdict
from verifier.profiles.rules import ProfileRules, RulesError
from verifier.records import Experiment

if TYPE_CHECKING:
    from verifier.forked import Forked

__all__ = ["VerificationResult", "VerifyOptions", "load_profile_rules", "verify_path"]


@dataclass(frozen=True)
class VerificationResult:
    source: str
    findings: tuple[Finding, ...]
    experiment: Experiment | None
    classification: Classification | None
    files: int
    signature: str  # unsigned | not checked | verified | failed

    @property
    def verified(self) -> bool:
        """Fail closed: any error finding, or nothing to classify, is not verified."""
        return self.classification is not None and not any(f.is_error for f in self.findings)

    @property
    def verdict(self) -> Verdict:
        if not self.verified or self.classification is None:
            return Verdict.INVALID
        return self.classification.verdict


def verify_path(path: Path, options: VerifyOptions | None = None) -> VerificationResult:
    """Verify the bundle at `path` (a directory or a .tar.gz).

    Raises UnreadableInput or UnsafeInput when the input cannot be read safely at all;
    everything else wrong with a bundle is a finding.
    """
    with fewer_collections():
        return _verify(path, options or VerifyOptions())


# A bundle with less JSON than this is verified in one process: the fork would cost about
# as much as it saves (a fork is a few milliseconds; the checks run beside take ~100 us a
# record).
BESIDE_FROM_BYTES = 2_000_000


def _verify(path: Path, options: VerifyOptions) -> VerificationResult:
    bundle = read_bundle(path, options.limits)
    context = BundleContext(bundle, options)
    beside = _start_beside(context)
    try:
        found = run_named(context, skip=BESIDE if beside is not None else ())
        experiment, classification, failure = _classify(context)
        if beside is not None:
            found.update(_findings_beside(beside, context))
    finally:
        if beside is not None:
            beside.cancel()
    findings = in_order(found)
    if failure is not None:
        findings.append(failure)
    return VerificationResult(
        source=bundle.source,
        findings=tuple(findings),
        experiment=experiment,
        classification=classification,
        files=len(bundle.files),
        signature=_signature_status(
            findings, signed=layout.SIGNATURE in bundle.files, options=options
        ),
    )


_Beside = tuple[dict[str, list[Finding]], dict[str, bool]]  # findings by check; parsed


def _start_beside(context: BundleContext) -> Forked[_Beside] | None:
    """Run the BESIDE checks in a forked child, for a bundle large enough to gain from it.

    The child starts at once and parses each document on its own, holding one at a time
    (EachAlone). It sends back, with its findings, which documents it parsed: they count
    only if those are the ones this process parsed.
    """
    size = sum(len(data) for name, data in context.files.items() if name.endswith(".json"))
    if size < BESIDE_FROM_BYTES:
        return None
    from verifier import forked  # (pickle and the rest: only where a child is worth it)

    if not forked.can_fork():
        return None
    documents = EachAlone(context.files, context.options.limits)
    alone = BundleContext.over(context.bundle, context.options, documents)

    def work(_channel: object) -> _Beside:
        return run_named(alone, BESIDE), documents.parsed

    try:
        return forked.Forked(work)
    except forked.ChildFailed:
        return None


def _findings_beside(beside: Forked[_Beside], context: BundleContext) -> dict[str, list[Finding]]:
    """The child's findings, if it delivered them and parsed every JSON file as this
    process did; otherwise the checks run here after all."""
    from verifier import forked

    try:
        result: object = beside.result()
    except forked.ChildFailed:
        result = None
    if not (isinstance(result, tuple) and len(result) == 2):
        return run_named(context, BESIDE)
    theirs, parsed = result
    json_files = {path for path in context.files if path.endswith(".json")}
    if (
        not isinstance(theirs, dict)
        or set(theirs) != BESIDE
        or not isinstance(parsed, dict)
        or set(parsed) != json_files
        or {path for path, ok in parsed.items() if ok} != set(context.documents)
    ):
        return run_named(context, BESIDE)
    return theirs


def _classify(
    context: BundleContext,
) -> tuple[Experiment | None, Classification | None, Finding | None]:
    """The experiment, what its evidence supports, and the finding of a failure to say."""
    experiment: Experiment | None = None
    try:
        experiment = context.experiment
        if experiment is None or not context.records:
            return experiment, None, None
        plan = context.plan
        protocol = ProtocolContext(
            max_tokens=experiment.protocol.get("max_tokens"),
            skipped=plan.skipped_controls if plan is not None else {},
        )
        skips = [f"skipped {p}: {why}" for p, why in (plan.skipped if plan else {}).items()]
        if experiment.attached and any(c.settings or c.server_args for c in experiment.conditions):
            skips.append(
                "attached to a server the harness did not start: the condition's settings "
                "and server arguments are declared, not verified (no command line or "
                "environment was recorded)"
            )
        classification = classify(
            experiment.conditions,
            context.proofs,
            context.rules,
            protocol,
            notes=[context.rules_choice.note, *skips],
        )
    except Exception as exc:  # fail closed: a bug must never become a verdict
        return experiment, None, internal_error("classify", exc)
    return experiment, classification, None


def load_profile_rules(path: Path) -> ProfileRules:
    """A reviewer's `--profile FILE`: rules they chose, so the tool trusts them."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"--profile {path}: {exc.strerror or exc}") from None
    try:
        return ProfileRules.from_json(loads_strict(data))
    except InvalidDocument as exc:
        raise UsageError(f"--profile {path}: {exc.message}") from None
    except RulesError as exc:
        raise UsageError(f"--profile {path}: not profile rules: {exc}") from None


def _signature_status(findings: list[Finding], *, signed: bool, options: VerifyOptions) -> str:
    if any(f.check == "signature" and f.is_error for f in findings):
        return "failed"
    if not signed:
        return "unsigned"
    return "verified" if options.public_key is not None else "not checked"
