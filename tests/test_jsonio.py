"""Strict JSON reading: what a hostile bundle may try is refused, never crashes."""

from __future__ import annotations

import contextlib
import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from verifier.errors import InvalidDocument, UnsafeInput
from verifier.jsonio import ValueBudget, dumps_stable, loads_strict, resolve_pointer


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


# --- the scanner agrees with the standard library wherever no strict rule applies -------

_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**30), 10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(_VALUES, st.sampled_from([None, 0, 2]), st.booleans())
def test_any_document_reads_as_the_standard_library_reads_it(
    value: object, indent: int | None, ascii_only: bool
) -> None:
    text = json.dumps(value, indent=indent, ensure_ascii=ascii_only)
    if re.search(r"\\ud[89a-f]", text) or re.search("[\ud800-\udfff]", text):
        return  # lone surrogates are refused on purpose
    assert loads_strict(text.encode("utf-8", "surrogatepass")) == json.loads(text)


def _reference(text: str) -> object:
    """The standard library with the strict rules that are not about cost."""

    def pairs(items: list[tuple[str, object]]) -> dict[str, object]:
        if len({k for k, _ in items}) != len(items):
            raise ValueError("duplicate")
        return dict(items)

    def constant(name: str) -> object:
        raise ValueError(name)

    return json.loads(text, object_pairs_hook=pairs, parse_constant=constant)


@given(st.text(alphabet='{}[],:"\\ 0123456789.eE+-truefalsnNIiy\n\t', max_size=60))
def test_json_like_text_is_judged_as_the_standard_library_judges_it(text: str) -> None:
    try:
        expected = _reference(text)
    except (ValueError, RecursionError):
        with pytest.raises(InvalidDocument):
            loads_strict(text.encode())
        return
    try:
        got = loads_strict(text.encode())
    except InvalidDocument as exc:  # only for a rule the reference does not have
        assert re.search(r"out of range|a number of|nesting|surrogate", exc.message), exc.message
        return
    assert got == expected


def test_values_are_counted_across_documents_and_stop_reading() -> None:
    budget = ValueBudget(10)
    assert loads_strict(b"[1, 2, 3, [4]]", budget=budget) == [1, 2, 3, [4]]  # 6 values
    with pytest.raises(UnsafeInput, match=r"more than 10 values in all.*--max-json-values"):
        loads_strict(b'{"a": [null, true, false]}', budget=budget)


def test_depth_is_exact() -> None:
    assert loads_strict(b"[" * 64 + b"]" * 64) is not None
    with pytest.raises(InvalidDocument, match="nesting deeper than 64 levels"):
        loads_strict(b"[" * 65 + b"]" * 65)
    assert loads_strict(b'{"a":' * 3 + b"1" + b"}" * 3, max_depth=3) == {"a": {"a": {"a": 1}}}
