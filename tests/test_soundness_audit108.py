"""What helper-108's audit found: records holding evidence their server gives only where it
was started to (/metrics readings, cached_tokens) from a server declared without the flag
(a warning: what a server gives unasked is a fact of its build); and counters only a
request moves (misses, mlxcel's counter of cached tokens, llama.cpp's decode calls) that
moved where no request was recorded (an error)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_soundness import SEED_FILES, _archive_files
from test_soundness_audit70 import _verify
from test_soundness_signals import Files, _edited, _invalid, _records
from test_soundness_signals78 import _sglang_files
from test_soundness_states import _vllm_files

from verifier import layout
from verifier.model import Verdict
from verifier.verify import VerificationResult

MISSES = "mlxcel_prompt_cache_misses_total"


def _servers(files: Files, edit: Callable[[dict[str, Any]], None]) -> Files:
    """`files` with `edit` applied to every server declaration of experiment.json."""

    def each(experiment: Any) -> None:
        for condition in experiment["conditions"]:
            for server in condition["servers"]:
                edit(server)

    return _edited(files, layout.EXPERIMENT, each)


def _without(*flags: str) -> Callable[[dict[str, Any]], None]:
    def drop(server: dict[str, Any]) -> None:
        server["argv"] = [a for a in server["argv"] if a not in flags]

    return drop


SWITCHED = {
    "llama.cpp": (lambda: _archive_files("llama-cpp-cuda-flip.tar.gz"), ("--metrics",)),
    "mlxcel": (lambda: dict(SEED_FILES), ("--metrics",)),
    "vllm": (_vllm_files, ("--enable-prompt-tokens-details",)),
    "sglang-metrics": (_sglang_files, ("--enable-metrics",)),
    "sglang-report": (_sglang_files, ("--enable-cache-report",)),
}


@pytest.mark.parametrize("server", sorted(SWITCHED))
def test_evidence_from_a_server_declared_without_the_flag_that_gives_it(
    tmp_path: Path, server: str
) -> None:
    files, flags = SWITCHED[server]
    result = _verify(_servers(files(), _without(*flags)), tmp_path)
    assert _switch_warnings(result), [f.message for f in result.findings]
    assert result.verdict is Verdict.CACHE_STATE_DEPENDENT  # the proofs read the evidence


def _switch_warnings(result: VerificationResult) -> list[str]:
    return [
        f.message
        for f in result.findings
        if f.check == "consistency" and f.severity == "warning" and "gives only when" in f.message
    ]


@pytest.mark.parametrize(
    ("server", "spelling"),
    [("vllm", "--enable_prompt_tokens_details"), ("sglang-report", "--enable-cache-rep")],
)
def test_the_flag_in_another_spelling_or_cut_short_is_the_flag(
    tmp_path: Path, server: str, spelling: str
) -> None:
    """What the server's parser reads as the flag (vLLM reads `_` as `-`; argparse takes a
    long option cut short) asks for the evidence: the bundle keeps its verdict."""
    files, (flag,) = SWITCHED[server]

    def respell(entry: dict[str, Any]) -> None:
        entry["argv"] = [spelling if a == flag else a for a in entry["argv"]]

    result = _verify(_servers(files(), respell), tmp_path)
    assert result.verdict is Verdict.CACHE_STATE_DEPENDENT
    assert not _switch_warnings(result)


def test_llama_servers_variable_asks_for_metrics_and_its_off_value_does_not(
    tmp_path: Path,
) -> None:
    files = _archive_files("llama-cpp-cuda-flip.tar.gz")

    def by_variable(value: str) -> Callable[[dict[str, Any]], None]:
        def edit(server: dict[str, Any]) -> None:
            _without("--metrics")(server)
            server["environment"]["LLAMA_ARG_ENDPOINT_METRICS"] = value

        return edit

    assert not _switch_warnings(_verify(_servers(files, by_variable("1")), tmp_path / "on"))
    assert _switch_warnings(_verify(_servers(files, by_variable("false")), tmp_path / "off"))


def test_the_flags_no_form_last_turns_it_off(tmp_path: Path) -> None:
    def negate(server: dict[str, Any]) -> None:
        server["argv"] = [*server["argv"], "--no-enable-prompt-tokens-details"]

    assert _switch_warnings(_verify(_servers(_vllm_files(), negate), tmp_path))


def test_a_config_file_may_set_the_flag(tmp_path: Path) -> None:
    def configured(server: dict[str, Any]) -> None:
        _without("--enable-prompt-tokens-details")(server)
        server["argv"] = [*server["argv"], "--config", "/path/to/vllm.yaml"]

    assert not _switch_warnings(_verify(_servers(_vllm_files(), configured), tmp_path))


def test_no_metrics_read_needs_no_flag(tmp_path: Path) -> None:
    """A llama-server started without --metrics whose snapshots hold none: nothing to say
    of the flag (its requests are judged by what the rest proves)."""

    def no_metrics(record: Any) -> None:
        for side in ("before", "after"):
            record["telemetry"][side]["metrics"] = None

    files = _records(_archive_files("llama-cpp-cuda-flip.tar.gz"), no_metrics)
    assert not _switch_warnings(_verify(_servers(files, _without("--metrics")), tmp_path))


# --- counters that only a request moves ---------------------------------------------------


def _shifted(files: Files, condition: str, instance: int, surface: str, name: str,
             start: tuple[int, str], by: float) -> Files:  # fmt: skip
    """Add `by` to one counter in every snapshot of one server from (sequence, side) on, in
    the order the snapshots were read (before, then after, of each request)."""
    first = (start[0], start[1] == "after")

    def edit(record: Any) -> None:
        if record["condition"] != condition or record["server_instance"] != instance:
            return
        for after, side in ((False, "before"), (True, "after")):
            if (record["sequence"], after) >= first:
                record["telemetry"][side][surface][name] += by

    return _records(files, edit)


@pytest.mark.parametrize(
    ("start", "words"),
    [
        ((2, "before"), "between records/sdpa-det-0/001.json and this request"),
        ((4, "before"), "between records/sdpa-det-0/003.json and this request"),
    ],
    ids=["between-two-requests", "between-a-reset-and-a-cold-request"],
)
def test_a_miss_between_two_requests(tmp_path: Path, start: tuple[int, str], words: str) -> None:
    files = _shifted(dict(SEED_FILES), "sdpa-det-0", 1, "metrics", MISSES, start, 1.0)
    result = _invalid(files, tmp_path, "telemetry", "did work nobody recorded " + words)
    assert any(MISSES in f.message for f in result.findings if f.is_error)


def test_a_miss_before_a_fresh_servers_first_request(tmp_path: Path) -> None:
    files = _shifted(dict(SEED_FILES), "sdpa-det-0", 2, "metrics", MISSES, (10, "before"), 3.0)
    _invalid(files, tmp_path, "telemetry", "before its first recorded request (" + MISSES)


@pytest.mark.parametrize(
    ("sample", "condition", "name", "by"),
    [
        ("seed", "sdpa-det-0", "llamacpp:prompt_tokens_cached_total", 32.0),
        ("llama-cpp-real.tar.gz", "default", "llamacpp:n_decode_total", 5.0),
    ],
    ids=["cached-tokens", "decode-calls"],
)
def test_counted_between_two_requests(
    tmp_path: Path, sample: str, condition: str, name: str, by: float
) -> None:
    files = dict(SEED_FILES) if sample == "seed" else _archive_files(sample)
    files = _shifted(files, condition, 1, "metrics", name, (4, "before"), by)
    words = f"between records/{condition}/003.json and this request ({name}"
    _invalid(files, tmp_path, "telemetry", "did work nobody recorded " + words)


def test_decode_calls_before_the_first_request_may_be_a_warm_up(tmp_path: Path) -> None:
    """A llama-server started without --no-warmup decodes before its first request."""
    name = "llamacpp:n_decode_total"
    real = _archive_files("llama-cpp-real.tar.gz")
    files = _shifted(real, "default", 1, "metrics", name, (1, "before"), 1.0)
    result = _verify(files, tmp_path)
    assert result.verdict is Verdict.CACHE_STATE_DEPENDENT, [
        f.message for f in result.findings if f.is_error
    ]


def test_the_samples_move_none_of_them_between_requests() -> None:
    """The guard: every honest sample keeps these counters still between requests."""
    for files in (dict(SEED_FILES), _archive_files("llama-cpp-real.tar.gz")):
        last: dict[tuple[str, int], Any] = {}
        for name in sorted(n for n in files if n.startswith(layout.RECORDS_DIR + "/")):
            record = json.loads(files[name])
            key = (record["condition"], record["server_instance"])
            metrics = record["telemetry"]["before"]["metrics"]
            if key in last:
                for counter in (MISSES, "llamacpp:n_decode_total"):
                    if counter in metrics:
                        assert metrics[counter] == last[key][counter], (name, counter)
            last[key] = record["telemetry"]["after"]["metrics"]
