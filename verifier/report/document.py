"""The report document: one JSON-able structure that every output format renders."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from verifier import __version__
from verifier.classify import Classification, ConditionResult, FiniteSampleBound
from verifier.localize import NEAR_TIE_NATS, Diagnosis, Side
from verifier.model import Arm, Finding, Severity, Verdict
from verifier.schemas import SCHEMA_VERSION
from verifier.verify import VerificationResult

EXIT_VERIFIED = 0
EXIT_NOT_VERIFIED = 1
EXIT_UNREADABLE = 2
EXIT_UNEXPECTED_VERDICT = 3
# The worst of several bundles decides the process's exit code: unreadable input first.
_SEVERITY_ORDER = (EXIT_UNREADABLE, EXIT_NOT_VERIFIED, EXIT_UNEXPECTED_VERDICT, EXIT_VERIFIED)


@dataclass(frozen=True)
class BundleOutcome:
    """One bundle of a `verify` call: its result, or why it could not be read."""

    source: str
    result: VerificationResult | None
    error: str | None = None
    expected: Verdict | None = None
    unsafe: bool = False  # refused as unsafe (a limit crossed): read, but not verified

    @property
    def verdict(self) -> Verdict:
        return self.result.verdict if self.result is not None else Verdict.INVALID

    @property
    def exit_code(self) -> int:
        if self.result is None:
            return EXIT_NOT_VERIFIED if self.unsafe else EXIT_UNREADABLE
        if not self.result.verified:
            return EXIT_NOT_VERIFIED
        if self.expected is not None and self.expected is not self.result.verdict:
            return EXIT_UNEXPECTED_VERDICT
        return EXIT_VERIFIED


def worst_exit_code(codes: list[int]) -> int:
    return next((code for code in _SEVERITY_ORDER if code in codes), EXIT_VERIFIED)


def _finding(finding: Finding) -> dict[str, Any]:
    return {
        "check": finding.check,
        "severity": str(finding.severity),
        "message": finding.message,
        "file": finding.file,
        "pointer": finding.pointer,
        "expected": finding.expected,
        "actual": finding.actual,
    }


def _bound(bound: FiniteSampleBound) -> dict[str, Any]:
    return {
        "requests": bound.requests,
        "variations": bound.variations,
        "upper_bound_95": bound.upper_bound,
        "sentence": bound.sentence,
    }


def _condition(result: ConditionResult) -> dict[str, Any]:
    return {
        "id": result.condition.id,
        "label": result.condition.label,
        "settings": result.condition.settings,
        "verdict": str(result.verdict),
        "reasons": list(result.reasons),
        "arms": {str(arm): result.counts.get(arm, {}) for arm in Arm},
        "baseline_class": result.baseline_label,
        "warm_class": result.warm_label,
        "excluded": [
            {
                "file": proof.record.file,
                "claimed_arm": str(proof.arm),
                "reason": proof.reason,
            }
            for proof in result.excluded
        ],
        "capped": result.capped,
        "first_differences": [
            {
                "field": d.field,
                "index": d.index,
                "baseline_excerpt": d.left_excerpt,
                "warm_excerpt": d.right_excerpt,
            }
            for d in result.first_differences
        ],
        "class_telemetry": [
            {
                "class": t.label,
                "arm": str(t.arm),
                "requests": t.requests,
                "cached_tokens": list(t.cached_tokens),
                "counter_deltas": {k: list(v) for k, v in t.counter_deltas.items()},
            }
            for t in result.class_telemetry
        ],
        "bound": _bound(result.bound),
        "diagnosis": _diagnosis(result.diagnosis),
    }


def _side(side: Side | None) -> dict[str, Any] | None:
    if side is None:
        return None
    return {
        "token": side.token,
        "logprob": side.logprob,
        "other_token_logprob": side.other_logprob,
        "other_token_logprob_at_most": side.other_at_most,
        "margin": side.margin,
        "top1_top2_gap": side.gap,
    }


def _diagnosis(diagnosis: Diagnosis | None) -> dict[str, Any] | None:
    """The divergence localized by the diagnostic phase (never part of the verdict)."""
    if diagnosis is None:
        return None
    found = diagnosis.localization
    return {
        "note": diagnosis.note,
        "files": list(diagnosis.files),
        "token_index": found.index if found else None,
        "near_tie": found.near_tie if found else None,
        "near_tie_nats": NEAR_TIE_NATS,
        "cold": _side(found.cold) if found else None,
        "warm": _side(found.warm) if found else None,
    }


def _classification(classification: Classification) -> dict[str, Any]:
    labels = {c.output_hash: c.label for c in classification.classes}
    return {
        "reasons": list(classification.reasons),
        "classes": [
            {"label": c.label, "output_hash": c.output_hash, "count": c.count}
            for c in classification.classes
        ],
        "conditions": [_condition(r) for r in classification.conditions],
        "bound": _bound(classification.bound),
        "requests": [
            {
                "file": p.record.file,
                "condition": p.record.condition,
                "sequence": p.record.sequence,
                "phase": p.record.phase,
                "claimed_arm": str(p.arm),
                "proven": p.proven,
                "reason": p.reason,
                "class": labels.get(p.record.output_hash or ""),
                "output_hash": p.record.output_hash,
                "cached_tokens": p.cached_tokens,
                "prompt_tokens": p.prompt_tokens,
                "finish_reason": p.record.finish_reason,
            }
            for p in classification.proofs
        ],
    }


def _experiment(result: VerificationResult) -> dict[str, Any] | None:
    if result.experiment is None:
        return None
    doc = result.experiment.document
    return {
        "title": doc.get("title"),
        "synthetic": bool(doc.get("synthetic", False)),
        "server": doc["server"],
        "model": doc["model"],
        "hardware": doc["hardware"],
        "protocol": doc["protocol"],
        "conditions": [c["id"] for c in doc["conditions"]],
    }


def bundle_document(outcome: BundleOutcome) -> dict[str, Any]:
    result = outcome.result
    findings = list(result.findings) if result is not None else []
    return {
        "source": outcome.source,
        "verified": bool(result is not None and result.verified),
        "verdict": str(outcome.verdict),
        "expected": str(outcome.expected) if outcome.expected is not None else None,
        "exit_code": outcome.exit_code,
        "error": outcome.error,
        "files": result.files if result is not None else 0,
        "signature": result.signature if result is not None else "unsigned",
        "finding_counts": {str(s): sum(1 for f in findings if f.severity is s) for s in Severity},
        "findings": [_finding(f) for f in findings],
        "experiment": _experiment(result) if result is not None else None,
        "classification": (
            _classification(result.classification)
            if result is not None and result.classification is not None
            else None
        ),
    }


def build_report(outcomes: list[BundleOutcome]) -> dict[str, Any]:
    """The report of one `verify` call; its schema is `evidence schema show report`."""
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "evidence.report",
        "tool": {"name": "evidence", "version": __version__},
        "exit_code": worst_exit_code([o.exit_code for o in outcomes]),
        "bundles": [bundle_document(o) for o in outcomes],
    }
