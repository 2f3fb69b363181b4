"""What helper-100's audit found: the two controls (the per-request opt-out and the
cache-off server) were proven while mlxcel's scheduler counted a miss across them, or while
the cache's own stats counted more entries after them than before. A miss is a lookup that
found nothing, and an entry more is a prompt stored: neither control does either."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_soundness import SEED_FILES, _archive_files
from test_soundness_audit70 import _verify
from test_soundness_signals import Files, _records

from verifier.model import Verdict

MISSES = "mlxcel_prompt_cache_misses_total"
# The seed's condition sdpa-det-0: (server, first request) of its opt-out requests (7-9)
# and of its cache-off requests (12-14), each the last requests of its server.
CONTROLS = {"request-disabled": (1, 7), "server-disabled": (3, 12)}


def _rising(arm: str, surface: str, name: str) -> Files:
    """The seed with the counter `name` one more after each request of the control `arm` of
    sdpa-det-0 than before it, and the same between them (no other trace)."""
    instance, first = CONTROLS[arm]

    def edit(record: Any) -> None:
        if record["condition"] != "sdpa-det-0" or record["server_instance"] != instance:
            return
        step = record["sequence"] - first
        if step < 0:
            return
        before, after = (record["telemetry"][side][surface] for side in ("before", "after"))
        assert before[name] == after[name]  # the seed's: the control leaves it still
        before[name] += step
        after[name] = before[name] + 1

    return _records(dict(SEED_FILES), edit)


def _unproven(files: Files, tmp_path: Path, arm: str, words: str) -> None:
    result = _verify(files, tmp_path)
    assert result.verdict is Verdict.INCONCLUSIVE
    assert result.classification is not None
    (condition,) = [c for c in result.classification.conditions if c.condition.id == "sdpa-det-0"]
    assert any(f"claimed {arm}: " in r and words in r for r in condition.reasons), condition.reasons


@pytest.mark.parametrize("arm", sorted(CONTROLS))
def test_a_miss_counted_across_a_control(tmp_path: Path, arm: str) -> None:
    files = _rising(arm, "metrics", MISSES)
    _unproven(files, tmp_path, arm, f"{MISSES} moved: the server counted a miss")


@pytest.mark.parametrize("arm", sorted(CONTROLS))
def test_an_entry_stored_across_a_control(tmp_path: Path, arm: str) -> None:
    files = _rising(arm, "cache_stats", "entries")
    _unproven(files, tmp_path, arm, "the cache's entries (/entries) rose from")


@pytest.mark.parametrize("arm", sorted(CONTROLS))
def test_a_control_without_the_miss_counter_is_not_proven(tmp_path: Path, arm: str) -> None:
    instance, first = CONTROLS[arm]

    def edit(record: Any) -> None:
        if record["condition"] != "sdpa-det-0" or record["server_instance"] != instance:
            return
        if record["sequence"] >= first:
            for side in ("before", "after"):
                record["telemetry"][side]["metrics"].pop(MISSES)

    files = _records(dict(SEED_FILES), edit)
    _unproven(files, tmp_path, arm, f"{MISSES} not recorded")


@pytest.mark.parametrize(
    ("side", "gauge", "samples", "words"),
    [
        ("before", "requests_processing", {"": 1.0}, "busy in the snapshot before this request"),
        ("after", "requests_deferred", {"": 1.0}, "busy in the snapshot after this request"),
        # helper-102: samples whose sum is 0, and a snapshot that lacks the gauge
        ("before", "requests_processing", {'{slot="0"}': 1.0, '{slot="1"}': -1.0}, "busy"),
        ("after", "requests_processing", {}, "lacks llamacpp:requests_processing"),
    ],
)
def test_llama_server_busy_beside_a_recorded_request(
    tmp_path: Path, side: str, gauge: str, samples: dict[str, float], words: str
) -> None:
    """llama-server works its busy gauges out as it answers /metrics: one above zero in a
    snapshot is a request in flight beside the recorded one, which the counted work shows only
    once that request ends (never, where it ends after the last snapshot)."""
    name = f"llamacpp:{gauge}"

    def edit(record: Any) -> None:
        if record["sequence"] == 8:
            metrics = record["telemetry"][side]["metrics"]
            assert metrics.pop(name) == 0
            metrics.update({name + labels: value for labels, value in samples.items()})

    files = _records(_archive_files("llama-cpp-real.tar.gz"), edit)
    result = _verify(files, tmp_path)
    assert result.verdict is Verdict.INVALID
    (message,) = [f.message for f in result.findings if f.is_error]
    assert words in message


def test_llama_server_busy_gauges_taken_out_of_one_servers_snapshots(tmp_path: Path) -> None:
    """helper-103: both gauges left out of every snapshot of one server, while the bundle's
    other servers (the same build) hold them, hid a busy snapshot there."""

    def edit(record: Any) -> None:
        if record["server_instance"] == 1:
            for side in ("before", "after"):
                for gauge in ("requests_processing", "requests_deferred"):
                    del record["telemetry"][side]["metrics"][f"llamacpp:{gauge}"]

    files = _records(_archive_files("llama-cpp-real.tar.gz"), edit)
    result = _verify(files, tmp_path)
    assert result.verdict is Verdict.INVALID
    errors = [f.message for f in result.findings if f.is_error]
    assert errors and all("which other snapshots of the bundle hold" in m for m in errors)
