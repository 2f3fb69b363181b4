"""`dumps_public` writes exactly `dumps_stable`'s bytes (the plain path, json itself).

On every JSON document of the committed samples (bundles, negative samples, archives, the
raw capture), on what export makes of the seed capture, on hypothesis-generated JSON, and
on the values the fast path hands back to json (NaN, subclasses, tuples, odd keys).
"""

from __future__ import annotations

import enum
import json
import math
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verifier.export.assemble import assemble
from verifier.export.serialize import dumps_public, dumps_public_each
from verifier.jsonio import dumps_stable
from verifier.raw import load_raw

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "sample_bundles"


def _sample_documents() -> Iterator[tuple[str, bytes]]:
    for path in sorted(SAMPLES.rglob("*")):
        if path.is_file() and path.suffix == ".json":
            yield str(path.relative_to(SAMPLES)), path.read_bytes()
        elif path.is_file() and path.name.endswith(".tar.gz"):
            with tarfile.open(path, "r:gz") as archive:
                for member in archive:
                    handle = archive.extractfile(member) if member.isfile() else None
                    if handle is not None and member.name.endswith(".json"):
                        yield f"{path.name}:{member.name}", handle.read()


def _same(value: Any) -> None:
    try:
        expected = dumps_stable(value)
    except (ValueError, TypeError, UnicodeEncodeError, RecursionError) as exc:
        with pytest.raises(type(exc)):
            dumps_public(value)
        return
    assert dumps_public(value) == expected


def test_every_sample_document_gives_the_same_bytes() -> None:
    checked = 0
    for name, data in _sample_documents():
        try:
            value = json.loads(data)
        except ValueError:
            continue  # a negative sample that is not JSON
        assert dumps_public(value) == dumps_stable(value), name
        checked += 1
    assert checked > 100


def test_every_exported_document_gives_the_same_bytes(seed_raw: Path) -> None:
    documents = assemble(load_raw(seed_raw)).documents
    for document in documents.values():
        assert dumps_public(document) == dumps_stable(document)


_keys = st.text(max_size=8)
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(),
    st.sampled_from(["", "\x00", "\u2028", '"\\/', "é", "\U0001f600", "\x7f"]),
)
_json = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(_keys, inner, max_size=5)),
    max_leaves=40,
)


@settings(max_examples=400, deadline=None)
@given(value=_json)
def test_generated_json_gives_the_same_bytes(value: Any) -> None:
    _same(value)


class _Number(enum.IntEnum):
    ONE = 1


class _Text(str):
    pass


@pytest.mark.parametrize(
    "value",
    [
        {"a": math.nan},
        [math.inf],
        {"x": -math.inf},
        {"t": (1, 2, [3])},
        {1: "int key", "b": 2},
        {None: 1, True: 2, 1.5: 3},
        {"enum": _Number.ONE},
        {"text": _Text("sub")},
        {"set": {1, 2}},
        {"bytes": b"x"},
        {"surrogate": "\ud800"},
        -0.0,
        1e300,
        [[[[[]]]], {}],
    ],
    ids=repr,
)
def test_values_json_handles_itself_give_the_same_result(value: Any) -> None:
    _same(value)


def _same_each(values: list[Any]) -> None:
    """dumps_public_each gives each document's dumps_stable bytes, or the error the first
    document that json refuses gets."""
    expected: list[bytes] = []
    for value in values:
        try:
            expected.append(dumps_stable(value))
        except (ValueError, TypeError, UnicodeEncodeError, RecursionError) as exc:
            with pytest.raises(type(exc)):
                dumps_public_each(values)
            return
    assert dumps_public_each(values) == expected


def _shaped(value: Any, copies: int) -> list[Any]:
    """`copies` documents of the same keys with different values (a bundle's records)."""
    return [
        value if i == 0 else json.loads(json.dumps(value, ensure_ascii=False).replace("1", str(i)))
        for i in range(copies)
    ]


@settings(max_examples=300, deadline=None)
@given(values=st.lists(_json, max_size=12), copies=st.integers(1, 300))
def test_documents_written_together_give_each_one_s_bytes(values: list[Any], copies: int) -> None:
    _same_each(values)
    finite = [v for v in values if "NaN" not in json.dumps(v) and "Infinity" not in json.dumps(v)]
    if finite:
        _same_each(_shaped(finite[0], copies))


def test_the_records_of_an_export_written_together_give_their_bytes(seed_raw: Path) -> None:
    documents = list(assemble(load_raw(seed_raw)).documents.values())
    _same_each(documents)
    _same_each(documents * 300)  # past one batch of documents written together


@pytest.mark.parametrize(
    "odd",
    [{"a": math.nan}, {"t": (1, 2)}, {1: "int key"}, {"enum": _Number.ONE}, {"set": {1}}],
    ids=repr,
)
def test_an_odd_document_among_others_is_written_as_json_writes_it(odd: Any) -> None:
    _same_each([{"a": 1, "b": "x"}, odd, {"a": 2, "b": "y"}] * 100)


def test_the_first_refusal_in_order_is_the_one_made() -> None:
    """A lone surrogate (refused when encoded) before a NaN (refused when written): the
    surrogate's UnicodeEncodeError, as one document at a time gave it."""
    with pytest.raises(UnicodeEncodeError):
        dumps_public_each([{"a": 1}, {"a": "\ud800"}, {"a": math.nan}])
