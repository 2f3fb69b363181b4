"""Per-request telemetry proofs: which claimed arms the recorded telemetry supports."""

from __future__ import annotations

from collections.abc import Iterator

from verifier.checks.context import BundleContext
from verifier.model import Finding, Severity

CHECK = "telemetry"


def check_telemetry(ctx: BundleContext) -> Iterator[Finding]:
    proofs = ctx.proofs
    for proof in proofs:
        record = proof.record
        for pointer in proof.bad_numbers:
            yield Finding(
                CHECK,
                Severity.ERROR,
                "a number that enters a proof is not a whole number in 0..2^53",
                file=record.file,
                pointer=pointer if pointer.startswith("/telemetry") else "/response" + pointer,
            )
        if proof.contradiction is not None:
            yield Finding(
                CHECK,
                Severity.ERROR,
                f"the record's telemetry contradicts itself: {proof.contradiction}",
                file=record.file,
                pointer="/telemetry",
            )
            continue
        if proof.failed is not None and _carries_completion(record.response):
            yield Finding(
                CHECK,
                Severity.ERROR,
                f"a request marked failed ({proof.failed}) carries a completion: a failed "
                "request must not hide an output from the comparison",
                file=record.file,
                pointer="/http_status",
            )
        elif proof.failed is not None:
            yield Finding(
                CHECK,
                Severity.WARNING,
                f"the request failed ({proof.failed}): left out of the comparison",
                file=record.file,
                pointer="/http_status",
            )
        elif not proof.proven:
            yield Finding(
                CHECK,
                Severity.WARNING,
                f"claimed {record.claimed_arm} not proven: {proof.reason}",
                file=record.file,
                pointer="/telemetry",
            )
        for disagreement in _counts_disagree(record.response):
            yield Finding(
                CHECK,
                Severity.ERROR,
                f"the response's own counts disagree: {disagreement}",
                file=record.file,
                pointer="/response/timings",
            )
        if proof.capped:
            yield Finding(
                CHECK,
                Severity.WARNING,
                "finish_reason is length: the output hit the token cap and is truncated",
                file=record.file,
                pointer="/response/choices/0/finish_reason",
            )
    prompt_tokens: dict[int, list[str]] = {}
    for proof in proofs:
        if proof.failed is None and proof.prompt_tokens is not None:
            prompt_tokens.setdefault(proof.prompt_tokens, []).append(proof.record.file)
    if len(prompt_tokens) > 1:
        (common, _), *others = sorted(prompt_tokens.items(), key=lambda kv: -len(kv[1]))
        for value, files in others:
            for file in files:
                yield Finding(
                    CHECK,
                    Severity.WARNING,
                    "prompt_tokens differs from the other requests: the prompt was not the same",
                    file=file,
                    pointer="/usage/prompt_tokens",
                    expected=str(common),
                    actual=str(value),
                )


# A server that reports its own timings (llama.cpp's `timings`) counts the same tokens twice:
# each pair must agree, or one of them was edited (a reply cut at its cap made to look short,
# a cold request made to look warm).
_TWICE = (
    ("timings.predicted_n", ("timings", "predicted_n"), "usage.completion_tokens",
     ("usage", "completion_tokens")),
    ("timings.cache_n", ("timings", "cache_n"), "usage.prompt_tokens_details.cached_tokens",
     ("usage", "prompt_tokens_details", "cached_tokens")),
)  # fmt: skip


def _count_at(response: dict[str, object], path: tuple[str, ...]) -> int | None:
    node: object = response
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    return node if isinstance(node, int) and not isinstance(node, bool) else None


def _counts_disagree(response: object) -> Iterator[str]:
    if not isinstance(response, dict) or not isinstance(response.get("timings"), dict):
        return
    for name, path, other_name, other_path in _TWICE:
        one, other = _count_at(response, path), _count_at(response, other_path)
        if one is not None and other is not None and one != other:
            yield f"{name} is {one}, {other_name} is {other}"
    processed, cached = (
        _count_at(response, ("timings", "prompt_n")),
        _count_at(response, ("timings", "cache_n")),
    )
    prompt = _count_at(response, ("usage", "prompt_tokens"))
    if processed is not None and cached is not None and prompt not in (None, processed + cached):
        yield (
            f"timings.prompt_n {processed} and timings.cache_n {cached} are not "
            f"usage.prompt_tokens {prompt}"
        )


def _carries_completion(response: object) -> bool:
    if not isinstance(response, dict):
        return False
    choices = response.get("choices")
    return isinstance(choices, list) and bool(choices)
