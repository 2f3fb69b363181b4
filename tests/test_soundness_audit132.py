"""What the verify audit of helper-132 found: one configuration declared as two
conditions in two spellings the server reads as one, each verified with a split "in 1 of 2
conditions" between conditions that differ by nothing:

- a setting and the option it sets (llama-server's LLAMA_ARG_FLASH_ATTN=on and `-fa on`,
  mlxcel's MLXCEL_PREFILL_CHUNK=512 and `--prefill-chunk-size 512`);
- an option given once and twice with one value (`-fa on` and `-fa on -fa on`).

Each is one configuration run twice, an error (as `_run_twice` in
test_soundness_audit77.py is)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_soundness import SEED_FILES, _archive_files
from test_soundness_audit70 import _verify
from test_soundness_signals import Files, _edited, _invalid, _records
from test_soundness_signals78 import _clean, sglang_argv
from test_soundness_states import _told_as, _vllm_files

from verifier import layout
from verifier.model import Verdict
from verifier.verify import VerificationResult

_FLIP = "llama-cpp-cuda-flip.tar.gz"


def _declared(condition: Any, settings: dict[str, str], args: list[str], drop: str) -> None:
    condition["settings"] = settings
    condition["server_args"] = args
    condition.pop("label", None)
    for server in condition["servers"]:
        server["environment"].pop(drop, None)
        server["environment"].update(settings)
        server["argv"] = [*server["argv"], *args]


def test_a_setting_and_the_option_it_sets_are_one_configuration(tmp_path: Path) -> None:
    def declared(experiment: Any) -> None:
        (off,) = [c for c in experiment["conditions"] if c["id"] == "fa-off"]
        _declared(off, {}, ["-fa", "on"], "LLAMA_ARG_FLASH_ATTN")

    files = _edited(_archive_files(_FLIP), layout.EXPERIMENT, declared)
    _invalid(files, tmp_path, "consistency", "declare the same configuration")


def test_an_option_given_twice_with_one_value_is_given_once(tmp_path: Path) -> None:
    def declared(experiment: Any) -> None:
        for condition, args in zip(
            experiment["conditions"],
            (["-fa", "on"], ["--flash-attn", "on", "-fa", "on"]),
            strict=True,
        ):
            _declared(condition, {}, args, "LLAMA_ARG_FLASH_ATTN")

    files = _edited(_archive_files(_FLIP), layout.EXPERIMENT, declared)
    _invalid(files, tmp_path, "consistency", "declare the same configuration")


def test_mlxcels_setting_and_the_option_it_sets_are_one_configuration(tmp_path: Path) -> None:
    def declared(experiment: Any) -> None:
        first, second = experiment["conditions"]
        _declared(first, {"MLXCEL_PREFILL_CHUNK": "512"}, [], "MLXCEL_SDPA_DETERMINISTIC")
        first["label"] = "MLXCEL_PREFILL_CHUNK=512"
        _declared(second, {}, ["--prefill-chunk-size", "512"], "MLXCEL_SDPA_DETERMINISTIC")

    files = _edited(dict(SEED_FILES), layout.EXPERIMENT, declared)
    _invalid(files, tmp_path, "consistency", "declare the same configuration")


@pytest.mark.parametrize(
    ("first", "second"),
    [
        # an option that takes each of its values in turn, and a setting of another value
        ((["-ot", "a", "-ot", "b"], {}), (["-ot", "b"], {})),
        (([], {"LLAMA_ARG_FLASH_ATTN": "on"}), (["-fa", "off"], {})),
        (([], {"LLAMA_ARG_FLASH_ATTN": "on"}), ([], {"LLAMA_ARG_FLASH_ATTN": "off"})),
        # (helper-133) a negative number is an option's value, not an option
        ((["-ngl", "-1"], {}), (["-ngl", "1"], {})),
    ],
)
def test_configurations_that_differ_stay_apart(
    first: tuple[list[str], dict[str, str]], second: tuple[list[str], dict[str, str]]
) -> None:
    from verifier.checks.consistency import _configuration
    from verifier.profiles import PROFILES
    from verifier.records import Condition

    def condition(args: list[str], settings: dict[str, str]) -> Condition:
        return Condition("c", "", None, settings, (), tuple(args))

    llama = PROFILES["llama.cpp"]
    assert _configuration(condition(*first), llama) != _configuration(condition(*second), llama)
    assert _configuration(condition(["-fa", "1"], {}), llama) == _configuration(
        condition([], {"LLAMA_ARG_FLASH_ATTN": "on"}), llama
    )
    # (helper-133) an option given without a value is a switch turned on
    assert _configuration(condition(["--no-mmap"], {}), llama) == _configuration(
        condition([], {"LLAMA_ARG_NO_MMAP": "1"}), llama
    )


# --- SGLang's counter of cached tokens, created at its first hit (helper-132's F2) ---------

_LABELS = '{model_name="tiny"}'


def _sglang_lazy(edit: Callable[[int, Any], None] | None = None, *, written: bool = True) -> Files:
    """The llama-cpp-real capture told as SGLang tells it (`_told_as`): its counters labelled
    with the model's name and created on first use, as its collector does: the counter of
    cached tokens at the first request with cached tokens (none on a cache-off server), the
    one of prompt tokens at the first request. `written=False`: a build without the first."""

    def snapshot(state: dict[str, float], off: bool) -> dict[str, Any]:
        metrics: dict[str, float] = {}
        if written and state.get("cached", 0.0) > 0:
            metrics["sglang:cached_tokens_total" + _LABELS] = state["cached"]
        if state.get("requests", 0.0) > 0:
            metrics["sglang:prompt_tokens_total" + _LABELS] = state["prompt"]
        return {"cache_stats": None, "metrics": metrics}

    def count(state: dict[str, float], usage: dict[str, Any], off: bool) -> None:
        cached = usage.get("prompt_tokens_details", {}).get("cached_tokens", 0) or 0
        state["cached"] = state.get("cached", 0.0) + cached
        state["prompt"] = state.get("prompt", 0.0) + usage["prompt_tokens"]
        state["requests"] = state.get("requests", 0.0) + 1

    server = {"profile": "sglang", "name": "sglang", "version": "0.5.0"}
    return _told_as(
        server, "SGLang has no per-request radix-cache opt-out", sglang_argv, snapshot, count, edit
    )


def test_an_sglang_counter_created_at_its_first_hit_stood_at_zero(tmp_path: Path) -> None:
    """Every fresh server's first cold and first warm request, and every request of the
    cache-off server, were "not recorded": an honest SGLang capture was never more than
    inconclusive."""
    _clean(_verify(_sglang_lazy(), tmp_path))


def _counter(record: Any, side: str) -> dict[str, Any]:
    metrics: dict[str, Any] = record["telemetry"][side]["metrics"]
    return metrics


def _unproven(files: Files, tmp_path: Path, words: str) -> VerificationResult:
    result = _verify(files, tmp_path)
    assert result.verdict is not Verdict.CACHE_STATE_DEPENDENT
    reasons = [
        r
        for c in (result.classification.conditions if result.classification else ())
        for r in c.reasons
    ]
    found = [f.message for f in result.findings] + reasons
    assert any(words in m for m in found), found
    return result


def test_a_counter_that_appears_across_a_cold_request_moved(tmp_path: Path) -> None:
    # (the first request is a fresh server's cold one: a hit there, its counter created)
    def hit(sequence: int, record: Any) -> None:
        if sequence == 1:
            _counter(record, "after")["sglang:cached_tokens_total" + _LABELS] = 7.0

    _invalid(_sglang_lazy(hit), tmp_path, "telemetry", "show a hit, cached_tokens show none")


def test_a_counter_taken_out_after_it_was_created_is_not_recorded(tmp_path: Path) -> None:
    seen: dict[str, int] = {}

    def dropped(sequence: int, record: Any) -> None:
        for side in ("before", "after"):
            metrics = _counter(record, side)
            if "sglang:cached_tokens_total" + _LABELS in metrics:
                seen[side] = seen.get(side, 0) + 1
                if seen[side] > 1:
                    del metrics["sglang:cached_tokens_total" + _LABELS]

    _unproven(_sglang_lazy(dropped), tmp_path, "sglang:cached_tokens_total not recorded")


def test_a_build_that_writes_no_counter_of_cached_tokens_proves_nothing_by_it(
    tmp_path: Path,
) -> None:
    result = _unproven(_sglang_lazy(written=False), tmp_path, "not recorded: no miss shown")
    assert result.verdict is Verdict.INCONCLUSIVE


def test_a_counter_absent_where_the_metrics_were_not_read_is_not_recorded(
    tmp_path: Path,
) -> None:
    def unread(sequence: int, record: Any) -> None:
        if sequence == 1:
            record["telemetry"]["before"]["metrics"] = None

    result = _unproven(_sglang_lazy(unread), tmp_path, "claimed cold not proven")
    assert result.verdict is Verdict.INCONCLUSIVE


def test_a_counter_created_between_two_requests_moved_between_them(tmp_path: Path) -> None:
    # (the cache-off server's second request: its counter created before it, at 5)
    def between(sequence: int, record: Any) -> None:
        if sequence == 10:
            for side in ("before", "after"):
                _counter(record, side)["sglang:cached_tokens_total" + _LABELS] = 5.0

    _unproven(_sglang_lazy(between), tmp_path, "moved between this request and the one before")


# --- vLLM's answers leave out a count of cached tokens that is zero (helper-132's F3) ------


def _without_zero_details(sequence: int, record: Any) -> None:
    """As vLLM writes its answers: `prompt_tokens_details` only where it counts some."""
    usage = record["response"]["usage"]
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict) and not details.get("cached_tokens"):
        del usage["prompt_tokens_details"]
        record["usage"] = usage


def test_a_vllm_answer_that_leaves_out_no_cached_tokens_counts_none(tmp_path: Path) -> None:
    """Every cold answer left `cached_tokens` out, and was "a miss is unknown": an honest
    vLLM capture was never more than inconclusive."""
    _clean(_verify(_vllm_files(edit=_without_zero_details), tmp_path))


def test_a_vllm_answer_without_the_count_whose_counter_moved_is_unknown(tmp_path: Path) -> None:
    # (the first request is a fresh server's cold one: its counter of hits moved)
    def hit(sequence: int, record: Any) -> None:
        _without_zero_details(sequence, record)
        if sequence == 1:
            record["telemetry"]["after"]["metrics"]["vllm:prefix_cache_hits_total"] = 16.0

    _unproven(_vllm_files(edit=hit), tmp_path, "cached_tokens is absent: a miss is unknown")


@pytest.mark.parametrize(
    "argv",
    [
        lambda a: [x for x in a if x != "--enable-prompt-tokens-details"],
        # (helper-133) turned off after, by its `--no-` form in any spelling; shortened
        lambda a: [*a, "--no-enable-prompt-tokens-details"],
        lambda a: [*a, "--no_enable_prompt_tokens_details"],
        lambda a: [
            x if x != "--enable-prompt-tokens-details" else "--enable-prompt-tok" for x in a
        ],
        lambda a: [*a, "--config", "/path/to/config.yaml"],
    ],
)
def test_a_vllm_server_not_asked_for_the_count_says_nothing_by_its_absence(
    tmp_path: Path, argv: Callable[[list[str]], list[str]]
) -> None:
    def unasked(experiment: Any) -> None:
        for condition in experiment["conditions"]:
            for server in condition["servers"]:
                server["argv"] = argv(server["argv"])

    files = _edited(_vllm_files(edit=_without_zero_details), layout.EXPERIMENT, unasked)
    _unproven(files, tmp_path, "cached_tokens is absent: a miss is unknown")


@pytest.mark.parametrize("details", [{}, {"cached_tokens": None}])
def test_a_vllm_answer_whose_details_hold_no_count_is_unknown(
    tmp_path: Path, details: dict[str, Any]
) -> None:
    """(helper-133) vLLM leaves the object out; one that is there without a count is not
    vLLM's way of saying none."""

    def emptied(sequence: int, record: Any) -> None:
        _without_zero_details(sequence, record)
        usage = record["response"]["usage"]
        usage.setdefault("prompt_tokens_details", dict(details))
        record["usage"] = usage

    _unproven(_vllm_files(edit=emptied), tmp_path, "cached_tokens is absent: a miss is unknown")


_BUILT: dict[str, Callable[[], Files]] = {
    "sglang lazy": _sglang_lazy,
    "sglang lazy, a hit on a cold request": lambda: _sglang_lazy(
        lambda s, r: (
            _counter(r, "after").update({"sglang:cached_tokens_total" + _LABELS: 7.0})
            if s == 1
            else None
        )
    ),
    "sglang without the counter": lambda: _sglang_lazy(written=False),
    "vllm without zero counts": lambda: _vllm_files(edit=_without_zero_details),
}


@pytest.mark.parametrize("name", sorted(_BUILT))
def test_the_plain_proofs_prove_the_same(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import proofs_reference as reference

    files = _BUILT[name]()
    fast = _verify(files, tmp_path / "fast")
    with monkeypatch.context() as patched:
        reference.use_plain_paths(patched)
        plain = _verify(files, tmp_path / "plain")
    assert (fast.verdict, fast.findings, fast.classification) == (
        plain.verdict,
        plain.findings,
        plain.classification,
    )


# --- helper-135's findings -----------------------------------------------------------------


def test_one_number_spelled_two_ways_is_one_configuration(tmp_path: Path) -> None:
    """`-ub 0512` is `-ub 512` to llama-server (std::stoi): two conditions so declared are
    one configuration run twice."""

    def declared(experiment: Any) -> None:
        first, second = experiment["conditions"]
        _declared(first, {}, ["-ub", "512"], "LLAMA_ARG_FLASH_ATTN")
        _declared(second, {}, ["-ub", "+0512"], "LLAMA_ARG_FLASH_ATTN")

    files = _edited(_archive_files(_FLIP), layout.EXPERIMENT, declared)
    _invalid(files, tmp_path, "consistency", "declare the same configuration")


@pytest.mark.parametrize(("name", "value"), [("t_max_predict_ms", 1), ("n_indent", 4)])
def test_a_reply_under_a_limit_that_is_no_count_is_capped(
    tmp_path: Path, name: str, value: int
) -> None:
    """llama-server stops a reply past its time or at a line's indentation and calls it a
    limit's stop; relabelled `stop`, its count cannot show it was cut: every reply is
    capped, and replies that agree say nothing past what they hold."""

    def limited(document: Any) -> None:
        document["request_body"][name] = value

    files = _edited(_archive_files("llama-cpp-cuda-stable.tar.gz"), layout.EXPERIMENT, limited)
    files = _records(files, limited)
    result = _verify(files, tmp_path)
    assert result.verdict is not Verdict.CACHE_STATE_INDEPENDENT
    assert result.classification is not None
    assert all(p.capped for p in result.classification.proofs)


def test_the_cap_a_reason_names_is_the_least_the_bodies_set(tmp_path: Path) -> None:
    """(helper-135) `n_predict: 22` beside `max_tokens: 128`: the replies hold 22 tokens,
    and the reason said they agree in the first 128."""

    def capped(document: Any) -> None:
        document["request_body"]["n_predict"] = 22

    files = _edited(_archive_files("llama-cpp-cuda-stable.tar.gz"), layout.EXPERIMENT, capped)
    result = _verify(_records(files, capped), tmp_path)
    assert result.classification is not None
    reasons = [r for c in result.classification.conditions for r in c.reasons]
    assert any("agree in the first 22 tokens" in r for r in reasons), reasons
    assert not any("128" in r for r in reasons), reasons


def test_an_invalid_bundles_text_report_marks_what_it_claims(tmp_path: Path) -> None:
    """(helper-135) The text and plain reports of a bundle that failed verification stated
    its diagnostic reading, its telemetry and its finite-sample bound as found; Markdown
    marked them as claims."""
    import io

    from make_samples import _resum
    from rich.console import Console
    from test_soundness import write

    from verifier.report import plain
    from verifier.report.common import printable
    from verifier.report.document import BundleOutcome, build_report
    from verifier.report.text import render_text
    from verifier.verify import verify_path

    def capped(experiment: Any) -> None:
        experiment["protocol"]["max_tokens"] = 127

    files = _edited(_archive_files("llama-cpp-real.tar.gz"), layout.EXPERIMENT, capped)
    path = write(_resum(files), tmp_path / "b")
    result = verify_path(path)
    assert result.verdict is Verdict.INVALID and result.classification is not None
    report = printable(build_report([BundleOutcome(str(path), result)]))
    console = Console(file=io.StringIO(), width=100)
    render_text(report, console)
    assert isinstance(console.file, io.StringIO)
    for shown in (console.file.getvalue(), plain.render(report, 100)):
        assert shown is not None
        assert "first divergent token" not in shown
        assert "telemetry by output class and arm, as claimed (unverified)" in shown
        assert "finite sample, as claimed (unverified)" in shown
