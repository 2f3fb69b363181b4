"""Verify one bundle: read it safely, run every check, classify what the evidence supports."""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from verifier import layout
from verifier.bundle.reader import Limits, read_bundle
from verifier.checks import BESIDE, in_order, internal_error, run_named
from verifier.checks.context import (
    BundleContext,
    EachAlone,
    Share,
    VerifyOptions,
    violations_of,
)
from verifier.classify import Classification, ProtocolContext, classify, sampled
from verifier.collector import fewer_collections
from verifier.errors import InvalidDocument, UsageError
from verifier.inputs import read_small_file
from verifier.jsonio import ValueBudget, loads_strict
from verifier.model import Finding, Verdict
from verifier.profiles.base import ServerLimits
from verifier.profiles.rules import ProfileRules, RulesError
from verifier.records import Experiment
from verifier.schemas import SchemaViolation

if TYPE_CHECKING:
    from verifier.forked import Forked

__all__ = [
    "VerificationResult",
    "VerifyOptions",
    "load_profile_rules",
    "skip_note",
    "verify_path",
]


@dataclass(frozen=True)
class VerificationResult:
    """What verify found in one bundle: its findings, experiment and classification."""

    source: str
    findings: tuple[Finding, ...]
    experiment: Experiment | None
    classification: Classification | None
    files: int
    signature: str  # unsigned | not checked | verified | failed
    # phase -> why this tool's plan of the protocol skips it (never the bundle's words);
    # None where no plan was made (no experiment, or one that plans too many records)
    skipped: Mapping[str, str] | None = None

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
        skipped = _skipped(context)
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
        skipped=skipped,
    )


_Beside = tuple[dict[str, list[Finding]], dict[str, bool]]  # findings by check; parsed


def _start_beside(context: BundleContext) -> Forked[_Beside] | None:
    """Share the work with a forked child, for a bundle large enough to gain from it.

    The child starts at once. First it parses and validates the last SHARED of the
    records (`_prepare`) and sends back their schema violations from a thread, while this
    process parses every document and validates the rest. Then it runs the BESIDE checks,
    parsing each document again on its own and holding one at a time (EachAlone), and
    sends back, with their findings, which documents it parsed: those findings count only
    if it parsed the documents this process did.
    """
    size = sum(len(data) for name, data in context.files.items() if name.endswith(".json"))
    if size < BESIDE_FROM_BYTES:
        return None
    from verifier import forked  # (pickle and the rest: only where a child is worth it)

    if not forked.can_fork():
        return None
    files, limits = context.files, context.options.limits
    records = sorted(
        p for p in files if p.startswith(layout.RECORDS_DIR + "/") and p.endswith(".json")
    )
    shared = records[len(records) - int(len(records) * SHARED) :]

    def work(channel: forked.Channel) -> _Beside:
        # Sent from a thread: the parent takes them only once it has parsed every document
        # and validated its own, and meanwhile this process goes on with its checks (the
        # thread waits in one write, without the GIL).
        def send(prepared: list[tuple[str, list[tuple[str, ...]]]]) -> None:
            try:
                channel.send(prepared)
            except BaseException:  # as in forked._child: the parent does all the work
                os._exit(1)

        sending = threading.Thread(target=send, args=(_prepare(files, shared, limits),))
        sending.start()
        documents = EachAlone(files, limits)
        found = run_named(BundleContext.over(context.bundle, context.options, documents), BESIDE)
        sending.join()
        return found, documents.parsed

    try:
        beside = forked.Forked(work)
    except forked.ChildFailed:
        return None
    context.share = Share(frozenset(shared), lambda: _prepared(beside, frozenset(shared)))
    return beside


# The share of the records the child validates for the parent before its own checks,
# while the parent parses every document and validates the rest. Measured on the
# 10,024-record bundle (timelines of `evidence verify`): with 0.40 the parent ended
# 0.3-0.6 s after the child, with 0.60 the two within 0.2 s (docs/BENCHMARKS.md).
SHARED = 0.60
# The child validates no document nested deeper than this, so that what this process
# takes from it never met a stack depth this process's own validation would not (the
# default limit is 64).
_SHARED_MAX_DEPTH = 200


def _prepare(
    files: Mapping[str, bytes], paths: list[str], limits: Limits
) -> list[tuple[str, list[tuple[str, ...]]]]:
    """The child's share of the validation: the schema violations of each document it
    could read, as tuples. One it cannot read, or whose validation fails unexpectedly, it
    leaves out: the parent validates that one itself. It reads at most the bundle's limit
    of values in all (the parent's budget bounds the parent's reading, not this)."""
    prepared: list[tuple[str, list[tuple[str, ...]]]] = []
    depth = min(limits.max_json_depth, _SHARED_MAX_DEPTH)
    left = limits.max_json_values
    for path in paths:
        try:
            budget = ValueBudget(left)
            document = loads_strict(files[path], max_depth=depth, budget=budget)
            left -= budget.at_most()
            prepared.append((path, [tuple(v) for v in violations_of(path, document)]))
        except Exception:  # noqa: S112 - the parent validates it, and reports what it finds
            continue
    return prepared


def _prepared(
    beside: Forked[_Beside], paths: frozenset[str]
) -> dict[str, list[SchemaViolation]] | None:
    """The schema violations the child found, by path; None (all validated here) if it sent
    nothing whole."""
    from verifier import forked

    try:
        message: object = beside.receive()
    except forked.ChildFailed:
        return None
    given: dict[str, list[SchemaViolation]] = {}
    try:
        for path, violations in message:  # type: ignore[attr-defined]
            if path not in paths or path in given or type(violations) is not list:
                return None
            given[path] = [SchemaViolation(*v) for v in violations]
    except Exception:  # not what the child sends: validate them here
        return None
    return given


def _findings_beside(beside: Forked[_Beside], context: BundleContext) -> dict[str, list[Finding]]:
    """The child's findings, if it delivered them and parsed every JSON file as this
    process did; otherwise the checks run here after all."""
    from verifier import forked

    if context.share is not None:
        context.share.ready()  # sent first: taken off the pipe even if it was never needed
    try:
        result: object = beside.result()
    except forked.ChildFailed:
        result = None
    if not (isinstance(result, tuple) and len(result) == 2):
        return run_named(context, BESIDE)
    theirs, parsed = result
    if not isinstance(theirs, dict) or set(theirs) != BESIDE or not parsed_alike(parsed, context):
        return run_named(context, BESIDE)
    return theirs


def parsed_alike(parsed: object, context: BundleContext) -> bool:
    """Whether a process that parsed the JSON files on its own (`parsed`: path -> whether
    it parsed) read them as `context` did: every one asked, and the same ones accepted.
    Only then are the findings it made from its own documents `context`'s."""
    json_files = {path for path in context.files if path.endswith(".json")}
    return (
        isinstance(parsed, dict)
        and set(parsed) == json_files
        and {path for path, ok in parsed.items() if ok} == set(context.documents)
    )


def skip_note(phase: str, why: str) -> str:
    """The experiment's note of a phase the tool's plan skips, as the reports state it."""
    return f"skipped {phase}: {why}"


def _skipped(context: BundleContext) -> Mapping[str, str] | None:
    """The phases this tool's plan skips, and why; None where it made no plan."""
    try:
        plan = context.plan
    except Exception:  # as _classify: a failure to plan is its finding, not a report line
        return None
    if plan is None or plan.unbuilt:
        return None
    return dict(plan.skipped)


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
        if plan is not None and plan.unbuilt:  # it cannot be complete: nothing to classify
            return experiment, None, None
        max_tokens = experiment.protocol.get("max_tokens")
        sampled_in, max_tokens_in = _servers_set(context, experiment, max_tokens)
        protocol = ProtocolContext(
            max_tokens=max_tokens,
            skipped=plan.skipped_controls if plan is not None else {},
            sampled=sampled(experiment.document.get("request_body")),
            sampled_in=sampled_in,
            max_tokens_in=max_tokens_in,
        )
        skips = [skip_note(p, why) for p, why in (plan.skipped if plan else {}).items()]
        if experiment.attached:
            declared = any(c.settings or c.server_args for c in experiment.conditions)
            skips.append(
                "attached to a server the harness did not start: no command line or "
                "environment was recorded, so what the server set for every request (a "
                "reply cap, a context, its sampling) is not known"
                + (", and the condition's settings and server arguments are declared, not "
                   "verified" if declared else "")
            )  # fmt: skip
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


def _servers_set(
    context: BundleContext, experiment: Experiment, max_tokens: object
) -> tuple[dict[str, str], dict[str, int | None]]:
    """What each condition's servers set for its requests beside the body (`ServerLimits`):
    why they sample anyway, and the one reply cap its requests met where it is one count
    of tokens (None where a server's context or an unread value limits them too)."""
    body_cap = max_tokens if isinstance(max_tokens, int) else None
    sampled_in: dict[str, str] = {}
    max_tokens_in: dict[str, int | None] = {}
    none = ServerLimits()
    for condition in experiment.conditions:
        limits = [s for s in context.condition_limits(condition.id) if s != none]
        if not limits:
            continue
        if why := next((s.sampling for s in limits if s.sampling), None):
            sampled_in[condition.id] = why
        caps = {s.reply_cap for s in limits}
        if any(s.context is not None or s.unread is not None for s in limits) or len(caps) > 1:
            max_tokens_in[condition.id] = None
        elif (cap := caps.pop()) is not None:
            max_tokens_in[condition.id] = cap if body_cap is None else min(cap, body_cap)
    return sampled_in, max_tokens_in


# The most bytes a `--profile` file is read to (the tool's own rules are some 2 KB).
MAX_PROFILE_FILE_BYTES = 1 << 20


def load_profile_rules(path: Path) -> ProfileRules:
    """A reviewer's `--profile FILE`: rules they chose, so the tool trusts them."""
    data = read_small_file(path, "--profile", MAX_PROFILE_FILE_BYTES)
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
