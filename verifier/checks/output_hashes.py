"""Recompute each record's canonical output hash; the usage copy must match the response."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

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
        yield from _one_reply(path, record, response)
        if record["usage"] != response.get("usage"):
            yield Finding(
                CHECK,
                Severity.ERROR,
                "the usage copy differs from response.usage",
                file=path,
                pointer="/usage",
            )


def _one_reply(path: str, record: dict[str, Any], response: dict[str, Any]) -> Iterator[Finding]:
    """The protocol asks one reply of each request, and the output hash reads the first
    choice alone: a body that asks more (`n`, `best_of`, llama.cpp's `n_cmpl`; vLLM's beam
    search), a second choice, or a first one that says it is another (`index`) would leave
    a reply unjudged."""
    body = record.get("request_body")
    for field in ("n", "best_of", "n_cmpl", "use_beam_search"):
        value = body.get(field) if isinstance(body, dict) else None
        one = value is False if field == "use_beam_search" else type(value) is int and value == 1
        if value is not None and not one:
            yield Finding(
                CHECK,
                Severity.ERROR,
                f"the request asks {field}={value!r}: the protocol asks one reply of each "
                "request, and the output hash reads the first alone",
                file=path,
                pointer=f"/request_body/{field}",
            )
    choices = response.get("choices")
    if isinstance(choices, list) and len(choices) > 1:
        yield Finding(
            CHECK,
            Severity.ERROR,
            f"the response holds {len(choices)} choices: its output hash reads the first "
            "alone, so the others would go unjudged (the protocol asks one reply a request)",
            file=path,
            pointer="/response/choices/1",
        )
    first = choices[0] if isinstance(choices, list) and choices else None
    index = first.get("index") if isinstance(first, dict) else None
    if index is not None and not (type(index) is int and index == 0):
        yield Finding(
            CHECK,
            Severity.ERROR,
            f"the response's only choice says it is choice {index!r}: another was left out",
            file=path,
            pointer="/response/choices/0/index",
        )
