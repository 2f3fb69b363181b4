"""The JSON report's text: exactly `json.dumps(report, indent=2, ensure_ascii=False)`, faster.

With an indent the standard library uses its pure-Python encoder, a generator per
container and a yield per token: ~0.25 s for the report of a 10,000-record bundle. This
writer gives the same bytes with one list of pieces and no generators. It handles the
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


def reference_dumps(document: Any) -> str:
    """The plain path, and the reference the fast one is tested against."""
    return json.dumps(document, indent=2, ensure_ascii=False)


def dumps_indented(document: Any) -> str:
    """`json.dumps(document, indent=2, ensure_ascii=False)`, byte for byte."""
    return "".join(chunks_indented(document))


def chunks_indented(document: Any) -> list[str]:
    """The text of dumps_indented in pieces of some hundred kilobytes, to be written one
    after the other: the report of a large bundle is never held twice, nor as millions of
    small strings at once."""
    try:
        return _dumps(document)
    except (_Unusual, RecursionError):
        return [reference_dumps(document)]


def _scalar(value: Any) -> str:
    """A value that is no container, spelled as json.dumps spells it (its order of tests)."""
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
        if value != value:
            return "NaN"
        if value == INFINITY:
            return "Infinity"
        if value == -INFINITY:
            return "-Infinity"
        return _float_repr(value)
    raise _Unusual


_PIECES = 20_000  # small strings joined into one chunk at a time


def _dumps(document: Any) -> list[str]:
    chunks: list[str] = []
    pieces: list[str] = []
    append = pieces.append
    escape = encode_basestring
    scalar = _scalar

    def write(value: Any, newline: str) -> None:
        # `newline` is "\n" and the indentation of the line `value` starts on.
        kind = type(value)
        if kind is str:
            append(escape(value))
        elif kind is dict or (isinstance(value, dict) and not isinstance(value, list | tuple)):
            if not value:
                append("{}")
                return
            inner = newline + "  "
            separator = "{" + inner
            for key, item in value.items():
                if len(pieces) > _PIECES:
                    chunks.append("".join(pieces))
                    pieces.clear()
                if type(key) is not str:
                    raise _Unusual  # json.dumps turns such keys to text; leave it to it
                append(separator)
                append(escape(key))
                separator = "," + inner
                item_kind = type(item)
                if item_kind is str:
                    append(": " + escape(item))
                elif item_kind is dict or item_kind is list:
                    append(": ")
                    write(item, inner)
                elif item_kind is int:
                    append(": " + _int_repr(item))
                else:
                    append(": ")
                    write(item, inner)
            append(newline + "}")
        elif kind is list or kind is tuple or isinstance(value, list | tuple):
            if not value:
                append("[]")
                return
            inner = newline + "  "
            separator = "[" + inner
            for item in value:
                if len(pieces) > _PIECES:
                    chunks.append("".join(pieces))
                    pieces.clear()
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
        else:
            append(scalar(value))

    write(document, "\n")
    chunks.append("".join(pieces))
    return chunks
