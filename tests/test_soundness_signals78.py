"""What the audit of helper-78 found, each lie with the integrity redone as a forger would
(SHA256SUMS recomputed), each of which had been verified with the verdict the forger wanted:

- requests nobody recorded, served beside the recorded ones, were seen only on llama.cpp:
  mlxcel's llama.cpp-style prompt counter, vLLM's prefix-cache queries (in tokens) and
  SGLang's prompt counter moved by thousands of tokens across a warm request of 42 or 66,
  and were not read; now a move past what the answer counts is an error;
- vLLM's prefix-cache hits (in tokens) were read only for their direction: a warm answer of
  65 cached tokens across which they rose by one was proven; now they move by exactly the
  answer's cached tokens;
- vLLM's newer counters of the prompt tokens the cache supplied
  (`vllm:prompt_tokens_cached`, `vllm:prompt_tokens_by_source`) rose across a cold request
  and were not read; now the request is not proven.

The honest bundles each lie starts from keep their verdicts, and so do the same bundles
where a server counts its prompt tokens either way SERVERS.md leaves open, or (an older
build) does not write the newer counters at all."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from make_samples import _dump
from test_soundness import SEED_FILES
from test_soundness_audit70 import _verify
from test_soundness_signals import Files, _invalid
from test_soundness_states import _told_as, _vllm_files

from verifier import layout
from verifier.checks.telemetry import COUNTED_KINDS
from verifier.model import Verdict
from verifier.profiles import KNOWN_RULES, PROFILES

_BESIDE = "other work ran beside this request"


def _warm_load(extra: float) -> Callable[[Any], float]:
    return lambda record: extra if record["claimed_arm"] == "warm" else 0.0


def _add_work(files: Files, metric: str, extra: Callable[[Any], float]) -> Files:
    """`metric` moved by `extra(record)` more across each record, and carried on to every
    later snapshot of the same server: work nobody recorded, done beside those requests."""
    carried: dict[tuple[str, int], float] = {}
    files = dict(files)
    names = sorted(n for n in files if n.startswith(layout.RECORDS_DIR + "/"))
    for name in names:
        record = json.loads(files[name])
        server = (record["condition"], record["server_instance"])
        before = carried.get(server, 0.0)
        after = before + extra(record)
        for side, added in (("before", before), ("after", after)):
            metrics = record["telemetry"][side]["metrics"]
            if metrics is not None and metric in metrics:
                metrics[metric] += added
        carried[server] = after
        files[name] = _dump(record)
    return files


def _clean(result: Any) -> None:
    assert result.verdict is Verdict.CACHE_STATE_DEPENDENT, [
        f.message for f in result.findings if f.severity != "info"
    ]
    assert not [f for f in result.findings if f.is_error]


# --- SGLang: the real llama.cpp capture told as SGLang would tell it ------------------------


def _sglang_files(
    *, work: str | None = "prompt", edit: Callable[[int, Any], None] | None = None
) -> Files:
    """The llama-cpp-real capture as an SGLang bundle (`_told_as`): SGLang's command lines,
    its counter of cached tokens and (`work`) of prompt tokens running on per server,
    counting every prompt token (`prompt`) or only those computed (`computed`), or not
    written (None: a build without it), and the opt-out phase skipped (SGLang has none)."""

    def snapshot(state: dict[str, float], off: bool) -> dict[str, Any]:
        metrics = {"sglang:cached_tokens_total": state.get("cached", 0.0)}
        if work is not None:
            metrics["sglang:prompt_tokens_total"] = state.get("prompt", 0.0)
        return {"cache_stats": None, "metrics": metrics}

    def count(state: dict[str, float], usage: dict[str, Any], off: bool) -> None:
        cached = usage.get("prompt_tokens_details", {}).get("cached_tokens", 0) or 0
        state["cached"] = state.get("cached", 0.0) + cached
        computed = usage["prompt_tokens"] - (cached if work == "computed" else 0)
        state["prompt"] = state.get("prompt", 0.0) + computed

    server = {"profile": "sglang", "name": "sglang", "version": "0.5.0"}
    reason = "SGLang has no per-request radix-cache opt-out"
    return _told_as(server, reason, sglang_argv, snapshot, count, edit)


def sglang_argv(off: bool) -> list[str]:
    """SGLang's command line as the harness starts it (`SglangProfile.start_argv`)."""
    return [
        "/path/to/python", "-m", "sglang.launch_server", "--model-path", "/path/to/model",
        "--served-model-name", "tiny", "--host", "127.0.0.1", "--port", "51339",
        "--enable-metrics", "--enable-cache-report",
    ] + (["--disable-radix-cache"] if off else [])  # fmt: skip


@pytest.mark.parametrize("work", ["prompt", "computed", None])
def test_an_sglang_bundle_that_counts_its_prompts_either_way_or_not_at_all(
    tmp_path: Path, work: str | None
) -> None:
    result = _verify(_sglang_files(work=work), tmp_path)
    _clean(result)
    # a build that writes no prompt counter: its verdict stands, and the report says what
    # it could not rule out
    warned = [f.message for f in result.findings if f.severity == "warning"]
    unruled = "no metrics snapshot holds sglang:prompt_tokens_total"
    assert any(unruled in m and "beside" in m for m in warned) is (work is None), warned


def _without(files: Files, metric: str) -> Files:
    """`metric` taken out of every metrics snapshot."""
    files = dict(files)
    for name in [n for n in files if n.startswith(layout.RECORDS_DIR + "/")]:
        record = json.loads(files[name])
        for side in ("before", "after"):
            metrics = record["telemetry"][side]["metrics"]
            if metrics is not None:
                metrics.pop(metric, None)
        files[name] = _dump(record)
    return files


def test_sglang_prompts_served_beside_the_warm_requests(tmp_path: Path) -> None:
    files = _add_work(_sglang_files(), "sglang:prompt_tokens_total", _warm_load(4000.0))
    _invalid(files, tmp_path, "telemetry", "sglang:prompt_tokens_total moved by 4066")
    _invalid(files, tmp_path, "telemetry", _BESIDE)


def test_sglangs_prompt_counter_taken_out_where_it_moved(tmp_path: Path) -> None:
    files = _add_work(_sglang_files(), "sglang:prompt_tokens_total", _warm_load(4000.0))
    for name in [n for n in files if n.startswith(layout.RECORDS_DIR + "/")]:
        record = json.loads(files[name])
        if record["claimed_arm"] == "warm":
            for side in ("before", "after"):
                del record["telemetry"][side]["metrics"]["sglang:prompt_tokens_total"]
            files[name] = _dump(record)
    _invalid(files, tmp_path, "telemetry", "metrics snapshots lack sglang:prompt_tokens_total")


# --- mlxcel -----------------------------------------------------------------------------


def test_mlxcel_prompts_served_beside_the_warm_requests(tmp_path: Path) -> None:
    # opt-out requests (no lookup, no miss, no insert) sent beside every warm one: only the
    # server's prompt counter shows them, 4042 where the answer counts 42
    files = _add_work(dict(SEED_FILES), "llamacpp:prompt_tokens_total", _warm_load(4000.0))
    _invalid(files, tmp_path, "telemetry", "llamacpp:prompt_tokens_total moved by 4042")


def test_mlxcels_prompt_counter_taken_out_of_every_snapshot(tmp_path: Path) -> None:
    # Read as an older build's (tests/export/rawfactory.py's mlxcel captures write none):
    # not an error, but the report says that work beside the requests is not ruled out.
    counter = "llamacpp:prompt_tokens_total"
    files = _add_work(dict(SEED_FILES), counter, _warm_load(4000.0))
    result = _verify(_without(files, counter), tmp_path)
    warned = [f.message for f in result.findings if f.severity == "warning"]
    assert [m for m in warned if f"holds {counter}" in m and "not ruled out" in m], warned


def test_mlxcels_prompt_counter_without_the_cached_tokens(tmp_path: Path) -> None:
    # llama.cpp's reading of the counter (SERVERS.md: cached tokens left out), 10 of 42 on a
    # warm request: within the bound both readings meet
    files = _add_work(
        dict(SEED_FILES),
        "llamacpp:prompt_tokens_total",
        lambda record: -32.0 if record["claimed_arm"] == "warm" else 0.0,
    )
    _clean(_verify(files, tmp_path))


# --- vLLM -------------------------------------------------------------------------------


def test_vllm_lookups_beside_the_warm_requests(tmp_path: Path) -> None:
    files = _add_work(_vllm_files(), "vllm:prefix_cache_queries_total", _warm_load(4000.0))
    _invalid(files, tmp_path, "telemetry", "vllm:prefix_cache_queries_total moved by 4066")


def test_vllm_hits_of_one_token_under_a_warm_answer_of_65(tmp_path: Path) -> None:
    # each hit counted as one (as if the counter counted hits, not tokens), its lookup too
    state: dict[int, dict[str, float]] = {}

    def one(_sequence: int, record: Any) -> None:
        counts = state.setdefault(record["server_instance"], {"queries": 0.0, "hits": 0.0})
        usage = record["response"]["usage"]
        cached = usage.get("prompt_tokens_details", {}).get("cached_tokens", 0) or 0
        if record["server_instance"] == 3:  # the cache-off server: no lookup
            moves = {"queries": 0.0, "hits": 0.0}
        elif cached:
            moves = {"queries": 1.0, "hits": 1.0}
        else:
            moves = {"queries": float(usage["prompt_tokens"]), "hits": 0.0}
        for side in ("before", "after"):
            if side == "after":
                for name, moved in moves.items():
                    counts[name] += moved
            metrics = record["telemetry"][side]["metrics"]
            metrics["vllm:prefix_cache_queries_total"] = counts["queries"]
            metrics["vllm:prefix_cache_hits_total"] = counts["hits"]

    files = _vllm_files(edit=one)
    _invalid(files, tmp_path, "telemetry", "but its answer counts 65 cached tokens")


def _newer_counters(lie: str | None = None, engine: bool = False) -> Callable[[int, Any], None]:
    """vLLM's newer accounts of the prompt tokens by where they came from, running on per
    server as the answers say (labelled as a real server labels them, with `engine`); with
    `lie`, the counter of that name rises by 16 more across the second cold request."""
    state: dict[int, dict[str, float]] = {}
    label = 'engine="0",model_name="tiny",' if engine else ""
    by_source = "vllm:prompt_tokens_by_source_total{" + label + 'source="%s"}'

    def edit(_sequence: int, record: Any) -> None:
        counts = state.setdefault(
            record["server_instance"], {"cached": 0.0, "local_cache_hit": 0.0, "computed": 0.0}
        )
        usage = record["response"]["usage"]
        cached = usage.get("prompt_tokens_details", {}).get("cached_tokens", 0) or 0
        for side in ("before", "after"):
            if side == "after":
                counts["cached"] += cached
                counts["local_cache_hit"] += cached
                counts["computed"] += usage["prompt_tokens"] - cached
                if lie and record["claimed_arm"] == "cold" and record["phase"] == "cycle-2":
                    counts[lie] += 16.0
            metrics = record["telemetry"][side]["metrics"]
            metrics["vllm:prompt_tokens_cached_total"] = counts["cached"]
            metrics[by_source % "local_cache_hit"] = counts["local_cache_hit"]
            metrics[by_source % "local_compute"] = counts["computed"]

    return edit


@pytest.mark.parametrize("engine", [False, True])
def test_vllms_newer_counters_that_agree_with_the_answers(tmp_path: Path, engine: bool) -> None:
    _clean(_verify(_vllm_files(edit=_newer_counters(engine=engine)), tmp_path))


@pytest.mark.parametrize("lie", ["cached", "local_cache_hit"])
@pytest.mark.parametrize("engine", [False, True])
def test_vllms_newer_counters_say_a_cold_request_was_served_from_the_cache(
    tmp_path: Path, lie: str, engine: bool
) -> None:
    result = _verify(_vllm_files(edit=_newer_counters(lie, engine)), tmp_path)
    assert result.verdict is Verdict.INCONCLUSIVE
    (unproven,) = [f for f in result.findings if "claimed cold not proven" in f.message]
    assert "+16" in unproven.message
    assert unproven.file == f"{layout.RECORDS_DIR}/default/004.json"


# --- what the profiles read -------------------------------------------------------------


def test_every_kind_of_counted_work_is_one_the_check_reads() -> None:
    for profile in PROFILES.values():
        assert {what for _, what in profile.counted_work} <= COUNTED_KINDS, profile.name


def test_the_rules_bundles_carry_are_unchanged() -> None:
    # the new reads are the profiles', not their rules': a bundle's copy stays valid
    assert sorted(KNOWN_RULES) == [
        ("llama.cpp", "1"), ("mlxcel", "1"), ("sglang", "1"), ("vllm", "1")
    ]  # fmt: skip


# --- what helper-87's review of these rules found ------------------------------------------


def test_sglangs_labelled_prompt_counter_appears_after_the_first_answer(tmp_path: Path) -> None:
    """prometheus_client writes a labelled sample once it first counts: SGLang's prompt
    counter is not in a server's snapshot before the first request it serves."""
    first: set[int] = set()

    def lazy(_sequence: int, record: Any) -> None:
        if record["server_instance"] not in first:
            first.add(record["server_instance"])
            del record["telemetry"]["before"]["metrics"]["sglang:prompt_tokens_total"]

    _clean(_verify(_sglang_files(edit=lazy), tmp_path))


@pytest.mark.parametrize(
    ("files", "metric"),
    [
        (lambda: _sglang_files(), "sglang:prompt_tokens_total"),
        (lambda: dict(SEED_FILES), "llamacpp:prompt_tokens_total"),
    ],
    ids=["sglang", "mlxcel"],
)
def test_prompts_counted_between_two_requests(
    tmp_path: Path, files: Callable[[], Files], metric: str
) -> None:
    """A request served beside a warm one that finishes after its snapshot is counted
    between two records: no request's own move shows it."""
    edited = dict(files())
    carried: dict[tuple[str, int], float] = {}
    for name in sorted(n for n in edited if n.startswith(layout.RECORDS_DIR + "/")):
        record = json.loads(edited[name])
        server = (record["condition"], record["server_instance"])
        for side in ("before", "after"):
            metrics = record["telemetry"][side]["metrics"]
            if metrics is not None and metric in metrics:
                metrics[metric] += carried.get(server, 0.0)
        if record["claimed_arm"] == "warm":
            carried[server] = carried.get(server, 0.0) + 5000.0
        edited[name] = _dump(record)
    _invalid(edited, tmp_path, "telemetry", "counted work nobody recorded between")


def test_a_vllm_kv_connector_counts_cached_tokens_from_elsewhere() -> None:
    vllm = PROFILES["vllm"]
    assert vllm.cached_tokens_from_elsewhere(["vllm", "serve", "m", "--kv-transfer-config", "{}"])
    assert vllm.cached_tokens_from_elsewhere(["vllm", "serve", "m", "--kv_transfer_config={}"])
    assert not vllm.cached_tokens_from_elsewhere(["vllm", "serve", "m", "--port", "1"])
