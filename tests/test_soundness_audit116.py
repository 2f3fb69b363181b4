"""What helper-116's audit found: llama-server's seconds of work (`prompt_seconds_total`,
`tokens_predicted_seconds_total`) were never read, so a record copied from another
condition's server, its identity and times stamped anew, went unseen where nothing after it
on its server read the work counters; and the timings could be lowered freely. Now they
stand still where no request is recorded, never go down, move across a request by what its
answer's timings say, and by no more than the request took (`ServerProfile.seconds_counters`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_soundness import _archive_files
from test_soundness_audit70 import _verify
from test_soundness_signals import Files, _edited, _invalid

PROMPT = "llamacpp:prompt_seconds_total"
PREDICTED = "llamacpp:tokens_predicted_seconds_total"
FLIP = "llama-cpp-cuda-flip.tar.gz"


def _flip() -> Files:
    return _archive_files(FLIP)


def test_the_samples_agree_with_their_seconds_of_work(tmp_path: Path) -> None:
    for archive in ("llama-cpp-cuda-flip.tar.gz", "llama-cpp-cuda-stable.tar.gz",
                    "llama-cpp-real.tar.gz"):  # fmt: skip
        result = _verify(_archive_files(archive), tmp_path / archive)
        assert result.verified, [f.message for f in result.findings if f.is_error]
        assert not [f for f in result.findings if "seconds" in f.message]


def _copied(files: Files, source: str, target: str, same: tuple[str, ...]) -> Files:
    """`target` replaced by the record at `source`, but for the `same` fields of `target`
    (and its response's id and created), as helper-116's graft did."""
    kept = json.loads(files[target])
    copy = json.loads(files[source])
    for field in same:
        copy[field] = kept[field]
    for field in ("id", "created"):
        copy["response"][field] = kept["response"][field]
    return {**files, target: (json.dumps(copy, indent=2) + "\n").encode()}


def test_a_record_copied_from_another_conditions_server(tmp_path: Path) -> None:
    files = _copied(
        _flip(), "records/fa-off/011.json", "records/fa-on/011.json",
        ("condition", "started_at", "elapsed_s"),
    )  # fmt: skip
    _invalid(files, tmp_path, "telemetry", "did work nobody recorded")


def test_the_seconds_move_between_two_requests(tmp_path: Path) -> None:
    def moved(record: Any) -> None:
        for side in ("before", "after"):
            record["telemetry"][side]["metrics"][PREDICTED] += 0.5

    files = _edited(_flip(), "records/fa-on/003.json", moved)
    _invalid(files, tmp_path, "telemetry", "did work nobody recorded between")


def test_the_seconds_are_not_zero_on_a_fresh_server(tmp_path: Path) -> None:
    def started(record: Any) -> None:
        for side in ("before", "after"):
            record["telemetry"][side]["metrics"][PROMPT] += 0.25

    files = _flip()
    for name in ("records/fa-on/001.json", "records/fa-on/002.json"):
        files = _edited(files, name, started)
    _invalid(files, tmp_path, "telemetry", "before its first recorded request")


@pytest.mark.parametrize(("field", "by"), [("predicted_ms", 0.5), ("prompt_ms", 0.2)])
def test_timings_lowered_below_the_servers_seconds(tmp_path: Path, field: str, by: float) -> None:
    def lowered(record: Any) -> None:
        record["response"]["timings"][field] = round(record["response"]["timings"][field] * by, 3)

    files = _edited(_flip(), "records/fa-on/001.json", lowered)
    _invalid(files, tmp_path, "telemetry", f"timings.{field} says")


def test_more_seconds_of_work_than_the_request_took(tmp_path: Path) -> None:
    """With the timings left out of every answer (which the contract allows), the seconds
    still bound the request's time."""

    def shortened(record: Any) -> None:
        record["response"].pop("timings", None)
        if record["sequence"] == 1 and record["condition"] == "fa-on":
            record["elapsed_s"] = 0.05  # the server spent some 0.089 s on it

    files = _flip()
    for name in [n for n in files if n.startswith("records/")]:
        files = _edited(files, name, shortened)
    _invalid(files, tmp_path, "telemetry", "more than the 0.05 s it took")


def test_the_seconds_go_down_across_a_request(tmp_path: Path) -> None:
    def fell(record: Any) -> None:
        metrics = record["telemetry"]["after"]["metrics"]
        metrics[PREDICTED] = record["telemetry"]["before"]["metrics"][PREDICTED] - 0.001

    files = _edited(_flip(), "records/fa-on/002.json", fell)
    _invalid(files, tmp_path, "telemetry", "down: the telemetry is not usable")


def test_the_seconds_taken_out_of_a_snapshot(tmp_path: Path) -> None:
    def taken(record: Any) -> None:
        del record["telemetry"]["after"]["metrics"][PREDICTED]

    files = _edited(_flip(), "records/fa-on/011.json", taken)
    _invalid(files, tmp_path, "telemetry", "lack llamacpp:tokens_predicted_seconds_total")
