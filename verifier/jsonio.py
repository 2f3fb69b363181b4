"""Strict JSON reading (no duplicate keys, NaN, bad UTF-8 or absurd nesting) and stable writing.

A hostile document is stopped while it is parsed, not after: every value passes one counter
and one depth gauge before it is built, so a document of millions of tiny values or of
absurd nesting costs at most what the limits allow, in time and in memory. A document
that cannot break a limit or a rule (judged from its text first, then from what was
built) is read by orjson (kept only where it writes back the bytes it read) or by the
standard library's C parser alone, ~9x or ~5x faster; any other is read by the scanner,
which alone refuses and writes every message.
"""

from __future__ import annotations

import functools
import json
import json.decoder
import math
import re
import sys
from collections.abc import Callable
from typing import Any

import orjson

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
    """How many more JSON values may be built; one budget is shared by a bundle's documents.

    Documents the fast path read while far from the limit are counted only when the count
    can matter (`settle`): `remaining` is always exact when read.
    """

    def __init__(self, limit: int = MAX_VALUES, *, flag: str = "--max-json-values") -> None:
        self.limit = limit
        self.flag = flag
        self._remaining = limit
        self._deferred: list[Any] = []  # read, not yet counted
        self._deferred_bound = 0  # at least as many values as they hold

    @property
    def remaining(self) -> int:
        self.settle()
        return self._remaining

    def room(self) -> int:
        """At most this many values are left (the deferred documents' bound taken)."""
        return self._remaining - self._deferred_bound

    def defer(self, document: Any, bound: int) -> None:
        self._deferred.append(document)
        self._deferred_bound += bound

    def settle(self) -> None:
        if self._deferred:
            self._remaining -= sum(_count_values(d, None, any_int=True) for d in self._deferred)
            self._deferred, self._deferred_bound = [], 0

    def at_most(self) -> int:
        """At most this many values were taken (exactly, once settled), without counting."""
        return self.limit - self.room()

    def charge(self, document: Any, bound: int) -> bool:
        """Take the values of a document read elsewhere, which holds at most `bound`
        (`at_most` of the budget it was read with), if they fit in what is left, as if it
        had been read with this budget: counted only once the count can matter."""
        if bound <= self.room():
            self.defer(document, bound)
            return True
        values = _count_values(document, None, any_int=True)
        if values > self.remaining:
            return False
        self.take(values)
        return True

    def take(self, values: int) -> None:
        self._remaining -= values

    def spend(self) -> None:
        """One value, as the scanner builds it (it settles the budget before it starts)."""
        self._remaining -= 1
        if self._remaining < 0:
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
    text = _text(data)
    budget = budget if budget is not None else ValueBudget()
    document = _loads_fast(text, max_depth, budget, data)
    if document is _NOT_SURE:
        document = _loads_scanned(text, max_depth, budget)
    return document


def loads_reference(
    data: bytes, *, max_depth: int = MAX_DEPTH, budget: ValueBudget | None = None
) -> Any:
    """loads_strict without its fast path: every value judged as it is parsed (the tests'
    reference, and what loads_strict falls back to whenever its fast path is not sure)."""
    return _loads_scanned(_text(data), max_depth, budget if budget is not None else ValueBudget())


def _text(data: bytes) -> str:
    try:
        text = data.decode("utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        raise InvalidDocument(f"invalid UTF-8 at byte {exc.start}") from None
    if text.startswith("\ufeff"):
        raise InvalidDocument("a byte-order mark is not allowed")
    return text


def _loads_scanned(text: str, max_depth: int, budget: ValueBudget) -> Any:
    budget.settle()
    scanner = _Scanner(max_depth, budget)
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


# --- the fast path -------------------------------------------------------------------
#
# The standard library's C parser reads a valid document ~5x faster than the scanner
# above, which judges every value in Python, and orjson (`_decoded_orjson`) some 2x faster
# again. They are used only where they are sure to build exactly what the scanner builds;
# whenever a rule might be broken they answer "not sure" and the scanner reads the
# document again, so every refusal and its message are the scanner's alone:
# - a string or key with a lone surrogate can only come from a \\uD800-\\uDFFF escape
#   (strict UTF-8 refuses encoded surrogates): any such escape in the text -> not sure;
# - a fraction or exponent past MAX_NUMBER_CHARS or read as Infinity (parse_float sees
#   its text), an integer of 4,299+ digits (int() refuses 4,301+; the count sees the rest)
#   -> not sure;
# - NaN, Infinity, a duplicate key, any syntax error, a stack overflow -> not sure;
# - the values are counted and the nesting measured on what was built: past the budget
#   or past max_depth -> not sure (the scanner then stops where it always did).
_NOT_SURE: Any = object()
_intern = sys.intern
_MAYBE_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")


class _NotSure(Exception):
    pass


def _not_sure(_name: str) -> Any:
    raise _NotSure


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # Keys interned: the records of a bundle repeat the same few hundred keys, and the C
    # parser shares them only within one document (a third of the memory of 10,000 records).
    result = {_intern(key): value for key, value in pairs}
    if len(result) != len(pairs):
        raise _NotSure
    return result


def _finite_float(text: str) -> float:
    if len(text) > MAX_NUMBER_CHARS:
        raise _NotSure
    number = float(text)
    if number == _INFINITY or number == -_INFINITY:
        raise _NotSure
    return number


_INFINITY = math.inf
_HUGE = 10 ** (MAX_NUMBER_CHARS - 2)  # the least integer of 4,299 digits
_HUGE_DIGITS_N = MAX_NUMBER_CHARS - 1
# A run of 4,299 digits, tried only where a run starts: tried at every place of a run of
# 4,298, the search read it to its end from each (16 MiB of such runs took minutes).
_HUGE_DIGITS = re.compile(f"(?<![0-9])[0-9]{{{_HUGE_DIGITS_N}}}")
_DECODER = json.JSONDecoder(
    object_pairs_hook=_unique_keys, parse_constant=_not_sure, parse_float=_finite_float
)


def ints_bounded() -> bool:
    """Whether int(), and so the C parser, refuses integers longer than the strict rules
    read: where the environment lifts Python's bound (PYTHONINTMAXSTRDIGITS=0) it would
    read integers of any length, in quadratic time."""
    return 0 < sys.get_int_max_str_digits() <= MAX_NUMBER_CHARS


def _no_huge_run(text: str, data: bytes | None) -> bool:
    """Whether `text` holds no run of 4,299 digits: where its UTF-8 bytes `data` are given,
    read in them with each ASCII digit a `d` and every other byte a space (in UTF-8 an
    ASCII digit is its own byte, and no other character's bytes include one, so the runs
    of `d` are the runs of [0-9] of the text): one C loop and one C search, some 10x
    cheaper than the search for a run in the text (about 14 ns a character on a raw
    exchange)."""
    if len(text) < _HUGE_DIGITS_N:
        return True
    if data is not None:
        return _HUGE_RUN not in data.translate(_DIGITS_AS_D)
    return _HUGE_DIGITS.search(text) is None


_DIGITS_AS_D = bytes(ord("d") if 48 <= b <= 57 else ord(" ") for b in range(256))
_HUGE_RUN = b"d" * _HUGE_DIGITS_N


def _loads_fast(text: str, max_depth: int, budget: ValueBudget, data: bytes | None = None) -> Any:
    """`text` parsed by the C parser where the strict rules are sure to build the same
    value; else _NOT_SURE. `data`, where given, is `text` as UTF-8 bytes."""
    if not ints_bounded():
        return _NOT_SURE
    if _MAYBE_SURROGATE.search(text):
        return _NOT_SURE
    containers = text.count("[") + text.count("{")
    # At most this many values: each but the first is the first item of a container,
    # after its bracket, or follows a comma (strings may hold more of either, never fewer);
    # and every value takes a character and a separator or closer of its own, so a text
    # holds at most half as many values as characters (plus one).
    most = min(1 + text.count(",") + containers, (len(text) + 1) // 2)
    # Far from the budget's end the values need not be counted yet: only when what the
    # documents deferred might hold reaches it (of the records of `make bench`, `most` is
    # 1.16x the count, half the characters 21x). Deferred too: the nesting (never deeper
    # than the containers) and the integer length (no run of 4,299 digits).
    if most <= budget.room() and containers <= max_depth and _no_huge_run(text, data):
        document = _decoded(text, data, containers, most)
        if document is not _NOT_SURE:
            budget.defer(document, most)
        return document
    # A document that might spend the budget is read by the scanner, which stops in time.
    if most > budget.room() and most > budget.remaining:  # (room() is the cheaper bound)
        return _NOT_SURE
    document = _decoded(text, data, containers, most)
    if document is _NOT_SURE:
        return _NOT_SURE
    values = _count_values(document, max_depth if containers > max_depth else None)
    if values < 0:
        return _NOT_SURE
    budget.take(values)
    return document


def _decoded(text: str, data: bytes | None, containers: int, most: int) -> Any:
    """`text` (`data`, where given, as UTF-8, with at most `containers` arrays and objects
    and `most` values) parsed by orjson where it is sure to build what the standard
    library's parser builds, else by that parser; _NOT_SURE where the strict rules might
    refuse it."""
    if data is not None:
        document = _decoded_orjson(data, containers, most)
        if document is not _NOT_SURE:
            return document
    try:
        return _DECODER.decode(text)
    except (_NotSure, ValueError, RecursionError):  # JSONDecodeError is a ValueError
        return _NOT_SURE


# orjson reads a record in under half the standard library's time, but it is not
# trusted to read a hostile one: its cache of object keys takes a key for another whose
# (unseeded) hash is the same, without comparing them, and a writer can make two keys of
# 17 to 64 bytes collide at will; it reads an integer past 64 bits as a float, and of a
# duplicate key keeps the last value without a word. So what it read is kept only where
# it writes it back as the very bytes it read (`_AS_WRITTEN`: as export writes a document,
# indented by two with a final newline; or compact, without one). Those bytes then spell
# that value, and the standard library's parser reads it from them: every value orjson
# builds (str, an int of 64 bits, float, bool, None, dict, list) is written so that it
# reads back as itself, in the same order (a float in the shortest form that reads back,
# -0.0 as such; a string with the escapes JSON needs). A key taken for another, a member
# dropped, an integer read as a float, a number or escape spelled otherwise: the bytes
# differ, and the standard library's parser reads the document; so it does where orjson
# refuses one (NaN, Infinity, lone surrogates, a byte-order mark, nesting past 1,024
# levels) or cannot write it back (nesting past 254).
_AS_WRITTEN = orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE


def _decoded_orjson(data: bytes, containers: int, most: int) -> Any:
    """What orjson reads in `data`, where it writes that back as `data` (and so the standard
    library's parser reads the same value in `data`); else _NOT_SURE. `data` holds at most
    `containers` arrays and objects and `most` values.

    A document that orjson could write back in far more bytes than it holds (deep, and of
    many values: each line indented by two a level) is not written back at all: the
    standard library's parser reads it (`_write_back_bound`)."""
    if _write_back_bound(len(data), containers, most) > 16 * len(data) + _WRITE_BACK_FREE:
        return _NOT_SURE
    try:
        document = orjson.loads(data)
        again = orjson.dumps(document, option=_AS_WRITTEN if data.endswith(b"\n") else 0)
    except (orjson.JSONDecodeError, orjson.JSONEncodeError):
        return _NOT_SURE
    return document if again == data else _NOT_SURE


def _write_back_bound(size: int, containers: int, most: int) -> int:
    """At most how many bytes orjson writes back a document of `size` bytes with at most
    `containers` arrays and objects and `most` values: what it writes compact is at most
    5 bytes a byte of the text (a number of 4 characters, `9e15`, is written in 18, and
    nothing else grows as much), and indented, each line (a value, or the end of a
    container: at most `most` + `containers`) adds its newline, the space after a key's
    colon and two spaces a level, no deeper than `containers`."""
    return 5 * size + (most + containers) * (2 * containers + 2)


# What the write-back may take whatever the document's size (a record's takes some 44 KB).
_WRITE_BACK_FREE = 1 << 20

_PLAIN: Callable[[str], Any] = json.JSONDecoder().decode  # made once


def loads_plain(data: bytes) -> Any:
    """`json.loads(data.decode("utf-8"))`, duplicate keys, NaN and all, raising ValueError
    where it does; read by orjson where that is sure to read the same (`_decoded_orjson`),
    in about half the time. Not strict: for a reader that judges what it read against a
    strict reading of the same bytes."""
    containers = data.count(b"[") + data.count(b"{")
    # (in UTF-8, as in the text: a value but the first follows a comma or a bracket)
    document = _decoded_orjson(data, containers, 1 + data.count(b",") + containers)
    if document is not _NOT_SURE:
        return document
    return _PLAIN(data.decode("utf-8"))


def _count_values(document: Any, max_depth: int | None, *, any_int: bool = False) -> int:
    """How many values `document` holds (itself included); -1 when it nests deeper than
    `max_depth` (None: the caller knows it cannot) or, unless `any_int`, holds an integer
    of 4,299+ digits."""
    if type(document) is not dict and type(document) is not list:
        huge = type(document) is int and not -_HUGE < document < _HUGE and not any_int
        return -1 if huge else 1
    count = 1
    pending: list[tuple[Any, int]] = [(document, 1)]
    pop, push = pending.pop, pending.append
    while pending:
        node, depth = pop()
        if max_depth is not None and depth > max_depth:
            return -1
        children = node.values() if type(node) is dict else node
        count += len(children)
        for child in children:
            kind = type(child)
            if kind is dict or kind is list:
                push((child, depth + 1))
            elif kind is int and not -_HUGE < child < _HUGE and not any_int:
                return -1
    return count


def dumps_stable(document: Any) -> bytes:
    """Serialize for writing to a bundle: indented, UTF-8, final newline, same bytes every time."""
    text = json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False)
    return (text + "\n").encode("utf-8")


def json_key(value: Any) -> str:
    """A comparison key that tells `false` from `0` and `1` from `1.0`, as JSON does (Python's
    `==` does not)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


@functools.lru_cache(maxsize=1024)
def _pointer_parts(pointer: str) -> tuple[str, ...]:
    """The unescaped reference tokens of a pointer that starts with `/`: proofs resolve the
    same few pointers in every record."""
    return tuple(raw.replace("~1", "/").replace("~0", "~") for raw in pointer[1:].split("/"))


def resolve_pointer(document: Any, pointer: str) -> Any:
    """Resolve an RFC 6901 pointer; raise KeyError when any step is missing."""
    if pointer == "":
        return document
    if not pointer.startswith("/"):
        raise KeyError(pointer)
    node = document
    for part in _pointer_parts(pointer):
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
