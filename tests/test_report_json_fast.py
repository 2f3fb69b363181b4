"""The JSON report's writer gives json.dumps(indent=2, ensure_ascii=False)'s bytes.

verifier/jsontext.py stands in for the standard library's pure-Python encoder
(`reference_dumps`, the plain path): on every sample bundle's report, on the hostile
corpus (tests/hostile/test_corpus_json_report.py) and on hypothesis-generated values.
"""

from __future__ import annotations

import enum
import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sample_paths import BUNDLES, KEY, SAMPLES

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
