"""Recompute each record's canonical output hash; the usage copy must match the response."""

from __future__ import annotations

from collections.abc import Iterator

from verifier import layout
from verifier.canonical import OutputHashError, canonical_hash, canonical_output
from verifier.checks.context import BundleContext
from verifier.model import Finding, Severity

CHECK = "output-hash"


def check_output_hashes(ctx: BundleContext) -> Iterator[Finding]:
    # The digest of the last output hashed without tool calls, by its two strings: the
    # records of one condition nearly all give the same reply, in a row, and the digest
    # is a function of those two strings alone (compared by ==: str or None each).
    last: tuple[object, object, str] | None = None
    for path in sorted(ctx.documents):
        if not path.startswith(layout.RECORDS_DIR + "/"):
            continue
        record = ctx.valid(path)
        if record is None:
            continue
        claimed = record["output_hash"]
        response = record["response"]
        if record["http_status"] != 200 or response is None:
            if claimed is not None:
                yield Finding(
                    CHECK,
                    Severity.ERROR,
                    "a failed request cannot have an output hash",
                    file=path,
                    pointer="/output_hash",
                    expected="null",
                    actual=claimed,
                )
            continue
        try:
            canonical = canonical_output(response)
            if canonical["tool_calls"] is None:
                content, reasoning = canonical["content"], canonical["reasoning_content"]
                if last is not None and last[0] == content and last[1] == reasoning:
                    actual = last[2]
                else:
                    actual = canonical_hash(canonical)
                    last = (content, reasoning, actual)
            else:
                actual = canonical_hash(canonical)
        except OutputHashError as exc:
            yield Finding(
                CHECK,
                Severity.ERROR,
                f"the response has no canonical output: {exc}",
                file=path,
                pointer="/response/choices/0/message",
            )
            continue
        if claimed != actual:
            yield Finding(
                CHECK,
                Severity.ERROR,
                "the output hash does not match the response: output or hash was altered",
                file=path,
                pointer="/output_hash",
                expected=actual,
                actual=str(claimed),
            )
        choices = response.get("choices")
        if isinstance(choices, list) and len(choices) > 1:
            # (`n` above 1, or choices added: every reply must be judged, and only the first
            # enters the output hash)
            yield Finding(
                CHECK,
                Severity.ERROR,
                f"the response holds {len(choices)} choices: its output hash reads the first "
                "alone, so the others would go unjudged (the protocol asks one reply a request)",
                file=path,
                pointer="/response/choices/1",
            )
        if record["usage"] != response.get("usage"):
            yield Finding(
                CHECK,
                Severity.ERROR,
                "the usage copy differs from response.usage",
                file=path,
                pointer="/usage",
            )
