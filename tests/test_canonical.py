"""The canonical output hash, exactly as EVIDENCE.md defines it."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
import rfc8785
from hypothesis import given
from hypothesis import strategies as st

from verifier.canonical import OutputHashError, canonical_output, first_difference, output_hash


def response(message: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "id": "x",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        **extra,
    }


def expected_hash(obj: dict[str, Any]) -> str:
    return hashlib.sha256(rfc8785.dumps(obj)).hexdigest()


def test_hash_covers_content_reasoning_and_tool_calls_only() -> None:
    a = response({"role": "assistant", "content": "hi"}, usage={"prompt_tokens": 1}, created=1)
    b = response({"role": "assistant", "content": "hi"}, usage={"prompt_tokens": 9}, created=2)
    assert output_hash(a) == output_hash(b)
    assert output_hash(a) == expected_hash(
        {"content": "hi", "reasoning_content": None, "tool_calls": None}
    )


def test_known_vector() -> None:
    # The RFC 8785 bytes written out by hand, as anyone's script would produce them.
    body = b'{"content":"A","reasoning_content":null,"tool_calls":null}'
    assert output_hash(response({"content": "A"})) == hashlib.sha256(body).hexdigest()


def test_empty_string_and_null_content_differ() -> None:
    assert output_hash(response({"content": ""})) != output_hash(response({"content": None}))
    assert output_hash(response({"content": None})) == output_hash(response({}))


def test_reasoning_alias_and_ambiguity() -> None:
    rc = response({"content": "x", "reasoning_content": "think"})
    alias = response({"content": "x", "reasoning": "think"})
    both = response({"content": "x", "reasoning_content": "think", "reasoning": "think"})
    assert output_hash(rc) == output_hash(alias) == output_hash(both)
    with pytest.raises(OutputHashError, match="differ"):
        output_hash(response({"content": "x", "reasoning_content": "a", "reasoning": "b"}))


def test_tool_call_ids_are_dropped_and_arguments_kept_verbatim() -> None:
    def call(call_id: str, arguments: str) -> dict[str, Any]:
        return {
            "id": call_id,
            "type": "function",
            "function": {"name": "f", "arguments": arguments},
        }

    one = response({"content": None, "tool_calls": [call("call_1", '{"a": 1}')]})
    two = response({"content": None, "tool_calls": [call("call_2", '{"a": 1}')]})
    spaced = response({"content": None, "tool_calls": [call("call_1", '{"a":1}')]})
    assert output_hash(one) == output_hash(two)
    assert output_hash(one) != output_hash(spaced)
    assert canonical_output(one)["tool_calls"] == [
        {"type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
    ]


@pytest.mark.parametrize(
    "bad",
    [None, [], {}, {"choices": []}, {"choices": [{}]}, {"choices": [{"message": {"content": 3}}]}],
)
def test_non_chat_completions_have_no_hash(bad: Any) -> None:
    with pytest.raises(OutputHashError):
        output_hash(bad)


@given(st.text(), st.text())
def test_any_content_change_changes_the_hash(a: str, b: str) -> None:
    same = output_hash(response({"content": a})) == output_hash(response({"content": b}))
    assert same == (a == b)


def test_key_order_and_escaping_do_not_matter() -> None:
    text = json.dumps(response({"content": "é\u2028", "role": "assistant"}), ensure_ascii=True)
    reordered = json.loads(text)
    assert output_hash(reordered) == output_hash(
        response({"role": "assistant", "content": "é\u2028"})
    )


def test_first_difference_counts_code_points() -> None:
    diff = first_difference("content", "naïve café 🙂 A", "naïve café 🙂 B")
    assert diff is not None and diff.index == 13
    assert first_difference("content", "same", "same") is None
    prefix = first_difference("content", "abc", "abcdef")
    assert prefix is not None and prefix.index == 3


@given(st.text(max_size=60), st.text(max_size=60), st.text(alphabet="ab", max_size=30))
def test_the_first_difference_is_that_of_a_scan_of_every_character(
    left: str, right: str, shared: str
) -> None:
    from verifier.canonical import _common_prefix

    for a, b in ((left, right), (shared + left, shared + right), (shared, shared + right)):
        plain = next(
            (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
        )
        assert _common_prefix(a, b) == plain
        found = first_difference("content", a, b)
        assert (found is None) == (a == b)
        if found is not None:
            assert found.index == plain


_TEXTS = st.none() | st.text() | st.sampled_from(["", '"\\', "\x00\x1f\x7f", "\u2028é😀", "\ud800"])


@given(_TEXTS, _TEXTS, st.booleans())
def test_the_hash_without_tool_calls_is_that_rfc8785_writes(
    content: str | None, reasoning: str | None, as_reasoning: bool
) -> None:
    from verifier import canonical

    field = "reasoning" if as_reasoning else "reasoning_content"
    response = {"choices": [{"message": {"content": content, field: reasoning}}]}
    try:
        plain: str | None = hashlib.sha256(rfc8785.dumps(canonical_output(response))).hexdigest()
    except rfc8785.CanonicalizationError:
        plain = None
    fast = canonical._without_tool_calls(canonical_output(response))
    assert fast is None or fast == rfc8785.dumps(canonical_output(response))
    try:
        got: str | None = output_hash(response)
    except OutputHashError:
        got = None
    assert got == plain
