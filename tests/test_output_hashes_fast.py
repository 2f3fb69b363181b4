"""The output-hash check reuses the digest of the last output hashed when the next one has
the same two strings (and no tool calls): it finds exactly what hashing each record does."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sample_paths import BUNDLES, SAMPLES

from verifier import layout
from verifier.bundle.reader import Limits, read_bundle
from verifier.canonical import OutputHashError, output_hash
from verifier.checks import output_hashes
from verifier.checks.context import BundleContext, VerifyOptions
from verifier.model import Finding, Severity

CHECK = output_hashes.CHECK


def plain_check(ctx: Any) -> Iterator[Finding]:
    """check_output_hashes as it was: every record's output hashed on its own."""
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
                    CHECK, Severity.ERROR, "a failed request cannot have an output hash",
                    file=path, pointer="/output_hash", expected="null", actual=claimed,
                )  # fmt: skip
            continue
        try:
            actual = output_hash(response)
        except OutputHashError as exc:
            yield Finding(
                CHECK, Severity.ERROR, f"the response has no canonical output: {exc}",
                file=path, pointer="/response/choices/0/message",
            )  # fmt: skip
            continue
        if claimed != actual:
            yield Finding(
                CHECK, Severity.ERROR,
                "the output hash does not match the response: output or hash was altered",
                file=path, pointer="/output_hash", expected=actual, actual=str(claimed),
            )  # fmt: skip
        if record["usage"] != response.get("usage"):
            yield Finding(
                CHECK, Severity.ERROR, "the usage copy differs from response.usage",
                file=path, pointer="/usage",
            )  # fmt: skip


@pytest.mark.parametrize("bundle", BUNDLES)
def test_every_sample_gets_the_same_findings(bundle: str) -> None:
    context = BundleContext(read_bundle(SAMPLES / bundle, Limits()), VerifyOptions())
    assert list(output_hashes.check_output_hashes(context)) == list(plain_check(context))


class _Documents:
    """What the check reads of a context: its documents, each valid."""

    def __init__(self, documents: dict[str, Any]) -> None:
        self.documents = documents

    def valid(self, path: str) -> Any:
        return self.documents[path]


_TEXTS = st.sampled_from(["A", "B", "", None, "A\n", "\ud800", 7, ["A"]])
_MESSAGES = st.fixed_dictionaries(
    {"role": st.just("assistant"), "content": _TEXTS},
    optional={
        "reasoning_content": _TEXTS,
        "reasoning": _TEXTS,
        "tool_calls": st.sampled_from(
            [None, [], [{"type": "function", "function": {"name": "f", "arguments": "{}"}}], 3]
        ),
    },
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_MESSAGES, st.booleans(), st.booleans()), min_size=1, max_size=10))
def test_runs_of_outputs_get_the_same_findings(
    drawn: list[tuple[dict[str, Any], bool, bool]],
) -> None:
    # Outputs drawn from a few strings come in runs of equal ones, with tool calls, the
    # reasoning alias, strings rfc8785 refuses and values that are not strings in between;
    # each claims its own hash or another output's.
    base = BundleContext(read_bundle(SAMPLES / "seed-mlxcel", Limits()), VerifyOptions())
    template = base.documents[base.records[0].file]
    documents: dict[str, Any] = {}
    for index, (message, right, failed) in enumerate(drawn):
        document = copy.deepcopy(template)
        # (calls are read out of a reply only where its request offers tools: it does here)
        document["request_body"]["tools"] = [{"type": "function", "function": {"name": "f"}}]
        response = document["response"]
        response["choices"][0]["message"] = message
        try:
            own = output_hash(response)
        except OutputHashError:
            own = "0" * 64
        document["output_hash"] = own if right else "f" * 64
        if failed:
            document["http_status"] = 500
        documents[f"{layout.RECORDS_DIR}/c/{index:03d}.json"] = document
    context = _Documents(documents)
    assert list(output_hashes.check_output_hashes(context)) == list(plain_check(context))  # type: ignore[arg-type]
