"""What the verify audit of helper-77 found, each lie with the integrity redone as a forger
would (SHA256SUMS recomputed), each of which had been verified with the verdict the forger
wanted:

- a condition's setting overridden on the command line in a spelling only the server knows:
  `--flash_attn on` (llama-server and vLLM read a long option's `_` as `-`), an option
  named by the environment variable that sets it in a name other than its own
  (`LLAMA_ARG_UBATCH` is `-ub/--ubatch-size`, `LLAMA_ARG_BATCH` `-b/--batch-size`) or by a
  short spelling (`-dev`, `-mg`), and a toggle taken out by a wrapper (`env -u NAME`,
  `env -i`): each is an error, as `--flash-attn on` and `env NAME=1` were;
- `vllm serve MODEL` names its model positionally: two conditions may not serve two models
  that way either;
- two conditions that declare the same configuration: one configuration run twice, whose
  halves disagreeing was reported as a split "in 1 of 2 conditions";
- mlxcel's snapshot-cache hit counter absent before a cold request and above zero after it
  was read as not recorded: it moved, and the request is not proven cold.

The honest bundles each lie starts from keep their verdicts (tests/test_samples.py,
test_soundness_states.py)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from make_samples import _dump
from test_soundness import SEED_FILES, _archive_files
from test_soundness_audit70 import _verify
from test_soundness_signals import Files, _edited, _invalid, _servers
from test_soundness_states import _vllm_files

from verifier import layout
from verifier.model import Verdict

_FLIP = "llama-cpp-cuda-flip.tar.gz"


def _argv_ends_with(files: Files, *tail: str) -> Files:
    def given(experiment: Any) -> None:
        for server in _servers(experiment):
            server["argv"] = [*server["argv"], *tail]

    return _edited(files, layout.EXPERIMENT, given)


# --- a long option written with `_` ---------------------------------------------------


@pytest.mark.parametrize("option", [["--flash_attn", "on"], ["--flash_attn=on"]])
def test_a_toggle_overridden_by_an_option_written_with_underscores(
    tmp_path: Path, option: list[str]
) -> None:
    # the same on every server: no command line differs from another
    files = _argv_ends_with(_archive_files(_FLIP), *option)
    _invalid(files, tmp_path, "consistency", "sets what the condition's setting")


def test_a_declared_server_argument_given_again_with_underscores(tmp_path: Path) -> None:
    def declared(experiment: Any) -> None:
        for condition in experiment["conditions"]:
            value = condition["settings"].pop("LLAMA_ARG_FLASH_ATTN")
            condition["server_args"] = ["-fa", value]
            condition["label"] = f"-fa {value}"
            for server in condition["servers"]:
                server["environment"].pop("LLAMA_ARG_FLASH_ATTN", None)
                server["argv"] = [*server["argv"], "-fa", value, "--flash_attn", "on"]

    files = _edited(_archive_files(_FLIP), layout.EXPERIMENT, declared)
    _invalid(files, tmp_path, "consistency", "--flash_attn is given again")


def _vllm_declaring(*tail: str) -> Files:
    def declared(experiment: Any) -> None:
        condition = experiment["conditions"][0]
        condition["server_args"] = ["--max-num-batched-tokens", "16"]
        condition["label"] = "--max-num-batched-tokens 16"
        for server in condition["servers"]:
            server["argv"] = [*server["argv"], "--max-num-batched-tokens", "16", *tail]

    return _edited(_vllm_files(), layout.EXPERIMENT, declared)


def test_a_vllm_server_argument_given_again_with_underscores(tmp_path: Path) -> None:
    assert _verify(_vllm_declaring(), tmp_path).verdict is Verdict.CACHE_STATE_DEPENDENT
    files = _vllm_declaring("--max_num_batched_tokens", "8192")
    _invalid(files, tmp_path, "consistency", "--max_num_batched_tokens is given again")


def test_the_per_server_option_written_with_underscores_takes_the_flag_after_it(
    tmp_path: Path,
) -> None:
    def hide(experiment: Any) -> None:
        server = next(s for s in _servers(experiment) if s["cache_disabled"])
        argv = [a for a in server["argv"] if a != "--no-cache-prompt"]
        at = argv.index("--slot-save-path")
        argv[at : at + 2] = ["--slot_save_path", "--no-cache-prompt", "--metrics"]
        server["argv"] = argv

    files = _edited(_archive_files("llama-cpp-real.tar.gz"), layout.EXPERIMENT, hide)
    _invalid(files, tmp_path, "consistency", "--slot_save_path takes a value")


# --- environment names and short spellings -----------------------------------------------


@pytest.mark.parametrize(
    ("setting", "values", "option"),
    [
        ("LLAMA_ARG_UBATCH", ("1", "512"), ["-ub", "512"]),
        ("LLAMA_ARG_UBATCH", ("1", "512"), ["--ubatch-size", "512"]),
        ("LLAMA_ARG_BATCH", ("1", "2048"), ["--batch-size", "2048"]),
        ("LLAMA_ARG_BATCH", ("1", "2048"), ["-b", "2048"]),
        ("LLAMA_ARG_DEVICE", ("none", "CUDA0"), ["-dev", "CUDA0"]),
        ("LLAMA_ARG_MAIN_GPU", ("0", "1"), ["-mg", "1"]),
        ("LLAMA_ARG_NO_KV_OFFLOAD", ("0", "1"), ["-nkvo"]),
        ("LLAMA_ARG_OVERRIDE_TENSOR", ("a=CPU", "b=CPU"), ["-ot", "c=CPU"]),
        ("LLAMA_ARG_THREADS_BATCH", ("1", "2"), ["-tb", "4"]),
        ("LLAMA_ARG_CTX_SIZE", ("256", "512"), ["--ctx_size", "4096"]),
    ],
)
def test_a_setting_overridden_by_the_option_its_environment_name_sets(
    tmp_path: Path, setting: str, values: tuple[str, str], option: list[str]
) -> None:
    def labelled(experiment: Any) -> None:
        for condition, value in zip(experiment["conditions"], values, strict=True):
            condition["settings"] = {setting: value}
            condition["label"] = f"{setting}={value}"
            for server in condition["servers"]:
                server["environment"] = {setting: value}
                server["argv"] = [*server["argv"], *option]

    files = _edited(_archive_files(_FLIP), layout.EXPERIMENT, labelled)
    _invalid(files, tmp_path, "consistency", f"the condition's setting {setting} sets")


# --- a wrapper that takes a toggle out ---------------------------------------------------


@pytest.mark.parametrize(
    ("wrapper", "words"),
    [
        (["/usr/bin/env", "-u", "MLXCEL_SDPA_DETERMINISTIC"], "takes MLXCEL_SDPA_DETERMINISTIC"),
        (["env", "-uMLXCEL_SDPA_DETERMINISTIC"], "takes MLXCEL_SDPA_DETERMINISTIC out"),
        (["env", "--unset=MLXCEL_SDPA_DETERMINISTIC"], "takes MLXCEL_SDPA_DETERMINISTIC out"),
        (["env", "--unset", "MLXCEL_SDPA_DETERMINISTIC"], "takes MLXCEL_SDPA_DETERMINISTIC out"),
        (["env", "-S", "-u MLXCEL_SDPA_DETERMINISTIC"], "takes MLXCEL_SDPA_DETERMINISTIC out"),
        (["env", "-i"], "an emptied environment"),
        (["env", "--ignore-environment"], "an emptied environment"),
        (["env", "-", "PATH=/usr/bin"], "an emptied environment"),
        (["sh", "-c", 'unset MLXCEL_SDPA_DETERMINISTIC; exec "$0" "$@"'], "takes MLXCEL_SDPA"),
    ],
)
def test_a_toggle_taken_out_by_a_wrapper(tmp_path: Path, wrapper: list[str], words: str) -> None:
    def wrapped(experiment: Any) -> None:
        for server in _servers(experiment):
            server["argv"] = [*wrapper, *server["argv"]]

    files = _edited(dict(SEED_FILES), layout.EXPERIMENT, wrapped)
    _invalid(files, tmp_path, "consistency", words)


def test_a_wrapper_that_leaves_the_toggles_is_no_finding(tmp_path: Path) -> None:
    def wrapped(experiment: Any) -> None:
        for server in _servers(experiment):
            server["argv"] = ["env", "-u", "HOME", "--", *server["argv"]]

    result = _verify(_edited(dict(SEED_FILES), layout.EXPERIMENT, wrapped), tmp_path)
    assert result.verdict is Verdict.CACHE_STATE_DEPENDENT


# --- vLLM's positional model --------------------------------------------------------------


def _two_vllm_models(positional: bool) -> Files:
    files = _vllm_files()
    experiment = json.loads(files[layout.EXPERIMENT])
    second = json.loads(json.dumps(experiment["conditions"][0]))
    second["id"] = "b"
    experiment["conditions"].append(second)
    for condition, model in zip(experiment["conditions"], ("/m/a", "/m/b"), strict=True):
        condition["server_args"] = [model] if positional else ["--model", model]
        condition["label"] = " ".join(condition["server_args"])
        for server in condition["servers"]:
            argv = [a for a in server["argv"] if a != "/path/to/model"]
            if positional:
                server["argv"] = [*argv[:2], model, *argv[2:]]
            else:
                server["argv"] = [*argv, "--model", model]
    files[layout.EXPERIMENT] = _dump(experiment)
    return files


@pytest.mark.parametrize("positional", [True, False])
def test_two_vllm_conditions_that_serve_two_models(tmp_path: Path, positional: bool) -> None:
    _invalid(_two_vllm_models(positional), tmp_path, "consistency", "2 different models")


@pytest.mark.parametrize(
    ("argv", "models"),
    [
        (["vllm", "serve", "/m/x", "--port", "1"], ["/m/x"]),
        (["vllm", "serve", "--model", "/m/x", "--async-scheduling", "--host", "h"], ["/m/x"]),
        (["vllm", "serve", "--model", "/m/x", "-O3", "--port", "1"], ["/m/x"]),
        (["vllm", "serve", "--model", "/m/x", "--skip-tokenizer-init", "--port", "1"], ["/m/x"]),
    ],
)
def test_a_vllm_model_is_read_where_it_is_named(argv: list[str], models: list[str]) -> None:
    """Only right after `serve` is an argument surely the model: after an option it may be
    the option's value (`--async-scheduling` takes none; helper-86 found honest command
    lines refused when it was read as taking one)."""
    from verifier.profiles import PROFILES

    assert [value for _, value in PROFILES["vllm"].models_named(argv, {})] == models


# --- two conditions of one configuration --------------------------------------------------


def _later(text: str, hours: int = 1) -> str:
    return (datetime.fromisoformat(text) + timedelta(hours=hours)).isoformat()


def _run_twice(edit_warm: bool) -> Files:
    """The seed's first condition, and the same configuration run again an hour later as a
    second condition; with `edit_warm`, its warm requests gave the cold reply."""
    files = dict(SEED_FILES)
    experiment = json.loads(files[layout.EXPERIMENT])
    first = experiment["conditions"][0]
    dropped = [c["id"] for c in experiment["conditions"][1:]]
    again = json.loads(json.dumps(first))
    again["id"] = f"{first['id']}-again"
    for server in again["servers"]:
        server["started_at"] = _later(server["started_at"])
        server["stopped_at"] = _later(server["stopped_at"])
    experiment["conditions"] = [first, again]
    files[layout.EXPERIMENT] = _dump(experiment)
    prefix = f"{layout.RECORDS_DIR}/"
    for name in [n for n in files if n.startswith(prefix) and n.split("/")[1] in dropped]:
        del files[name]
    names = sorted(n for n in files if n.startswith(f"{prefix}{first['id']}/"))
    cold = json.loads(files[names[0]])
    for name in names:
        record = json.loads(files[name])
        record["condition"] = again["id"]
        record["started_at"] = _later(record["started_at"])
        record["response"]["id"] += "x"
        if edit_warm and record["claimed_arm"] == "warm":
            record["response"]["choices"] = cold["response"]["choices"]
            record["response"]["usage"]["completion_tokens"] = cold["usage"]["completion_tokens"]
            record["response"]["usage"]["total_tokens"] = cold["usage"]["total_tokens"]
            record["usage"] = record["response"]["usage"]
            record["output_hash"] = cold["output_hash"]
        files[name.replace(f"/{first['id']}/", f"/{again['id']}/")] = _dump(record)
    return files


@pytest.mark.parametrize("disagree", [True, False])
def test_two_conditions_of_one_configuration(tmp_path: Path, disagree: bool) -> None:
    _invalid(_run_twice(disagree), tmp_path, "consistency", "declare the same configuration")


# --- mlxcel's snapshot-cache counter appearing across a cold request ----------------------


@pytest.mark.parametrize(
    ("surface", "name", "before"),
    [
        ("metrics", "mlxcel_prompt_cache_snapshot_hits_total", None),
        ("cache_stats", "snapshot_hits", None),
        ("metrics", "mlxcel_prompt_cache_snapshot_hits_total", 0),
    ],
)
def test_a_snapshot_hit_counter_that_appears_across_a_cold_request(
    tmp_path: Path, surface: str, name: str, before: int | None
) -> None:
    def hit(record: Any) -> None:
        record["telemetry"]["after"][surface][name] = 1
        if before is not None:
            record["telemetry"]["before"][surface][name] = before

    files = _edited(dict(SEED_FILES), f"{layout.RECORDS_DIR}/sdpa-det-0/004.json", hit)
    result = _verify(files, tmp_path)
    assert result.verdict is Verdict.INCONCLUSIVE
    assert result.classification is not None
    (condition,) = [c for c in result.classification.conditions if c.condition.id == "sdpa-det-0"]
    assert any("another cache supplied state" in reason for reason in condition.reasons)


# --- what helper-86's review of these rules found -----------------------------------------


@pytest.mark.parametrize(
    ("wrapper", "words"),
    [
        (["sudo", "-E"], "starts the server through sudo"),
        (["setpriv", "--reset-env"], "starts the server through setpriv"),
        (["nice", "-n", "5", "sudo"], "starts the server through sudo"),
        (["nice", "-n5", "sudo"], "starts the server through sudo"),
        (["stdbuf", "-oL", "sudo"], "starts the server through sudo"),
        (["conda", "run", "-n", "mlx"], "starts the server through conda"),
        (["bash", "-c", 'exec -c "$0" "$@"'], "starts the server through bash"),
        (
            ["/bin/sh", "-c", 'cd /srv;env -u MLXCEL_SDPA_DETERMINISTIC "$0" "$@"'],
            "through /bin/sh",
        ),
        (["env", "--uns=MLXCEL_SDPA_DETERMINISTIC"], "takes MLXCEL_SDPA_DETERMINISTIC out"),
        (["env", "--ignore-env"], "an emptied environment"),
    ],
)
def test_a_launcher_or_a_shortened_env_option_before_the_server(
    tmp_path: Path, wrapper: list[str], words: str
) -> None:
    """A launcher may run the server with another environment than the bundle records
    (sudo's env_reset, `setpriv --reset-env`, a shell's script); GNU env takes its long
    options shortened."""

    def wrapped(experiment: Any) -> None:
        for server in _servers(experiment):
            server["argv"] = [*wrapper, *server["argv"]]

    files = _edited(dict(SEED_FILES), layout.EXPERIMENT, wrapped)
    _invalid(files, tmp_path, "consistency", words)


def test_an_env_that_only_sets_other_variables_is_no_finding(tmp_path: Path) -> None:
    def wrapped(experiment: Any) -> None:
        for server in _servers(experiment):
            server["argv"] = ["env", "CUDA_VISIBLE_DEVICES=0", *server["argv"]]

    result = _verify(_edited(dict(SEED_FILES), layout.EXPERIMENT, wrapped), tmp_path)
    assert result.verdict is Verdict.CACHE_STATE_DEPENDENT


@pytest.mark.parametrize("spelled", ["false", "off", " 0", "OFF"])
def test_two_conditions_of_one_configuration_spelled_apart(tmp_path: Path, spelled: str) -> None:
    """`0`, `false` and `off` are one value of a switch (llama.cpp's is_falsey)."""
    files = _run_twice(True)
    experiment = json.loads(files[layout.EXPERIMENT])
    again = experiment["conditions"][1]
    for name in again["settings"]:
        again["settings"][name] = spelled
        for server in again["servers"]:
            server["environment"][name] = spelled
    files[layout.EXPERIMENT] = _dump(experiment)
    _invalid(files, tmp_path, "consistency", "declare the same configuration")


def test_server_arguments_read_as_the_server_reads_them() -> None:
    from verifier.checks.consistency import _option_pairs
    from verifier.profiles import PROFILES

    llama = PROFILES["llama.cpp"]
    same = [
        ("-fa", "on", "-b", "512"),
        ("-b", "512", "--flash-attn", "1"),
        ("--flash_attn=true", "--batch-size", "512"),
    ]
    assert len({_option_pairs(args, llama) for args in same}) == 1
    assert _option_pairs(("-fa", "on"), llama) != _option_pairs(("-fa", "off"), llama)
    assert _option_pairs(("-b", "512"), llama) != _option_pairs(("-b", "256"), llama)
    # an option that adds one more each time it is given (helper-87): not the last alone
    assert _option_pairs(("-ot", "a", "-ot", "b"), llama) != _option_pairs(("-ot", "b"), llama)
    assert _option_pairs(("--lora", "a", "--lora", "b"), llama) != _option_pairs(
        ("--lora", "b"), llama
    )
