"""Strict JSON reading (no duplicate keys, NaN, bad UTF-8 or absurd nesting) and stable writing.

A hostile document is stopped while it is parsed, not after: every value passes one counter
and one depth gauge before it is built, so a document of millions of tiny values or of
absurd nesting costs at most what the limits allow, in time and in memory.
"""

from __future__ import annotations

import json
import json.decoder
import math
import re
from collections.abc import Callable
from typing import Any

from verifier.errors import InvalidDocument, UnsafeInput

MAX_DEPTH = 64
MAX_VALUES = 1_000_000
# Python's own bound on the digits int() converts (its cost grows with the square of
# them). A shorter number that is out of range is the schemas' to refuse, as EVIDENCE.md
# "Numbers are bounded" says; a longer one cannot be read at all.
MAX_NUMBER_CHARS = 4300

_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")
_NUMBER = re.compile(r"(-?(?:0|[1-9][0-9]*))(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_WHITESPACE = re.compile(r"[ \t\n\r]*")
_LITERALS: tuple[tuple[str, Any], ...] = (("null", None), ("true", True), ("false", False))
# The grammar of arrays and objects (commas, colons, whitespace, their error messages)
# is the standard library's; only the scanning of each value is replaced.
_JSON_OBJECT: Callable[..., tuple[dict[str, Any], int]] = vars(json.decoder)["JSONObject"]
_JSON_ARRAY: Callable[..., tuple[list[Any], int]] = vars(json.decoder)["JSONArray"]
_SCANSTRING: Callable[[str, int, bool], tuple[str, int]] = vars(json.decoder)["scanstring"]


class ValueBudget:
    """How many more JSON values may be built; one budget is shared by a bundle's documents."""

    def __init__(self, limit: int = MAX_VALUES, *, flag: str = "--max-json-values") -> None:
        self.limit = limit
        self.remaining = limit
        self.flag = flag

    def spend(self) -> None:
        self.remaining -= 1
        if self.remaining < 0:
            raise UnsafeInput(
                f"the JSON documents hold more than {self.limit} values in all; reading "
                f"stopped (raise the limit with {self.flag} if you trust this input)"
            )


def _refuse_constant(name: str) -> Any:
    raise InvalidDocument(f"{name} is not valid JSON")


def _number(text: str) -> None:
    if len(text) > MAX_NUMBER_CHARS:
        raise InvalidDocument(
            f"a number of {len(text)} characters (at most {MAX_NUMBER_CHARS} are read): "
            f"{text[:20]}..."
        )


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise InvalidDocument(f"duplicate key {_shown(key)}")
        if _LONE_SURROGATE.search(key):
            raise InvalidDocument("a key holds a lone surrogate (not valid Unicode)")
        result[key] = value
    return result


def _shown(text: str) -> str:
    return repr(text if len(text) <= 60 else text[:60] + "...")


class _Scanner:
    """One document's value scanner: counts, depth and the rules, checked per value."""

    def __init__(self, max_depth: int, budget: ValueBudget) -> None:
        self.max_depth = max_depth
        self.depth = 0
        self.budget = budget
        self.memo: dict[str, str] = {}

    def scan(self, text: str, index: int) -> tuple[Any, int]:
        """Parse the value at `index`; StopIteration(index) when none starts there."""
        try:
            char = text[index]
        except IndexError:
            raise StopIteration(index) from None
        self.budget.spend()
        if char == '"':
            value, end = _SCANSTRING(text, index + 1, True)
            if _LONE_SURROGATE.search(value):
                raise InvalidDocument("a string holds a lone surrogate (not valid Unicode)")
            return value, end
        if char in "[{":
            self.depth += 1
            if self.depth > self.max_depth:
                raise InvalidDocument(f"nesting deeper than {self.max_depth} levels")
            try:
                if char == "[":
                    return _JSON_ARRAY((text, index + 1), self.scan)
                return _JSON_OBJECT(
                    (text, index + 1), True, self.scan, None, _no_duplicates, self.memo
                )
            finally:
                self.depth -= 1
        for literal, constant in _LITERALS:
            if text.startswith(literal, index):
                return constant, index + len(literal)
        match = _NUMBER.match(text, index)
        if match is not None:
            integer, fraction, exponent = match.groups()
            _number(match.group())
            if fraction or exponent:
                number = float(match.group())
                if math.isinf(number):
                    raise InvalidDocument(
                        f"the number {match.group()[:20]} is out of range (it would be Infinity)"
                    )
                return number, match.end()
            return int(integer), match.end()
        for constant in ("NaN", "Infinity", "-Infinity"):
            if text.startswith(constant, index):
                _refuse_constant(constant)
        raise StopIteration(index)


def loads_strict(
    data: bytes, *, max_depth: int = MAX_DEPTH, budget: ValueBudget | None = None
) -> Any:
    """Parse JSON bytes, refusing everything EVIDENCE.md says a hostile bundle may try.

    Raises InvalidDocument for a document that breaks a rule, and UnsafeInput once the
    value budget (shared by every document read with it) is spent.
    """
    try:
        text = data.decode("utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        raise InvalidDocument(f"invalid UTF-8 at byte {exc.start}") from None
    if text.startswith("\ufeff"):
        raise InvalidDocument("a byte-order mark is not allowed")
    scanner = _Scanner(max_depth, budget if budget is not None else ValueBudget())
    try:
        start = _WHITESPACE.match(text, 0)
        try:
            document, end = scanner.scan(text, start.end() if start else 0)
        except StopIteration as stop:
            raise json.JSONDecodeError("Expecting value", text, stop.value) from None
        rest = _WHITESPACE.match(text, end)
        if rest is not None and rest.end() != len(text):
            raise json.JSONDecodeError("Extra data", text, rest.end())
    except json.JSONDecodeError as exc:
        reason = exc.msg.removesuffix(" at")  # "Invalid control character at"
        raise InvalidDocument(
            f"not JSON: {reason} at line {exc.lineno} column {exc.colno}"
        ) from None
    except RecursionError:  # only if max_depth was raised past what the stack holds
        raise InvalidDocument("nesting too deep for this Python's stack") from None
    return document


def dumps_stable(document: Any) -> bytes:
    """Serialize for writing to a bundle: indented, UTF-8, final newline, same bytes every time."""
    text = json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False)
    return (text + "\n").encode("utf-8")


def json_key(value: Any) -> str:
    """A comparison key that tells `false` from `0` and `1` from `1.0`, as JSON does (Python's
    `==` does not)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


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
