"""Recompute each record's canonical output hash; the usage copy must match the response."""

from __future__ import annotations

from collections.abc import Iterator

from verifier import layout
from verifier.canonical import OutputHashError, output_hash
from verifier.checks.context import BundleContext
from verifier.model import Finding, Severity

CHECK = "output-hash"


def check_output_hashes(ctx: BundleContext) -> Iterator[Finding]:
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
            actual = output_hash(response)
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
        if record["usage"] != response.get("usage"):
            yield Finding(
                CHECK,
                Severity.ERROR,
                "the usage copy differs from response.usage",
                file=path,
                pointer="/usage",
            )
