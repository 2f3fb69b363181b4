"""loads_strict's fast path against the scanner it stands in for (loads_reference).

The fast path reads a document with the standard library's C parser only when it is sure
that the scanner would read the same values; whenever it is not, the scanner reads it.
So on every input both must give the same outcome: the same values (types, key order),
or the same refusal with the same message, and the same value budget left afterwards.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from verifier import jsonio
from verifier.bundle.reader import Limits, read_bundle
from verifier.errors import InvalidDocument, UnsafeInput
from verifier.jsonio import ValueBudget, loads_reference, loads_strict

SAMPLES = Path(__file__).resolve().parent.parent / "sample_bundles"
_BIG = Limits(max_members=100_000, max_total_bytes=1 << 30, max_json_values=10**8)

Loader = Callable[..., Any]


def outcome(load: Loader, data: bytes, *, limit: int, max_depth: int) -> tuple[Any, ...]:
    budget = ValueBudget(limit)
    try:
        value = load(data, max_depth=max_depth, budget=budget)
    except (InvalidDocument, UnsafeInput) as exc:
        return ("refused", type(exc).__name__, exc.message, budget.remaining)
    # json.dumps keeps key order and tells 1 from 1.0 and true from 1
    return ("read", json.dumps(value), budget.remaining)


def assert_same(data: bytes, *, limit: int = jsonio.MAX_VALUES, max_depth: int = 64) -> None:
    fast = outcome(loads_strict, data, limit=limit, max_depth=max_depth)
    plain = outcome(loads_reference, data, limit=limit, max_depth=max_depth)
    assert fast == plain, data[:200]


def count_values(data: bytes) -> int | None:
    """How many values the scanner reads in `data`; None when it refuses it."""
    budget = ValueBudget(10**9)
    try:
        loads_reference(data, budget=budget)
    except InvalidDocument:
        return None
    return budget.limit - budget.remaining


def sample_documents() -> Iterator[tuple[str, bytes]]:
    bundles = sorted(
        p for p in SAMPLES.rglob("*") if p.suffix == ".gz" or (p / "SHA256SUMS").is_file()
    )
    for bundle in bundles:
        for name, data in read_bundle(bundle, _BIG).files.items():
            if name.endswith(".json"):
                yield f"{bundle.relative_to(SAMPLES)}/{name}", data


SAMPLE_DOCUMENTS = dict(sample_documents())


def test_the_samples_are_found() -> None:
    assert len(SAMPLE_DOCUMENTS) > 200
    assert any(name.startswith("negative/duplicate-json-key/") for name in SAMPLE_DOCUMENTS)


def test_every_sample_document_reads_the_same() -> None:
    for data in SAMPLE_DOCUMENTS.values():
        check_sample(data)


def check_sample(data: bytes) -> None:
    assert_same(data)
    assert_same(data, max_depth=3)
    values = count_values(data)
    if values is not None:
        assert_same(data, limit=values)  # exactly enough
        assert_same(data, limit=values - 1)  # one short: refused where the scanner stops


# Each of these must be refused, or read, exactly as the scanner does.
_HOSTILE = [
    b'{"a": 1, "a": 2}',
    b'{"a": {"b": 1, "b": 1}}',
    b'[{"x": 1}, {"y": 2, "y": 3}]',
    b'{"a": NaN}',
    b"[Infinity]",
    b"[-Infinity]",
    b"NaN",
    b'{"a": 1e400}',
    b'{"a": -1e400}',
    b"[1e308, 1e309]",
    b"1e999",
    b'{"a": 1E+0309}',
    b'{"a": 0.' + b"0" * 5000 + b"1}",
    b'{"a": ' + b"9" * 4300 + b"}",
    b'{"a": -' + b"9" * 4300 + b"}",
    b'{"a": -' + b"9" * 4299 + b"}",
    b'{"a": ' + b"9" * 4299 + b"}",
    b'{"a": ' + b"9" * 4301 + b"}",
    b"9" * 4300,
    b"-" + b"9" * 4300,
    b"1." + b"5" * 4299,
    b'{"a": "\\ud800"}',
    b'{"\\udc80": 1}',
    b'{"a": "\\ud83d\\ude00"}',  # a valid pair: read
    b'{"a": "\\\\ud800"}',  # an escaped backslash, then text: read
    b'{"a": "\\uDBFF"}',
    b"[" * 64 + b"]" * 64,
    b"[" * 65 + b"]" * 65,
    b'{"a":' * 65 + b"1" + b"}" * 65,
    b"[" * 5000 + b"]" * 5000,
    b"[" * 100_000,
    b'{"a": "' + b"[" * 500 + b'"}',
    b"\xef\xbb\xbf{}",
    b'{"a": "\xff"}',
    b'{"a": "\xed\xa0\x80"}',  # an encoded surrogate: not UTF-8
    b"{",
    b"[1,]",
    b'{"a" 1}',
    b"[1] [2]",
    b'  {"a": [1, 2.5, true, false, null, "x"]}\n\t ',
    b'"a\x01b"',
    b"-0",
    b"-0.0",
    b"[1.0, 1, true]",
    b"",
    b"   ",
    b"[]",
    b"{}",
    b'[[], {}, [[]], {"a": {}}]',
    # what orjson reads otherwise (`jsonio._decoded_orjson`): integers past 64 bits,
    # duplicate keys (with colons in them, or a colon spelled as an escape)
    b"[12345678901234567890, 1]",
    b"[18446744073709551615]",
    b"[18446744073709551616]",
    b"[9223372036854775807, -9223372036854775808]",
    b"[-9223372036854775809]",
    b'{"n": 123456789012345678}',
    b'{"n": 1234567890123456789.5}',
    b'{"a": 1, "a": "\\u003a"}',
    b'{"a": "\\u003A", "a": 2}',
    b'{"a": "\\u003a"}',
    b'{"\\u003a": 1, ":": 2}',
    b'{"a:b": 1, "a:b": {"c:d": ":"}}',
    b'{"x": [{"k": 1}, {"k": 1, "k": 1}]}',
    b'{"a": "x:y", "b": {"c": ":::"}}',
    b'"a:b"',
]


@pytest.mark.parametrize("data", _HOSTILE, ids=range(len(_HOSTILE)))
def test_hostile_documents_read_the_same(data: bytes) -> None:
    assert_same(data)
    assert_same(data, max_depth=2)
    for limit in (0, 1, 2, 3, 5, 10):
        assert_same(data, limit=limit)


def test_the_fast_path_is_taken_for_ordinary_documents() -> None:
    """It must be: otherwise the comparisons above compare the scanner with itself."""
    text = SAMPLE_DOCUMENTS["seed-mlxcel/experiment.json"].decode()
    budget = ValueBudget()
    assert jsonio._loads_fast(text, 64, budget) is not jsonio._NOT_SURE
    assert budget.remaining < budget.limit


def test_integers_of_any_length_are_left_to_the_scanner() -> None:
    old = sys.get_int_max_str_digits()
    try:
        sys.set_int_max_str_digits(0)
        assert_same(b"[" + b"7" * 6000 + b"]")
        assert_same(b"[" + b"7" * 100 + b"]")
    finally:
        sys.set_int_max_str_digits(old)


def test_the_budget_is_shared_the_same_way() -> None:
    documents = [b"[1, 2, 3, [4]]", b'{"a": [null, true]}', b"[1, 2]", b"{}"]
    for limit in range(14):
        results = []
        for load in (loads_strict, loads_reference):
            budget = ValueBudget(limit)
            seen = []
            for data in documents:
                try:
                    seen.append(json.dumps(load(data, budget=budget)))
                except UnsafeInput as exc:
                    seen.append(exc.message)
            results.append((seen, budget.remaining))
        assert results[0] == results[1], limit


# --- generated inputs -----------------------------------------------------------------

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(10**30), 10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=30,
)
# Pieces a hostile writer would splice into an otherwise valid document.
_SPLICES = st.sampled_from(
    [
        "NaN", "Infinity", "-Infinity", "1e400", "-1e309", "9" * 4301, "-" + "9" * 4300,
        '"\\ud800"', '"\\udfff"', '"\\ud83d\\ude00"', '"\\\\ud800"', "[" * 70 + "]" * 70,
        '{"k": 1, "k": 2}', '{"k": 1, "K": 2}', "1.5e308", "0.0", "-0", "[]", "{}", '""',
        '"\\u0000"', '"\\n"', "tru", "[1,]", "{,}", '"\\u003a"', '{"k": "\\u003a", "k": 1}',
        '{"k": ":", "k": 1}', "18446744073709551616", "-9223372036854775809",
    ]
)  # fmt: skip


@given(
    _VALUES, st.sampled_from([None, 0, 2]), st.booleans(), st.integers(0, 200), st.integers(1, 70)
)
def test_generated_documents_read_the_same(
    value: object, indent: int | None, ascii_only: bool, limit: int, max_depth: int
) -> None:
    data = json.dumps(value, indent=indent, ensure_ascii=ascii_only).encode(
        "utf-8", "surrogatepass"
    )
    assert_same(data, limit=limit, max_depth=max_depth)
    assert_same(data)


@given(_VALUES, _SPLICES, st.integers(0, 10**6), st.integers(0, 200))
def test_spliced_documents_read_the_same(
    value: object, splice: str, where: int, limit: int
) -> None:
    text = json.dumps({"doc": value, "x": None})
    # the splice replaces a null of the document (or the text "null" in a string)
    nulls = [i for i in range(len(text)) if text.startswith("null", i)]
    at = nulls[where % len(nulls)]
    text = text[:at] + splice + text[at + 4 :]
    data = text.encode("utf-8", "surrogatepass")
    assert_same(data)
    assert_same(data, limit=limit, max_depth=3)


@given(
    st.text(alphabet='{}[],:"\\ 0123456789.eE+-truefalsnNIiyud8\n\t', max_size=80),
    st.integers(0, 30),
)
def test_json_like_text_reads_the_same(text: str, limit: int) -> None:
    data = text.encode()
    assert_same(data)
    assert_same(data, limit=limit, max_depth=2)


@given(st.binary(max_size=120))
def test_any_bytes_read_the_same(data: bytes) -> None:
    assert_same(data)


def test_documents_of_long_strings_are_counted_only_near_the_budget_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the fast path defers is bounded by the commas and brackets, not only by half
    the characters: documents of long strings (a bundle's records) fit a budget their
    characters would not, and none is counted (walked) until the budget nears its end."""
    documents = [json.dumps({"text": "x" * 500, "n": [i, 2.5]}).encode() for i in range(20)]
    limit = 20 * 6  # 5 values a document, 5 by the commas and brackets, 260 by the length
    budget = ValueBudget(limit)
    for data in documents:
        loads_strict(data, budget=budget)
    assert budget.remaining == limit - 20 * 5
    walked: list[object] = []
    counted = jsonio._count_values

    def walk(document: object, max_depth: int | None) -> int:
        walked.append(document)
        return counted(document, max_depth)

    monkeypatch.setattr(jsonio, "_count_values", walk)
    budget = ValueBudget(limit)
    for data in documents:
        loads_strict(data, budget=budget)
    assert walked == []


@given(_VALUES, st.sampled_from([None, 0, 2]))
def test_the_deferred_bound_is_never_below_the_count(value: object, indent: int | None) -> None:
    text = json.dumps(value, indent=indent, ensure_ascii=False)  # (no escape the path refuses)
    budget = ValueBudget(10**9)
    document = jsonio._loads_fast(text, 64, budget)
    assert document is not jsonio._NOT_SURE
    assert budget.room() <= budget.remaining  # what it deferred is at least what it holds


@pytest.mark.parametrize(
    "text",
    [
        "1" * 4299,
        "a" + "1" * 4299 + "a",
        "1" * 4298,
        "1" * 4298 + "a" + "1" * 4298,
        '["' + "7" * 5000 + '"]',
        ("9" * 4298 + " ") * 3 + "9" * 4299,
        "x" * 10 + "0" * 4299 + "x",
    ],
)
def test_a_run_of_4299_digits_is_found_as_the_plain_search_finds_it(text: str) -> None:
    plain = re.compile("[0-9]{4299}").search(text)
    found = jsonio._HUGE_DIGITS.search(text)
    assert (found is None) == (plain is None)


@given(
    st.lists(
        st.one_of(
            st.integers(0, 4400).map(lambda n: "7" * n),
            st.sampled_from(["a", " ", "é", "\u0663", "\U0001f600", ",", '"']),
        ),
        max_size=8,
    )
)
def test_a_run_of_4299_digits_is_found_in_the_bytes_as_in_the_text(parts: list[str]) -> None:
    text = "".join(parts)  # (an Arabic-Indic digit is no [0-9], nor are its bytes)
    plain = re.compile("[0-9]{4299}").search(text) is None
    assert jsonio._no_huge_run(text, text.encode("utf-8")) == plain
    assert jsonio._no_huge_run(text, None) == plain


def test_many_digits_in_no_long_run_keep_the_fast_path() -> None:
    document = {"n": [123456789] * 600}  # 5,400 digits, none in a run of 4,299
    data = json.dumps(document).encode()
    assert len(data) - len(data.translate(None, b"0123456789")) > 4299
    assert jsonio._loads_fast(data.decode(), 64, ValueBudget(10**6), data) == document
    huge = b'{"n": ' + b"9" * 4299 + b"}"  # int() reads it: the strict rules do not
    assert jsonio._loads_fast(huge.decode(), 64, ValueBudget(10**6), huge) is jsonio._NOT_SURE


# --- orjson (`jsonio._decoded_orjson`) ----------------------------------------------------


def test_orjson_reads_the_ordinary_documents(monkeypatch: pytest.MonkeyPatch) -> None:
    """It must: otherwise the comparisons above compare the standard library's parser with
    the scanner only."""
    kept: list[bool] = []
    real = jsonio._decoded_orjson

    def decoded(data: bytes, containers: int, most: int) -> Any:
        document = real(data, containers, most)
        kept.append(document is not jsonio._NOT_SURE)
        return document

    monkeypatch.setattr(jsonio, "_decoded_orjson", decoded)
    records = [d for name, d in SAMPLE_DOCUMENTS.items() if name.startswith("seed-mlxcel/")]
    for data in records:
        assert loads_strict(data) == json.loads(data)
    assert kept == [True] * len(records)


@given(_VALUES, st.sampled_from([0, jsonio._AS_WRITTEN]), st.integers(0, 200))
def test_documents_as_orjson_writes_them_read_the_same(
    value: object, option: int, limit: int
) -> None:
    """Written as orjson writes them, so that what it reads is kept (json.dumps' spacing
    differs from orjson's: the generated documents above are nearly all read otherwise)."""
    try:
        data = jsonio.orjson.dumps(value, option=option)
    except jsonio.orjson.JSONEncodeError:
        return  # an integer past 64 bits, a surrogate
    containers = data.count(b"[") + data.count(b"{")
    assert jsonio._decoded_orjson(data, containers, 1 + data.count(b",") + containers) == value
    assert_same(data)
    assert_same(data, limit=limit, max_depth=3)
    assert json.dumps(jsonio.loads_plain(data)) == json.dumps(json.loads(data))


# Two keys of 64 bytes with the same xxh3-64 hash, which orjson's key cache takes for
# each other (found by a fresh-eyes audit): the second read as the first, a leak's name
# (`tOken`) read as a harmless one.
_SAME_HASH = (
    b"SERVER_ENV_VAR__68PJ90G4xNsdkqz8________________________________",
    b"SERVER_ENV_VAR__4ltOkenald919Tkj________________________________",
)


def _as_orjson_writes(document: object, indented: bool) -> bytes:
    """`document` spelled as orjson writes it: indented by two with a final newline, or
    compact (so that only the write-back check can tell a key taken for another)."""
    if indented:
        return json.dumps(document, indent=2).encode() + b"\n"
    return json.dumps(document, separators=(",", ":")).encode()


@pytest.mark.parametrize("indented", [False, True])
def test_keys_orjson_takes_for_each_other_are_read_as_written(indented: bool) -> None:
    first, second = (key.decode() for key in _SAME_HASH)
    document = {"a": {first: "x"}, "b": {second: "hunter2hunter2"}}
    data = _as_orjson_writes(document, indented)
    assert loads_strict(data) == document
    assert list(loads_strict(data)["b"]) == [second]
    assert jsonio.loads_plain(data) == document
    assert_same(data)
    # and across documents: the first key read before, in another document
    loads_strict(_as_orjson_writes({first: 1}, indented))
    alone = _as_orjson_writes({second: 1}, indented)
    assert list(loads_strict(alone)) == [second]
    assert list(jsonio.loads_plain(alone)) == [second]


@pytest.mark.parametrize("depth", [255, 1000, 1024, 1025])
def test_loads_plain_reads_deep_nesting_as_json_loads(depth: int) -> None:
    """orjson reads up to 1,024 levels and writes back 254: what it cannot write back
    is json.loads' to read, or to refuse (a RecursionError, as it raises)."""
    data = b"[" * depth + b"]" * depth
    outcomes = []
    for load in (lambda: json.loads(data.decode()), lambda: jsonio.loads_plain(data)):
        try:
            outcomes.append(("read", json.dumps(load())))
        except (ValueError, RecursionError) as exc:
            outcomes.append(("refused", type(exc).__name__))
    assert outcomes[0] == outcomes[1]


def test_orjson_keeps_only_what_it_writes_back_as_read() -> None:
    def read(data: bytes) -> Any:
        containers = data.count(b"[") + data.count(b"{")
        return jsonio._decoded_orjson(data, containers, 1 + data.count(b",") + containers)

    assert read(b'{\n  "a": [\n    1,\n    2.5\n  ]\n}\n') == {"a": [1, 2.5]}
    assert read(b'{"a":[1,2.5]}') == {"a": [1, 2.5]}
    for other in (
        b'{"a": [1, 2.5]}',  # json.dumps' spacing
        b'{\n  "a": 1\n}',  # no final newline
        b'{"a":1,"a":2}',  # a member dropped
        b"[18446744073709551616]",  # read as a float
        b'["\\u0061"]',  # an escape where none is needed
        b"[1E2]",
        b"[-0]",
        b'["\\ud800"]',  # refused by orjson
        b"[" * 300 + b"]" * 300,  # read, not written back
    ):
        assert read(other) is jsonio._NOT_SURE, other


@given(
    st.from_regex(r"-?(0|[1-9][0-9]{0,25})(\.[0-9]{1,25})?([eE][-+]?[0-9]{1,3})?", fullmatch=True)
)
def test_numbers_read_by_orjson_are_read_as_python_reads_them(number: str) -> None:
    data = f"[{number}]".encode()
    assert_same(data)
    assert jsonio.loads_plain(data) == json.loads(data)
    assert json.dumps(jsonio.loads_plain(data)) == json.dumps(json.loads(data))


@given(st.binary(max_size=60) | st.text(alphabet='{}[],:"\\ 0123456789.eE-nNul', max_size=60))
def test_loads_plain_is_json_loads(data: bytes | str) -> None:
    raw = data.encode() if isinstance(data, str) else data
    try:
        expected: tuple[Any, ...] = ("read", json.dumps(json.loads(raw.decode("utf-8"))))
    except ValueError:  # (a UnicodeDecodeError is one)
        expected = ("refused",)
    try:
        found: tuple[Any, ...] = ("read", json.dumps(jsonio.loads_plain(raw)))
    except ValueError:
        found = ("refused",)
    assert found == expected


def test_a_deep_document_of_many_values_is_not_written_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Indented, every line of it would take two spaces a level: 2 MB at 250 levels would
    be written back in some 500 MB (found by a fresh-eyes audit)."""
    written: list[int] = []
    real = jsonio.orjson.dumps

    def dumps(value: Any, option: int = 0) -> bytes:
        found: bytes = real(value, option=option)
        written.append(len(found))
        return found

    monkeypatch.setattr(jsonio.orjson, "dumps", dumps)
    for depth in (250, 64, 20):
        data = b"[" * depth + b"0," * 999_000 + b"0" + b"]" * depth + b"\n"
        assert_same(data, max_depth=300)
        jsonio.loads_plain(data)
    assert written == []
    record = SAMPLE_DOCUMENTS["seed-mlxcel/records/sdpa-det-0/001.json"]
    assert loads_strict(record) == json.loads(record)
    assert written == [len(record)]  # a record is


@given(_VALUES, st.sampled_from([None, 2]))
def test_the_write_back_bound_holds(value: object, indent: int | None) -> None:
    text = json.dumps(value, indent=indent, ensure_ascii=False)
    data = text.encode("utf-8", "surrogatepass")
    containers = data.count(b"[") + data.count(b"{")
    most = 1 + data.count(b",") + containers
    try:
        document = jsonio.orjson.loads(data)
    except jsonio.orjson.JSONDecodeError:
        return  # a surrogate, an integer past 64 bits
    bound = jsonio._write_back_bound(len(data), containers, most)
    for option in (0, jsonio._AS_WRITTEN):
        assert len(jsonio.orjson.dumps(document, option=option)) <= bound
