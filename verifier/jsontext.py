"""Indented JSON text: exactly `json.dumps(document, indent=2, ensure_ascii=False)`, faster.

The one writer of the two indented JSON texts the tool writes: the JSON report
(`verifier.report`) and every public document (`jsonio.dumps_stable`'s bytes, through
`export.serialize.dumps_public`). With an indent the standard library uses its pure-Python
encoder, a generator per container and a yield per token: ~0.25 s for the report of a
10,000-record bundle, ~1 s for the documents of its export. This writer gives the same
bytes with one list of pieces and no generators. It handles the
values a report holds (dict, list, tuple, str, int, float, bool, None and their
subclasses, string keys); on anything else (a non-string key, an unknown type, a cycle)
it leaves the whole document to `json.dumps`, which then answers as it always did.
"""

from __future__ import annotations

import json
from json.encoder import INFINITY, encode_basestring
from typing import Any

_float_repr = float.__repr__
_int_repr = int.__repr__


class _Unusual(Exception):
    """A value this writer does not spell itself: json.dumps writes the document."""


def reference_dumps(document: Any, *, allow_nan: bool = True) -> str:
    """The plain path, and the reference the fast one is tested against."""
    return json.dumps(document, indent=2, ensure_ascii=False, allow_nan=allow_nan)


def dumps_indented(document: Any, *, allow_nan: bool = True) -> str:
    """`json.dumps(document, indent=2, ensure_ascii=False, allow_nan=...)`, byte for byte
    (and its error, where it refuses the document)."""
    return "".join(chunks_indented(document, allow_nan=allow_nan))


def chunks_indented(document: Any, *, allow_nan: bool = True) -> list[str]:
    """The text of dumps_indented in pieces of some hundred kilobytes, to be written one
    after the other: the report of a large bundle is never held twice, nor as millions of
    small strings at once."""
    try:
        return _dumps(document, allow_nan)
    except (_Unusual, RecursionError):
        return [reference_dumps(document, allow_nan=allow_nan)]


def _scalar(value: Any, allow_nan: bool) -> str:
    """A value that is no container, spelled as json.dumps spells it (its order of tests);
    NaN and the infinities only where json.dumps would write them (else it says why not)."""
    if isinstance(value, str):
        return encode_basestring(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return _int_repr(value)
    if isinstance(value, float):
        if not allow_nan and (value != value or value in (INFINITY, -INFINITY)):
            raise _Unusual
        if value != value:
            return "NaN"
        if value == INFINITY:
            return "Infinity"
        if value == -INFINITY:
            return "-Infinity"
        return _float_repr(value)
    raise _Unusual


_PIECES = 20_000  # small strings joined into one chunk at a time


def _dumps(document: Any, allow_nan: bool) -> list[str]:
    chunks: list[str] = []
    pieces: list[str] = []
    append = pieces.append
    escape = encode_basestring

    def flush() -> None:
        chunks.append("".join(pieces))
        pieces.clear()

    def write_dict(value: dict[Any, Any], newline: str) -> None:
        if not value:
            append("{}")
            return
        inner = newline + "  "
        separator = "{" + inner
        for key, item in value.items():
            if type(key) is not str:
                raise _Unusual  # json.dumps turns such keys to text; leave it to it
            append(separator)
            append(escape(key))
            separator = "," + inner
            item_kind = type(item)
            if item_kind is str:
                append(": " + escape(item))
            elif item_kind is int:
                append(": " + _int_repr(item))
            elif item is None:
                append(": null")
            else:
                append(": ")
                write(item, inner)
        append(newline + "}")
        if len(pieces) > _PIECES:
            flush()

    def write_list(value: list[Any] | tuple[Any, ...], newline: str) -> None:
        if not value:
            append("[]")
            return
        inner = newline + "  "
        separator = "[" + inner
        for item in value:
            append(separator)
            separator = "," + inner
            item_kind = type(item)
            if item_kind is str:
                append(escape(item))
            elif item_kind is int:
                append(_int_repr(item))
            else:
                write(item, inner)
        append(newline + "]")
        if len(pieces) > _PIECES:
            flush()

    def write(value: Any, newline: str) -> None:
        # `newline` is "\n" and the indentation of the line `value` starts on. The exact
        # JSON types first (nearly every value), then subclasses the way json.dumps takes them.
        kind = type(value)
        if kind is str:
            append(escape(value))
        elif kind is dict:
            write_dict(value, newline)
        elif kind is list:
            write_list(value, newline)
        elif value is None:
            append("null")
        elif value is True:
            append("true")
        elif value is False:
            append("false")
        elif kind is int or kind is float:
            append(_scalar(value, allow_nan))
        elif isinstance(value, dict):  # no class is both a dict and a list or tuple
            write_dict(value, newline)
        elif isinstance(value, list | tuple):
            write_list(value, newline)
        else:
            append(_scalar(value, allow_nan))

    write(document, "\n")
    chunks.append("".join(pieces))
    return chunks
