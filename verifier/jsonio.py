"""Strict JSON reading (no duplicate keys, NaN, bad UTF-8 or absurd nesting) and stable writing."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from verifier.errors import InvalidDocument

MAX_DEPTH = 64
_TOKENS = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)


def _refuse_constant(name: str) -> Any:
    raise InvalidDocument(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise InvalidDocument(f"the number {text[:20]} is out of range (it would be Infinity)")
    return value


_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _check_strings(node: Any) -> None:
    """Refuse lone surrogates (escaped as \\ud800...): they are not Unicode text."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _LONE_SURROGATE.search(item):
                raise InvalidDocument("a string holds a lone surrogate (not valid Unicode)")
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise InvalidDocument(f"duplicate key {key!r}")
        result[key] = value
    return result


def _check_depth(data: bytes, limit: int) -> None:
    depth = 0
    for match in _TOKENS.finditer(data):
        token = match.group()
        if token in (b"[", b"{"):
            depth += 1
            if depth > limit:
                raise InvalidDocument(f"nesting deeper than {limit} levels")
        elif token in (b"]", b"}"):
            depth -= 1


def loads_strict(data: bytes, *, max_depth: int = MAX_DEPTH) -> Any:
    """Parse JSON bytes, refusing everything EVIDENCE.md says a hostile bundle may try."""
    try:
        text = data.decode("utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        raise InvalidDocument(f"invalid UTF-8 at byte {exc.start}") from None
    if text.startswith("\ufeff"):
        raise InvalidDocument("a byte-order mark is not allowed")
    _check_depth(data, max_depth)
    try:
        document = json.loads(
            text,
            object_pairs_hook=_no_duplicates,
            parse_constant=_refuse_constant,
            parse_float=_finite_float,
        )
    except json.JSONDecodeError as exc:
        raise InvalidDocument(
            f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except RecursionError:
        raise InvalidDocument("nesting too deep") from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        raise InvalidDocument(f"a number cannot be read: {str(exc)[:80]}") from None
    _check_strings(document)
    return document


def dumps_stable(document: Any) -> bytes:
    """Serialize for writing to a bundle: indented, UTF-8, final newline, same bytes every time."""
    text = json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False)
    return (text + "\n").encode("utf-8")


def resolve_pointer(document: Any, pointer: str) -> Any:
    """Resolve an RFC 6901 pointer; raise KeyError when any step is missing."""
    if pointer == "":
        return document
    if not pointer.startswith("/"):
        raise KeyError(pointer)
    node = document
    for raw in pointer[1:].split("/"):
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict):
            if part not in node:
                raise KeyError(pointer)
            node = node[part]
        elif isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                raise KeyError(pointer)
            node = node[int(part)]
        else:
            raise KeyError(pointer)
    return node
