"""What helper-91's and helper-92's audits found: a counter of mlxcel's snapshot cache, a
cache beside the rules' signals (`ServerProfile.other_hit_counters`), kept from telling
against a cold request by leaving it (or one of its samples) out of that request's
snapshot after, by letting its rise fall between two requests of the server, by a server
that starts with it above zero, or by writing it as no count; and that honest captures of
the counter keep their verdict."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_soundness import SEED_FILES
from test_soundness_audit70 import _verify
from test_soundness_signals import Files, _records

from verifier.model import Verdict
from verifier.verify import VerificationResult, verify_path

# A value of the counter in one snapshot: (sequence, side) -> value; None leaves it out.
Values = Callable[[int, str], object]


def _counting(surface: str, name: str, values: Values, files: Files = SEED_FILES) -> Files:
    """The seed (or `files`) with the counter written into every snapshot of its first
    server (the one of the requests 1-9 of condition sdpa-det-0) as `values` says (a
    float in the stats as an integer)."""

    def edit(record: Any) -> None:
        if record["condition"] != "sdpa-det-0" or record["server_instance"] != 1:
            return
        for side in ("before", "after"):
            value = values(record["sequence"], side)
            if value is not None:
                record["telemetry"][side][surface][name] = (
                    int(value) if surface == "cache_stats" and type(value) is float else value
                )

    return _records(dict(files), edit)


def _reasons(result: VerificationResult) -> list[str]:
    assert result.classification is not None
    (condition,) = [c for c in result.classification.conditions if c.condition.id == "sdpa-det-0"]
    return list(condition.reasons)


def _unproven(files: Files, tmp_path: Path, words: str) -> None:
    """The bundle verifies inconclusive: a request of sdpa-det-0 is not proven, for `words`."""
    result = _verify(files, tmp_path)
    assert result.verdict is Verdict.INCONCLUSIVE
    assert any(words in reason for reason in _reasons(result))


SURFACES = [
    ("metrics", "mlxcel_prompt_cache_snapshot_hits_total"),
    ("cache_stats", "snapshot_hits"),
]


@pytest.mark.parametrize(("surface", "name"), SURFACES)
def test_a_snapshot_hit_left_out_of_a_cold_requests_snapshot_after(
    tmp_path: Path, surface: str, name: str
) -> None:
    # 0 up to the second cold request (4), 1 from then on, and left out after request 4
    def values(sequence: int, side: str) -> object:
        if (sequence, side) == (4, "after"):
            return None
        return 1.0 if sequence > 4 else 0.0

    _unproven(_counting(surface, name, values), tmp_path, "is missing after it")


@pytest.mark.parametrize(("surface", "name"), SURFACES)
def test_a_snapshot_hit_counted_between_two_requests(
    tmp_path: Path, surface: str, name: str
) -> None:
    # 0 up to request 3, 1 from request 4's snapshot before on: its rise fell between them
    def values(sequence: int, side: str) -> object:
        return 1.0 if sequence >= 4 else 0.0

    _unproven(_counting(surface, name, values), tmp_path, "between the request before it")


def test_a_rise_between_two_requests_leaves_the_earlier_one_unproven(tmp_path: Path) -> None:
    # left out of every snapshot up to request 4's after, 1 from request 5 on: where the
    # counter first appears, above zero, between the cold request 4 and the warm 5
    def values(sequence: int, side: str) -> object:
        return 1.0 if sequence > 4 else None

    files = _counting("metrics", "mlxcel_prompt_cache_snapshot_hits_total", values)
    _unproven(files, tmp_path, "between it and the next request")


@pytest.mark.parametrize(("surface", "name"), SURFACES)
@pytest.mark.parametrize("first", [1, 5])
def test_a_snapshot_hit_across_a_warm_request_keeps_the_verdict(
    tmp_path: Path, surface: str, name: str, first: int
) -> None:
    # honest: the counter rises across the warm request 5 alone; from the first snapshot
    # on (0 until then), or first written in request 5's snapshot after (registered late)
    def values(sequence: int, side: str) -> object:
        if sequence < first:
            return None
        return 1.0 if sequence > 5 or (sequence, side) == (5, "after") else 0.0

    result = _verify(_counting(surface, name, values), tmp_path)
    seed = verify_path(Path(__file__).parent.parent / "sample_bundles" / "seed-mlxcel")
    assert result.verdict is seed.verdict is Verdict.CACHE_STATE_DEPENDENT
    assert not any("another cache" in reason for reason in _reasons(result))


def test_a_labelled_sample_left_out_after_a_cold_request(tmp_path: Path) -> None:
    # helper-92: the family keeps a sample of another label, so it is still there after
    # request 4; the sample that rose across it is what was left out, from there on
    family = "mlxcel_prompt_cache_snapshot_hits_total"

    def rose(sequence: int, side: str) -> object:
        return None if sequence > 4 or (sequence, side) == (4, "after") else 0.0

    files = _counting("metrics", family + '{kind="a"}', rose)
    files = _counting("metrics", family + '{kind="b"}', lambda sequence, side: 0.0, files)
    _unproven(files, tmp_path, "is missing after it")


@pytest.mark.parametrize(("surface", "name"), SURFACES)
def test_a_counter_above_zero_in_a_fresh_servers_first_snapshot(
    tmp_path: Path, surface: str, name: str
) -> None:
    # helper-92: 1 from the first snapshot of the server on, never moving: a use before
    # its first request (a cold one) was recorded
    _unproven(
        _counting(surface, name, lambda sequence, side: 1.0),
        tmp_path,
        "fresh server's first snapshot",
    )


@pytest.mark.parametrize(("low", "high"), [("0", "1"), (False, True), (-1, 0)])
def test_a_stats_counter_that_is_no_count(tmp_path: Path, low: object, high: object) -> None:
    # helper-92: a value read as no number at all hid the rise across request 4
    def values(sequence: int, side: str) -> object:
        return high if sequence > 4 or (sequence, side) == (4, "after") else low

    _unproven(_counting("cache_stats", "snapshot_hits", values), tmp_path, "is not a count")


@pytest.mark.parametrize(("surface", "name"), SURFACES)
def test_a_counter_that_goes_down_hides_no_rise(tmp_path: Path, surface: str, name: str) -> None:
    # helper-93: 0 until request 3, 5 after the warm request 3 and before the cold 4, then
    # 1 (its true value) from 4 on: the cold request's rise hid behind a fall across it
    def values(sequence: int, side: str) -> object:
        if sequence < 3 or (sequence, side) == (3, "before"):
            return 0.0
        return 5.0 if sequence == 3 or (sequence, side) == (4, "before") else 1.0

    _unproven(_counting(surface, name, values), tmp_path, "went down on its server")


@pytest.mark.parametrize(
    "key",
    [
        'mlxcel_prompt_cache_snapshot_hits_total {kind="tokens"}',  # a blank before `{`
        "mlxcel_prompt_cache_snapshot_hits_total\t",
        " mlxcel_prompt_cache_snapshot_hits_total",
        'mlxcel_prompt_cache_snapshot_hits_total{kind="tokens"',  # no closing brace
        'mlxcel_prompt_cache_snapshot_hits_total{\u00a0kind="tokens"}',  # a no-break space
        "mlxcel_prompt_cache_snapshot_hits_total{}",
        "",
    ],
)
def test_a_counter_under_a_key_no_sample_has(tmp_path: Path, key: str) -> None:
    # the snapshot cache's hit counter, rising across the cold request 4, written in every
    # snapshot under a key capture never writes (sample_key): read as no family at all, the
    # counter was never held, and request 4 passed as cold
    def values(sequence: int, side: str) -> object:
        return 1.0 if sequence > 4 or (sequence, side) == (4, "after") else 0.0

    _unproven(_counting("metrics", key, values), tmp_path, "no Prometheus sample's name")
