"""The records verify's child validates for the parent change nothing.

For a large bundle the forked child first parses and validates the last share of the
records (`verify.SHARED`) and sends back their schema violations, while the parent parses
every document and validates the rest; then it runs its own checks. Here the share is
forced on every bundle: whatever the child sends, or fails to send, the parent's
documents, schema violations and value budget are those of parsing and validating every
file itself, in order.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from sample_paths import SAMPLES

from verifier import forked, verify
from verifier.bundle.reader import Limits, read_bundle
from verifier.checks.context import BundleContext, Share, VerifyOptions, violations_of
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

    def seen(beside: Any, paths: frozenset[str]) -> dict[str, list[SchemaViolation]] | None:
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


def test_a_huge_integer_in_the_childs_share_runs_the_budget_out_as_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A document of the share that the scanner reads (an integer of 4,299 digits) runs
    the budget out where one process does, its violations given by the child."""
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


def test_a_document_nested_deeper_than_the_child_reads_is_validated_here(
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
def test_a_message_not_as_the_child_sends_it_means_all_validated_here(
    message: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected, _, _ = both(SEED, VerifyOptions(), monkeypatch)
    monkeypatch.setattr(verify, "_prepare", lambda *_args: message)
    alone, shared, given = both(SEED, VerifyOptions(), monkeypatch)
    assert alone == expected and shared == expected
    assert given == [[]]


def test_a_child_that_dies_before_its_share_means_all_validated_here(
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


def test_what_the_child_gives_is_what_validating_here_finds() -> None:
    for sample in (SEED, SAMPLES / "negative" / "schema-violation"):
        loaded = read_bundle(sample, Limits())
        paths = sorted(p for p in loaded.files if p.startswith("records/"))
        given = verify._prepare(loaded.files, paths, Limits())
        assert [path for path, _ in given] == paths
        for path, violations in given:
            here = violations_of(path, loads_strict(loaded.files[path]))
            assert violations == [tuple(v) for v in here]


def test_the_child_reads_at_most_the_limit_of_values_in_all() -> None:
    """Each document is read with what is left of one budget: 10 documents of 1,001 values
    each, under a limit of 2,500, are 2 read and 8 left to the parent."""
    files = {f"records/c/{i:03d}.json": json.dumps([0] * 1000).encode() for i in range(10)}
    given = verify._prepare(files, sorted(files), Limits(max_json_values=2500))
    assert [path for path, _ in given] == sorted(files)[:2]


def test_schema_violations_given_are_taken_for_the_documents_parsed_here() -> None:
    bundle = read_bundle(SAMPLES / "negative" / "schema-violation", Limits())
    plain = BundleContext(bundle, VerifyOptions())
    shared = BundleContext(bundle, VerifyOptions())
    paths = frozenset(p for p in bundle.files if p.startswith("records/"))
    given = {
        path: [SchemaViolation(*v) for v in violations]
        for path, violations in verify._prepare(bundle.files, sorted(paths), Limits())
    }
    shared.share = Share(paths, lambda: given)
    assert shared.documents == plain.documents
    assert shared.schema_violations == plain.schema_violations
    assert any(shared.schema_violations[p] for p in paths)  # an invalid one was given too
    # taken as given (the child validated the same bytes), not validated again here
    marked = BundleContext(bundle, VerifyOptions())
    first = min(paths)
    told = SchemaViolation("/x", "told by the child", "x")
    marked.share = Share(paths, lambda: {first: [told], "records/not/here.json": [told]})
    assert marked.schema_violations[first] == [told]
    assert "records/not/here.json" not in marked.schema_violations
    assert all(marked.schema_violations[p] == plain.schema_violations[p] for p in paths - {first})


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


def test_leaks_found_by_the_child_are_the_ones_found_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle, leaky = _with_leaks(tmp_path)
    alone, shared, given = both(bundle, VerifyOptions(), monkeypatch)
    assert shared == alone
    assert set(leaky) & set(given[0]) and set(leaky) - set(given[0])  # both sides leak
    assert [f.file for f in alone[1] if f.check == "leaks"] == leaky
