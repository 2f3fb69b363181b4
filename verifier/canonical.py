"""The canonical output hash and the first difference between two outputs (EVIDENCE.md)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from json.encoder import encode_basestring as _encode_string
from typing import Any

import rfc8785

from verifier.model import Sha256Hex


class OutputHashError(ValueError):
    """The response has no canonical output (not a chat completion, or ambiguous)."""


def canonical_output(response: Any) -> dict[str, Any]:
    """Reduce a chat-completion response to the object whose RFC 8785 bytes are hashed."""
    if not isinstance(response, dict):
        raise OutputHashError("the response is not a JSON object")
    choices = response.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise OutputHashError("the response has no choices[0]")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise OutputHashError("choices[0] has no message object")

    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise OutputHashError("message.content is neither a string nor null")

    reasoning: Any = None
    has_rc = "reasoning_content" in message and message["reasoning_content"] is not None
    has_r = "reasoning" in message and message["reasoning"] is not None
    if has_rc and has_r and message["reasoning_content"] != message["reasoning"]:
        raise OutputHashError("message.reasoning_content and message.reasoning differ")
    if has_rc:
        reasoning = message["reasoning_content"]
    elif has_r:
        reasoning = message["reasoning"]
    if reasoning is not None and not isinstance(reasoning, str):
        raise OutputHashError("the reasoning field is not a string")

    tool_calls: list[dict[str, Any]] | None = None
    if "tool_calls" in message and message["tool_calls"] is not None:
        raw_calls = message["tool_calls"]
        if not isinstance(raw_calls, list):
            raise OutputHashError("message.tool_calls is not a list")
        tool_calls = []
        for call in raw_calls:
            if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
                raise OutputHashError("a tool call has no function object")
            function = call["function"]
            if function.get("arguments") is not None and not isinstance(function["arguments"], str):
                raise OutputHashError("a tool call's arguments are not the string the server sent")
            tool_calls.append(
                {
                    "type": call.get("type"),
                    "function": {
                        "name": function.get("name"),
                        "arguments": function.get("arguments"),
                    },
                }
            )
    return {"content": content, "reasoning_content": reasoning, "tool_calls": tool_calls}


def output_hash(response: Any) -> Sha256Hex:
    """SHA-256 (lowercase hex) of the RFC 8785 serialization of the canonical output."""
    return canonical_hash(canonical_output(response))


def canonical_hash(canonical: dict[str, Any]) -> Sha256Hex:
    """output_hash's digest of a canonical output (canonical_output's result)."""
    encoded = _without_tool_calls(canonical)
    if encoded is None:
        try:
            encoded = rfc8785.dumps(canonical)
        except Exception as exc:  # rfc8785 raises its own types for floats out of range etc.
            raise OutputHashError(f"cannot canonicalize the output: {exc}") from None
    return Sha256Hex(hashlib.sha256(encoded).hexdigest())


def _without_tool_calls(canonical: dict[str, Any]) -> bytes | None:
    """rfc8785.dumps(canonical) for an output without tool calls (nearly every one), or
    None for any other (rfc8785 then writes it, or says why it cannot).

    Its keys in RFC 8785 order; each string as rfc8785 writes one (its escapes are those
    of json's encode_basestring: the quote, the backslash, and the short or six-character
    escape of each control character; every other character as itself, in UTF-8); a lone
    surrogate, which UTF-8 cannot encode, is left to rfc8785 to refuse.
    """
    content, reasoning = canonical["content"], canonical["reasoning_content"]
    if canonical["tool_calls"] is not None:
        return None
    if not (content is None or type(content) is str):
        return None
    if not (reasoning is None or type(reasoning) is str):
        return None
    text = (
        '{"content":'
        + ("null" if content is None else _encode_string(content))
        + ',"reasoning_content":'
        + ("null" if reasoning is None else _encode_string(reasoning))
        + ',"tool_calls":null}'
    )
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return None


@dataclass(frozen=True)
class FirstDifference:
    """Where two texts first differ, by Unicode code point, with a short excerpt of each side."""

    field: str
    index: int
    left_excerpt: str
    right_excerpt: str


def first_difference(
    field: str, left: str | None, right: str | None, *, context: int = 40
) -> FirstDifference | None:
    """Zero-based index of the first differing code point, or None when the texts are equal.

    `null` and `""` differ and are shown as such; where the differing characters are not
    plain printable ASCII (NFC against NFD, look-alikes, invisible characters), each
    excerpt ends with the code points at the index, so that texts that look the same show
    how they differ.
    """
    if left == right:
        return None
    if left is None or right is None:
        return FirstDifference(field, 0, _shown(left, 0, context), _shown(right, 0, context))
    index = _common_prefix(left, right)
    return FirstDifference(
        field, index, _shown(left, index, context), _shown(right, index, context)
    )


def _common_prefix(left: str, right: str) -> int:
    """The length of the longest common prefix: a binary search over slices compared in C,
    not a Python step per character (replies run to thousands of characters)."""
    low, high = 0, min(len(left), len(right))  # left[:low] == right[:low]; the answer <= high
    while low < high:
        middle = (low + high + 1) // 2
        if left[low:middle] == right[low:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def _shown(text: str | None, index: int, context: int) -> str:
    if text is None:
        return "null (absent)"
    if text == "":
        return '"" (empty)'
    start = max(0, index - context)
    prefix = "…" if start > 0 else ""
    suffix = "…" if index + context < len(text) else ""
    excerpt = prefix + text[start : index + context] + suffix
    at = text[index : index + 3]
    if not at:
        return excerpt + " [ends here]"
    if any(not (ch.isascii() and ch.isprintable()) for ch in at):
        return excerpt + " [at " + str(index) + ": " + " ".join(f"U+{ord(c):04X}" for c in at) + "]"
    return excerpt
