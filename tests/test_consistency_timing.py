"""One request at a time, one server at a time: what the records' and servers' times must
show (the consistency check), with room for the clocks (a start is wall time, a duration
monotonic)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from sample_paths import SAMPLES

from verifier.bundle.reader import Limits, read_bundle
from verifier.checks.consistency import check_consistency
from verifier.checks.context import BundleContext, VerifyOptions

SEED = SAMPLES / "seed-mlxcel"
RECORD_1 = Path("records/sdpa-det-0/001.json")  # started 09:30:00, took 21.4 s
RECORD_2 = Path("records/sdpa-det-0/002.json")  # started 09:30:21.7


def _edit(path: Path, change: Any) -> None:
    document = json.loads(path.read_text())
    change(document)
    path.write_text(json.dumps(document))


def _timing(bundle: Path) -> list[str]:
    context = BundleContext(read_bundle(bundle, Limits()), VerifyOptions())
    return [
        f"{f.file} {f.message}"
        for f in check_consistency(context)
        if "in flight" in f.message or "alive at once" in f.message
    ]


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    copy = tmp_path / "bundle"
    shutil.copytree(SEED, copy)
    return copy


def test_the_samples_send_one_request_and_run_one_server_at_a_time() -> None:
    for sample in ("seed-mlxcel", "llama-cpp-real.tar.gz", "llama-cpp-cuda-flip.tar.gz"):
        assert _timing(SAMPLES / sample) == [], sample


@pytest.mark.parametrize(
    ("started", "overlaps"),
    [
        ("2026-11-02T09:30:00Z", True),  # with the one before it
        ("2026-11-02T09:30:20Z", True),  # 1.4 s before the one before it ended
        ("2026-11-02T09:30:21.35Z", False),  # 50 ms early: within the clocks' leeway
        ("2026-11-02T09:30:21.45Z", False),
    ],
)
def test_a_request_sent_before_the_one_before_it_had_its_answer(
    bundle: Path, started: str, overlaps: bool
) -> None:
    _edit(bundle / RECORD_2, lambda r: r.__setitem__("started_at", started))
    found = _timing(bundle)
    if overlaps:
        assert found == [
            f"{RECORD_2.as_posix()} this request started before the one before it "
            f"({RECORD_1.as_posix()}) had its answer: two requests in flight at once, where "
            "the protocol sends one at a time"
        ]
    else:
        assert found == []


def test_a_request_without_a_duration_is_not_judged_by_it(bundle: Path) -> None:
    """No overlap is made up (the missing duration is an error of its own, below)."""
    _edit(bundle / RECORD_1, lambda r: r.__setitem__("elapsed_s", None))
    _edit(bundle / RECORD_2, lambda r: r.__setitem__("started_at", "2026-11-02T09:30:00Z"))
    assert _timing(bundle) == []


def test_a_server_started_before_the_one_before_it_stopped(bundle: Path) -> None:
    def early(experiment: dict[str, Any]) -> None:
        experiment["conditions"][0]["servers"][1]["started_at"] = "2026-11-02T09:33:20Z"

    _edit(bundle / "experiment.json", early)
    assert _timing(bundle) == [
        "experiment.json server 2 of sdpa-det-0 started before server 1 of sdpa-det-0 "
        "stopped: two servers alive at once, where the protocol runs one"
    ]


@pytest.mark.parametrize("elapsed", [None, 0, _MISSING := object()])  # a string: the schema
def test_a_request_without_a_duration_is_an_error_since_schema_1_1(
    bundle: Path, elapsed: object
) -> None:
    """Capture times every request: without a duration, whether the next one waited for
    its answer cannot be checked (`elapsed_s` is outside the output hash)."""

    def untimed(record: dict[str, Any]) -> None:
        if elapsed is _MISSING:
            del record["elapsed_s"]
        else:
            record["elapsed_s"] = elapsed

    _edit(bundle / RECORD_1, untimed)
    context = BundleContext(read_bundle(bundle, Limits()), VerifyOptions())
    found = [f for f in check_consistency(context) if f.pointer == "/elapsed_s"]
    assert [f.file for f in found] == [RECORD_1.as_posix()]


def test_a_server_without_a_stop_time_before_another_is_an_error(bundle: Path) -> None:
    def unstopped(experiment: dict[str, Any]) -> None:
        experiment["conditions"][0]["servers"][0]["stopped_at"] = None

    _edit(bundle / "experiment.json", unstopped)
    context = BundleContext(read_bundle(bundle, Limits()), VerifyOptions())
    assert [f.message for f in check_consistency(context) if "no stop time" in f.message] == [
        "server 1 of sdpa-det-0 has no stop time, yet server 2 of sdpa-det-0 started after "
        "it: whether it had stopped cannot be checked"
    ]
