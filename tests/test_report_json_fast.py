"""The JSON report's writer gives json.dumps(indent=2, ensure_ascii=False)'s bytes.

verifier/jsontext.py stands in for the standard library's pure-Python encoder
(`reference_dumps`, the plain path): on every sample bundle's report, on the hostile
corpus (tests/hostile/test_corpus_json_report.py) and on hypothesis-generated values.
Its column writer (`_Columns`: long lists, their dicts' values by key) is tested with
the plain path made to fail, so that a value it gave back to json.dumps fails the test.
"""

from __future__ import annotations

import enum
import json
import math
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sample_paths import BUNDLES, KEY, SAMPLES

from verifier import jsontext
from verifier.checks.context import VerifyOptions
from verifier.jsontext import dumps_indented, reference_dumps
from verifier.report.document import BundleOutcome, build_report
from verifier.verify import verify_path


def test_every_sample_is_found() -> None:
    assert "seed-mlxcel" in BUNDLES and "negative/duplicate-json-key" in BUNDLES
    assert len(BUNDLES) > 30


@pytest.mark.parametrize("bundle", BUNDLES)
def test_every_sample_report_is_written_as_json_dumps_writes_it(bundle: str) -> None:
    result = verify_path(SAMPLES / bundle, VerifyOptions(public_key=KEY))
    report = build_report([BundleOutcome(bundle, result)])
    assert dumps_indented(report) == json.dumps(report, indent=2, ensure_ascii=False)


@pytest.mark.parametrize("bundle", BUNDLES)
def test_every_sample_report_through_columns_alone(
    bundle: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every list of two items or more laid out by _Columns after its first, three items
    at a time: its batches and every column of a report, and never json.dumps's text."""
    result = verify_path(SAMPLES / bundle, VerifyOptions(public_key=KEY))
    report = build_report([BundleOutcome(bundle, result)])
    expected = json.dumps(report, indent=2, ensure_ascii=False)
    with monkeypatch.context() as patched:
        patched.setattr(jsontext, "_COLUMN", 2)
        patched.setattr(jsontext, "_ROWS", 3)
        patched.setattr(jsontext, "reference_dumps", _no_fallback)
        assert dumps_indented(report) == expected


def _no_fallback(document: Any, *, allow_nan: bool = True) -> str:
    raise AssertionError("the fast writer gave this document to json.dumps")


def test_all_samples_in_one_report() -> None:
    outcomes = [BundleOutcome(b, verify_path(SAMPLES / b)) for b in BUNDLES[:12]]
    outcomes.append(BundleOutcome("missing", None, error="no such file", unsafe=True))
    report = build_report(outcomes)
    assert dumps_indented(report) == reference_dumps(report)


class _Word(enum.StrEnum):
    HIT = "hit"


class _Level(enum.IntEnum):
    ONE = 1


class _Text(str):
    pass


class _Number(float):
    pass


_STRINGS = st.text() | st.sampled_from(["", '"', "\\", "\u2028", "\x00", "é", "\ud800", "😀"])
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()  # NaN and the infinities too: json.dumps writes them
    | _STRINGS
    | st.sampled_from([_Word.HIT, _Level.ONE, _Text("x\n"), _Number(2.5), -0.0, math.inf])
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(_STRINGS, inner, max_size=5)
    ),
    max_leaves=40,
)


@settings(max_examples=400, deadline=None)
@given(_VALUES)
def test_any_value_is_written_as_json_dumps_writes_it(value: Any) -> None:
    assert dumps_indented(value) == json.dumps(value, indent=2, ensure_ascii=False)


@given(
    st.dictionaries(
        st.integers() | st.floats() | st.booleans() | st.none() | _STRINGS, _SCALARS, max_size=4
    )
)
def test_keys_that_are_no_strings_are_left_to_json_dumps(value: dict[Any, Any]) -> None:
    assert dumps_indented(value) == json.dumps(value, indent=2, ensure_ascii=False)


def test_what_json_dumps_refuses_it_refuses_alike() -> None:
    looped: list[Any] = []
    looped.append(looped)
    for bad in (looped, {"a": object()}, {"a": {1, 2}}, {(1, 2): 3}):
        with pytest.raises((TypeError, ValueError)) as expected:
            json.dumps(bad, indent=2, ensure_ascii=False)
        with pytest.raises(type(expected.value)):
            dumps_indented(bad)


# Values that the column writer must not take for one another: equal in Python, with
# different texts (0.0 and -0.0; 1, 1.0 and True; 0 and False), NaN (not equal to
# itself), the subclasses, strings that repeat (looked up by value) and that % or a
# newline would break.
_CONFUSABLE = st.sampled_from(
    [
        0.0, -0.0, 1, 1.0, True, 0, False, None, math.nan, math.inf, -math.inf, 1e300,
        5e-324, 2**64, -(2**70), "", "1", "%s", "%", "\n", "\u2028", "\ud800", "é", "😀",
        "a\x00b", _Word.HIT, _Level.ONE, _Text("x\n"), _Number(2.5),
    ]
)  # fmt: skip
_KEYS = st.sampled_from(["a", "b", "%s", "%(x)s", "%", "é", "\ud800", "k\n", '"', ""]) | _STRINGS
_CELLS = st.recursive(
    _CONFUSABLE | _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(_KEYS, inner, max_size=3)
    ),
    max_leaves=12,
)


@st.composite
def _tables(draw: st.DrawFn, cells: st.SearchStrategy[Any] = _CELLS) -> list[Any]:
    """A list of dicts of a few key lists (one, mostly: the report's rows), each value
    maybe itself such a list, now and then an item of another kind."""
    shapes = draw(st.lists(st.lists(_KEYS, unique=True, max_size=4), min_size=1, max_size=3))
    rows: list[Any] = []
    for _ in range(draw(st.integers(min_value=8, max_value=24))):
        if draw(st.integers(0, 9)) == 0:
            rows.append(draw(cells))
            continue
        keys = draw(st.sampled_from(shapes))
        row = {}
        for key in keys:
            nested = draw(st.integers(0, 5)) == 0
            row[key] = draw(
                st.lists(st.fixed_dictionaries({"x": cells}), min_size=8, max_size=9)
                if nested
                else cells
            )
        rows.append(row)
    return rows


@settings(max_examples=300, deadline=None)
@given(_tables())
def test_tables_are_written_by_columns_as_json_dumps_writes_them(value: list[Any]) -> None:
    expected = json.dumps(value, indent=2, ensure_ascii=False)
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(jsontext, "reference_dumps", _no_fallback)
        patched.setattr(jsontext, "_ROWS", 5)
        assert dumps_indented(value) == expected
        assert dumps_indented({"rows": value, "more": [value]}) == json.dumps(
            {"rows": value, "more": [value]}, indent=2, ensure_ascii=False
        )
        # Lists within a column written one by one (_FLAT), a long first item (_SMALL).
        patched.setattr(jsontext, "_FLAT", 4)
        assert dumps_indented(value) == expected
        patched.setattr(jsontext, "_SMALL", 0)
        assert dumps_indented(value) == expected


@settings(max_examples=150, deadline=None)
@given(_tables())
def test_tables_without_nan_as_json_dumps_refuses_them(value: list[Any]) -> None:
    """allow_nan=False (the public documents of export): NaN and the infinities refused
    alike, wherever in a column they are; the rest written alike."""
    try:
        expected = json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False)
    except ValueError as refused:
        with pytest.raises(ValueError, match="^" + re.escape(str(refused)) + "$"):
            dumps_indented(value, allow_nan=False)
        return
    assert dumps_indented(value, allow_nan=False) == expected


def test_columns_keep_apart_what_python_finds_equal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsontext, "reference_dumps", _no_fallback)
    columns = [
        [0.0, -0.0] * 6,
        [1, True, 1.0, 0, False, 0.0] * 3,
        [math.nan, float("nan"), 1.5, math.inf, -math.inf] * 3,
        ["%s", "%%", "a", "a", "\ud800", None] * 4,
        [2**100, -1, None, 3] * 4,
        [_Level.ONE, 1, _Word.HIT, "hit", _Text("x"), "x", _Number(2.5), 2.5] * 2,
    ]
    for column in columns:
        rows = [{"%s": item, "k": [item], "": {"n": item}} for item in column]
        assert dumps_indented(rows) == json.dumps(rows, indent=2, ensure_ascii=False)
        assert dumps_indented(column) == json.dumps(column, indent=2, ensure_ascii=False)


def test_columns_refuse_what_json_dumps_refuses() -> None:
    """An int too long to spell, NaN where refused, a cycle: within a long list,
    json.dumps's own error."""
    looped: list[Any] = []
    looped.append(looped)
    for rows, allow_nan in (
        ([{"a": 1}] * 8 + [{"a": 10**5000}], True),
        ([{"a": [1.0]}] * 8 + [{"a": [math.nan]}], False),
        ([{"a": 1}] * 8 + [{"a": looped}], True),
    ):
        with pytest.raises(ValueError) as expected:
            json.dumps(rows, indent=2, ensure_ascii=False, allow_nan=allow_nan)
        with pytest.raises(ValueError, match="^" + re.escape(str(expected.value)) + "$"):
            dumps_indented(rows, allow_nan=allow_nan)


def test_keys_that_are_no_strings_in_a_table_are_left_to_json_dumps() -> None:
    rows = [{"a": 1, "b": 2}] * 8 + [{"a": 1, 2: "b"}, {None: 0, True: 1, 1.5: 2}]
    assert dumps_indented(rows) == json.dumps(rows, indent=2, ensure_ascii=False)


def test_a_long_table_in_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """The report's requests: many rows of the same keys, more than a batch."""
    monkeypatch.setattr(jsontext, "reference_dumps", _no_fallback)
    rows = [
        {
            "file": f"records/c-{i % 7}/{i:03}.json",
            "sequence": i,
            "proven": i % 3 != 0,
            "reason": ["reset proven", "warm: 3 cached tokens", "é \u2028 %s"][i % 3],
            "class": None if i % 5 == 0 else "AB"[i % 2],
            "cached_tokens": None if i % 4 == 0 else i * 7,
            "delta": [0.0, -0.0, 1e-7][i % 3],
        }
        for i in range(1000)
    ]
    document = {"requests": rows, "conditions": [{"id": "c", "rows": rows[:40]}] * 9}
    assert dumps_indented(document) == json.dumps(document, indent=2, ensure_ascii=False)


def test_the_report_is_built_at_the_pace_of_fewer_collections(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """build_report makes its documents under collector.fewer_collections, and gives the
    caller's pace back after."""
    import gc

    from verifier.report import document

    before = gc.get_threshold()
    seen: list[int] = []
    real = document.bundle_document

    def recorded(outcome: BundleOutcome) -> dict[str, Any]:
        seen.append(gc.get_threshold()[0])
        return real(outcome)

    monkeypatch.setattr(document, "bundle_document", recorded)
    report = build_report([BundleOutcome(BUNDLES[0], verify_path(SAMPLES / BUNDLES[0]))])
    assert seen and seen[0] >= max(50_000, before[0])
    assert gc.get_threshold() == before
    assert report["bundles"][0]["source"] == BUNDLES[0]
