"""Three lies of the 70th audit, each with the integrity redone as a forger would (the output
hashes and SHA256SUMS recomputed), each of which had been verified with the split the forger
wanted:

- F3: the count of cached entries taken out of (or nulled in, or written as "0" in) the
  warm requests' before-stats only, which hid "cached tokens from a cache that held no
  entry before the request";
- F4: llama.cpp's `timings.prompt_ms` and `predicted_ms` written as strings, or left out of
  one answer, which skipped the bound that a server works no longer than its request took;
- F2: an empty reasoning block (`<think>\\n\\n</think>\\n\\n`) left in the content of the
  cold and baseline answers of one condition and not of its warm ones, with the same
  completion count: one generation written two ways, a split made of nothing.

Each lie must leave the bundle invalid, with the finding that names it; the honest bundle
each starts from, and the honest variants beside each lie, keep their verdicts."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from make_samples import _resum
from test_soundness import SEED_FILES, _archive_files, write
from test_soundness_signals import Files, _edited, _invalid, _records

from verifier import layout
from verifier.canonical import output_hash
from verifier.model import Verdict
from verifier.verify import VerificationResult, verify_path


def _verify(files: Files, tmp_path: Path) -> VerificationResult:
    return verify_path(write(_resum(files), tmp_path / "b"))


def _errors(result: VerificationResult) -> list[str]:
    return [f.message for f in result.findings if f.is_error]


# Since the seconds counters are read, they catch F4's shortened request on their own too.
_SECONDS_BOUND = "_seconds_total), more than the 0.005 s it took"


def _only(result: VerificationResult, words: str, *also: str) -> None:
    """Every error is the one named, or one of `also`: the lie left no other trace."""
    named = (words, *also)
    assert all(any(w in message for w in named) for message in _errors(result)), _errors(result)


@pytest.mark.parametrize(
    ("bundle", "verdict"),
    [
        ("seed-mlxcel", Verdict.CACHE_STATE_DEPENDENT),
        ("llama-cpp-cuda-flip.tar.gz", Verdict.CACHE_STATE_DEPENDENT),
        ("llama-cpp-cuda-stable.tar.gz", Verdict.CACHE_STATE_INDEPENDENT),
    ],
)
def test_the_honest_bundles_the_lies_start_from_keep_their_verdicts(
    tmp_path: Path, bundle: str, verdict: Verdict
) -> None:
    files = dict(SEED_FILES) if bundle == "seed-mlxcel" else _archive_files(bundle)
    result = _verify(files, tmp_path)
    assert result.verdict is verdict
    assert not [f for f in result.findings if f.severity != "info"]


# --- F3: the count of entries, taken out where it would have said the cache was empty ----


def _warm_before_stats(edit: Callable[[dict[str, Any]], None]) -> Callable[[Any], None]:
    def edited(record: Any) -> None:
        if record["claimed_arm"] == "warm":
            edit(record["telemetry"]["before"]["cache_stats"])

    return edited


def test_the_lie_the_entry_count_hid_is_caught_where_it_is_written(tmp_path: Path) -> None:
    """The control: a warm request served from a cache its stats say held no entry."""
    files = _records(dict(SEED_FILES), _warm_before_stats(lambda s: s.update(entries=0)))
    _invalid(files, tmp_path, "telemetry", "held no entry before the request")


@pytest.mark.parametrize(
    "edit",
    [lambda s: s.pop("entries"), lambda s: s.update(entries=None)],
    ids=["left-out", "null"],
)
def test_an_entry_count_taken_out_of_the_warm_requests_stats_only(
    tmp_path: Path, edit: Callable[[dict[str, Any]], None]
) -> None:
    """F3: every other stats snapshot carries `entries`; the warm ones' before-stats, where
    it would have said 0, do not. The same build writes it in every stats answer or none."""
    files = _records(dict(SEED_FILES), _warm_before_stats(edit))
    result = _invalid(files, tmp_path, "telemetry", "lack /entries (or hold null)")
    _only(result, "lack /entries (or hold null)")
    (finding,) = [f for f in result.findings if "lack /entries" in f.message]
    assert finding.message.startswith("10 of 56 stats snapshots")
    assert finding.pointer == "/telemetry/before/cache_stats"


@pytest.mark.parametrize("value", ["0", "1", 1.5, -1, True, [0], {"n": 0}])
def test_an_entry_count_that_is_no_count(tmp_path: Path, value: object) -> None:
    """F3: "0" is not 0 to the rule that reads an empty cache, and would pass for a field
    that says nothing: where the count is there, it must be a count."""
    files = _records(dict(SEED_FILES), _warm_before_stats(lambda s: s.update(entries=value)))
    result = _invalid(files, tmp_path, "telemetry", "not a whole number in 0..2^53")
    _only(result, "/entries is")
    pointers = {f.pointer for f in result.findings if "/entries is" in f.message}
    assert pointers == {"/telemetry/before/cache_stats/entries"}


def test_an_entry_count_left_out_of_every_snapshot_proves_no_reset(tmp_path: Path) -> None:
    """A build that writes no count of entries at all is not an error of the every-or-none
    rule, but its resets are proven by that count alone: its cold requests are not proven,
    and nothing is claimed (fail closed)."""

    def none(record: Any) -> None:
        for side in ("before", "after"):
            record["telemetry"][side]["cache_stats"].pop("entries")

    result = _verify(_records(dict(SEED_FILES), none), tmp_path)
    assert result.verdict is Verdict.INCONCLUSIVE
    assert not _errors(result)
    assert any("reset is not proven" in f.message for f in result.findings)


# --- F4: the server's timings, unread where they would have outlasted the request --------

_FLIP = "llama-cpp-cuda-flip.tar.gz"
_SHORT = "records/fa-on/002.json"  # a warm answer whose timings say 19.4 ms of work


def _short_request(edit: Callable[[dict[str, Any]], None]) -> Files:
    """The flip sample with one request made to last 5 ms, and its timings edited."""

    def shortened(record: Any) -> None:
        record["elapsed_s"] = 0.005
        edit(record["response"]["timings"])

    return _edited(_archive_files(_FLIP), _SHORT, shortened)


def test_timings_longer_than_the_request_are_caught_where_they_are_numbers(
    tmp_path: Path,
) -> None:
    """The control: the bound the lies below would skip."""
    files = _short_request(lambda t: None)
    _invalid(files, tmp_path, "consistency", "longer than the whole request took")


@pytest.mark.parametrize(
    "spelling",
    [str, lambda v: True, lambda v: [v], lambda v: {"ms": v}],
    ids=["string", "true", "list", "object"],
)
def test_timings_written_as_no_number(tmp_path: Path, spelling: Callable[[float], Any]) -> None:
    """F4: "3.805" was read as no timing at all, and the bound was skipped."""

    def respelled(timings: dict[str, Any]) -> None:
        for name in ("prompt_ms", "predicted_ms"):
            timings[name] = spelling(timings[name])

    files = _short_request(respelled)
    result = _invalid(files, tmp_path, "consistency", "not a number of milliseconds")
    _only(result, "not a number of milliseconds", _SECONDS_BOUND)
    pointers = {f.pointer for f in result.findings if "not a number of milli" in f.message}
    assert pointers == {"/response/timings/prompt_ms", "/response/timings/predicted_ms"}


def test_a_timing_written_as_a_string_is_an_error_even_within_the_bound(tmp_path: Path) -> None:
    """Not only where the bound would have failed: a timing that cannot be read is an error."""

    def respelled(record: Any) -> None:
        record["response"]["timings"]["prompt_ms"] = str(record["response"]["timings"]["prompt_ms"])

    files = _edited(_archive_files(_FLIP), "records/fa-off/005.json", respelled)
    _invalid(files, tmp_path, "consistency", "(timings.prompt_ms): not a number of milliseconds")


@pytest.mark.parametrize(
    "names", [("prompt_ms", "predicted_ms"), ("prompt_ms",), ("predicted_ms",)]
)
def test_timings_left_out_of_one_answer(tmp_path: Path, names: tuple[str, ...]) -> None:
    """F4: every other answer carries them; the one whose work outlasted its request not."""

    def removed(timings: dict[str, Any]) -> None:
        for name in names:
            timings.pop(name)

    result = _invalid(_short_request(removed), tmp_path, "telemetry", "which the others carry")
    _only(result, "answers lack timings.", _SECONDS_BOUND)
    lacking = {f.pointer for f in result.findings if "answers lack timings." in f.message}
    assert lacking == {f"/response/timings/{name}" for name in names}


def test_timings_null_in_one_answer_are_timings_left_out(tmp_path: Path) -> None:
    files = _short_request(lambda t: t.update(prompt_ms=None, predicted_ms=None))
    _invalid(files, tmp_path, "telemetry", "1 of 28 answers lack timings.prompt_ms")


def test_a_build_that_writes_no_timings_in_any_answer_is_no_finding(tmp_path: Path) -> None:
    """In none is as one build writes them: the bound then has nothing to read."""

    def none(record: Any) -> None:
        for name in ("prompt_ms", "predicted_ms"):
            record["response"]["timings"].pop(name)

    result = _verify(_records(_archive_files(_FLIP), none), tmp_path)
    assert result.verdict is Verdict.CACHE_STATE_DEPENDENT
    assert not _errors(result)


# --- F2: an empty reasoning block in some answers' content and not in others' -----------

_STABLE = "llama-cpp-cuda-stable.tar.gz"
_QWEN_EMPTY = "<think>\n\n</think>\n\n"


def _prefixed(files: Files, condition: str, prefix: Callable[[Any], str | None]) -> Files:
    """Each answer of `condition` for which `prefix(record)` is a string, with its content
    starting with that string (and its output hash redone)."""

    def edit(record: Any) -> None:
        before = prefix(record) if record["condition"] == condition else None
        if before is None:
            return
        message = record["response"]["choices"][0]["message"]
        message["content"] = before + (message["content"] or "")
        record["output_hash"] = output_hash(record["response"])

    return _records(files, edit)


@pytest.mark.parametrize(
    "prefix",
    [
        lambda r: None if r["claimed_arm"] == "warm" else _QWEN_EMPTY,
        lambda r: _QWEN_EMPTY if r["claimed_arm"] == "warm" else None,
        lambda r: None if r["claimed_arm"] == "warm" else "\n<think>\t</think>",
    ],
    ids=["cold-side", "warm-side", "other-white-space"],
)
def test_an_empty_reasoning_block_on_one_side_is_a_split_made_of_nothing(
    tmp_path: Path, prefix: Callable[[Any], str | None]
) -> None:
    """F2: the same 22 tokens on both sides, one side's content with the empty block its
    parser would have taken out. It had been judged cache-state-dependent."""
    files = _prefixed(_archive_files(_STABLE), "fa-on", prefix)
    result = _invalid(files, tmp_path, "consistency", "only by an empty reasoning block")
    _only(result, "only by an empty reasoning block")
    (finding,) = [f for f in result.findings if "empty reasoning block" in f.message]
    assert "both count 22 completion tokens" in finding.message
    assert finding.file is not None and finding.file.startswith("records/fa-on/")
    assert finding.pointer == "/response/choices/0/message/content"


def test_empty_reasoning_blocks_of_other_white_space_are_two_generations(tmp_path: Path) -> None:
    """helper-73: `\n` and `\n\n` are one token each in Qwen's vocabulary: blocks that differ
    in their white space are two token sequences of one count, left to the classification."""
    files = _prefixed(
        _archive_files(_STABLE),
        "fa-on",
        lambda r: "<think>\n</think>\n\n" if r["claimed_arm"] == "warm" else _QWEN_EMPTY,
    )
    result = _verify(files, tmp_path)
    assert not [f for f in _errors(result) if "empty reasoning block" in f.message]
    assert result.verdict is Verdict.CACHE_STATE_DEPENDENT


def test_an_empty_reasoning_block_in_every_answer_is_one_way_of_writing(tmp_path: Path) -> None:
    """A server whose parser is off leaves the block in every answer: no split, no finding."""
    files = _prefixed(_archive_files(_STABLE), "fa-on", lambda r: _QWEN_EMPTY)
    result = _verify(files, tmp_path)
    assert result.verdict is Verdict.CACHE_STATE_INDEPENDENT
    assert not _errors(result)


def _one_story(seed_files: Files, *, cold_count: int) -> Files:
    """The seed with every reply the cold story, the cold side's with the empty block before
    it, and the cold side counting `cold_count` completion tokens (mlxcel's counters bind no
    count of generated tokens, so only the answers' own counts are edited, kept whole)."""
    records = [
        json.loads(data)
        for name, data in sorted(seed_files.items())
        if name.startswith(layout.RECORDS_DIR + "/")
    ]
    cold_text = next(
        r["response"]["choices"][0]["message"]["content"]
        for r in records
        if r["claimed_arm"] == "cold"
    )

    def edit(record: Any) -> None:
        response = record["response"]
        warm = record["claimed_arm"] == "warm"
        response["choices"][0]["message"]["content"] = (
            cold_text if warm else _QWEN_EMPTY + cold_text
        )
        usage = response["usage"]
        usage["completion_tokens"] = 731 if warm else cold_count
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        if "usage" in record:  # (the record's copy of it)
            record["usage"] = dict(usage)
        record["output_hash"] = output_hash(response)

    return _records(seed_files, edit)


def test_an_empty_reasoning_block_with_the_same_count_on_another_server(tmp_path: Path) -> None:
    """The rule reads the answers' own counts, not one server's counters: mlxcel too."""
    files = _one_story(dict(SEED_FILES), cold_count=731)
    result = _invalid(files, tmp_path, "consistency", "only by an empty reasoning block")
    _only(result, "only by an empty reasoning block")


def test_an_empty_reasoning_block_with_other_counts_is_two_generations(tmp_path: Path) -> None:
    """Where the side with the block counts its tokens too (4 more), the replies may be two
    generations: the rule leaves them to the classification, which finds the split."""
    files = _one_story(dict(SEED_FILES), cold_count=735)
    result = _verify(files, tmp_path)
    assert result.verdict is Verdict.CACHE_STATE_DEPENDENT
    assert not _errors(result)
