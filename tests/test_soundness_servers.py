"""Lies of a fresh-eyed audit (helper-47, 2026-12-05): what a server's own command line or
environment sets for every request it serves, which the request body cannot undo, and one
experiment that serves two models. Each is built from an honest llama.cpp sample with the
integrity redone as a forger would; the verdict it argued for must not stand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from make_samples import _resum
from test_soundness import _archive_files, write
from test_soundness_signals import Files, _edited, _invalid

from verifier import layout
from verifier.model import Verdict
from verifier.profiles import PROFILES
from verifier.profiles.base import ServerLimits
from verifier.verify import VerificationResult, verify_path

LLAMA = PROFILES["llama.cpp"]


def _servers_with(sample: str, argv: list[str], environment: dict[str, str]) -> Files:
    def edit(experiment: Any) -> None:
        for condition in experiment["conditions"]:
            for server in condition["servers"]:
                server["argv"] += argv
                server["environment"].update(environment)

    return _edited(_archive_files(sample), layout.EXPERIMENT, edit)


def _verified(files: Files, tmp_path: Path) -> VerificationResult:
    return verify_path(write(_resum(files), tmp_path / "b"))


def _completion_tokens(files: Files) -> set[int]:
    return {
        json.loads(data)["response"]["usage"]["completion_tokens"]
        for name, data in files.items()
        if name.startswith(layout.RECORDS_DIR + "/")
    }


# --- a cap the server sets: llama-server lowers each request's n_predict to its own -n ----


@pytest.mark.parametrize(
    ("argv", "environment"),
    [
        (["-n", "{n}"], {}),
        (["--n-predict={n}"], {}),
        (["--predict", "{n}", "-n", "500"], {}),  # two given: the least may be the one used
        ([], {"LLAMA_ARG_N_PREDICT": "{n}"}),
        (["-n", "{n}x"], {}),  # not read as a count: every reply may have met it
    ],
)
def test_a_cap_on_the_servers_command_line_caps_every_reply(
    tmp_path: Path, argv: list[str], environment: dict[str, str]
) -> None:
    """Every reply of the stable sample has 22 tokens and says it stopped; with `-n 22`
    on the servers, each may have been cut there, so their agreement proves nothing past
    it. Before: cache-state-independent, no warning."""
    sample = "llama-cpp-cuda-stable.tar.gz"
    (n,) = _completion_tokens(_archive_files(sample))
    files = _servers_with(
        sample,
        [a.format(n=n) for a in argv],
        {k: v.format(n=n) for k, v in environment.items()},
    )
    result = _verified(files, tmp_path)
    assert result.verdict is Verdict.INCONCLUSIVE, result.classification
    assert result.classification is not None
    reasons = " ".join(r for c in result.classification.conditions for r in c.reasons)
    assert "hit the token cap" in reasons
    assert any("may be truncated" in f.message for f in result.findings)


def test_a_cap_above_the_replies_or_a_context_they_do_not_fill_changes_nothing(
    tmp_path: Path,
) -> None:
    sample = "llama-cpp-cuda-stable.tar.gz"
    files = _servers_with(sample, ["-n", "500", "-c", "4096", "-np", "1"], {})
    assert _verified(files, tmp_path).verdict is Verdict.CACHE_STATE_INDEPENDENT


def test_a_context_the_prompt_and_reply_fill_caps_the_reply(tmp_path: Path) -> None:
    """A slot's context (`-c` over `-np` slots) full at the reply's last token: llama-server
    stops there, whatever finish_reason the bundle writes."""
    sample = "llama-cpp-cuda-stable.tar.gz"
    record = next(
        json.loads(data)
        for name, data in _archive_files(sample).items()
        if name.startswith(layout.RECORDS_DIR + "/")
    )
    usage = record["response"]["usage"]
    context = usage["prompt_tokens"] + usage["completion_tokens"]
    files = _servers_with(sample, ["-c", str(2 * context), "-np", "2"], {})
    assert _verified(files, tmp_path).verdict is Verdict.INCONCLUSIVE


# --- sampling the server sets: temperature 0 in the body is then not greedy ---------------


@pytest.mark.parametrize(
    "argv",
    [
        ["--samplers", "top_p;min_p"],
        ["--sampling-seq", "pm"],
        ["--dynatemp-range", "2.0"],
        ["--xtc-probability=1.0"],
        ["--mirostat", "2"],
        ["--mirostat", "two"],
    ],
)
def test_sampling_on_the_servers_command_line_is_not_greedy(
    tmp_path: Path, argv: list[str]
) -> None:
    """Before: the flip sample stayed cache-state-dependent with each of these."""
    result = _verified(_servers_with("llama-cpp-cuda-flip.tar.gz", argv, {}), tmp_path)
    assert result.verdict is Verdict.INCONCLUSIVE
    assert result.classification is not None
    assert all(
        any(
            "do not ask for greedy replies" in r and "server is started with" in r
            for r in c.reasons
        )
        for c in result.classification.conditions
    )


def test_neutral_sampling_settings_on_the_command_line_change_nothing(tmp_path: Path) -> None:
    argv = ["--mirostat", "0", "--dynatemp-range", "0.0", "--xtc-probability", "0"]
    result = _verified(_servers_with("llama-cpp-cuda-flip.tar.gz", argv, {}), tmp_path)
    assert result.verdict is Verdict.CACHE_STATE_DEPENDENT


def test_the_limits_llama_server_reads() -> None:
    assert LLAMA.limits(["-m", "x.gguf", "-np", "1"], {}) == ServerLimits()
    assert LLAMA.limits(["-n", "-1", "-c", "0"], {}) == ServerLimits()  # none: the defaults
    assert LLAMA.limits(["-n", "7"], {"LLAMA_ARG_N_PREDICT": "9"}).reply_cap == 7
    assert LLAMA.limits(["-c", "4096"], {"LLAMA_ARG_N_PARALLEL": "4"}).context == 1024
    assert LLAMA.limits(["--ctx-size=4096", "--parallel", "-1"], {}).unread is not None
    limits = ServerLimits(reply_cap=10, context=100)
    assert not limits.capped(prompt=50, used=9)
    assert limits.capped(prompt=50, used=10)  # its whole budget
    assert limits.capped(prompt=91, used=9)  # the context full
    assert limits.capped(prompt=None, used=9)  # unknown counts: it may have been cut


# --- one experiment, two models ------------------------------------------------------------


def test_conditions_that_serve_different_models_are_two_experiments(tmp_path: Path) -> None:
    """Each condition declares its own `-m` as a server argument, so the command lines
    compare equal without them: the condition that flips served another model than the
    one the experiment names. Before: cache-state-dependent, with warnings only."""
    files = _archive_files("llama-cpp-cuda-flip.tar.gz")
    manifest = json.loads(files[layout.MODEL_MANIFEST])
    manifest["files"].append({"path": "other.gguf", "size": 560384, "sha256": "ab" * 32})
    files[layout.MODEL_MANIFEST] = json.dumps(manifest).encode()

    def two_models(experiment: Any) -> None:
        for condition in experiment["conditions"]:
            other = condition["id"] == "fa-on"
            model = "/path/to/model/" + ("other.gguf" if other else "tiny.gguf")
            condition["server_args"] = ["-m", model]
            for server in condition["servers"]:
                argv = server["argv"]
                at = argv.index("-m")
                argv[at : at + 2] = []
                argv += ["-m", model]

    files = _edited(files, layout.EXPERIMENT, two_models)
    _invalid(files, tmp_path, "consistency", "the servers load 2 different models")


# --- a format newer than the tool's ----------------------------------------------------------


def test_a_newer_format_is_said(tmp_path: Path) -> None:
    """Every document relabelled 1.7 verified as 1.1 without a word (helper-47)."""
    files = _archive_files("llama-cpp-cuda-flip.tar.gz")
    for name in [n for n in files if n.endswith(".json") and n != layout.MODEL_MANIFEST]:

        def newer(document: Any) -> None:
            if "schema_version" in document:
                document["schema_version"] = "1.7"

        files = _edited(files, name, newer)
    result = _verified(files, tmp_path)
    said = [f for f in result.findings if "newer than this tool's 1.1" in f.message]
    assert said and said[0].severity == "warning" and said[0].pointer == "/schema_version"


# --- the re-audit of the above (helper-48) ----------------------------------------------------


def _condition_servers_with(sample: str, condition_id: str, argv: list[str]) -> Files:
    def edit(experiment: Any) -> None:
        for condition in experiment["conditions"]:
            if condition["id"] == condition_id:
                condition["server_args"] = list(argv)
                for server in condition["servers"]:
                    server["argv"] += argv

    return _edited(_archive_files(sample), layout.EXPERIMENT, edit)


def test_sampling_set_on_one_conditions_servers_is_that_conditions(tmp_path: Path) -> None:
    """fa-off's servers sample anyway; fa-on's do not, and its split stands (the experiment
    is undecided with one condition undecided)."""
    files = _condition_servers_with("llama-cpp-cuda-flip.tar.gz", "fa-off", ["--mirostat", "2"])
    result = _verified(files, tmp_path)
    assert result.classification is not None
    verdicts = {c.condition.id: c.verdict for c in result.classification.conditions}
    assert verdicts == {"fa-on": Verdict.CACHE_STATE_DEPENDENT, "fa-off": Verdict.INCONCLUSIVE}
    (on,) = [c for c in result.classification.conditions if c.condition.id == "fa-on"]
    assert not any("greedy" in r for r in on.reasons)


def test_the_cap_a_condition_names_is_its_own(tmp_path: Path) -> None:
    sample = "llama-cpp-cuda-stable.tar.gz"
    (n,) = _completion_tokens(_archive_files(sample))
    files = _condition_servers_with(sample, "fa-on", ["-n", str(n)])
    result = _verified(files, tmp_path)
    assert result.classification is not None
    reasons = {c.condition.id: " ".join(c.reasons) for c in result.classification.conditions}
    assert f"agree in the first {n} tokens" in reasons["fa-on"]
    assert "token cap" not in reasons["fa-off"]
    # a context, not a count of reply tokens: no number is said
    files = _servers_with(sample, ["-c", "1"], {})
    result = _verified(files, tmp_path)
    assert result.classification is not None
    said = " ".join(r for c in result.classification.conditions for r in c.reasons)
    assert "agree in the tokens before it" in said and "first 128" not in said


def test_servers_that_load_files_of_one_name_from_two_folders_serve_two_models(
    tmp_path: Path,
) -> None:
    files = _archive_files("llama-cpp-cuda-flip.tar.gz")

    def two_folders(experiment: Any) -> None:
        for condition in experiment["conditions"]:
            folder = "/path/to/model-q8/" if condition["id"] == "fa-on" else "/path/to/model/"
            condition["server_args"] = ["-m", folder + "tiny.gguf"]
            for server in condition["servers"]:
                argv = server["argv"]
                at = argv.index("-m")
                argv[at : at + 2] = []
                argv += ["-m", folder + "tiny.gguf"]

    files = _edited(files, layout.EXPERIMENT, two_folders)
    _invalid(files, tmp_path, "consistency", "the servers load 2 different models")


@pytest.mark.parametrize("where", ["server", "body"])
def test_a_reply_longer_than_its_cap_is_a_contradiction(tmp_path: Path, where: str) -> None:
    """A server stops at the least cap: a reply of 52 tokens under a cap of 5 is not what
    it ran (the counts or the cap are)."""
    sample = "llama-cpp-cuda-flip.tar.gz"
    if where == "server":
        files = _condition_servers_with(sample, "fa-on", ["-n", "5"])
    else:

        def capped(record: Any) -> None:
            record["request_body"]["max_tokens"] = 5

        files = _archive_files(sample)
        for name in [n for n in files if n.startswith(layout.RECORDS_DIR + "/")]:
            files = _edited(files, name, capped)
        files = _edited(files, layout.EXPERIMENT, lambda e: e["request_body"].update(max_tokens=5))
    _invalid(files, tmp_path, "telemetry", "the reply counts more tokens than it was allowed")


# --- vLLM and SGLang: what their command lines set for every request (helper-49) ------------


def test_the_limits_vllm_and_sglang_read() -> None:
    vllm, sglang = PROFILES["vllm"], PROFILES["sglang"]
    override = ["--override-generation-config", '{"max_new_tokens": 22, "temperature": 0.5}']
    assert vllm.limits(override, {}).reply_cap == 22
    assert vllm.limits(["--max_model_len=148"], {}).context == 148
    assert vllm.limits(["--max-model-len", "32k"], {}).context == 32_000  # as vLLM reads it
    assert vllm.limits(["--max-model-len", "32K"], {}).context == 32_768
    dotted = ["--override-generation-config.max_new_tokens", "22"]  # vLLM's dotted JSON form
    assert vllm.limits(dotted, {}).reply_cap == 22
    assert vllm.limits(["--generation-config", "auto"], {}) == ServerLimits()  # the default
    for argv in (
        ["--generation-config", "/path/to/config"],  # a folder the bundle does not hold
        ["--config", "serve.yaml"],
        ["--override-generation-config", "{max_new_tokens: 22}"],
        ["--override-generation-config", '{"max_new_tokens": "22"}'],
        ["--max-model-len", "32 k"],
        ["--override-generation-config", "[" * 100_000],  # too deep to read: no crash
    ):
        assert vllm.limits(argv, {}).unread is not None, argv
    assert sglang.limits(["--context-length", "148"], {}).context == 148
    preferred = ["--preferred-sampling-params", '{"max_new_tokens": 5}']
    assert sglang.limits(preferred, {}).reply_cap == 5


def test_a_vllm_reply_longer_than_its_servers_cap_is_a_contradiction(tmp_path: Path) -> None:
    from test_soundness_states import _vllm_files

    def capped(experiment: Any) -> None:
        for condition in experiment["conditions"]:
            for server in condition["servers"]:
                server["argv"] += ["--override-generation-config", '{"max_new_tokens": 5}']

    files = _edited(_vllm_files(), layout.EXPERIMENT, capped)
    _invalid(files, tmp_path, "telemetry", "from a server started with a cap of 5")


def test_an_attached_capture_says_what_the_server_set_is_not_known(tmp_path: Path) -> None:
    """No command line was recorded, so a server's own `-n` or sampling could not be read:
    the verdict says so (helper-49)."""
    from test_report_layout import attached_seed

    result = verify_path(attached_seed(tmp_path))
    assert result.classification is not None
    assert any(
        "what the server set for every request (a reply cap, a context, its sampling) is not "
        "known" in reason
        for reason in result.classification.reasons
    ), result.classification.reasons


# --- mlxcel: a cache beside the one the rules count (helper-49) ----------------------------


@pytest.mark.parametrize("surface", ["metrics", "cache_stats"])
def test_a_snapshot_cache_hit_on_a_request_that_claims_no_cache_is_not_proven(
    tmp_path: Path, surface: str
) -> None:
    """mlxcel's snapshot cache of model-owned state counts its own hits (SERVERS.md): every
    cold, opt-out and cache-off request of the seed made to show one stayed proven."""
    from test_soundness import SEED_FILES

    files: Files = dict(SEED_FILES)
    files.pop("SHA256SUMS.sig", None)
    state: dict[tuple[str, int], list[float]] = {}
    for name in sorted(n for n in files if n.startswith(layout.RECORDS_DIR + "/")):
        record = json.loads(files[name])
        running = state.setdefault((record["condition"], record["server_instance"]), [0, 0])
        telemetry = record["telemetry"]
        for side in ("before", "after"):
            if side == "after" and record["claimed_arm"] != "warm":
                running[0] += 1
                running[1] += 32
            if surface == "metrics":
                metrics = telemetry[side]["metrics"]
                metrics["mlxcel_prompt_cache_snapshot_hits_total"] = running[0]
                metrics["mlxcel_prompt_cache_snapshot_tokens_reused_total"] = running[1]
            else:  # the stats' own `snapshot_*` fields (helper-51)
                telemetry[side]["cache_stats"]["snapshot_hits"] = running[0]
        files = _edited(files, name, lambda document, record=record: document.update(record))
    result = _verified(files, tmp_path)
    assert result.verdict is Verdict.INCONCLUSIVE
    unproven = [f for f in result.findings if "another cache supplied state" in f.message]
    assert len(unproven) == 18  # 9 requests a condition claim no cache: each unproven
