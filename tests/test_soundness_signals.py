"""Lies a fresh-eyed audit told, each with the integrity redone as a forger would: every
signal must agree with every other, and each is checked where it is, not only where a
proof happens to read it. Each lie must leave the bundle invalid, with the finding that
names it; the honest samples stay verified (tests/test_samples.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from make_samples import _dump, _resum
from test_soundness import RECORDS, SEED_FILES, _archive_files, write

from verifier import layout
from verifier.model import Verdict
from verifier.profiles import PROFILES
from verifier.verify import VerificationResult, verify_path

Files = dict[str, bytes]


def _edited(files: Files, name: str, edit: Callable[[Any], None]) -> Files:
    document = json.loads(files[name])
    edit(document)
    return {**files, name: _dump(document)}


def _records(files: Files, edit: Callable[[Any], None]) -> Files:
    for name in [n for n in files if n.startswith(layout.RECORDS_DIR + "/")]:
        files = _edited(files, name, edit)
    return files


def _invalid(files: Files, tmp_path: Path, check: str, words: str) -> VerificationResult:
    result = verify_path(write(_resum(files), tmp_path / "b"))
    assert result.verdict is Verdict.INVALID
    named = [f for f in result.findings if f.check == check and f.is_error and words in f.message]
    assert named, [f.message for f in result.findings if f.is_error]
    return result


def _servers(document: Any) -> list[dict[str, Any]]:
    return [s for c in document["conditions"] for s in c["servers"]]


def test_the_seed_is_clean_as_the_lies_start_from_it(tmp_path: Path) -> None:
    result = verify_path(write(_resum(dict(SEED_FILES)), tmp_path / "b"))
    assert result.verdict is Verdict.CACHE_STATE_DEPENDENT
    assert not [f for f in result.findings if f.severity != "info"]


@pytest.mark.parametrize("claimed_last", [True, False])
def test_a_manifest_that_lists_a_file_twice_contradicts_itself(
    tmp_path: Path, claimed_last: bool
) -> None:
    def twice(manifest: Any) -> None:
        files = manifest["files"]
        at = next(i for i, f in enumerate(files) if f["path"] == "model.safetensors")
        files.insert(at if claimed_last else at + 1, dict(files[at], sha256="ab" * 32, size=1))

    files = _edited(dict(SEED_FILES), layout.MODEL_MANIFEST, twice)
    _invalid(files, tmp_path, "manifest", "lists this file twice")


@pytest.mark.parametrize(
    ("spelling", "words"),
    [
        ("Model.safetensors", "lists this file twice"),
        ("./model.safetensors", "plain relative path"),
        ("x/../model.safetensors", "plain relative path"),
        ("sub//model.safetensors", "plain relative path"),
    ],
)
def test_a_manifest_that_spells_a_file_another_way(
    tmp_path: Path, spelling: str, words: str
) -> None:
    def again(manifest: Any) -> None:
        files = manifest["files"]
        at = next(i for i, f in enumerate(files) if f["path"] == "model.safetensors")
        files.insert(at, dict(files[at], path=spelling, sha256="ab" * 32, size=1))

    files = _edited(dict(SEED_FILES), layout.MODEL_MANIFEST, again)
    _invalid(files, tmp_path, "manifest", words)


def test_the_protocols_cap_is_the_one_the_body_sent(tmp_path: Path) -> None:
    files = _edited(
        dict(SEED_FILES), layout.EXPERIMENT, lambda e: e["protocol"].update(max_tokens=8)
    )
    _invalid(files, tmp_path, "request-body", "max_tokens is not the cap")


def test_an_answer_after_its_server_stopped(tmp_path: Path) -> None:
    last = max(n for n in RECORDS if "/sdpa-det-0/" in n)
    files = _edited(dict(SEED_FILES), last, lambda r: r.update(elapsed_s=600.0))
    _invalid(files, tmp_path, "consistency", "after server")


def test_counter_samples_that_are_not_counts_each(tmp_path: Path) -> None:
    # The family sums stay whole numbers: 1.25 + 0.75 is 2, and counts nothing.
    def split(record: Any) -> None:
        for side in ("before", "after"):
            metrics = record["telemetry"][side]["metrics"]
            total = metrics.pop("mlxcel_prompt_cache_hits_total")
            metrics['mlxcel_prompt_cache_hits_total{part="a"}'] = total / 2 + 0.25
            metrics['mlxcel_prompt_cache_hits_total{part="b"}'] = total / 2 - 0.25

    _invalid(_records(dict(SEED_FILES), split), tmp_path, "telemetry", "not a whole number")


def test_a_cache_on_request_on_a_cache_that_says_it_is_off(tmp_path: Path) -> None:
    def off(record: Any) -> None:
        if record["claimed_arm"] != "server-disabled":
            for side in ("before", "after"):
                record["telemetry"][side]["cache_stats"]["enabled"] = False

    _invalid(_records(dict(SEED_FILES), off), tmp_path, "telemetry", "say its cache is on")


@pytest.mark.parametrize("value", [0, "false"])
def test_a_cache_on_request_whose_stats_say_anything_but_on(tmp_path: Path, value: Any) -> None:
    def not_on(record: Any) -> None:
        if record["claimed_arm"] == "warm":
            for side in ("before", "after"):
                record["telemetry"][side]["cache_stats"]["enabled"] = value

    _invalid(_records(dict(SEED_FILES), not_on), tmp_path, "telemetry", "say its cache is on")


def test_a_cold_request_that_inserts_into_a_cache_its_stats_call_off(tmp_path: Path) -> None:
    # A cold request looks up nothing here, but inserts what it computed: a stats counter
    # of the cache's use moved, so the same stats saying the cache is off contradict it.
    def cold_off(record: Any) -> None:
        if record["claimed_arm"] == "cold":
            before, after = (record["telemetry"][s]["cache_stats"] for s in ("before", "after"))
            after["lookups"] = before["lookups"]
            before["enabled"] = after["enabled"] = False

    _invalid(_records(dict(SEED_FILES), cold_off), tmp_path, "telemetry", "say its cache is on")


def test_hits_from_a_cache_that_held_nothing_spelled_as_a_float(tmp_path: Path) -> None:
    def empty(record: Any) -> None:
        if record["claimed_arm"] == "warm":
            record["telemetry"]["before"]["cache_stats"]["entries"] = 0.0

    _invalid(_records(dict(SEED_FILES), empty), tmp_path, "telemetry", "held no entry")


def test_hits_from_a_cache_that_held_nothing(tmp_path: Path) -> None:
    def empty(record: Any) -> None:
        for side in ("before", "after"):
            stats = record["telemetry"][side]["cache_stats"]
            if stats is not None:
                stats["entries"] = 0

    _invalid(_records(dict(SEED_FILES), empty), tmp_path, "telemetry", "held no entry")


def test_more_hits_than_lookups_in_one_request(tmp_path: Path) -> None:
    def inflate(record: Any) -> None:
        after = record["telemetry"]["after"]["cache_stats"]
        if record["claimed_arm"] == "warm":
            after["hits"] += 1000

    files = _records(dict(SEED_FILES), inflate)
    _invalid(files, tmp_path, "telemetry", "stats:hits rose by")


def test_a_toggle_assigned_on_the_command_line(tmp_path: Path) -> None:
    def override(experiment: Any) -> None:
        for server in _servers(experiment):
            server["argv"] = ["env", "MLXCEL_SDPA_DETERMINISTIC=1", *server["argv"]]

    files = _edited(dict(SEED_FILES), layout.EXPERIMENT, override)
    _invalid(files, tmp_path, "consistency", "sets MLXCEL_SDPA_DETERMINISTIC itself")


def test_a_declared_server_argument_given_again_after_it(tmp_path: Path) -> None:
    def declare(experiment: Any) -> None:
        condition = experiment["conditions"][1]
        condition["server_args"] = ["--parallel", "1"]
        condition["label"] = f"{condition['label']} --parallel 1"
        for server in condition["servers"]:
            argv = server["argv"]
            at = argv.index("--parallel")  # the sample's own --parallel 4 now follows
            server["argv"] = [*argv[:at], "--parallel", "1", *argv[at:]]

    files = _edited(dict(SEED_FILES), layout.EXPERIMENT, declare)
    _invalid(files, tmp_path, "consistency", "--parallel is given again")


def test_the_cache_off_flag_as_the_value_of_a_per_server_option(tmp_path: Path) -> None:
    def hide(experiment: Any) -> None:
        server = next(s for s in _servers(experiment) if s["cache_disabled"])
        argv = [a for a in server["argv"] if a != "--no-cache-prompt"]
        at = argv.index("--slot-save-path")
        argv[at + 1 : at + 2] = ["--no-cache-prompt", "--metrics"]
        server["argv"] = argv

    files = _edited(_archive_files("llama-cpp-real.tar.gz"), layout.EXPERIMENT, hide)
    _invalid(files, tmp_path, "consistency", "--slot-save-path takes a value")


def test_a_schema_1_0_label_on_a_1_1_experiment(tmp_path: Path) -> None:
    # Relabelled 1.0, its times gone: the timing rules of 1.1 would no longer apply.
    files = dict(SEED_FILES)
    for name in [layout.EXPERIMENT, layout.MODEL_MANIFEST, layout.REDACTION_LEDGER, *RECORDS]:
        files = _edited(files, name, lambda d: d.update(schema_version="1.0"))
    _invalid(files, tmp_path, "profile", "a schema 1.0 experiment carries profile_rules")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("opt_out_fields", {"n_cache_reuse": 0}),
        (
            "telemetry",
            {
                "cached_tokens_pointer": "/usage/completion_tokens",
                "prompt_tokens_pointer": "/usage/prompt_tokens",
                "hit_counters": [],
                "reuse_counters": [],
                "store_counters": [],
                "path_counters": [],
                "cache_enabled_pointer": None,
                "cache_entries_pointer": None,
            },
        ),
    ],
)
def test_a_1_1_experiment_with_the_1_0_copy_of_the_rules(
    tmp_path: Path, name: str, value: Any
) -> None:
    files = _edited(dict(SEED_FILES), layout.EXPERIMENT, lambda e: e.update({name: value}))
    result = verify_path(write(_resum(files), tmp_path / "b"))
    assert result.verdict is Verdict.INVALID
    assert any(f.check == "profile" and f.is_error and name in f.message for f in result.findings)


@pytest.mark.parametrize("stop", [None, "2026-11-02T09:40:45.5", "absent"])
def test_the_last_server_without_a_stop_time_hides_a_late_answer(
    tmp_path: Path, stop: str | None
) -> None:
    last = max(RECORDS)
    files = _edited(dict(SEED_FILES), last, lambda r: r.update(elapsed_s=600.0))

    def unstopped(experiment: Any) -> None:
        server = experiment["conditions"][-1]["servers"][-1]
        if stop == "absent":
            del server["stopped_at"]
        else:
            server["stopped_at"] = stop

    files = _edited(files, layout.EXPERIMENT, unstopped)
    _invalid(files, tmp_path, "consistency", "has no stop time")


@pytest.mark.parametrize(
    "wrapper",
    [
        ["env", "--split-string=MLXCEL_SDPA_DETERMINISTIC=1"],
        ["env", "-SMLXCEL_SDPA_DETERMINISTIC=1"],
        ["sh", "-c", 'export MLXCEL_SDPA_DETERMINISTIC=1; exec "$0" "$@"'],
    ],
)
def test_a_toggle_assigned_by_a_wrapper(tmp_path: Path, wrapper: list[str]) -> None:
    def wrapped(experiment: Any) -> None:
        for server in _servers(experiment):
            server["argv"] = [*wrapper, *server["argv"]]

    files = _edited(dict(SEED_FILES), layout.EXPERIMENT, wrapped)
    _invalid(files, tmp_path, "consistency", "SDPA_DETERMINISTIC itself")


@pytest.mark.parametrize("option", [["-fa", "on"], ["--flash-attn", "on"], ["--flash-attn=on"]])
def test_an_option_that_sets_what_a_toggle_sets(tmp_path: Path, option: list[str]) -> None:
    # llama-server reads LLAMA_ARG_FLASH_ATTN as --flash-attn, and the option wins.
    def given(experiment: Any) -> None:
        for server in _servers(experiment):
            server["argv"] = [*server["argv"], *option]

    files = _edited(_archive_files("llama-cpp-cuda-flip.tar.gz"), layout.EXPERIMENT, given)
    _invalid(files, tmp_path, "consistency", "sets what the condition's setting")


def test_a_declared_server_argument_given_again_by_another_spelling(tmp_path: Path) -> None:
    def declared(experiment: Any) -> None:
        for condition in experiment["conditions"]:
            value = condition["settings"].pop("LLAMA_ARG_FLASH_ATTN")
            condition["server_args"] = ["--flash-attn", value]
            condition["label"] = f"--flash-attn {value}"
            for server in condition["servers"]:
                server["environment"].pop("LLAMA_ARG_FLASH_ATTN", None)
                server["argv"] = [*server["argv"], "--flash-attn", value, "-fa", "on"]

    files = _edited(_archive_files("llama-cpp-cuda-flip.tar.gz"), layout.EXPERIMENT, declared)
    _invalid(files, tmp_path, "consistency", "-fa is given again")


def test_a_difference_of_normalization_alone_is_shown_by_its_code_points(tmp_path: Path) -> None:
    """Warm replies that are the cold ones in NFD: the excerpts look the same on screen,
    so every format names the code points at the difference, on lines of their own."""
    import unicodedata

    from typer.testing import CliRunner

    from verifier.canonical import output_hash
    from verifier.cli import app

    def nfd_when_warm(record: Any) -> None:
        message = record["response"]["choices"][0]["message"]
        message["content"] = "Élias " + message["content"]
        if record["claimed_arm"] == "warm":
            message["content"] = unicodedata.normalize("NFD", message["content"])
        record["output_hash"] = output_hash(record["response"])

    bundle = write(_resum(_records(dict(SEED_FILES), nfd_when_warm)), tmp_path / "b")
    for fmt in ("text", "markdown"):
        result = CliRunner().invoke(app, ["verify", str(bundle), "-f", fmt])
        assert result.exit_code == 0 and "cache-state-dependent" in result.stdout
        assert "[at 0: U+00C9 U+006C U+0069]" in result.stdout
        assert "[at 0: U+0045 U+0301 U+006C]" in result.stdout


def test_independent_within_each_condition_says_so_when_conditions_differ(
    tmp_path: Path,
) -> None:
    """Each condition gives one output whatever the cache, but the two conditions give two:
    the verdict stands (conditions run other settings), and its sentence says where."""
    from typer.testing import CliRunner

    from verifier.canonical import output_hash
    from verifier.cli import app

    def by_condition(record: Any) -> None:
        message = record["response"]["choices"][0]["message"]
        message["content"] = "one" if record["condition"] == "sdpa-det-0" else "two"
        record["output_hash"] = output_hash(record["response"])
        for usage in (record["response"]["usage"], record["usage"]):  # one token each
            usage["total_tokens"] -= usage["completion_tokens"] - 1
            usage["completion_tokens"] = 1

    bundle = write(_resum(_records(dict(SEED_FILES), by_condition)), tmp_path / "b")
    result = CliRunner().invoke(app, ["verify", str(bundle)], env={"COLUMNS": "200"})
    assert result.exit_code == 0 and "verdict: cache-state-independent" in result.stdout
    assert "the same output within each condition, warm and cold alike" in result.stdout


@pytest.mark.parametrize(
    ("extra", "greedy"),
    [
        ({}, True),
        ({"dynatemp_range": 0}, True),
        ({"mirostat": 0}, True),
        ({"dynatemp_range": 1.5}, False),  # llama.cpp widens temperature 0 to a range
        ({"mirostat": 2}, False),
        ({"dynatemp_range": "1.5"}, False),
        ({"samplers": ["top_k", "dist"]}, False),
        ({"xtc_probability": 0, "xtc_threshold": 0.1}, True),
        ({"xtc_probability": 1.0, "xtc_threshold": 0.1}, False),  # drops the top token first
    ],
)
def test_a_body_that_samples_even_at_temperature_0_is_not_greedy(
    extra: dict[str, Any], greedy: bool
) -> None:
    from verifier.classify import sampled

    for body in ({"temperature": 0, **extra}, {"top_k": 1, **extra}):
        assert (sampled(body) is None) is greedy, body


@pytest.mark.parametrize(
    ("servers", "edit", "words"),
    [
        # llama-server reads the last of two flags: the cache-off server's is undone
        ("off", lambda s: s["argv"].append("--cache-prompt"), "--cache-prompt"),
        ("off", lambda s: s["argv"].append("--cache-prompt=true"), "--cache-prompt=true"),
        ("on", lambda s: s["argv"].append("--cache-prompt=false"), "--cache-prompt=false"),
        # llama-server reads `_` in a long option as `-`: the cache-on servers ran cold
        ("all", lambda s: s["argv"].append("--no_cache_prompt"), "--no_cache_prompt"),
        # LLAMA_ARG_NO_CACHE_PROMPT is --no-cache-prompt, on a cache-on server too
        ("all", lambda s: s["environment"].update(LLAMA_ARG_NO_CACHE_PROMPT="1"),
         "LLAMA_ARG_NO_CACHE_PROMPT"),
    ],
)  # fmt: skip
def test_the_cache_set_by_another_spelling_than_the_cache_off_flag(
    tmp_path: Path, servers: str, edit: Callable[[Any], None], words: str
) -> None:
    def spelled(experiment: Any) -> None:
        for server in _servers(experiment):
            if servers == "all" or server["cache_disabled"] is (servers == "off"):
                edit(server)

    files = _edited(_archive_files("llama-cpp-real.tar.gz"), layout.EXPERIMENT, spelled)
    _invalid(files, tmp_path, "servers", words)


def _llama_records(edit: Callable[[str, Any], None]) -> Files:
    """The real llama.cpp capture with each record edited by `edit(name, record)`."""
    files = _archive_files("llama-cpp-real.tar.gz")
    for name in sorted(n for n in files if n.startswith(layout.RECORDS_DIR + "/")):
        files = _edited(files, name, lambda record, name=name: edit(name, record))
    return files


def test_a_fresh_server_that_had_worked_before_its_first_request(tmp_path: Path) -> None:
    def worked(_name: str, record: Any) -> None:
        for snapshot in ("before", "after"):
            metrics = record["telemetry"][snapshot]["metrics"]
            metrics["llamacpp:prompt_tokens_total"] += 660
            metrics["llamacpp:tokens_predicted_total"] += 560

    _invalid(_llama_records(worked), tmp_path, "telemetry", "did work nobody recorded before")


def test_work_nobody_recorded_between_two_requests(tmp_path: Path) -> None:
    def hidden(name: str, record: Any) -> None:
        if name.endswith(("/003.json", "/004.json")):  # a warm-up hidden before the reset
            record["telemetry"]["before" if name.endswith("4.json") else "after"]["metrics"][
                "llamacpp:prompt_tokens_total"
            ] += 0 if name.endswith("3.json") else 66

    _invalid(_llama_records(hidden), tmp_path, "telemetry", "between records/default/003.json")


def test_a_server_that_worked_longer_than_its_request_took(tmp_path: Path) -> None:
    def longer(name: str, record: Any) -> None:
        if name.endswith("/001.json"):
            record["response"]["timings"]["prompt_ms"] = 100.0

    _invalid(_llama_records(longer), tmp_path, "consistency", "longer than the whole request")


@pytest.mark.parametrize("ms", [1e308, -5.0, 10**13])
def test_server_timings_that_are_no_milliseconds(tmp_path: Path, ms: float) -> None:
    """helper-66: 1e308 or -5 ms were read as no timings at all, and checked nothing."""

    def absurd(name: str, record: Any) -> None:
        if name.endswith("/002.json"):
            record["response"]["timings"]["prompt_ms"] = ms

    _invalid(_llama_records(absurd), tmp_path, "consistency", "not a number of milliseconds")


def test_a_duration_past_any_request_is_a_schema_error(tmp_path: Path) -> None:
    """helper-66: 10**400 seconds overflowed a float inside the consistency check."""
    files = _edited(dict(SEED_FILES), RECORDS[1], lambda r: r.update(elapsed_s=10**400))
    result = _invalid(files, tmp_path, "schema", "")
    assert not [f for f in result.findings if "internal error" in f.message]


def test_two_requests_in_flight_inside_the_clock_leeway(tmp_path: Path) -> None:
    """The second request starts 2 ms after the first, which the server says took 3.8 ms:
    within the 50 ms the clocks are allowed, but not within the server's own timings."""

    def early(name: str, record: Any) -> None:
        if name.endswith("/002.json"):
            record["started_at"] = "2026-12-01T11:03:01.781Z"

    _invalid(_llama_records(early), tmp_path, "consistency", "two requests in flight")


@pytest.mark.parametrize("shift", [-86400, 30])
def test_answers_whose_times_do_not_follow_their_requests(tmp_path: Path, shift: int) -> None:
    def moved(name: str, record: Any) -> None:
        if record["claimed_arm"] == "warm":
            record["response"]["created"] += shift

    _invalid(_llama_records(moved), tmp_path, "consistency", "do not follow their requests")


@pytest.mark.parametrize(
    ("which", "words"),
    [("warm", "another server build"), ("all", "not the declared build_commit"),
     ("upper", "not the declared build_commit")],
)  # fmt: skip
def test_answers_from_another_server_build(tmp_path: Path, which: str, words: str) -> None:
    def built(name: str, record: Any) -> None:
        if which in ("all", "upper") or record["claimed_arm"] == "warm":
            fingerprint = "b9999-deadbee"
            record["response"]["system_fingerprint"] = (
                fingerprint.upper().replace("B", "b", 1) if which == "upper" else fingerprint
            )

    _invalid(_llama_records(built), tmp_path, "consistency", words)


def test_a_1_0_label_lifts_no_timing_rule(tmp_path: Path) -> None:
    """Both bundles of the earlier release carry every time: a bundle relabelled 1.0 with
    its times taken out is not judged by laxer rules."""

    def untimed(record: Any) -> None:
        record["schema_version"] = "1.0"
        record.pop("started_at")
        record.pop("elapsed_s")

    files = _records(_archive_files("legacy/llama-cpp-real-1.0.tar.gz"), untimed)
    _invalid(files, tmp_path, "consistency", "no start time")


@pytest.mark.parametrize("value", ["\uff11", " 1", "1\u200b", "1\n"])
def test_a_setting_whose_value_is_not_what_it_shows(tmp_path: Path, value: str) -> None:
    def look_alike(experiment: Any) -> None:
        condition = experiment["conditions"][1]
        condition["settings"]["MLXCEL_SDPA_DETERMINISTIC"] = value
        condition.pop("label", None)
        for server in condition["servers"]:
            server["environment"]["MLXCEL_SDPA_DETERMINISTIC"] = value

    files = _edited(dict(SEED_FILES), layout.EXPERIMENT, look_alike)
    _invalid(files, tmp_path, "servers", "other than printable ASCII")


def _model_given(*given: str) -> Callable[[list[str]], None]:
    """An edit of a command line: its `-m PATH` replaced by `given`."""

    def edit(argv: list[str]) -> None:
        at = argv.index("-m")
        argv[at : at + 2] = given

    return edit


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (_model_given("-m", "/path/to/model/other-7b.gguf"), "loads the model file other-7b.gguf"),
        (lambda argv: argv.extend(["-m", "/path/to/model/other-7b.gguf"]), "told 2 times"),
        (lambda argv: argv.extend(["-hf", "someone/other-7b-GGUF"]), "told 2 times"),
        (lambda argv: argv.append("--model=/path/to/model/other.gguf"), "told 2 times"),
        # llama-server's -m names one file, whatever its suffix
        (_model_given("-m", "/path/to/model/other"), "loads the model file other,"),
        (_model_given("-m", "/path/to/model/tiny.gguf.1"), "loads the model file tiny.gguf.1"),
        # no model at all (router mode), a folder of models, an option spelled with `_`
        (lambda argv: argv.__delitem__(slice(argv.index("-m"), argv.index("-m") + 2)),
         "names no model file"),
        (_model_given("--models-dir", "/path/to/evil"), "loads the model file evil"),
        (lambda argv: argv.extend(["--hf_repo", "evil/evil-GGUF"]), "told 2 times"),
        # a name that looks redacted is compared all the same
        (_model_given("-m", "/path/to/model/evil<1>.gguf"), "loads the model file evil<1>"),
        # a URL's query is not part of the file's name
        (_model_given("-mu", "https://example.com/other.gguf?download=true"),
         "loads the model file other.gguf"),
    ],
)  # fmt: skip
def test_a_server_that_loads_another_model_than_the_declared_one(
    tmp_path: Path, edit: Callable[[list[str]], None], words: str
) -> None:
    def loads(experiment: Any) -> None:
        for server in _servers(experiment):
            edit(server["argv"])

    files = _edited(_archive_files("llama-cpp-real.tar.gz"), layout.EXPERIMENT, loads)
    _invalid(files, tmp_path, "consistency", words)


def test_a_cold_answer_while_mlxcels_other_counter_of_cached_tokens_rose(
    tmp_path: Path,
) -> None:
    def rose(record: Any) -> None:
        if record["claimed_arm"] == "cold":
            record["telemetry"]["after"]["metrics"]["llamacpp:prompt_tokens_cached_total"] += 32

    files = _records(dict(SEED_FILES), rose)
    _invalid(files, tmp_path, "telemetry", "but its answer says 0 cached tokens")


@pytest.mark.parametrize("with_option", [True, False])
def test_a_model_named_by_the_environment(tmp_path: Path, with_option: bool) -> None:
    """LLAMA_ARG_MODEL is llama-server's --model: a model named there is one the server
    is told to load, beside -m or instead of it."""

    def by_environment(experiment: Any) -> None:
        condition = experiment["conditions"][0]
        condition["settings"]["LLAMA_ARG_MODEL"] = "/path/to/model/other.gguf"
        condition.pop("label", None)
        for server in condition["servers"]:
            server["environment"]["LLAMA_ARG_MODEL"] = "/path/to/model/other.gguf"
            if not with_option:
                at = server["argv"].index("-m")
                del server["argv"][at : at + 2]

    files = _edited(_archive_files("llama-cpp-real.tar.gz"), layout.EXPERIMENT, by_environment)
    words = "told 2 times" if with_option else "loads the model file other.gguf"
    _invalid(files, tmp_path, "consistency", words)


def test_a_served_file_the_manifest_lists_beside_another_model_file(tmp_path: Path) -> None:
    """An earlier capture named the folder's `model.safetensors` while llama-server loaded
    its GGUF: both are in the manifest, so the served file's hash is known. A warning says
    which, and the verdict stands."""
    files = _archive_files("llama-cpp-real.tar.gz")
    manifest = json.loads(files[layout.MODEL_MANIFEST])
    (gguf,) = manifest["files"]
    manifest["files"].append(dict(gguf, path="model.safetensors", sha256="ab" * 32))

    def declared(experiment: Any) -> None:
        experiment["model"].update(model_file="model.safetensors", model_sha256="ab" * 32)

    files = _edited({**files, layout.MODEL_MANIFEST: _dump(manifest)}, layout.EXPERIMENT, declared)
    result = verify_path(write(_resum(files), tmp_path / "b"))
    assert result.verdict is Verdict.CACHE_STATE_DEPENDENT, [f.message for f in result.findings]
    warned = [f for f in result.findings if "which the manifest lists" in f.message]
    assert warned and all(f.severity == "warning" for f in warned)


def test_an_answer_without_its_system_fingerprint(tmp_path: Path) -> None:
    def dropped(name: str, record: Any) -> None:
        if record["claimed_arm"] == "warm":
            record["response"].pop("system_fingerprint")

    _invalid(_llama_records(dropped), tmp_path, "consistency", "lack the system_fingerprint")


@pytest.mark.parametrize("fingerprints", ["kept", "dropped"])
def test_a_build_commit_the_servers_version_does_not_name(
    tmp_path: Path, fingerprints: str
) -> None:
    """audit 11 F5: with the answers' fingerprints dropped, build_commit was compared with
    nothing; llama-server's `--version` text names its commit too."""

    def misattributed(server: Any) -> None:
        server["build_commit"] = "deadbee"

    def dropped(_name: str, record: Any) -> None:
        record["response"].pop("system_fingerprint")

    files = _llama_records(dropped) if fingerprints == "dropped" else None
    files = _edited(
        files or _archive_files("llama-cpp-real.tar.gz"),
        layout.EXPERIMENT,
        lambda document: misattributed(document["server"]),
    )
    _invalid(files, tmp_path, "consistency", "version names commit 0c1e570, not the declared")


@pytest.mark.parametrize(
    ("version", "commit"),
    [
        ("version: 5890 (0c1e570)\nbuilt with GNU 13.3.0 for Linux x86_64", "0c1e570"),
        ("version: 0.5.0-dev (build 1, commit 0C1E570)", "0c1e570"),
        ("llama-server, built from a tarball", None),
        ("version: 5890 (unknown)", None),
    ],
)
def test_the_commit_a_llama_server_version_names(version: str, commit: str | None) -> None:
    assert PROFILES["llama.cpp"].version_commit(version) == commit


@pytest.mark.parametrize("created", [None, "float"])
def test_an_answer_without_its_time(tmp_path: Path, created: str | None) -> None:
    def untimed(name: str, record: Any) -> None:
        if name.endswith("/005.json"):
            if created is None:
                record["response"].pop("created")
            else:
                record["response"]["created"] = float(record["response"]["created"] - 3600)

    _invalid(_llama_records(untimed), tmp_path, "consistency", "an answer without its time")


@pytest.mark.parametrize(
    "counter", ["llamacpp:prompt_tokens_total", "llamacpp:tokens_predicted_total"]
)
def test_a_work_counter_taken_out_where_it_moved(tmp_path: Path, counter: str) -> None:
    def hidden(name: str, record: Any) -> None:
        if name.endswith("/004.json"):
            del record["telemetry"]["before"]["metrics"][counter]

    _invalid(_llama_records(hidden), tmp_path, "telemetry", "metrics lack")


def test_mlxcels_other_counter_of_cached_tokens_taken_out(tmp_path: Path) -> None:
    done = []

    def hidden(record: Any) -> None:
        if record["claimed_arm"] == "cold" and not done:
            del record["telemetry"]["after"]["metrics"]["llamacpp:prompt_tokens_cached_total"]
            done.append(True)

    files = _records(dict(SEED_FILES), hidden)
    _invalid(files, tmp_path, "telemetry", "metrics lack llamacpp:prompt_tokens_cached_total")


def test_a_setting_not_what_it_shows_in_a_condition_without_servers(tmp_path: Path) -> None:
    """An attached capture declares no server: the setting's value is checked all the same."""
    files = _archive_files("llama-cpp-real.tar.gz")

    def attached(experiment: Any) -> None:
        experiment["conditions"][0]["settings"]["LLAMA_ARG_FLASH_ATTN"] = "\uff11"
        experiment["conditions"][0]["servers"] = []

    files = _edited(files, layout.EXPERIMENT, attached)
    _invalid(files, tmp_path, "servers", "other than printable ASCII")


def test_a_counter_taken_out_of_every_snapshot_of_a_server(tmp_path: Path) -> None:
    def hidden(name: str, record: Any) -> None:
        if record["server_instance"] == 4:
            for side in ("before", "after"):
                del record["telemetry"][side]["metrics"]["llamacpp:tokens_predicted_total"]

    _invalid(_llama_records(hidden), tmp_path, "telemetry", "metrics lack")


def test_a_failed_metrics_read_leaves_its_request_unproven_not_the_bundle_invalid(
    tmp_path: Path,
) -> None:
    def failed(name: str, record: Any) -> None:
        if name.endswith("/006.json"):
            record["telemetry"]["after"]["metrics"] = None

    result = verify_path(write(_resum(_llama_records(failed)), tmp_path / "b"))
    assert result.verdict is Verdict.INCONCLUSIVE, [f.message for f in result.findings]
    assert not [f for f in result.findings if f.is_error]


def test_an_answer_that_counts_other_tokens_than_its_server_generated(tmp_path: Path) -> None:
    """An output swapped for one two tokens longer, its usage and timings edited to match:
    llama-server's own counter of generated tokens still moved by the old count (audit 11)."""

    def longer(name: str, record: Any) -> None:
        if name.endswith("/002.json"):
            record["response"]["usage"]["completion_tokens"] += 2
            record["response"]["usage"]["total_tokens"] += 2
            record["response"]["timings"]["predicted_n"] += 2

    _invalid(_llama_records(longer), tmp_path, "telemetry", "tokens_predicted_total moved by")


def test_a_warm_answer_whose_server_computed_more_of_the_prompt(tmp_path: Path) -> None:
    """Each warm answer claims one more cached token (its timings kept in step): the server's
    counter of computed prompt tokens says it computed that one (audit 11)."""

    def warmer(_name: str, record: Any) -> None:
        response = record["response"]
        if response["usage"]["prompt_tokens_details"]["cached_tokens"] > 0:
            response["usage"]["prompt_tokens_details"]["cached_tokens"] += 1
            response["timings"]["cache_n"] += 1
            response["timings"]["prompt_n"] -= 1

    _invalid(_llama_records(warmer), tmp_path, "telemetry", "prompt_tokens_total moved by")


def test_one_output_whose_requests_count_it_differently_is_not_compared(tmp_path: Path) -> None:
    """A warm reply put in place of another keeps its own completion_tokens (mlxcel keeps no
    counter of generated tokens): the same text told as two generations (audit 11)."""
    name = next(n for n in RECORDS if json.loads(SEED_FILES[n])["claimed_arm"] == "warm")

    def recount(record: Any) -> None:
        for usage in (record["response"]["usage"], record["usage"]):  # and the record's copy
            usage["completion_tokens"] += 1
            usage["total_tokens"] += 1

    files = _edited(dict(SEED_FILES), name, recount)
    result = verify_path(write(_resum(files), tmp_path / "b"))
    assert result.verdict is Verdict.INCONCLUSIVE
    assert result.classification is not None
    reasons = [r for c in result.classification.conditions for r in c.reasons]
    assert any("count its completion tokens differently" in r for r in reasons), reasons


def test_a_served_model_file_where_no_model_file_is_declared(tmp_path: Path) -> None:
    """model_file null, and every server loads a file the manifest does not list: the
    served-model rule was skipped, and model_sha256 stood for any file (audit 11)."""

    def undeclared(experiment: Any) -> None:
        experiment["model"]["model_file"] = None
        for server in _servers(experiment):
            server["argv"] = [a.replace("tiny.gguf", "other-7b.gguf") for a in server["argv"]]

    files = _edited(_archive_files("llama-cpp-cuda-flip.tar.gz"), layout.EXPERIMENT, undeclared)
    _invalid(files, tmp_path, "consistency", "model_file is not declared")


def test_no_model_file_declared_and_none_named(tmp_path: Path) -> None:
    """model_file null and no -m: the server loads models on demand, and model_sha256 binds
    nothing (audit 12)."""

    def on_demand(experiment: Any) -> None:
        experiment["model"]["model_file"] = None
        for server in _servers(experiment):
            at = server["argv"].index("-m")
            del server["argv"][at : at + 2]

    files = _edited(_archive_files("llama-cpp-cuda-stable.tar.gz"), layout.EXPERIMENT, on_demand)
    _invalid(files, tmp_path, "consistency", "names no model file")


def test_swapped_outputs_without_their_counts_agree_only_within_the_cap(tmp_path: Path) -> None:
    """The flip's warm replies swapped for the cold one, their token counts taken out (so no
    count rule reads them): a reply without its count counts as capped, and one output
    cut at the cap in some requests is cut in all, so nothing is concluded (audit 11;
    before, five capped of 28 left the verdict `cache-state-independent`)."""
    from verifier.canonical import output_hash

    files = _archive_files("llama-cpp-cuda-flip.tar.gz")
    cold = json.loads(files["records/fa-on/001.json"])["response"]["choices"][0]["message"]

    def swapped(record: Any) -> None:
        record["response"]["choices"][0]["message"]["content"] = cold["content"]
        record["output_hash"] = output_hash(record["response"])
        for usage in (record["response"]["usage"], record["usage"]):
            del usage["completion_tokens"], usage["total_tokens"]
        del record["response"]["timings"]["predicted_n"]

    for number in ("002", "003", "005", "006", "011"):  # every warm reply of fa-on
        files = _edited(files, f"records/fa-on/{number}.json", swapped)
    result = verify_path(write(_resum(files), tmp_path / "b"))
    # Since audit 17 the counts taken out of five answers of 28 are an error of their own
    # (one build writes them in every answer); the classification still sees the cap.
    assert result.verdict is Verdict.INVALID, [f.message for f in result.findings]
    assert any("which the others carry" in f.message for f in result.findings if f.is_error)
    assert result.classification is not None
    reasons = [r for c in result.classification.conditions for r in c.reasons]
    assert any("5 of them hit the token cap: they agree" in r for r in reasons), reasons


# --- audit 17: the signals a forger left behind ---------------------------------------


def _usages(record: Any) -> list[dict[str, Any]]:
    """The response's usage and the record's copy of it: a forger edits both alike."""
    return [record["response"]["usage"], record["usage"]]


def test_a_cache_off_answer_without_its_count_whose_server_computed_one_token(
    tmp_path: Path,
) -> None:
    """The last cache-off request really came from the cache: its count and timings.cache_n
    taken out (absent is allowed in that arm), the prompt counter still moved by the one
    token the server computed. In the server-disabled arm an absent count says 0."""

    def hidden_hit(name: str, record: Any) -> None:
        if name.endswith("/014.json"):
            for usage in _usages(record):
                del usage["prompt_tokens_details"]
            del record["response"]["timings"]["cache_n"]
            after = record["telemetry"]["after"]["metrics"]
            after["llamacpp:prompt_tokens_total"] -= 65

    _invalid(
        _llama_records(hidden_hit), tmp_path, "telemetry",
        "prompt_tokens_total moved by 1 across this request, but its answer counts 66",
    )  # fmt: skip


def test_a_cold_answer_whose_timings_say_the_cache_served_it(tmp_path: Path) -> None:
    """timings.prompt_n 1 of a 66-token prompt (the rest from the cache), its cache_n taken
    out: usage's 0 cached tokens does not add up with what the server computed."""

    def was_warm(name: str, record: Any) -> None:
        if name.endswith("/001.json"):
            del record["response"]["timings"]["cache_n"]
            record["response"]["timings"]["prompt_n"] = 1

    _invalid(
        _llama_records(was_warm), tmp_path, "telemetry",
        "timings.prompt_n 1 tokens computed, and 0 from the cache by the answer",
    )  # fmt: skip


def test_a_cache_off_answer_while_mlxcels_counter_of_cached_tokens_rose(tmp_path: Path) -> None:
    """mlxcel leaves the count out of a cache-off answer: that says 0 cached tokens, and its
    own counter of cached tokens rose by 32 across the last cache-off request."""

    def rose(record: Any) -> None:
        record["telemetry"]["after"]["metrics"]["llamacpp:prompt_tokens_cached_total"] += 32

    name = f"{layout.RECORDS_DIR}/sdpa-det-0/014.json"
    assert json.loads(SEED_FILES[name])["claimed_arm"] == "server-disabled"
    files = _edited(dict(SEED_FILES), name, rose)
    _invalid(files, tmp_path, "telemetry", "but its answer says 0 cached tokens")


def test_a_warm_answer_while_mlxcels_counter_of_cached_tokens_stood_still(
    tmp_path: Path,
) -> None:
    def still(record: Any) -> None:
        after = record["telemetry"]["after"]["metrics"]
        after["llamacpp:prompt_tokens_cached_total"] = record["telemetry"]["before"]["metrics"][
            "llamacpp:prompt_tokens_cached_total"
        ]

    name = f"{layout.RECORDS_DIR}/sdpa-det-0/011.json"  # the last request on its server
    files = _edited(dict(SEED_FILES), name, still)
    _invalid(files, tmp_path, "telemetry", "moved by 0 across this request, but its answer says 32")


def test_a_total_left_as_it_was_when_the_completion_count_changed(tmp_path: Path) -> None:
    """A warm reply swapped for the cold one, its completion count edited to match, its total
    left: 42 + 712 is not 773."""

    def recount(record: Any) -> None:
        for usage in _usages(record):
            usage["completion_tokens"] = 712

    files = _edited(dict(SEED_FILES), f"{layout.RECORDS_DIR}/sdpa-det-0/002.json", recount)
    _invalid(files, tmp_path, "telemetry", "usage.total_tokens 773 is not prompt_tokens 42")


def test_another_binary_than_the_one_the_process_maps_recorded(tmp_path: Path) -> None:
    def rebuilt(experiment: Any) -> None:
        experiment["server"]["binary_sha256"] = "ab" * 32

    files = _edited(dict(SEED_FILES), layout.EXPERIMENT, rebuilt)
    _invalid(files, tmp_path, "consistency", "process maps recorded mlxcel-server")


def test_a_model_digest_that_names_no_file(tmp_path: Path) -> None:
    """model_file null and model_sha256 the tokenizer's digest, an entry of the manifest: the
    report showed it as the model file's."""
    manifest = json.loads(SEED_FILES[layout.MODEL_MANIFEST])
    tokenizer = next(e for e in manifest["files"] if e["path"] == "tokenizer.json")

    def unbound(experiment: Any) -> None:
        experiment["model"].update(model_file=None, model_sha256=tokenizer["sha256"])

    files = _edited(dict(SEED_FILES), layout.EXPERIMENT, unbound)
    _invalid(files, tmp_path, "manifest", "model_sha256 is given without model_file")


def test_vllm_command_lines_differ_only_by_the_cache_flags() -> None:
    """vLLM's harness writes --enable-prefix-caching on cache-on servers: with the cache-off
    flag, the one difference between the command lines (a capture of this tool was
    invalid)."""
    from types import SimpleNamespace

    from verifier.checks.consistency import normalized_command_line
    from verifier.profiles.base import LaunchSpec

    profile = PROFILES["vllm"]

    def server(off: bool) -> Any:
        spec = LaunchSpec(Path("/path/to/vllm"), Path("/path/to/model"), "m", 8000, off, Path("/s"))
        return SimpleNamespace(argv=tuple(profile.start_argv(spec)), cache_disabled=off)

    on, off = server(False), server(True)
    assert on.argv != off.argv
    assert normalized_command_line(on, profile.rules, ()) == normalized_command_line(
        off, profile.rules, ()
    )


@pytest.mark.parametrize(
    ("keys", "said"),
    [
        (['vllm:cache_config_info{block_size="16",enable_prefix_caching="True"}'], {True}),
        (['vllm:cache_config_info{enable_prefix_caching="False",block_size="16"}'], {False}),
        (['vllm:cache_config_info{enable_prefix_caching="false"}'], {False}),
        (['vllm:cache_config_info{block_size="16"}'], set()),
        (['vllm:cache_config_info{enable_prefix_caching="maybe"}'], set()),
        (['vllm:other{enable_prefix_caching="True"}'], set()),
        (
            [
                'vllm:cache_config_info{enable_prefix_caching="True",engine="0"}',
                'vllm:cache_config_info{enable_prefix_caching="False",engine="1"}',
            ],
            {True, False},
        ),
    ],
)
def test_what_vllms_gauge_says_of_its_prefix_cache(keys: list[str], said: set[bool]) -> None:
    assert PROFILES["vllm"].cache_state_in_metrics(dict.fromkeys(keys, 1.0)) == said


@pytest.mark.parametrize(("off", "gauge", "proven_warm", "severity"), [
    (True, "True", False, "error"),  # a cache-off server whose cache says it is on
    (False, "False", False, "warning"),  # vLLM turns caching off for some models
    (False, "False", True, "error"),  # ... but then its warm hits contradict it
    (True, "False", False, None),
    (False, "True", True, None),
])  # fmt: skip
def test_a_vllm_server_whose_own_gauge_contradicts_its_declared_cache(
    off: bool, gauge: str, proven_warm: bool, severity: str | None
) -> None:
    from types import SimpleNamespace

    from verifier.checks.telemetry import _cache_state_said
    from verifier.model import Arm

    metrics = {f'vllm:cache_config_info{{enable_prefix_caching="{gauge}"}}': 1.0}
    snapshot = SimpleNamespace(metrics=metrics)
    record = SimpleNamespace(
        condition="c", server_instance=3, before=snapshot, after=snapshot, file="records/c/1.json"
    )
    proof = SimpleNamespace(record=record, arm=Arm.WARM, comparable=proven_warm)
    server = SimpleNamespace(instance=3, cache_disabled=off)
    experiment = SimpleNamespace(conditions=[SimpleNamespace(id="c", servers=[server])])
    context = SimpleNamespace(
        experiment=experiment, profile=PROFILES["vllm"], records=[record], proofs=[proof]
    )
    found = list(_cache_state_said(context))  # type: ignore[arg-type]
    assert [str(f.severity) for f in found] == ([] if severity is None else [severity])


@pytest.mark.parametrize("total", [773.0, "773", None, -1])
def test_a_total_that_is_not_a_count(tmp_path: Path, total: Any) -> None:
    """The total written so that no sum is read against it (audit of audit 17)."""

    def recount(record: Any) -> None:
        for usage in _usages(record):
            usage["completion_tokens"] = 712
            usage["total_tokens"] = total

    files = _edited(dict(SEED_FILES), f"{layout.RECORDS_DIR}/sdpa-det-0/002.json", recount)
    _invalid(files, tmp_path, "telemetry", "usage.total_tokens is")


@pytest.mark.parametrize("pointer", ["usage/total_tokens", "timings/prompt_n", "timings"])
def test_an_answer_without_a_count_the_others_carry(tmp_path: Path, pointer: str) -> None:
    """A field every answer of one build carries, taken out of one answer, where a rule
    would have read it against the rest."""
    parent, _, field = pointer.rpartition("/")

    def taken_out(name: str, record: Any) -> None:
        if name.endswith("/002.json"):
            for holder in ([record["response"]] if not parent else [record["response"][parent]]) + (
                [record["usage"]] if parent == "usage" else []
            ):
                del holder[field]

    _invalid(_llama_records(taken_out), tmp_path, "telemetry", "which the others carry")


@pytest.mark.parametrize("spelled", ["MLXCEL-SERVER", "mlxcel-server (deleted)", None])
def test_the_binary_in_the_maps_spelled_otherwise(tmp_path: Path, spelled: str | None) -> None:
    """The maps' entry of the server binary renamed (another case, a file replaced while it
    ran) or its digest nulled, the declared digest changed."""

    def rebuilt(experiment: Any) -> None:
        experiment["server"]["binary_sha256"] = "ab" * 32
        entry = next(e for e in experiment["runtime_libraries"] if e["name"] == "mlxcel-server")
        if spelled is None:
            entry["sha256"] = None
        else:
            entry["name"] = spelled

    files = _edited(dict(SEED_FILES), layout.EXPERIMENT, rebuilt)
    _invalid(files, tmp_path, "consistency", "process maps recorded")  # (null passes the schema)


@pytest.mark.parametrize("named", ["tokenizer.json", "model.safetensors.index.json"])
def test_a_model_file_that_is_no_weights_file(tmp_path: Path, named: str) -> None:
    manifest = json.loads(SEED_FILES[layout.MODEL_MANIFEST])
    entries = {e["path"]: e for e in manifest["files"]}
    if named not in entries:
        pytest.skip(f"the seed's manifest lists no {named}")

    def renamed(experiment: Any) -> None:
        experiment["model"].update(model_file=named, model_sha256=entries[named]["sha256"])

    files = _edited(dict(SEED_FILES), layout.EXPERIMENT, renamed)
    _invalid(files, tmp_path, "manifest", "another kind than model weights")


def test_a_shorter_reply_than_the_server_decoded(tmp_path: Path) -> None:
    """The last warm reply cut by ten tokens with every count edited to match (usage, total,
    timings, the generated-token counter): llama-server's decode calls still count the
    reply it generated (56 calls for 1 prompt token and 46 completion tokens)."""

    def shorter(name: str, record: Any) -> None:
        if name.endswith("/016.json"):
            for usage in _usages(record):
                usage["completion_tokens"] -= 10
                usage["total_tokens"] -= 10
            record["response"]["timings"]["predicted_n"] -= 10
            record["telemetry"]["after"]["metrics"]["llamacpp:tokens_predicted_total"] -= 10

    _invalid(
        _llama_records(shorter), tmp_path, "telemetry", "n_decode_total moved by 56 across"
    )  # fmt: skip


def test_the_decode_counter_taken_out(tmp_path: Path) -> None:
    def taken_out(name: str, record: Any) -> None:
        if name.endswith("/016.json"):
            del record["telemetry"]["after"]["metrics"]["llamacpp:n_decode_total"]

    _invalid(_llama_records(taken_out), tmp_path, "telemetry", "lack llamacpp:n_decode_total")


# --- helper-53 (2026-12-05) --------------------------------------------------------------


def test_a_cache_off_answer_whose_timings_say_it_came_from_the_cache(tmp_path: Path) -> None:
    """The cache-off control's cached_tokens taken out (where it says none), and its timings
    made to say 75 of 76 prompt tokens came from the cache: the answer contradicts itself."""

    def served_from_cache(record: Any) -> None:
        for usage in (record["response"]["usage"], record["usage"]):
            usage.pop("prompt_tokens_details", None)
        timings = record["response"]["timings"]
        prompt = timings["prompt_n"] + timings["cache_n"]
        timings["cache_n"], timings["prompt_n"] = prompt - 1, 1

    files = _archive_files("llama-cpp-cuda-flip.tar.gz")
    for number in ("012", "013", "014"):  # the server-disabled arm of each condition
        for condition in ("fa-on", "fa-off"):
            files = _edited(files, f"records/{condition}/{number}.json", served_from_cache)
    _invalid(files, tmp_path, "telemetry", "tokens came from the cache")


def test_a_second_choice_in_every_answer_is_judged_or_refused(tmp_path: Path) -> None:
    """`n: 2` and a second choice holding the other class's reply: only the first enters the
    output hash, so the second would go unjudged."""
    from verifier.canonical import output_hash

    files = dict(SEED_FILES)
    first = json.loads(files[RECORDS[0]])["response"]["choices"][0]

    def two_choices(record: Any) -> None:
        record["request_body"]["n"] = 2
        record["response"]["choices"].append({**first, "index": 1})
        record["output_hash"] = output_hash(record["response"])

    files = _records(files, two_choices)
    files = _edited(files, layout.EXPERIMENT, lambda e: e["request_body"].update(n=2))
    _invalid(files, tmp_path, "output-hash", "choices")


@pytest.mark.parametrize(
    ("field", "value"),
    [("n", 2), ("n", 1.0), ("best_of", 2), ("n_cmpl", 2), ("use_beam_search", True)],
)
def test_a_body_that_asks_two_replies_is_refused_though_one_is_recorded(
    tmp_path: Path, field: str, value: object
) -> None:
    """helper-54, helper-55: `n: 2` with one choice recorded: the other reply was left out."""
    files = _records(dict(SEED_FILES), lambda r: r["request_body"].update({field: value}))
    files = _edited(files, layout.EXPERIMENT, lambda e: e["request_body"].update({field: value}))
    _invalid(files, tmp_path, "output-hash", f"asks {field}={value!r}")


def test_an_only_choice_that_says_it_is_the_second_is_refused(tmp_path: Path) -> None:
    def second(record: Any) -> None:
        record["response"]["choices"][0]["index"] = 1

    _invalid(_records(dict(SEED_FILES), second), tmp_path, "output-hash", "says it is choice 1")


# --- helper-57 (2026-12-05, session 11) ---------------------------------------------------


@pytest.mark.parametrize(
    ("field", "cold", "warm"),
    [
        (
            "function_call",
            {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            {"name": "get_weather", "arguments": '{"city": "Lyon"}'},
        ),
        ("refusal", "I cannot help with that.", "Sure, here it is."),
        # helper-91: any field the hash does not read, not only those named before
        ("thinking", "The tide is out.", "The tide is in."),
        ("x_reply", ["a"], ["b"]),
        ("annotations", [{"type": "url_citation"}], [{"type": "other"}]),
    ],
)
def test_a_reply_in_a_part_the_output_hash_does_not_read_is_refused(
    tmp_path: Path, field: str, cold: object, warm: object
) -> None:
    """Replies whose content is null and which differ only in `message.function_call` (the
    legacy single call) or `message.refusal` all had one output hash, and the bundle was
    judged cache-state-independent."""
    from verifier.canonical import output_hash

    def moved(record: Any) -> None:
        message = record["response"]["choices"][0]["message"]
        message["content"] = None
        message[field] = warm if record["claimed_arm"] == "warm" else cold
        record["output_hash"] = output_hash(record["response"])

    _invalid(_records(dict(SEED_FILES), moved), tmp_path, "output-hash", f"message.{field}")


def test_parts_the_output_hash_does_not_read_sent_as_null_are_no_finding(tmp_path: Path) -> None:
    """vLLM sends `refusal`, `function_call` and `audio` as null in every reply."""
    from verifier.canonical import output_hash

    def nulls(record: Any) -> None:
        message = record["response"]["choices"][0]["message"]
        message.update(refusal=None, function_call=None, audio=None, annotations=None)
        message.update(tool_calls=[], reasoning_content=None, thinking="")
        record["output_hash"] = output_hash(record["response"])

    result = verify_path(write(_resum(_records(dict(SEED_FILES), nulls)), tmp_path / "b"))
    assert result.verdict is Verdict.CACHE_STATE_DEPENDENT
    assert not [f for f in result.findings if f.is_error]


def _token_list(text: str) -> list[dict[str, Any]]:
    """A greedy token list that spells `text`, a word a token, with its bytes."""
    words = [w for w in text.split(" ")]
    tokens = [w if i == 0 else " " + w for i, w in enumerate(words)]
    return [
        {"token": t, "bytes": list(t.encode()), "logprob": -0.1, "top_logprobs": []} for t in tokens
    ]


def test_a_token_list_that_spells_another_reply_is_refused(tmp_path: Path) -> None:
    """Every reply says A, but the warm replies' own token lists spell the seed's warm story
    B: the response contradicts itself (it had been judged cache-state-independent)."""
    from verifier.canonical import output_hash

    files = dict(SEED_FILES)
    records = [json.loads(files[n]) for n in files if n.startswith(layout.RECORDS_DIR + "/")]
    texts = {r["claimed_arm"]: r["response"]["choices"][0]["message"]["content"] for r in records}
    cold, warm = texts["cold"], texts["warm"]
    assert cold != warm

    def spelled_elsewhere(record: Any) -> None:
        choice = record["response"]["choices"][0]
        choice["message"]["content"] = cold
        choice["logprobs"] = {
            "content": _token_list(warm if record["claimed_arm"] == "warm" else cold)
        }
        record["output_hash"] = output_hash(record["response"])

    _invalid(_records(files, spelled_elsewhere), tmp_path, "output-hash", "does not spell")


def test_a_token_list_that_spells_more_than_the_reply_is_no_finding(tmp_path: Path) -> None:
    """A list of the whole generation: reasoning tags, other spacing and an end token."""

    def whole(record: Any) -> None:
        choice = record["response"]["choices"][0]
        text = choice["message"]["content"]
        generated = f"<think>\n\n</think>\n\n{text.replace('. ', '.  ')}<|im_end|>"
        choice["logprobs"] = {"content": _token_list(generated)}

    result = verify_path(write(_resum(_records(dict(SEED_FILES), whole)), tmp_path / "b"))
    assert result.verdict is Verdict.CACHE_STATE_DEPENDENT
    assert not [f for f in result.findings if f.is_error]


def _bpe(text: str) -> str:
    """`text` as byte-level BPE's alphabet spells its UTF-8 bytes (GPT-2's)."""
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    others = [b for b in range(256) if b not in printable]
    return "".join(
        chr(b) if b in printable else chr(0x100 + others.index(b)) for b in text.encode()
    )


def _bpe_list(text: str) -> list[dict[str, Any]]:
    """Tokens sent undecoded, as byte-level BPE symbols (`Ġkeeper`), a word a token."""
    words = text.split(" ")
    return [{"token": _bpe((" " if i else "") + w), "logprob": -0.1} for i, w in enumerate(words)]


def _split_character(text: str) -> list[dict[str, Any]]:
    """Texts without bytes, the first character of two bytes or more split in two (U+FFFD)."""
    at = next(i for i, c in enumerate(text) if len(c.encode()) > 1)
    pieces = [text[:at], "\ufffd", "\ufffd", text[at + 1 :]]
    return [{"token": p, "logprob": -0.1} for p in pieces]


def _empty_for_a_character(text: str) -> list[dict[str, Any]]:
    """A character of several bytes sent as an empty token without bytes (vLLM #9463)."""
    at = next(i for i, c in enumerate(text) if len(c.encode()) > 1)
    pieces = [text[:at], "", text[at + 1 :]]
    return [{"token": p, "bytes": list(p.encode()), "logprob": -0.1} for p in pieces]


def _decoded_alone(text: str) -> list[dict[str, Any]]:
    """A token a character, each character of several bytes split into two tokens that,
    decoded alone, are U+FFFD, with the bytes of U+FFFD (vLLM's `errors="replace"`)."""
    tokens = []
    for c in text:
        pieces = [c] if len(c.encode()) == 1 else ["\ufffd", "\ufffd"]
        tokens += [{"token": p, "bytes": list(p.encode()), "logprob": -0.1} for p in pieces]
    return tokens


def _around_call(text: str) -> list[dict[str, Any]]:
    """The text generated with a call after its first word (or three), which a parser took
    out of the content (llama.cpp's Hermes content: the text before the call and after)."""
    words = text.split(" ")
    cut = 1 if len(words) < 6 else 3
    call = '<tool_call>\n{"name": "weather", "arguments": {}}\n</tool_call>'
    pieces = [" ".join(words[:cut]), call, " " + " ".join(words[cut:])]
    return [{"token": p, "bytes": list(p.encode()), "logprob": -0.1} for p in pieces]


@pytest.mark.parametrize(
    ("reply", "listed"),
    [
        ("The keeper lit the lamp.", _bpe_list),  # `Ġthe`: byte-level BPE, undecoded
        ("是的，今天天气很好！", _bpe_list),  # no space: every symbol BPE's (vLLM #19177)
        ("He said “hello” and left.", _split_character),
        ("He said “hello” and left.", _empty_for_a_character),
        # each token decoded alone, its bytes those of its text (vLLM, mlx-vlm)
        ("Café in 北京.", lambda t: _decoded_alone(t)),
        # llama.cpp's Hermes content: the text before a call and after it, joined
        ("Let me check. Here is what I found: sunny, 21 degrees.", lambda t: _around_call(t)),
        # the same, where the text after the call repeats the text before it
        ("Done. Saved. Done. Saved.", lambda t: _around_call(t)),
        # vLLM's return_tokens_as_token_ids
        ("The keeper lit the lamp.", lambda t: [{"token": "token_id:791", "logprob": -0.1}]),
        ("The keeper lit the lamp.", lambda t: [{"token": "<0xE5>", "logprob": -0.1}]),
    ],
)
def test_a_token_list_a_server_sends_in_another_form_is_no_finding(
    tmp_path: Path, reply: str, listed: Callable[[str], list[dict[str, Any]]]
) -> None:
    """Honest lists that are not the reply's text token by token: read where they can be
    (byte-level BPE's symbols read back as bytes), and otherwise they say nothing."""
    from verifier.canonical import output_hash

    def sent(record: Any) -> None:
        choice = record["response"]["choices"][0]
        choice["message"]["content"] = reply
        choice["logprobs"] = {"content": listed(reply)}
        if calls:
            call = {"name": "weather", "arguments": "{}"}
            choice["message"]["tool_calls"] = [{"id": "c0", "type": "function", "function": call}]
            record["request_body"]["tools"] = _TOOLS  # (a server reads calls only then)
        record["output_hash"] = output_hash(record["response"])

    calls = any("<tool_call>" in t["token"] for t in listed(reply))
    files = dict(SEED_FILES)
    if calls:
        files = _edited(files, layout.EXPERIMENT, lambda e: e["request_body"].update(tools=_TOOLS))
    result = verify_path(write(_resum(_records(files, sent)), tmp_path / "b"))
    assert not [f.message for f in result.findings if f.is_error]


@pytest.mark.parametrize(
    "spelled",
    [
        "The dose is not safe for children under 12.",
        "Take 10 mg, never 100 mg, with food.",
        # what the reply leaves out ends as a marker would, but does not start as one
        "Take it. Never on an empty stomach [warning] Eat first.",
        # helper-63: what the reply leaves out is marked up as a tag is
        "This medication is <strong>not</strong> safe during pregnancy.",
        # helper-63: the list's first words
        "Do not take more than 4 grams a day.",
        # helper-64: what the list spells after the reply
        "Yes, you can take both. Just kidding: never do that.",
    ],
)
def test_a_token_list_that_spells_words_the_reply_lacks_is_refused(
    tmp_path: Path, spelled: str
) -> None:
    """helper-62: the list had been read as the reply in up to 3 pieces wherever they were,
    so a reply that left out a word the list spells (`not`) passed; a gap is now only what
    a parser takes out (a tag, a marker, a special token)."""
    from verifier.canonical import output_hash

    reply = spelled.replace(" not", "").replace("10 mg, never ", "")
    reply = reply.replace(" Never on an empty stomach [warning]", "")
    reply = reply.replace(" <strong>not</strong>", "").replace("Do not take", "take")
    reply = reply.replace(" Just kidding: never do that.", "")

    def dropped(record: Any) -> None:
        choice = record["response"]["choices"][0]
        choice["message"]["content"] = reply
        choice["logprobs"] = {"content": _token_list(spelled)}
        record["output_hash"] = output_hash(record["response"])

    _invalid(_records(dict(SEED_FILES), dropped), tmp_path, "output-hash", "does not spell")


def test_a_token_list_that_spells_the_stop_string_the_server_cut_is_no_finding(
    tmp_path: Path,
) -> None:
    """A request that names stop strings: the server cuts the one it met out of the content,
    not out of the token list."""

    def stopped(record: Any) -> None:
        record["request_body"]["stop"] = ["\n\nUser:"]
        choice = record["response"]["choices"][0]
        choice["logprobs"] = {"content": _token_list(choice["message"]["content"] + " \n\nUser:")}

    files = _records(dict(SEED_FILES), stopped)
    files = _edited(
        files, layout.EXPERIMENT, lambda e: e["request_body"].update(stop=["\n\nUser:"])
    )
    result = verify_path(write(_resum(files), tmp_path / "b"))
    assert not [f.message for f in result.findings if f.is_error and f.check == "output-hash"]


@pytest.mark.parametrize("finish", [None, "tool_calls", "function_call"])
@pytest.mark.parametrize(
    ("field", "empty"),
    [("tool_calls", []), ("reasoning_content", ""), ("reasoning", ""), ("content", None)],
)
def test_an_empty_field_on_the_warm_replies_alone_is_no_split(
    tmp_path: Path, field: str, empty: object, finish: str | None
) -> None:
    """helper-66: every reply says the cold text, with its counts and counters; the warm ones
    also carry an empty `tool_calls` (or reasoning) that the cold ones leave out. The hash
    tells them apart, and the bundle was judged cache-state-dependent."""
    from verifier.canonical import output_hash

    files = dict(SEED_FILES)
    records = [json.loads(files[n]) for n in files if n.startswith(layout.RECORDS_DIR + "/")]
    cold = next(r for r in records if r["claimed_arm"] == "cold")["response"]["choices"][0]

    def emptied(record: Any) -> None:
        message = record["response"]["choices"][0]["message"]
        message["content"] = "" if field == "content" else cold["message"]["content"]
        record["response"]["choices"][0]["finish_reason"] = "stop"
        if record["claimed_arm"] == "warm":
            message[field] = empty
            # helper-68: a finish set apart too (not in the hash), that says it ended
            record["response"]["choices"][0]["finish_reason"] = finish or "stop"
        record["output_hash"] = output_hash(record["response"])

    _invalid(_records(files, emptied), tmp_path, "consistency", "made of nothing")


def test_an_empty_field_the_hash_reads_as_none_splits_nothing(tmp_path: Path) -> None:
    """`tool_calls: null` and no `tool_calls` hash alike: no split, and no finding."""
    from verifier.canonical import output_hash

    files = dict(SEED_FILES)
    records = [json.loads(files[n]) for n in files if n.startswith(layout.RECORDS_DIR + "/")]
    cold = next(r for r in records if r["claimed_arm"] == "cold")["response"]["choices"][0]

    def emptied(record: Any) -> None:
        message = record["response"]["choices"][0]["message"]
        message["content"] = cold["message"]["content"]
        if record["claimed_arm"] == "warm":
            message["tool_calls"] = None
        record["output_hash"] = output_hash(record["response"])

    result = verify_path(write(_resum(_records(files, emptied)), tmp_path / "b"))
    # (inconclusive: the seed's replies are cut at the cap, and now all agree)
    assert result.verdict is Verdict.INCONCLUSIVE
    assert not [f for f in result.findings if f.is_error]


def test_an_empty_list_on_a_reply_cut_short_is_left_to_the_classification(
    tmp_path: Path,
) -> None:
    """helper-67: SGLang writes `tool_calls: []` on a reply cut right after a call's marker
    (which its parser takes out of the text), null on the others: a reply cut short is the
    start of another, judged as such (inconclusive here), not a split made of nothing."""
    from verifier.canonical import output_hash

    files = dict(SEED_FILES)
    records = [json.loads(files[n]) for n in files if n.startswith(layout.RECORDS_DIR + "/")]
    cold = next(r for r in records if r["claimed_arm"] == "cold")["response"]["choices"][0]
    first_warm = min(n for n in RECORDS if json.loads(files[n])["claimed_arm"] == "warm")

    def marked(name: str) -> Callable[[Any], None]:
        def edit(record: Any) -> None:
            choice = record["response"]["choices"][0]
            choice["message"].update(content=cold["message"]["content"], tool_calls=None)
            choice["finish_reason"] = "stop"
            if name == first_warm:
                choice["message"]["tool_calls"] = []
                choice["finish_reason"] = "length"
            record["output_hash"] = output_hash(record["response"])

        return edit

    for name in RECORDS:
        files = _edited(files, name, marked(name))
    result = verify_path(write(_resum(files), tmp_path / "b"))
    assert not [f for f in result.findings if f.is_error]
    assert result.verdict is not Verdict.CACHE_STATE_DEPENDENT


def test_an_empty_part_written_two_ways_beside_other_text_is_no_finding(tmp_path: Path) -> None:
    """helper-67: SGLang writes `tool_calls: []` where it found a call's marker and no call
    (a reply cut after `<tool_call>`), null elsewhere: that reply's text differs anyway."""
    from verifier.canonical import output_hash

    def marked(record: Any) -> None:
        message = record["response"]["choices"][0]["message"]
        message["tool_calls"] = None
        if record["claimed_arm"] == "warm":
            message["content"] += " <tool_call>"
            message["tool_calls"] = []
        record["output_hash"] = output_hash(record["response"])

    result = verify_path(write(_resum(_records(dict(SEED_FILES), marked)), tmp_path / "b"))
    assert result.verdict is Verdict.CACHE_STATE_DEPENDENT
    assert not [f for f in result.findings if f.is_error]


@pytest.mark.parametrize(("field", "empty"), [("tool_calls", []), ("tool_calls", None)])
def test_an_empty_field_written_in_every_reply_is_no_finding(
    tmp_path: Path, field: str, empty: object
) -> None:
    """vLLM sends `tool_calls: []` in every answer, SGLang null: one way in each answer."""
    from verifier.canonical import output_hash

    def emptied(record: Any) -> None:
        record["response"]["choices"][0]["message"][field] = empty
        record["output_hash"] = output_hash(record["response"])

    result = verify_path(write(_resum(_records(dict(SEED_FILES), emptied)), tmp_path / "b"))
    assert result.verdict is Verdict.CACHE_STATE_DEPENDENT
    assert not [f for f in result.findings if f.is_error]


_MISSES = "mlxcel_prompt_cache_misses_total"


def test_a_warm_request_whose_server_also_counted_a_miss_is_not_proven(tmp_path: Path) -> None:
    """helper-66: each warm request's miss counter moved beside its hit counters (a cold
    request's telemetry with hits written over it), and the bundle was judged
    cache-state-dependent. The scheduler counts a lookup a hit or a miss, never both."""
    files = dict(SEED_FILES)
    shift: dict[tuple[str, int], int] = {}
    for name in RECORDS:  # later snapshots moved on too, so no counter moves between requests

        def missed(record: Any) -> None:
            key = (record["condition"], record["server_instance"])
            record["telemetry"]["before"]["metrics"][_MISSES] += shift.get(key, 0)
            shift[key] = shift.get(key, 0) + (record["claimed_arm"] == "warm")
            record["telemetry"]["after"]["metrics"][_MISSES] += shift[key]

        files = _edited(files, name, missed)
    result = verify_path(write(_resum(files), tmp_path / "b"))
    assert result.verdict is Verdict.INVALID  # the telemetry disagrees with itself: an error
    assert [f for f in result.findings if f.is_error and "a miss counted" in f.message]
    assert result.classification is not None
    warm = [p for p in result.classification.proofs if p.record.claimed_arm == "warm"]
    assert warm and not any(p.proven for p in warm)
    assert all(f"{_MISSES} moved: the server counted a miss" in p.reason for p in warm)


def test_a_warm_request_without_its_miss_counter_is_not_proven(tmp_path: Path) -> None:
    """A signal the profile defines but the record lacks proves nothing either way."""

    def dropped(record: Any) -> None:
        if record["claimed_arm"] == "warm":
            del record["telemetry"]["after"]["metrics"][_MISSES]

    result = verify_path(write(_resum(_records(dict(SEED_FILES), dropped)), tmp_path / "b"))
    assert result.verdict is not Verdict.CACHE_STATE_DEPENDENT
    assert result.classification is not None
    warm = [p for p in result.classification.proofs if p.record.claimed_arm == "warm"]
    assert warm and not any(p.proven for p in warm)


def test_a_copy_of_the_rules_from_before_miss_counters_is_the_same_rules(tmp_path: Path) -> None:
    """Bundles of the earlier release carry the mlxcel v1 rules without `misses`: that copy
    is no other rules (they are judged by this tool's, misses included); a copy that names
    other miss counters is."""

    def without(document: Any) -> None:
        del document["profile_rules"]["signals"]["misses"]

    files = _edited(dict(SEED_FILES), layout.EXPERIMENT, without)
    result = verify_path(write(_resum(files), tmp_path / "b"))
    assert result.verdict is Verdict.CACHE_STATE_DEPENDENT
    assert not [f for f in result.findings if f.severity != "info"]

    def other(document: Any) -> None:
        document["profile_rules"]["signals"]["misses"] = []

    _invalid(
        _edited(dict(SEED_FILES), layout.EXPERIMENT, other), tmp_path / "o", "profile", "differ"
    )


_TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]


def _called(warm_edit: Callable[[dict[str, Any], dict[str, Any]], None]) -> Files:
    """The seed, its request offering a tool and every reply the same call to it; each warm
    reply's message and call then edited by `warm_edit`."""
    from verifier.canonical import output_hash

    def offered(body: dict[str, Any]) -> None:
        body["tools"] = _TOOLS

    files = _edited(dict(SEED_FILES), layout.EXPERIMENT, lambda e: offered(e["request_body"]))

    def called(record: Any) -> None:
        offered(record["request_body"])
        call = {"id": "c", "type": "function", "function": {"name": "get_weather"}}
        call["function"]["arguments"] = '{"city":"Paris"}'
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        finish = "tool_calls"
        if record["claimed_arm"] == "warm":
            warm_edit(message, call)
            finish = message.pop("finish", finish)
        choice = record["response"]["choices"][0]
        choice.update(message=message, finish_reason=finish)
        choice.pop("logprobs", None)
        record["output_hash"] = output_hash(record["response"])

    return _records(files, called)


def test_replies_that_are_one_tool_call_to_a_request_offering_it(tmp_path: Path) -> None:
    result = verify_path(write(_resum(_called(lambda m, c: None)), tmp_path / "b"))
    assert not [f for f in result.findings if f.is_error]
    assert result.verdict is not Verdict.CACHE_STATE_DEPENDENT


@pytest.mark.parametrize(
    ("edit", "check", "words"),
    [
        (lambda m, c: c.pop("type"), "output-hash", "no function call with a name"),
        (lambda m, c: c.update(type=None), "output-hash", "no function call with a name"),
        (lambda m, c: c.update(function={}), "output-hash", "no function call with a name"),
        (lambda m, c: c["function"].update(name=""), "output-hash", "no function call"),
        (lambda m, c: m.update(content=""), "consistency", "made of nothing"),
        # helper-68: a finish that is not in the hash, set apart on the warm replies
        (lambda m, c: m.update(content="", finish="stop"), "consistency", "made of nothing"),
        (lambda m, c: m.pop("content"), "output-hash", ""),  # (absent is null: no split)
    ],
)
def test_tool_calls_split_by_how_they_are_written(
    tmp_path: Path, edit: Callable[[dict[str, Any], dict[str, Any]], None], check: str, words: str
) -> None:
    """helper-67: with every reply the same call, a warm call without its `type`, or one
    that holds nothing (`{"function": {}}`, hashed as nulls), or a warm `content: ""` beside
    null, each gave cache-state-dependent."""
    result = verify_path(write(_resum(_called(edit)), tmp_path / "b"))
    if not words:
        assert result.verdict is not Verdict.CACHE_STATE_DEPENDENT
        return
    assert result.verdict is Verdict.INVALID
    assert [f for f in result.findings if f.check == check and f.is_error and words in f.message]


def test_tool_calls_to_a_request_that_offers_no_tools(tmp_path: Path) -> None:
    """A server reads calls out of a reply only where its request offers tools: a warm
    reply given a call the cold ones lack had made a split of its own."""
    from verifier.canonical import output_hash

    def called(record: Any) -> None:
        if record["claimed_arm"] == "warm":
            call = {"type": "function", "function": {"name": "x", "arguments": "{}"}}
            record["response"]["choices"][0]["message"]["tool_calls"] = [call]
            record["output_hash"] = output_hash(record["response"])

    _invalid(_records(dict(SEED_FILES), called), tmp_path, "output-hash", "offers no tools")
