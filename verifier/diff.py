"""Bundles of the same request side by side: what each arm gave, and what differs between them.

Each bundle is verified first; an invalid one is reported and left out of the comparison.
Output classes are matched across bundles by output hash, so "cold A, warm B" in one build
and "cold A, warm A" in the next reads as "the split is gone, cold unchanged".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from verifier import __version__
from verifier.canonical import first_difference
from verifier.checks.consistency import normalized_command_line
from verifier.classify import ConditionResult, class_label
from verifier.jsonio import json_key
from verifier.model import Arm
from verifier.profiles import PROFILES
from verifier.records import Experiment, Record
from verifier.schemas import SCHEMA_VERSION
from verifier.verify import VerificationResult

EXIT_OK = 0
EXIT_NOT_VERIFIED = 1
EXIT_UNREADABLE = 2
EXIT_UNEXPECTED = 3

# The most first differences of pairs of output classes a diff lists, and the most pairs it
# compares for them. Every pair of 2,240 classes (a bundle of 2,240 replies, each its own)
# took 57 s and 3.85 GB before running out of memory (audit_i r6); a reader wants the first
# few, and each pair compares two replies' texts.
MOST_FIRST_DIFFERENCES = 20
MOST_PAIRS_COMPARED = 1_000

# What a reviewer asks first when two runs disagree: (label, JSON pointer into experiment.json)
_COMPARED = (
    ("server build", "/server/build_commit"),
    ("server binary sha256", "/server/binary_sha256"),
    ("server version", "/server/version"),
    ("server profile", "/server/profile"),
    ("model", "/model"),
    ("hardware", "/hardware"),
    ("runtime libraries", "/runtime_libraries"),
    ("protocol", "/protocol"),
    ("request body", "/request_body"),
)


@dataclass(frozen=True)
class DiffInput:
    """One bundle of a diff: its verification, or why it could not be read."""

    source: str
    result: VerificationResult | None
    error: str | None = None  # why it could not be read


def _servers_ran_with(experiment: Experiment) -> list[dict[str, Any]]:
    """What an experiment's servers ran with beyond what its conditions vary: each distinct
    command line (without the cache flags, the condition's declared arguments, per-server
    scratch values and the port the harness picked) and environment (without the
    condition's settings). A condition's own settings and arguments are compared apart."""
    profile = PROFILES.get(experiment.profile)
    seen: dict[str, dict[str, Any]] = {}
    for condition in experiment.conditions:
        for server in condition.servers:
            argv = list(
                normalized_command_line(server, profile.rules, condition.server_args)
                if profile is not None
                else server.argv
            )
            for at, arg in enumerate(argv):
                if arg == "--port" and at + 1 < len(argv):
                    argv[at + 1] = "<port>"
                elif arg.startswith("--port="):
                    argv[at] = "--port=<port>"
            environment = {
                k: v for k, v in server.environment.items() if k not in condition.settings
            }
            ran = {"argv": argv, "environment": dict(sorted(environment.items()))}
            seen.setdefault(json_key(ran), ran)
    return [seen[key] for key in sorted(seen)]


def _pointer(document: dict[str, Any], pointer: str) -> Any:
    node: Any = document
    for part in pointer.strip("/").split("/"):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def _examples(result: VerificationResult) -> dict[str, Record]:
    found: dict[str, Record] = {}
    if result.classification is None:
        return found
    for proof in result.classification.proofs:
        digest = proof.record.output_hash
        if digest and proof.comparable and digest not in found:
            found[digest] = proof.record
    return found


def _arms(
    condition: ConditionResult, labels: dict[str, str], local: dict[str, str]
) -> dict[str, list[str]]:
    """Arm -> the global class labels it gave (local labels A, B... mapped by hash)."""
    return {
        str(arm): sorted(labels[local[label]] for label in counts)
        for arm, counts in condition.counts.items()
        if counts
    }


def _divergent_token(condition: ConditionResult) -> int | None:
    found = condition.diagnosis.localization if condition.diagnosis else None
    return found.index if found else None


def _describe(first: dict[str, list[str]], other: dict[str, list[str]]) -> str:
    def one(arms: dict[str, list[str]], arm: Arm) -> str:
        return "/".join(arms.get(str(arm), [])) or "none"

    cold_a, cold_b = one(first, Arm.COLD), one(other, Arm.COLD)
    warm_a, warm_b = one(first, Arm.WARM), one(other, Arm.WARM)
    split_a, split_b = cold_a != warm_a, cold_b != warm_b
    parts = []
    if split_a and not split_b:
        parts.append("the split is gone")
    elif split_b and not split_a:
        parts.append("a split appears")
    elif split_a and split_b:
        parts.append("the split remains")
    else:
        parts.append("no split in either")
    parts.append("cold unchanged" if cold_a == cold_b else f"cold {cold_b} (was {cold_a})")
    parts.append("warm unchanged" if warm_a == warm_b else f"warm {warm_b} (was {warm_a})")
    return ", ".join(parts)


def diff_bundles(inputs: Sequence[DiffInput]) -> dict[str, Any]:
    """The diff document (schemas/diff.schema.json) of bundles compared with the first."""
    bundles: list[dict[str, Any]] = []
    compared: list[tuple[int, VerificationResult]] = []
    for index, item in enumerate(inputs):
        result = item.result
        verified = result is not None and result.verified
        bundles.append(
            {
                "source": item.source,
                "verified": verified,
                "verdict": str(result.verdict) if result is not None else "invalid",
                "unreadable": result is None,
                "error": item.error or (None if verified else _why_not_compared(result)),
            }
        )
        if verified and result is not None and result.experiment is not None:
            compared.append((index, result))

    labels: dict[str, str] = {}  # output hash -> global label
    examples: dict[str, Record] = {}
    for _, result in compared:
        assert result.classification is not None
        for output_class in result.classification.classes:
            labels.setdefault(output_class.output_hash, class_label(len(labels)))
        for digest, record in _examples(result).items():
            examples.setdefault(digest, record)

    differences = []
    for name, pointer in _COMPARED:
        values = [_pointer(r.experiment.document, pointer) for _, r in compared if r.experiment]
        if len({json_key(v) for v in values}) > 1:
            differences.append({"what": name, "pointer": pointer, "values": values})
    servers = [_servers_ran_with(r.experiment) for _, r in compared if r.experiment]
    if len({json_key(v) for v in servers}) > 1:
        differences.append(
            {"what": "server command lines and environment", "pointer": "/conditions",
             "values": servers}
        )  # fmt: skip

    bodies = {json_key(r.experiment.document["request_body"]) for _, r in compared if r.experiment}
    conditions: list[dict[str, Any]] = []
    # each bundle's local labels and conditions by id, looked up once (not once a condition)
    locals_: list[dict[str, str]] = []
    by_id: list[dict[str, ConditionResult]] = []
    ids: dict[str, None] = {}  # in order of first appearance
    for _, result in compared:
        assert result.classification is not None
        locals_.append({c.label: c.output_hash for c in result.classification.classes})
        mine: dict[str, ConditionResult] = {}
        for c in result.classification.conditions:
            mine.setdefault(c.condition.id, c)
            ids.setdefault(c.condition.id, None)
        by_id.append(mine)
    for cid in ids:
        per_bundle: list[dict[str, Any] | None] = []
        for local, mine in zip(locals_, by_id, strict=True):
            found = mine.get(cid)
            per_bundle.append(
                None
                if found is None
                else {
                    "verdict": str(found.verdict),
                    "settings": found.condition.settings,
                    "server_args": list(found.condition.server_args),
                    "arms": _arms(found, labels, local),
                    "divergent_token": _divergent_token(found),
                }
            )
        present = [b for b in per_bundle if b is not None]
        changes = [
            _describe(present[0]["arms"], other["arms"]) for other in present[1:]
        ] if present else []  # fmt: skip
        settings_differ = len({json_key([b["settings"], b["server_args"]]) for b in present}) > 1
        conditions.append(
            {
                "id": cid,
                "bundles": per_bundle,
                "changes": changes,
                "settings_differ": settings_differ,
            }
        )

    ordered = sorted(labels, key=lambda d: (len(labels[d]), labels[d]))
    first_differences, not_compared = _first_differences(ordered, labels, examples)
    same = (
        len(compared) == len(inputs) > 0
        and len(bodies) <= 1
        and all(
            all(b is not None for b in c["bundles"])
            and not c["settings_differ"]
            and len(
                {json_key([b["verdict"], b["arms"], b["divergent_token"]]) for b in c["bundles"]}
            )
            == 1
            for c in conditions
        )
    )
    bodies = {json_key(r.experiment.document["request_body"]) for _, r in compared if r.experiment}
    same_request = len(bodies) <= 1
    notes = []
    if not same_request:
        notes.append(
            "the bundles answer different requests: their outputs cannot be the same classes, "
            "so compare them as separate experiments"
        )
    if len(compared) < len(inputs):
        notes.append(f"{len(inputs) - len(compared)} bundle(s) did not verify and are not compared")
    if not_compared:
        notes.append(
            f"{not_compared} pair(s) of output classes not compared for their first difference: "
            f"the tool lists at most {MOST_FIRST_DIFFERENCES} and compares at most "
            f"{MOST_PAIRS_COMPARED} pairs (in class order, each with the ones after it)"
        )
    given = [
        (i, {c.output_hash for c in r.classification.classes})
        for i, r in compared
        if r.classification
    ]
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "evidence.diff",
        "same_request": same_request,
        "notes": notes,
        "tool": {"name": "evidence", "version": __version__},
        "bundles": bundles,
        "classes": [
            {
                "label": labels[d],
                "output_hash": d,
                "bundles": [i for i, hashes in given if d in hashes],
            }
            for d in ordered
        ],
        "conditions": conditions,
        "differences": differences,
        "first_differences": first_differences,
        "outcome": "same" if same else "changed",
    }


def _first_differences(
    ordered: Sequence[str], labels: dict[str, str], examples: dict[str, Record]
) -> tuple[list[dict[str, Any]], int]:
    """The first differences of pairs of output classes, each class against the ones after
    it in class order, and how many pairs were not compared: at most MOST_FIRST_DIFFERENCES
    listed and MOST_PAIRS_COMPARED compared, so that a bundle of many classes (every reply
    its own) is not compared pair by pair."""
    shown = [digest for digest in ordered if digest in examples]
    pairs = len(shown) * (len(shown) - 1) // 2
    found: list[dict[str, Any]] = []
    compared = 0
    for i, left in enumerate(shown):
        for right in shown[i + 1 :]:
            if len(found) >= MOST_FIRST_DIFFERENCES or compared >= MOST_PAIRS_COMPARED:
                return found, pairs - compared
            compared += 1
            a, b = examples[left], examples[right]
            for field, x, y in (
                ("content", a.content, b.content),
                ("reasoning_content", a.reasoning, b.reasoning),
            ):
                difference = first_difference(field, x, y)
                if difference is not None:
                    found.append(
                        {
                            "classes": [labels[left], labels[right]],
                            "field": field,
                            "index": difference.index,
                            "left_excerpt": difference.left_excerpt,
                            "right_excerpt": difference.right_excerpt,
                        }
                    )
                    break
    return found, pairs - compared


def _why_not_compared(result: VerificationResult | None) -> str:
    """Why a bundle that did not verify is not compared: its first error, and how many."""
    errors = [f for f in result.findings if f.is_error] if result is not None else []
    if not errors:
        return "the bundle did not verify (nothing to classify): not compared"
    first = errors[0]
    where = f" ({first.file}{first.pointer or ''})" if first.file else ""
    more = f", and {len(errors) - 1} more" if len(errors) > 1 else ""
    return f"the bundle did not verify ({first.check}: {first.message}{where}{more}): not compared"


def exit_code(document: dict[str, Any], expect: str | None) -> int:
    bundles = document["bundles"]
    if any(b["unreadable"] for b in bundles):
        return EXIT_UNREADABLE
    if not all(b["verified"] for b in bundles):
        return EXIT_NOT_VERIFIED
    if expect is not None and document["outcome"] != expect:
        return EXIT_UNEXPECTED
    return EXIT_OK
