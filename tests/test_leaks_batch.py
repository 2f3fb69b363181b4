"""`scan_documents` (documents scanned in batches) gives exactly `scan_document` of each.

A batch is scanned as one text, its documents' texts joined by `leaks._BATCH_GAP`, and is
scanned again document by document where that text has a hit. That is exact only if a batch
without a hit holds no document with one: a document's neighbours, seen through the gap,
must never hide its hit (`_BATCH_GAP`'s comment argues why they cannot). These tests check
it on documents and texts built from every detector's positive and negative examples, on
every sample bundle and on the hostile corpus; and that a gap too short is caught.
"""

from __future__ import annotations

import json
import sys
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import leaks_reference as reference
import pytest
import test_leaks
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_leaks_fast import (
    FRAGMENTS,
    HOSTILE,
    HOSTILE_UNITS,
    KNOWN,
    MAX_MEMBER_BYTES,
    _archive_members,
    sample_files,
)

from verifier import layout, leaks
from verifier.bundle.reader import Limits, LoadedBundle, read_bundle
from verifier.checks.context import BundleContext, EachAlone, VerifyOptions
from verifier.checks.leaks import _allowed, _bytes_findings, _hit_findings, check_leaks
from verifier.model import Finding, Severity
from verifier.verify import parsed_alike

SAMPLES = Path(__file__).resolve().parents[1] / "sample_bundles"


def _parameters(test: Any) -> list[str]:
    """The texts a parametrized test of test_leaks.py is run on."""
    (mark,) = (m for m in test.pytestmark if m.name == "parametrize")
    return [case[0] if isinstance(case, tuple) else case for case in mark.args[1]]


# Every detector's positive and negative examples (test_leaks.py), with what sits at a text's
# edges or reads around a match: version and address words before a dotted number, ports,
# private key blocks, escapes and percent-encoding (of the separators too), long runs.
EXAMPLES = (
    *_parameters(test_leaks.test_each_category_is_found),
    *_parameters(test_leaks.test_look_alikes_are_not_leaks),
    *_parameters(test_leaks.test_every_form_is_found_where_it_is),
    *_parameters(test_leaks.test_versions_and_public_words_are_not_leaks),
)
# What a detector reads before or after a match, and what it reads them around.
AROUND = (
    "version",
    "version ",
    "cuda",
    "driver: ",
    "runtime_",
    "build-",
    "host",
    "host ",
    "ip=",
    "listening on ",
    "http://",
    "@",
    "[",
    "10.0.0.7",
    "192.168.1.20",
    "8.8.8.8",
    "34.12.5.6",
    ":8080",
    "/24",
    "]",
)
EDGES = (
    *AROUND,
    "v1.0.0.1",
    "fe80::1",
    "aa:bb:cc:dd:ee:ff",
    "-----BEGIN RSA PRIVATE KEY-----",
    "MIIEpAIBAAKCAQEA",
    "-----END RSA PRIVATE KEY-----",
    "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456",
    "AKIAIOSFODNN7EXAMPLE",
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "--api-key",
    "--api-key=",
    "abcdEFGH1234",
    "api_key",
    "HF_TOKEN",
    "=abcdefghij",
    "Bearer ",
    "Authorization: ",
    "~al",
    "/home/al",
    "C:",
    "\\Users\\al",
    "Shared",
    "al@buildbox",
    "ssh://buildbox",
    "%2Fhome%2Fal",
    "%2F",
    "%00",
    "%01",
    "%02",
    "%0",
    "%",
    "\\u0000",
    "\\u0001",
    "\\u0002",
    "\\u002f",
    "\\/",
    "\\",
    "\x00",
    "\x01",
    "\x02",
    "\x00" * 40,
    "a" * 300,
    "key" * 100,
    "1." * 100,
    "é",
    "İ",
    "K",
    "\u2003",
)
PIECES = tuple(dict.fromkeys(EXAMPLES + EDGES + FRAGMENTS + HOSTILE_UNITS))
edge = st.one_of(st.sampled_from(AROUND), st.sampled_from(EDGES))
# A string of a few pieces; often one that begins or ends with what reads around a match.
hostile = st.one_of(
    st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=4)), max_size=5).map("".join),
    edge,
    st.tuples(edge, st.sampled_from(PIECES), edge).map("".join),
)
scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), hostile)
documents = st.one_of(
    st.lists(hostile, min_size=1, max_size=2),  # a text that begins and ends with a string
    st.dictionaries(hostile, hostile, min_size=1, max_size=2),
    st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=5), st.dictionaries(hostile, inner, max_size=5)
        ),
        max_leaves=12,
    ),
)


@contextmanager
def batches(
    documents: int, chars: int = leaks._BATCH_CHARS, gap: str = leaks._BATCH_GAP
) -> Iterator[None]:
    """`scan_documents` with batches of at most `documents` documents, or `chars`
    characters, and `gap` between the texts of a batch."""
    saved = leaks._BATCH_DOCUMENTS, leaks._BATCH_CHARS, leaks._BATCH_GAP
    leaks._BATCH_DOCUMENTS, leaks._BATCH_CHARS, leaks._BATCH_GAP = documents, chars, gap
    try:
        yield
    finally:
        leaks._BATCH_DOCUMENTS, leaks._BATCH_CHARS, leaks._BATCH_GAP = saved


def located(results: list[list[leaks.DocumentHit]]) -> list[list[tuple[Any, ...]]]:
    return [
        [(h.path, h.is_key, h.start, h.end, h.pointer, h.where, repr(h.hit)) for h in hits]
        for hits in results
    ]


def same_hits(docs: list[Any]) -> None:
    alone = located([leaks.scan_document(d) for d in docs])
    for size in (2, 3, 64):
        with batches(size):
            assert located(list(leaks.scan_documents(docs))) == alone, size
    with batches(64, chars=50):
        assert located(list(leaks.scan_documents(docs))) == alone, "by characters"


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(documents, min_size=1, max_size=8))
def test_batched_documents_give_each_document_s_own_hits(docs: list[Any]) -> None:
    same_hits(docs)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(hostile, min_size=2, max_size=6))
def test_a_batch_without_a_hit_holds_no_text_with_one(texts: list[str]) -> None:
    # Any text, not only a document's (which begins with a separator): a view decoded from
    # one need not, and the argument holds for every text.
    if not leaks.scan_text(leaks._BATCH_GAP.join(texts)):
        assert [leaks.scan_text(t) for t in texts] == [[] for _ in texts]


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(documents, max_size=8))
def test_one_text_builder_gives_each_document_its_own_text(docs: list[Any]) -> None:
    text_of = leaks._text_of()
    for document in docs:
        assert text_of(document) == reference._Flat.of(document).text


def test_a_document_that_cannot_be_joined_leaves_nothing_for_the_next() -> None:
    text_of = leaks._text_of()
    assert text_of(["a", {"b": "c"}]) == "\x00a\x00b\x01c"
    with pytest.raises(TypeError):
        text_of({"x": "y", 1: "z"})  # not JSON: a key that is not a string
    assert text_of(["a", {"b": "c"}]) == "\x00a\x00b\x01c"
    assert text_of("s") == "\x00s"


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (["version"], ["10.0.0.7"]),  # a version word hides the private address after it
        ({"cuda": "version"}, {"10.0.0.7": "host"}),
        (["build-"], ["192.168.1.20 up"]),
    ],
)
def test_a_gap_too_short_would_let_a_neighbour_hide_a_hit(before: Any, after: Any) -> None:
    assert leaks.scan_document(before) == []
    assert leaks.scan_document(after) != []
    alone = [leaks.scan_document(before), leaks.scan_document(after)]
    for short in ("", leaks.SEP, leaks.SEP * 2):
        with batches(64, gap=short):
            assert list(leaks.scan_documents([before, after])) != alone, repr(short)
    assert list(leaks.scan_documents([before, after])) == alone


def test_the_gap_is_longer_than_any_window_a_detector_reads() -> None:
    assert len(leaks._BATCH_GAP) > leaks._ADDRESS_WINDOW
    assert set(leaks._BATCH_GAP) == {leaks.SEP}


def test_a_batch_with_a_hit_is_scanned_document_by_document() -> None:
    clean = [{"a": "nothing here"}] * 5
    docs = [*clean, {"model": "/home/alice/m.gguf"}, *clean, ["a", {"b": "~al/x"}], *clean]
    alone = [leaks.scan_document(d) for d in docs]
    assert sum(map(bool, alone)) == 2
    with batches(4):
        assert list(leaks.scan_documents(docs)) == alone


def test_known_values_are_scanned_document_by_document() -> None:
    detector = leaks.Detector(KNOWN)
    docs = [["alice"], {"x": "/srv/private/models/q"}, ["ssh", "al@gpu-box-01"], "mlxcel"]
    assert located(list(detector.scan_documents(docs))) == located(
        [detector.scan_document(d) for d in docs]
    )


def test_documents_are_read_a_batch_ahead_at_most() -> None:
    read: list[int] = []

    def docs() -> Iterator[Any]:
        for i in range(20):
            read.append(i)
            yield {"n": str(i)}

    with batches(4):
        for i, hits in enumerate(leaks.scan_documents(docs())):
            assert hits == []
            assert len(read) <= (i // 4 + 1) * 4


class _Held(dict[str, Any]):
    """A document that can be watched (a weak reference) for whether something holds it."""


def test_a_large_text_is_scanned_alone_and_let_go_before_the_next(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Joined to its neighbours, a text past _BATCH_CHARS would be copied once more (four
    # bytes a character: 60 MiB for a 15 MiB string); held while the next one is read,
    # two would be alive at once.
    big = "\U0001f600" + "a" * 300 + " /home/alice/m.gguf " + "b" * 300
    docs = [{"a": "clean"}, {"s": big}, {"s": big + "c"}, {"b": "~al/x"}, {"c": "clean"}]
    alone = [leaks.scan_document(d) for d in docs]
    assert [bool(hits) for hits in alone] == [False, True, True, True, False]
    lengths: list[int] = []
    real = leaks.Detector.scan_text

    def scan_text(self: leaks.Detector, text: str, most: int | None = None) -> list[leaks.LeakHit]:
        lengths.append(len(text))
        return real(self, text, most)

    monkeypatch.setattr(leaks.Detector, "scan_text", scan_text)
    watched: list[weakref.ref[_Held]] = []
    alive: list[bool] = []

    def documents() -> Iterator[Any]:
        for document in docs:
            held = _Held(document)
            if "s" in document:  # whether the large one before it is still held
                alive.append(any(ref() is not None for ref in watched))
                watched.append(weakref.ref(held))
            yield held
            del held

    with batches(64, chars=500):
        assert list(leaks.scan_documents(documents())) == alone
    texts = [len(leaks._Flat.text_of(d)) for d in docs]
    assert texts[1] in lengths and texts[2] in lengths  # each scanned alone...
    assert max(lengths) == max(texts)  # ...never joined to another
    assert alive == [False, False]


# --- every sample bundle and the hostile corpus --------------------------------------------


def _documents(files: list[tuple[str, bytes]]) -> list[Any]:
    found = []
    for _, data in files:
        try:
            found.append(json.loads(data))
        except (UnicodeDecodeError, ValueError, RecursionError):
            continue
    return found


def test_every_sample_document_gives_its_own_hits() -> None:
    docs = _documents(list(sample_files()))
    assert len(docs) > 100
    assert any(leaks.scan_document(d) for d in docs)
    same_hits(docs)


def test_the_hostile_corpus_gives_each_document_s_own_hits(tmp_path: Path) -> None:
    if str(HOSTILE) not in sys.path:
        sys.path.insert(0, str(HOSTILE))
    import corpus

    files: list[tuple[str, bytes]] = []
    for case in corpus.CASES:
        folder = tmp_path / case.name
        folder.mkdir()
        path = case.build(folder)
        for file in [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file()):
            if file.stat().st_size <= MAX_MEMBER_BYTES:
                data = file.read_bytes()
                files += list(_archive_members(data)) or [(file.name, data)]
    docs = _documents(files)
    assert len(docs) > 500
    same_hits(docs)


# --- the check: the same findings, in the same order, as one document at a time ------------


def plain_check(ctx: BundleContext) -> Iterator[Finding]:
    """check_leaks as it was, with `scan_document` for each document in turn (the findings
    made of the hits as the check makes them: that part is not what is compared)."""
    allowed = _allowed(ctx)
    for path, data in sorted(ctx.files.items()):
        if path.endswith(".sig"):
            continue
        if path in ctx.documents:
            yield from _hit_findings(path, leaks.scan_document(ctx.documents[path]), allowed)
        else:
            yield from _bytes_findings(path, data)


def same_findings(bundle: LoadedBundle) -> None:
    options = VerifyOptions(limits=Limits(max_json_values=10**7))
    expected = list(plain_check(BundleContext(bundle, options)))
    with batches(3):
        together = BundleContext(bundle, options)
        assert list(check_leaks(together)) == expected
        each_alone = EachAlone(bundle.files, options.limits)
        alone = list(check_leaks(BundleContext.over(bundle, options, each_alone)))
    # As verify's parent trusts them: where json.loads read what the strict rules refused
    # (a lone surrogate, a duplicate key), the parent runs the check itself.
    if parsed_alike(each_alone.parsed, together):
        assert alone == expected


BUNDLES = sorted(
    p for p in SAMPLES.rglob("*") if (p / "experiment.json").is_file() or p.name.endswith(".tar.gz")
)


@pytest.mark.parametrize("path", BUNDLES, ids=lambda p: str(p.relative_to(SAMPLES)))
def test_each_sample_bundle_gives_the_same_findings(path: Path) -> None:
    same_findings(read_bundle(path, Limits()))


def test_some_sample_bundle_has_findings_of_both_kinds() -> None:
    severities = set()
    for path in BUNDLES:
        bundle = read_bundle(path, Limits())
        severities |= {f.severity for f in plain_check(BundleContext(bundle, VerifyOptions()))}
    assert Severity.ERROR in severities


names = st.sampled_from(
    ["a.json", "b.txt", "c.json", "c.json.sig", "d.log", "e.json", "records/x.json", "z.txt"]
)
contents = st.one_of(
    documents.map(lambda d: json.dumps(d).encode()),
    hostile.map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.binary(max_size=20),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(names, contents, max_size=8), documents)
def test_files_that_are_not_documents_keep_their_place(
    files: dict[str, bytes], ledger: Any
) -> None:
    files = dict(files)
    entries = [
        {
            "file": "a.json",
            "pointer": "",
            "category": "private-path",
            "placeholder": leaks.ALLOWED_PLACEHOLDER,
        },
        {
            "file": "c.json",
            "pointer": "/0",
            "category": "token",
            "placeholder": leaks.ALLOWED_PLACEHOLDER,
        },
    ]
    files[layout.REDACTION_LEDGER] = json.dumps({"entries": entries, "x": ledger}).encode()
    same_findings(LoadedBundle("test", files, ()))
