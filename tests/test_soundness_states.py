"""Lies of a fresh-eyed audit (helper-41, 2026-12-04), each with the integrity redone as a
forger would: the cache state each arm needs, the server's own statement of it, the counts
the cross-checks read, and what a bundle may spell otherwise. Each lie leaves the bundle
invalid (or, where the lie only takes a proof away, inconclusive), with the finding that
names it; the honest samples stay as they are (tests/test_samples.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from make_samples import _dump, _resum
from test_soundness import SEED_FILES, _archive_files, write
from test_soundness_signals import Files, _edited, _invalid, _llama_records, _records

from verifier import layout
from verifier.model import Verdict
from verifier.verify import VerificationResult, verify_path

# --- vLLM: the real llama.cpp capture told as vLLM would tell it ---------------------------

_VLLM_KEPT = (1, 2, 3, 4, 5, 6, 10, 11, 12, 13, 14)  # no opt-out (7-9), no diagnostics (15-16)
_GAUGE = 'vllm:cache_config_info{enable_prefix_caching="%s"}'


def _told_as(
    server: dict[str, Any],
    skipped: str,
    argv: Callable[[bool], list[str]],
    snapshot: Callable[[dict[str, float], bool], dict[str, Any]],
    count: Callable[[dict[str, float], dict[str, Any], bool], None],
    edit: Callable[[int, Any], None] | None,
) -> Files:
    """The llama-cpp-real capture as another profile's bundle: its `server` facts and
    command lines (`argv(cache_disabled)`), no environment, no timings, the opt-out phase
    skipped (`skipped`: why), the diagnostics left out; each server's counters start at
    zero in a state of their own, `snapshot(state, off)` writes them and `count(state, usage,
    off)` counts an answer; `edit(sequence, record)` edits a record."""
    files = _archive_files("llama-cpp-real.tar.gz")
    experiment = json.loads(files[layout.EXPERIMENT])
    experiment["server"].update(server, profile_version="1", build_commit=None)
    experiment["protocol"]["localize"] = False
    experiment.pop("profile_rules", None)
    experiment["protocol"]["skipped_phases"] = [{"phase": "opt-out", "reason": skipped}]
    condition = experiment["conditions"][0]
    condition["servers"] = [s for s in condition["servers"] if s["instance"] != 4]
    for entry in condition["servers"]:
        entry["argv"] = argv(entry["cache_disabled"])
        entry["environment"] = {}
    experiment["runtime_libraries"] = [
        lib for lib in experiment["runtime_libraries"] if "llama" not in lib["name"]
    ]
    files[layout.EXPERIMENT] = _dump(experiment)
    prefix = layout.RECORDS_DIR + "/default/"
    old = {n: json.loads(files.pop(f"{prefix}{n:03d}.json")) for n in range(1, 17)}
    states: dict[int, dict[str, float]] = {}
    for sequence, n in enumerate(_VLLM_KEPT, 1):
        record = old[n]
        record["sequence"] = sequence
        off = record["server_instance"] == 3
        state = states.setdefault(record["server_instance"], {})
        before = snapshot(state, off)
        response = record["response"]
        response.pop("timings", None)
        response.pop("system_fingerprint", None)
        usage = response["usage"]
        count(state, usage, off)
        record["telemetry"] = {"before": before, "after": snapshot(state, off)}
        record["usage"] = usage
        if edit is not None:
            edit(sequence, record)
        files[f"{prefix}{sequence:03d}.json"] = _dump(record)
    return files


def _vllm_files(
    *, gauge_on_off_server: bool = True, edit: Callable[[int, Any], None] | None = None
) -> Files:
    """The llama-cpp-real capture as a vLLM bundle (`_told_as`): vLLM's command lines, its
    two prefix cache counters (in tokens) running on per server, its `cache_config_info`
    gauge in every answer (but the cache-off server's where `gauge_on_off_server` is false),
    and the opt-out phase skipped (vLLM has none)."""

    def argv(off: bool) -> list[str]:
        flag = "--no-enable-prefix-caching" if off else "--enable-prefix-caching"
        return [
            "/path/to/vllm", "serve", "/path/to/model", "--served-model-name", "tiny",
            "--host", "127.0.0.1", "--port", "51339", "--enable-prompt-tokens-details", flag,
        ]  # fmt: skip

    def snapshot(state: dict[str, float], off: bool) -> dict[str, Any]:
        metrics = {
            "vllm:prefix_cache_queries_total": state.get("queries", 0.0),
            "vllm:prefix_cache_hits_total": state.get("hits", 0.0),
        }
        if gauge_on_off_server or not off:
            metrics[_GAUGE % ("False" if off else "True")] = 1.0
        return {"cache_stats": None, "metrics": metrics}

    def count(state: dict[str, float], usage: dict[str, Any], off: bool) -> None:
        if not off:
            state["queries"] = state.get("queries", 0.0) + usage["prompt_tokens"]
            cached = usage.get("prompt_tokens_details", {}).get("cached_tokens", 0)
            state["hits"] = state.get("hits", 0.0) + cached

    server = {"profile": "vllm", "name": "vllm", "version": "0.11.0"}
    reason = "vLLM has no per-request prefix-cache opt-out"
    return _told_as(server, reason, argv, snapshot, count, edit)


def _verified(files: Files, tmp_path: Path) -> VerificationResult:
    return verify_path(write(_resum(files), tmp_path / "b"))


def test_the_vllm_bundle_the_lies_start_from_is_clean(tmp_path: Path) -> None:
    result = _verified(_vllm_files(), tmp_path)
    assert result.verdict is Verdict.CACHE_STATE_DEPENDENT
    assert not [f for f in result.findings if f.severity != "info"]


def test_a_vllm_cache_off_server_whose_metrics_leave_out_its_cache_state(tmp_path: Path) -> None:
    # The cache-on servers' answers say their cache is on; the cache-off server's say
    # nothing, where the same build would say off: its own statement was taken out.
    files = _vllm_files(gauge_on_off_server=False)
    _invalid(files, tmp_path, "telemetry", "do not say whether the prefix cache is on")


def test_vllm_hits_past_the_tokens_looked_up(tmp_path: Path) -> None:
    def inflate(_sequence: int, record: Any) -> None:
        after = record["telemetry"]["after"]["metrics"]
        before = record["telemetry"]["before"]["metrics"]
        key = "vllm:prefix_cache_queries_total"
        if record["claimed_arm"] == "warm":  # one token looked up, 65 reused
            after[key] = before[key] + 1

    _invalid(
        _vllm_files(edit=inflate), tmp_path, "telemetry", "reused more than it was asked for"
    )  # fmt: skip


def test_vllm_hits_of_one_engine_past_its_own_queries(tmp_path: Path) -> None:
    # Summed, the two engines' hits and queries agree; engine 0 reused 65 tokens it never
    # looked up, hidden behind engine 1's queries.
    def split(_sequence: int, record: Any) -> None:
        for side in ("before", "after"):
            metrics = record["telemetry"][side]["metrics"]
            hits = metrics.pop("vllm:prefix_cache_hits_total")
            queries = metrics.pop("vllm:prefix_cache_queries_total")
            metrics['vllm:prefix_cache_hits_total{engine="0"}'] = hits
            metrics['vllm:prefix_cache_hits_total{engine="1"}'] = 0.0
            metrics['vllm:prefix_cache_queries_total{engine="0"}'] = 0.0
            metrics['vllm:prefix_cache_queries_total{engine="1"}'] = queries

    _invalid(
        _vllm_files(edit=split), tmp_path, "telemetry", 'hits_total{engine="0"} rose by'
    )  # fmt: skip


def test_mlxcel_stats_that_leave_their_cache_state_out_in_some_answers(tmp_path: Path) -> None:
    # A cache-off cold baseline whose `enabled: false` was taken out (or made null) says
    # nothing by itself: the other answers, which carry it, show it was there.
    for spelling in ("absent", None):

        def drop(record: Any, spelling: Any = spelling) -> None:
            if record["claimed_arm"] == "cold":
                for side in ("before", "after"):
                    stats = record["telemetry"][side]["cache_stats"]
                    if spelling == "absent":
                        del stats["enabled"]
                    else:
                        stats["enabled"] = None

        files = _records(dict(SEED_FILES), drop)
        _invalid(files, tmp_path, "telemetry", "stats snapshots lack /enabled")


# --- the counts the cross-checks read --------------------------------------------------


@pytest.mark.parametrize("field", ["prompt_n", "cache_n", "predicted_n"])
def test_timings_counts_written_as_floats(tmp_path: Path, field: str) -> None:
    # 65.0 is no count: read as one it would be skipped, and with it the cross-check of
    # timings against usage (a cold answer given timings of a warm one).
    def floats(name: str, record: Any) -> None:
        if name.endswith("/001.json"):
            timings = record["response"]["timings"]
            timings[field] = float(timings[field])

    _invalid(_llama_records(floats), tmp_path, "telemetry", f"timings.{field} is ")


def test_a_completion_count_that_is_no_count(tmp_path: Path) -> None:
    def text(name: str, record: Any) -> None:
        if name.endswith("/002.json"):
            for usage in (record["response"]["usage"], record["usage"]):
                usage["completion_tokens"] = str(usage["completion_tokens"])

    _invalid(_llama_records(text), tmp_path, "telemetry", "usage.completion_tokens is '")


def test_a_counter_beyond_the_signals_that_is_no_count(tmp_path: Path) -> None:
    # mlxcel's llama.cpp-style counter of cached tokens, read by a cross-check only.
    def negative(record: Any) -> None:
        if record["claimed_arm"] == "cold":
            record["telemetry"]["after"]["metrics"]["llamacpp:prompt_tokens_cached_total"] = -0.5

    files = _records(dict(SEED_FILES), negative)
    _invalid(files, tmp_path, "telemetry", "prompt_tokens_cached_total is not a whole number")


@pytest.mark.parametrize("where", ["across", "between"])
def test_a_counter_beyond_the_signals_that_goes_back(tmp_path: Path, where: str) -> None:
    # llama-server's decode calls, read by a cross-check only: made to fall by whole calls.
    def back(name: str, record: Any) -> None:
        key = "llamacpp:n_decode_total"
        if where == "across" and name.endswith("/002.json"):
            record["telemetry"]["after"]["metrics"][key] = 0
        if where == "between" and name.endswith("/003.json"):
            for side in ("before", "after"):
                record["telemetry"][side]["metrics"][key] -= 40

    words = "went down across" if where == "across" else "went down between"
    _invalid(_llama_records(back), tmp_path, "telemetry", words)


# --- the cache state of each arm ---------------------------------------------------------


@pytest.mark.parametrize("arm", ["request-disabled", "cold"])
def test_a_cache_on_arm_whose_stats_say_the_cache_is_off(tmp_path: Path, arm: str) -> None:
    """Stats that call the cache off around an opt-out (or cold) request that used no
    counter: the request was not served as claimed, so it proves nothing, and the verdict
    does not stand on it."""

    def off(record: Any) -> None:
        if record["claimed_arm"] == arm:
            telemetry = record["telemetry"]
            if arm == "cold":  # and it inserted nothing: no counter of the stats rose
                telemetry["after"]["cache_stats"] = dict(telemetry["before"]["cache_stats"])
            for side in ("before", "after"):
                telemetry[side]["cache_stats"]["enabled"] = False

    result = _verified(_records(dict(SEED_FILES), off), tmp_path)
    unproven = [
        f
        for f in result.findings
        if f.check == "telemetry" and f"a {arm} request is served with the cache on" in f.message
    ]
    assert unproven, [f.message for f in result.findings if f.severity != "info"]
    assert result.verdict in (Verdict.INCONCLUSIVE, Verdict.INVALID)
    assert result.verdict is not Verdict.CACHE_STATE_DEPENDENT


# --- what a bundle may spell otherwise ----------------------------------------------------


@pytest.mark.parametrize(("field", "value"), [("cache_prompt", 0), ("cache_prompt", "false")])
def test_a_copy_of_the_rules_equal_only_to_python(tmp_path: Path, field: str, value: Any) -> None:
    # 0 == False in Python; as JSON they differ, and the copy is another one.
    def copy(experiment: Any) -> None:
        experiment["profile_rules"]["opt_out_fields"] = {field: value}

    files = _edited(dict(SEED_FILES), layout.EXPERIMENT, copy)
    _invalid(files, tmp_path, "profile", "differ from this tool's")


@pytest.mark.parametrize("argument", ["-fa", "\u2010fa", "\uff0dfa", " -fa", "-fa\u200b"])
def test_a_server_argument_that_is_not_what_it_shows(tmp_path: Path, argument: str) -> None:
    """The flash-attention sample with its toggle given as server arguments (`-fa on`,
    `-fa off`), the second spelled with a look-alike: no server reads it as `-fa`."""
    files = _archive_files("llama-cpp-cuda-flip.tar.gz")
    experiment = json.loads(files[layout.EXPERIMENT])
    for condition in experiment["conditions"]:
        value = condition["settings"].pop("LLAMA_ARG_FLASH_ATTN")
        condition["server_args"] = [argument if value == "off" else "-fa", value]
        condition.pop("label", None)
        for server in condition["servers"]:
            del server["environment"]["LLAMA_ARG_FLASH_ATTN"]
            server["argv"] += condition["server_args"]
    files[layout.EXPERIMENT] = _dump(experiment)
    words = "has characters other than printable ASCII"
    if argument == "-fa":  # as the server reads it: the sample's verdict stands
        result = _verified(files, tmp_path)
        assert result.verdict is Verdict.CACHE_STATE_DEPENDENT
        assert not [f for f in result.findings if words in f.message]
    else:
        _invalid(files, tmp_path, "servers", words)
