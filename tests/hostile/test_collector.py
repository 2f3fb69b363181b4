"""verify makes next to no garbage cycles, so the CLI runs it with the cyclic collector off
(`cli.common.collector_off`): the objects in cycles left after verifying every sample
bundle and every case of the hostile corpus, counted by a full collection."""

from __future__ import annotations

import contextlib
import gc
import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from corpus import CASES, Case
from sample_paths import SAMPLES

from verifier import forked, verify
from verifier.checks.context import VerifyOptions
from verifier.errors import UnreadableInput, UnsafeInput

# Far above what any input leaves (9 for most, about 1,200 for the most: huge-counter),
# far below what a cycle per document or value would leave on the larger inputs.
MOST_IN_CYCLES = 5_000

BUNDLES = sorted(
    [p for p in SAMPLES.iterdir() if (p / "SHA256SUMS").exists() or p.suffix == ".gz"]
    + [p for p in (SAMPLES / "negative").iterdir() if p.is_dir() or p.suffix == ".gz"]
)


@contextmanager
def cycles_left() -> Iterator[list[int]]:
    counted: list[int] = []
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        yield counted
    finally:
        counted.append(gc.collect())
        if was:
            gc.enable()


def _verify(path: Path, monkeypatch: pytest.MonkeyPatch, options: VerifyOptions) -> None:
    monkeypatch.setattr(forked, "can_fork", lambda: False)  # every check in this process
    with contextlib.suppress(UnreadableInput, UnsafeInput):  # refused whole: counted too
        verify.verify_path(path, options)


@pytest.mark.parametrize("bundle", BUNDLES, ids=[p.name for p in BUNDLES])
def test_verifying_a_sample_leaves_next_to_no_cycles(
    bundle: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with cycles_left() as counted:
        _verify(bundle, monkeypatch, VerifyOptions())
    assert counted[0] < MOST_IN_CYCLES


@pytest.mark.parametrize("item", CASES, ids=[c.name for c in CASES])
def test_verifying_a_hostile_case_leaves_next_to_no_cycles(
    item: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = item.build(tmp_path)
    with cycles_left() as counted:
        _verify(path, monkeypatch, VerifyOptions())
    assert counted[0] < MOST_IN_CYCLES


def test_many_records_leave_no_more_cycles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What is left does not grow with the records: none is in a cycle of its own."""
    bundle = tmp_path / "bundle"
    shutil.copytree(SAMPLES / "seed-mlxcel", bundle)
    with cycles_left() as few:
        _verify(bundle, monkeypatch, VerifyOptions())
    for record in sorted((bundle / "records").rglob("*.json")):
        document = json.loads(record.read_text())
        for copy in range(1, 6):  # invalid copies: the findings of each are made too
            (record.parent / f"9{copy}{record.name}").write_text(json.dumps(document))
    with cycles_left() as many:
        _verify(bundle, monkeypatch, VerifyOptions())
    assert many[0] <= few[0] + 50


def test_leaky_records_leave_no_more_cycles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each leak found is located in its document by a walk that must not stay in a cycle
    (it once did: some 21 objects for every document with a hit)."""
    bundle = tmp_path / "bundle"
    shutil.copytree(SAMPLES / "seed-mlxcel", bundle)
    records = sorted((bundle / "records").rglob("*.json"))

    def leak(copies: int) -> None:
        for record in records:
            document = json.loads(record.read_text())
            document["response"]["note"] = "/home/alice/x ghp_" + "a" * 36 + " bob@example.org"
            record.write_text(json.dumps(document))
            for copy in range(1, copies + 1):
                (record.parent / f"9{copy}{record.name}").write_text(json.dumps(document))

    leak(0)
    _verify(bundle, monkeypatch, VerifyOptions())  # what the detectors make once, made
    with cycles_left() as few:
        _verify(bundle, monkeypatch, VerifyOptions())
    leak(8)
    with cycles_left() as many:
        _verify(bundle, monkeypatch, VerifyOptions())
    assert many[0] <= few[0] + 50
