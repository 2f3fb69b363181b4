"""Strict JSON reading: what a hostile bundle may try is refused, never crashes."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from verifier.errors import InvalidDocument
from verifier.jsonio import dumps_stable, loads_strict, resolve_pointer


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"a": 1, "a": 2}', "duplicate key"),
        (b'{"a": NaN}', "NaN"),
        (b'{"a": Infinity}', "Infinity"),
        (b'{"a": -Infinity}', "Infinity"),
        (b'{"a": "\xff"}', "UTF-8"),
        (b"[" * 100 + b"]" * 100, "nesting"),
        (b"\xef\xbb\xbf{}", "byte-order mark"),
        (b"{", "not JSON"),
        (b'{"a": 1e400}', "out of range"),
        (b'{"a": ' + b"9" * 5000 + b"}", "a number of 5000 characters"),
        (b'{"a": "\\ud800"}', "lone surrogate"),
        (b'{"\\udc80": 1}', "lone surrogate"),
    ],
)
def test_refused(data: bytes, message: str) -> None:
    with pytest.raises(InvalidDocument, match=message):
        loads_strict(data)


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    assert loads_strict(b'{"a": "' + b"[" * 500 + b'"}') == {"a": "[" * 500}


@given(st.binary(max_size=200))
def test_any_bytes_parse_or_are_refused_cleanly(data: bytes) -> None:
    with contextlib.suppress(InvalidDocument):
        loads_strict(data)


def test_stable_dump_round_trips() -> None:
    document = {"b": [1, 2.5, None], "a": "é"}
    assert loads_strict(dumps_stable(document)) == document
    assert dumps_stable(document) == dumps_stable(document)


def test_pointer() -> None:
    document = {"a/b": [{"~c": 1}]}
    assert resolve_pointer(document, "/a~1b/0/~0c") == 1
    with pytest.raises(KeyError):
        resolve_pointer(document, "/a~1b/1")
