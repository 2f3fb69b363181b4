"""The records verify's child parses and validates for the parent change nothing.

For a large bundle the forked child first parses and validates the last share of the
records (`verify.SHARED`) and sends them back as `marshal` bytes, while the parent parses
the rest; then it runs its own checks. Here the share is forced on every bundle: whatever
the child sends, or fails to send, the parent's documents, schema violations and value
budget are those of parsing every file itself, in order.
"""

from __future__ import annotations

import json
import marshal
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from sample_paths import SAMPLES

from verifier import forked, verify
from verifier.bundle.reader import Limits, read_bundle
from verifier.checks.context import BundleContext, Ready, Share, VerifyOptions, violations_of
from verifier.jsonio import ValueBudget, loads_strict
from verifier.schemas import SchemaViolation

pytestmark = pytest.mark.skipif(
    not forked.can_fork(), reason="forking beside needs Linux and two cores"
)

SEED = SAMPLES / "seed-mlxcel"


def outcome(bundle: Path, options: VerifyOptions) -> tuple[Any, ...]:
    result = verify.verify_path(bundle, options)
    classification = result.classification
    return (
        result.verdict,
        result.findings,
        None if classification is None else (classification.reasons, classification.classes),
        None if classification is None else [(p.proven, p.reason) for p in classification.proofs],
    )


def both(
    bundle: Path, options: VerifyOptions, monkeypatch: pytest.MonkeyPatch
) -> tuple[tuple[Any, ...], tuple[Any, ...], list[list[str]]]:
    """(in one process, with the child's share, the paths the child gave)"""
    with monkeypatch.context() as patched:
        patched.setattr(forked, "can_fork", lambda: False)
        alone = outcome(bundle, options)
    given: list[list[str]] = []
    real = verify._prepared

    def seen(beside: Any, paths: frozenset[str]) -> dict[str, Ready] | None:
        ready = real(beside, paths)
        given.append(sorted(ready or ()))
        return ready

    with monkeypatch.context() as patched:
        patched.setattr(verify, "BESIDE_FROM_BYTES", 0)
        patched.setattr(verify, "_prepared", seen)
        shared = outcome(bundle, options)
    return alone, shared, given


def total_values(bundle: Path) -> list[int]:
    """The values each JSON file holds, in the order the parent parses them."""
    loaded = read_bundle(bundle, Limits())
    counts = []
    for path, data in sorted(loaded.files.items()):
        if path.endswith(".json"):
            budget = ValueBudget(10**9)
            loads_strict(data, budget=budget)
            counts.append(10**9 - budget.remaining)
    return counts


def test_the_child_gives_the_last_share_of_the_records(monkeypatch: pytest.MonkeyPatch) -> None:
    alone, shared, given = both(SEED, VerifyOptions(), monkeypatch)
    assert shared == alone
    records = sorted(p.relative_to(SEED).as_posix() for p in (SEED / "records").rglob("*.json"))
    assert given == [records[len(records) - int(len(records) * verify.SHARED) :]]
    assert given[0]  # (the seed has enough records for a share)


def test_the_value_budget_runs_out_where_it_would_in_one_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counts = total_values(SEED)
    ends = [sum(counts[: i + 1]) for i in range(len(counts))]
    # Limits that run out before, inside and after the child's share, and at each edge.
    limits = {ends[-1], ends[-1] - 1, ends[-2], ends[-2] + 1, ends[len(ends) // 2] - 3}
    limits |= {ends[len(ends) // 4], ends[-3] + counts[-2] // 2}
    for limit in sorted(limits):
        options = VerifyOptions(limits=Limits(max_json_values=limit))
        alone, shared, _ = both(SEED, options, monkeypatch)
        assert shared == alone, limit


def test_a_huge_integer_the_child_gives_is_charged_to_the_budget_as_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A document the child read by the scanner (an integer of 4,299 digits), whose values
    this process then counts, runs the budget out where one process does."""
    bundle = tmp_path / "bundle"
    shutil.copytree(SEED, bundle)
    record = sorted((bundle / "records").rglob("*.json"))[-1]  # in the child's share
    document = json.loads(record.read_text())
    document["response"]["extra"] = [int("9" * 4299), "x" * 3000]
    record.write_text(json.dumps(document))
    counts = total_values(bundle)
    ends = [sum(counts[: i + 1]) for i in range(len(counts))]
    for limit in (ends[-1], ends[-1] - 1, ends[-2], ends[-2] + 1, ends[-3]):
        alone, shared, given = both(
            bundle, VerifyOptions(limits=Limits(max_json_values=limit)), monkeypatch
        )
        assert shared == alone, limit
        assert record.relative_to(bundle).as_posix() in given[0]


def test_a_document_nested_deeper_than_the_child_gives_is_parsed_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = tmp_path / "bundle"
    shutil.copytree(SEED, bundle)
    record = sorted((bundle / "records").rglob("*.json"))[-1]  # in the child's share
    document = json.loads(record.read_text())
    nested: Any = "deep"
    for _ in range(400):
        nested = [nested]
    document["response"]["extra"] = nested
    record.write_text(json.dumps(document))
    options = VerifyOptions(limits=Limits(max_json_depth=600))
    alone, shared, given = both(bundle, options, monkeypatch)
    assert shared == alone
    assert record.relative_to(bundle).as_posix() not in given[0]
    assert len(given[0]) == int(len(list((bundle / "records").rglob("*.json"))) * verify.SHARED) - 1


@pytest.mark.parametrize(
    "message",
    [
        "nonsense",
        [("records/none/001.json", b"")],  # a path not in the share
        [(7, b"")],
        [("x", "y", "z")],
        None,
    ],
    ids=["a-string", "not-in-the-share", "no-path", "three-items", "none"],
)
def test_a_message_not_as_the_child_sends_it_means_all_parsed_here(
    message: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected, _, _ = both(SEED, VerifyOptions(), monkeypatch)
    monkeypatch.setattr(verify, "_prepare", lambda *_args: message)
    alone, shared, given = both(SEED, VerifyOptions(), monkeypatch)
    assert alone == expected and shared == expected
    assert given == [[]]


def test_a_child_that_dies_before_its_share_means_all_parsed_here(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    expected, _, _ = both(SEED, VerifyOptions(), monkeypatch)

    def dies(*_args: Any) -> Any:
        os._exit(1)

    monkeypatch.setattr(verify, "_prepare", dies)
    _, shared, given = both(SEED, VerifyOptions(), monkeypatch)
    assert shared == expected
    assert given == [[]]


def test_a_share_that_cannot_be_sent_means_all_done_here(monkeypatch: pytest.MonkeyPatch) -> None:
    expected, _, _ = both(SEED, VerifyOptions(), monkeypatch)
    monkeypatch.setattr(verify, "_prepare", lambda *_args: [lambda: None])  # not picklable
    _, shared, given = both(SEED, VerifyOptions(), monkeypatch)
    assert shared == expected
    assert given == [[]]


def test_what_the_child_gives_is_what_parsing_here_builds() -> None:
    loaded = read_bundle(SEED, Limits())
    paths = sorted(p for p in loaded.files if p.startswith("records/"))
    for path, blob in verify._prepare(loaded.files, paths, Limits()):
        document, values, violations = marshal.loads(blob)
        here = loads_strict(loaded.files[path])
        assert document == here and json.dumps(document) == json.dumps(here)
        assert list(map(tuple, violations_of(path, here))) == violations
        assert all(sys.intern(key) is key for key in document)  # keys shared, as parsed here
        budget = ValueBudget(Limits().max_json_values)
        loads_strict(loaded.files[path], budget=budget)
        assert values == budget.at_most() >= budget.limit - budget.remaining


def test_what_the_child_gives_holds_at_most_the_limit_of_values_in_all() -> None:
    """The parent reads the whole share back at once: with each document given a budget of
    its own, 10 documents of 1,001 values would be 10,010 values under a limit of 2,500."""
    files = {f"records/c/{i:03d}.json": json.dumps([0] * 1000).encode() for i in range(10)}
    given = verify._prepare(files, sorted(files), Limits(max_json_values=2500))
    held = [marshal.loads(blob) for _, blob in given]
    assert len(given) == 2
    assert sum(values for _, values, _ in held) <= 2500
    assert sum(len(document) + 1 for document, _, _ in held) == 2002


def test_schema_violations_given_are_the_ones_found_here() -> None:
    bundle = read_bundle(SAMPLES / "negative" / "schema-violation", Limits())
    plain = BundleContext(bundle, VerifyOptions())
    shared = BundleContext(bundle, VerifyOptions())
    paths = frozenset(p for p in bundle.files if p.startswith("records/"))
    ready = {}
    for path, blob in verify._prepare(bundle.files, sorted(paths), Limits()):
        document, values, violations = marshal.loads(blob)
        ready[path] = Ready(document, values, [SchemaViolation(*v) for v in violations])
    shared.share = Share(paths, lambda: ready)
    assert shared.documents == plain.documents
    assert shared.schema_violations == plain.schema_violations
    assert any(shared.schema_violations[p] for p in paths)  # an invalid one was given too


def _with_leaks(tmp_path: Path) -> tuple[Path, list[str]]:
    """The seed with a home path in records inside and outside the child's share."""
    bundle = tmp_path / "bundle"
    shutil.copytree(SEED, bundle)
    records = sorted((bundle / "records").rglob("*.json"))
    leaky = [records[0], records[len(records) // 2], records[-2], records[-1]]
    for record in leaky:
        document = json.loads(record.read_text())
        document["response"]["note"] = "written in /home/alice/work"
        record.write_text(json.dumps(document))
    return bundle, [r.relative_to(bundle).as_posix() for r in leaky]


def test_the_childs_share_is_scanned_for_leaks_as_it_is_sent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The leak scan's hits of the share, found in what the child sends (read back from
    marshal), are the hits of scanning each document parsed; the leaks check takes them
    as they are, without parsing those documents again."""
    bundle, leaky = _with_leaks(tmp_path)
    loaded = read_bundle(bundle, Limits())
    records = sorted(p for p in loaded.files if p.startswith("records/"))
    share = records[len(records) // 3 :]
    scanned = verify._scanned(verify._prepare(loaded.files, share, Limits()))
    assert sorted(scanned) == share
    assert [p for p in share if scanned[p]] == [p for p in leaky if p in share]
    from verifier.leaks import scan_document

    for path in share:
        assert scanned[path] == scan_document(loads_strict(loaded.files[path]))
    from verifier.checks.context import EachAlone
    from verifier.checks.leaks import check_leaks

    plain = list(check_leaks(BundleContext(loaded, VerifyOptions())))
    import verifier.checks.context as context

    parsed_alone: list[str] = []
    real = context._json_loads
    by_text = {data.decode(errors="replace"): path for path, data in loaded.files.items()}

    def counted(text: str) -> Any:
        parsed_alone.append(by_text[text])
        return real(text)

    monkeypatch.setattr(context, "_json_loads", counted)
    documents = EachAlone(loaded.files, Limits())
    alone = BundleContext.over(loaded, VerifyOptions(), documents, scanned)
    assert list(check_leaks(alone)) == plain
    assert [f.file for f in plain if f.is_error] == leaky
    assert parsed_alone and not set(parsed_alone) & set(share)  # not parsed again
    assert all(documents.parsed[p] for p in share)  # and counted as parsed


def test_leaks_found_by_the_child_are_the_ones_found_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle, leaky = _with_leaks(tmp_path)
    alone, shared, given = both(bundle, VerifyOptions(), monkeypatch)
    assert shared == alone
    assert set(leaky) & set(given[0]) and set(leaky) - set(given[0])  # both sides leak
    assert [f.file for f in alone[1] if f.check == "leaks"] == leaky


def test_a_leak_scan_that_fails_in_the_child_is_the_checks_to_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle, _ = _with_leaks(tmp_path)
    expected, _, _ = both(bundle, VerifyOptions(), monkeypatch)

    def fails(documents: Any) -> Any:
        next(iter(documents))
        raise RuntimeError("a bug in the scan")

    monkeypatch.setattr(verify, "scan_documents", fails)  # the share's scan only
    _, shared, given = both(bundle, VerifyOptions(), monkeypatch)
    assert shared == expected and given[0]
