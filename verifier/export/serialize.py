"""The bytes of a public document: `jsonio.dumps_stable`'s, built without its generators.

`json.dumps` with `indent` runs the pure-Python encoder, one generator per container level
for every value; on a 10,000-record export that was the largest cost left in export's own
code. `dumps_public` appends the same text to one list instead: strings through the same C
escaper (`json.encoder.encode_basestring`), numbers through `int.__repr__` and
`float.__repr__` as `json` does. Anything but the plain JSON types (a subclass, a tuple, a
key that is not a string, NaN or an infinity) goes to `dumps_stable` itself, which stays
the reference: tests/export/test_export_serialize.py checks the bytes are the same.
"""

from __future__ import annotations

from collections.abc import Callable
from json.encoder import encode_basestring
from typing import Any

from verifier.jsonio import dumps_stable

_INFINITY = float("inf")


class _Unusual(Exception):
    """A value the fast path leaves to json itself."""


def dumps_public(document: Any) -> bytes:
    """`dumps_stable(document)`, byte for byte."""
    out: list[str] = []
    try:
        _encode(document, "\n", out.append)
    except (_Unusual, RecursionError):
        return dumps_stable(document)
    out.append("\n")
    return "".join(out).encode("utf-8")


def _encode(value: Any, newline: str, out: Callable[[str], None]) -> None:
    """Append `value`'s text; `newline` is a newline and the indentation of its level."""
    kind = type(value)
    if kind is str:
        out(encode_basestring(value))
    elif kind is dict:
        if not value:
            out("{}")
            return
        inner = newline + "  "
        separator = "{" + inner
        for key, item in value.items():
            if type(key) is not str:
                raise _Unusual
            out(separator)
            out(encode_basestring(key))
            out(": ")
            _encode(item, inner, out)
            separator = "," + inner
        out(newline + "}")
    elif kind is list:
        if not value:
            out("[]")
            return
        inner = newline + "  "
        separator = "[" + inner
        for item in value:
            out(separator)
            _encode(item, inner, out)
            separator = "," + inner
        out(newline + "]")
    elif value is None:
        out("null")
    elif value is True:
        out("true")
    elif value is False:
        out("false")
    elif kind is int:
        out(int.__repr__(value))
    elif kind is float:
        if value != value or value == _INFINITY or value == -_INFINITY:
            raise _Unusual  # dumps_stable refuses it, with json's own message
        out(float.__repr__(value))
    else:
        raise _Unusual
