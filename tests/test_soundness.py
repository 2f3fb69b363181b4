"""No bundle argues its way into a verdict: the lies of issue 7, in every report format,
and properties over every record and every counter a proof uses."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from make_samples import _dump, _resum, read_tree
from typer.testing import CliRunner

from verifier import checks, layout
from verifier.bundle.reader import Limits
from verifier.checks.context import VerifyOptions
from verifier.cli import app
from verifier.model import Verdict
from verifier.profiles.mlxcel import RULES as MLXCEL
from verifier.verify import verify_path

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_bundles"
SEED = SAMPLES / "seed-mlxcel"
NEGATIVE = SAMPLES / "negative"
EXPECTED: dict[str, dict[str, Any]] = json.loads((NEGATIVE / "EXPECTED.json").read_text())
SEED_FILES = read_tree(SEED)
RECORDS = sorted(p for p in SEED_FILES if p.startswith(layout.RECORDS_DIR + "/"))


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "160"})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout


def write(files: dict[str, bytes], root: Path) -> Path:
    if root.exists():
        shutil.rmtree(root)
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


def clean_split(root: Path) -> bool:
    """What a forger wants: verified, no warning, and a cache-state-dependent verdict."""
    result = verify_path(root, VerifyOptions())
    noisy = [f for f in result.findings if f.severity != "info"]
    return result.verdict is Verdict.CACHE_STATE_DEPENDENT and not noisy


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_negative_sample_in_every_format(name: str) -> None:
    expected = EXPECTED[name]
    path = str(NEGATIVE / name)
    signed = (NEGATIVE / name / layout.SIGNATURE).is_file()
    key = ["--key", str(SAMPLES / "keys" / "evidence-signing-key.pub.pem")] if signed else []
    code, text = run("verify", path, *key, "--format", "text")
    assert code == expected["exit_code"]
    assert f"verdict: {expected['verdict']}" in text
    code, out = run("verify", path, *key, "--format", "json")
    bundle = json.loads(out)["bundles"][0]
    assert (code, bundle["verdict"]) == (expected["exit_code"], expected["verdict"])
    if expected["verdict"] == "invalid" and expected["check"] is not None:
        located = [
            f
            for f in bundle["findings"]
            if f["check"] == expected["check"] and f["severity"] == "error"
        ]
        assert located and all(f["file"] for f in located), bundle["findings"]
    if expected["verdict"] == "inconclusive":
        reasons = [r for c in bundle["classification"]["conditions"] for r in c["reasons"]]
        assert reasons, "an inconclusive verdict says why"
    code, markdown = run("verify", path, *key, "--format", "markdown")
    assert code == expected["exit_code"] and expected["verdict"] in markdown


@pytest.mark.parametrize("bundle", ["legacy/seed-mlxcel-1.0", "legacy/llama-cpp-real-1.0.tar.gz"])
def test_bundles_of_the_first_release_keep_their_verdict_by_todays_rules(bundle: str) -> None:
    result = verify_path(SAMPLES / bundle, VerifyOptions())
    assert result.verified and result.verdict is Verdict.CACHE_STATE_DEPENDENT
    assert result.classification is not None
    assert any("schema 1.0" in r for r in result.classification.reasons)


def test_a_reviewer_profile_file_judges_an_unknown_version(tmp_path: Path) -> None:
    unknown = NEGATIVE / "unknown-profile-version"
    assert verify_path(unknown, VerifyOptions()).verdict is Verdict.INCONCLUSIVE
    rules = {**MLXCEL.to_json(), "version": "99"}
    profile = tmp_path / "mlxcel-99.json"
    profile.write_text(json.dumps(rules))
    code, out = run("verify", str(unknown), "--profile", str(profile), "--format", "json")
    bundle = json.loads(out)["bundles"][0]
    assert (code, bundle["verdict"]) == (0, "cache-state-dependent")
    assert any("reviewer's profile file" in r for r in bundle["classification"]["reasons"])
    profile.write_text(json.dumps({**rules, "signals": {"hits": ["not a ref"]}}))
    code, _ = run("verify", str(unknown), "--profile", str(profile))
    assert code == 2


def test_a_check_that_breaks_is_an_error_and_the_other_bundles_still_report(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(ctx: object) -> list[object]:
        raise RuntimeError("boom")

    monkeypatch.setattr(checks, "CHECKS", (*checks.CHECKS, ("broken", broken)))
    code, out = run("verify", str(SEED), str(SAMPLES / "llama-cpp-real.tar.gz"), "-f", "json")
    bundles = json.loads(out)["bundles"]
    assert code == 1 and [b["verdict"] for b in bundles] == ["invalid", "invalid"]
    assert all(any("internal error" in f["message"] for f in b["findings"]) for b in bundles)


def test_the_seed_sample_is_a_clean_split() -> None:
    assert clean_split(SEED)  # the baseline the properties below perturb


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    op=st.sampled_from(["delete", "duplicate", "move"]),
    source=st.sampled_from(RECORDS),
    target=st.sampled_from(RECORDS),
)
def test_deleting_duplicating_or_moving_any_record_is_caught(
    tmp_path: Path, op: str, source: str, target: str
) -> None:
    files = dict(SEED_FILES)
    if op == "delete":
        del files[source]
    else:
        document = json.loads(files[source])
        condition, sequence = target.split("/")[1], int(target.split("/")[2][:3])
        if op == "duplicate":  # a copy of `source` also stands at the next free sequence
            sequence = 15
        elif target == source:
            sequence = 15  # moved out of its place
        else:  # moved over `target`, which is gone
            del files[source]
        document.update(condition=condition, sequence=sequence)
        files[layout.record_path(condition, sequence)] = _dump(document)
    assert not clean_split(write(_resum(files), tmp_path / "b"))


def _proof_values(document: dict[str, Any]) -> list[tuple[str, ...]]:
    """Every (side, source, key) of a record that a proof reads."""
    found: list[tuple[str, ...]] = []
    for side in ("before", "after"):
        snapshot = document["telemetry"][side]
        for ref in MLXCEL.signals.store_access:
            source, _, name = ref.partition(":")
            table = snapshot["metrics" if source == "metric" else "cache_stats"] or {}
            found += [(side, source, key) for key in table if key.split("{")[0] == name]
    return found


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data(), name=st.sampled_from(RECORDS), bump=st.integers(1, 5000))
def test_changing_any_counter_or_cached_tokens_a_proof_uses_is_caught(
    tmp_path: Path, data: st.DataObject, name: str, bump: int
) -> None:
    document = json.loads(SEED_FILES[name])
    choices = [*_proof_values(document), ("cached_tokens",)]
    choice = data.draw(st.sampled_from(choices))
    if choice == ("cached_tokens",):
        usage = document["response"]["usage"]
        details = usage.setdefault("prompt_tokens_details", {})
        old = details.get("cached_tokens", 0)
        details["cached_tokens"] = max(0, old + data.draw(st.sampled_from([-bump, bump])))
        if details["cached_tokens"] == old:
            details["cached_tokens"] = old + bump
        document["usage"] = usage
    else:
        side, source, key = choice
        table = document["telemetry"][side]["metrics" if source == "metric" else "cache_stats"]
        old = table[key]
        table[key] = max(0, old + data.draw(st.sampled_from([-bump, bump])))
        if table[key] == old:
            table[key] = old + bump
    files = {**SEED_FILES, name: _dump(document)}
    assert not clean_split(write(_resum(files), tmp_path / "b"))


def _archive_files(name: str) -> dict[str, bytes]:
    from verifier.bundle.reader import read_bundle

    return dict(read_bundle(SAMPLES / name).files)


def test_a_conditions_flags_repeated_cannot_hide_them_in_another(tmp_path: Path) -> None:
    files = _archive_files("llama-cpp-cuda-flip.tar.gz")
    experiment = json.loads(files[layout.EXPERIMENT])
    on, off = experiment["conditions"]
    on["server_args"] = ["-ub", "8"]
    for server in on["servers"]:
        server["argv"] += ["-ub", "8", "-ub", "8"]
    for server in off["servers"]:
        server["argv"] += ["-ub", "8"]  # undeclared: the conditions differ by nothing declared
    files[layout.EXPERIMENT] = _dump(experiment)
    result = verify_path(write(_resum(files), tmp_path / "b"), VerifyOptions())
    assert not result.verified
    assert any(f.check == "consistency" and "command line" in f.message for f in result.findings)


@pytest.mark.parametrize("bundle", ["seed", "llama-cpp-real.tar.gz"])
@pytest.mark.parametrize(("arm", "model"), [("warm", "another-model-Q4"), ("cold", None)])
def test_replies_of_another_model_are_caught(
    tmp_path: Path, bundle: str, arm: str, model: str | None
) -> None:
    files = dict(SEED_FILES) if bundle == "seed" else _archive_files(bundle)
    records = sorted(name for name in files if name.startswith(layout.RECORDS_DIR + "/"))
    spliced = [name for name in records if json.loads(files[name])["claimed_arm"] == arm]
    for name in spliced:  # the replies of one arm spliced in from a run of another model
        document = json.loads(files[name])
        assert isinstance(document["response"]["model"], str)
        if model is None:
            del document["response"]["model"]
        else:
            document["response"]["model"] = model
        files[name] = _dump(document)
    assert len(spliced) < len(records) / 2
    result = verify_path(write(_resum(files), tmp_path / "b"), VerifyOptions())
    assert not result.verified
    (finding,) = [f for f in result.findings if f.check == "consistency"]
    assert finding.file == spliced[0] and finding.pointer == "/response/model"
    assert finding.actual == (model or "none")
    assert finding.message.startswith(f"{len(spliced)} answer(s) name ")


def test_records_without_time_zones_cannot_dodge_the_order_check(tmp_path: Path) -> None:
    files = dict(SEED_FILES)
    for name in RECORDS:
        document = json.loads(files[name])
        document["started_at"] = document["started_at"].rstrip("Z")
        files[name] = _dump(document)
    result = verify_path(write(_resum(files), tmp_path / "b"), VerifyOptions())
    assert not result.verified
    assert any("time zone" in f.message for f in result.findings)


def _internal_errors(result: Any) -> list[str]:
    return [f.message for f in result.findings if "internal error" in f.message]


def _forge_token(entry: dict[str, Any]) -> None:
    entry["token"] = entry["top_logprobs"][0]["token"] = "ZZZ"  # content left as it was


def _unhashable_bytes(entry: dict[str, Any]) -> None:
    entry["top_logprobs"][1]["bytes"] = [[]]  # not byte values (was a TypeError in classify)


@pytest.mark.parametrize(
    ("name", "index", "forge", "note"),
    [
        ("records/default/016.json", 3, _forge_token, "text is not its bytes"),
        ("records/default/015.json", 0, _unhashable_bytes, "not a list of byte values"),
    ],
)
def test_a_forged_token_list_gives_no_reading(
    tmp_path: Path, name: str, index: int, forge: Any, note: str
) -> None:
    files = _archive_files("llama-cpp-real.tar.gz")
    document = json.loads(files[name])
    forge(document["response"]["choices"][0]["logprobs"]["content"][index])
    files[name] = _dump(document)
    result = verify_path(write(_resum(files), tmp_path / "b"), VerifyOptions())
    assert _internal_errors(result) == [] and result.verified
    assert result.classification is not None
    (condition,) = result.classification.conditions
    assert condition.diagnosis is not None and condition.diagnosis.localization is None
    assert note in condition.diagnosis.note


def test_a_toggle_one_condition_declares_is_not_run_undeclared_in_another(
    tmp_path: Path,
) -> None:
    experiment = json.loads(SEED_FILES[layout.EXPERIMENT])
    first, second = experiment["conditions"]
    first["settings"]["MLXCEL_PREFILL_CHUNK"] = "1"
    first["label"] += ",MLXCEL_PREFILL_CHUNK=1"
    for server in first["servers"] + second["servers"]:  # the second ran it too, undeclared
        server["environment"]["MLXCEL_PREFILL_CHUNK"] = "1"
    files = {**SEED_FILES, layout.EXPERIMENT: _dump(experiment)}
    result = verify_path(write(_resum(files), tmp_path / "b"), VerifyOptions())
    assert not result.verified
    assert any("setting of another condition" in f.message for f in result.findings)


@pytest.mark.parametrize(
    ("name", "change"),
    [
        ("records/sdpa-det-0/002.json", {"elapsed_s": 1e308}),
        ("records/sdpa-det-1/014.json", {"elapsed_s": 3e11}),
        ("records/sdpa-det-1/014.json", {"started_at": "9999-12-31T23:59:59+00:00"}),
        ("records/sdpa-det-0/001.json", {"started_at": "0001-01-01T00:00:00+05:00"}),
    ],
)
def test_times_at_the_ends_of_the_calendar_are_findings_not_crashes(
    tmp_path: Path, name: str, change: dict[str, Any]
) -> None:
    files = dict(SEED_FILES)
    document = json.loads(files[name])
    document.update(change)
    files[name] = _dump(document)
    result = verify_path(write(_resum(files), tmp_path / "b"), VerifyOptions())
    assert _internal_errors(result) == []


def test_a_protocol_declared_to_plan_millions_of_requests_is_refused_at_once(
    tmp_path: Path,
) -> None:
    files = dict(SEED_FILES)
    experiment = json.loads(files[layout.EXPERIMENT])
    experiment["protocol"].update(cycles=1000, warm_per_cycle=1000)
    files[layout.EXPERIMENT] = _dump(experiment)
    result = verify_path(write(_resum(files), tmp_path / "b"), VerifyOptions())
    assert not result.verified
    errors = [f for f in result.findings if f.check == "completeness" and f.is_error]
    # Not built (a million planned requests, some 360 MiB): one finding says why.
    assert errors[0].message.startswith(
        "the declared protocol plans at least 2,002,000 request records, more than a bundle "
        "may hold (10,000 files; --max-members)"
    )
    assert errors[0].pointer == "/protocol"
    assert result.classification is None  # (it cannot be complete: nothing is classified)
    # Raise the member limit and it is built, and every record it plans is missing.
    limits = Limits(max_members=3_000_000)
    result = verify_path(write(_resum(files), tmp_path / "c"), VerifyOptions(limits=limits))
    errors = [f for f in result.findings if f.check == "completeness" and f.is_error]
    assert len(errors) == checks.MAX_ERRORS + 1
    assert errors[-1].message.startswith(f"more than {checks.MAX_ERRORS} errors in this check")


@pytest.mark.parametrize("change", ["prompt_tokens", "cached_tokens"])
def test_a_reply_that_differs_where_the_prompt_or_cache_state_did_is_not_nondeterminism(
    tmp_path: Path, change: str
) -> None:
    from verifier.canonical import output_hash

    files = dict(SEED_FILES)
    name = "records/sdpa-det-0/003.json"  # the second warm request of the first cycle
    document = json.loads(files[name])
    for usage in (document["response"]["usage"], document["usage"]):
        if change == "prompt_tokens":
            usage["prompt_tokens"] += 1
            usage["total_tokens"] += 1
        else:  # it reused more of the prompt than the other warm requests
            usage["prompt_tokens_details"]["cached_tokens"] = 40
    document["response"]["choices"][0]["message"]["content"] += " And then the lamp went out."
    document["output_hash"] = output_hash(document["response"])
    files[name] = _dump(document)
    result = verify_path(write(_resum(files), tmp_path / "b"), VerifyOptions())
    assert result.classification is not None
    first = result.classification.conditions[0]
    assert first.verdict is Verdict.INCONCLUSIVE, first.reasons
    assert result.verdict is Verdict.INCONCLUSIVE


@pytest.mark.parametrize(
    ("cap", "value"),
    [("n_predict", 22), ("max_completion_tokens", 22), ("max_tokens", 22)],
)
def test_a_cap_by_any_name_counts_whichever_the_server_reads(
    tmp_path: Path, cap: str, value: int
) -> None:
    # Every reply of this bundle is 22 tokens: under any cap of 22 each is cut at it.
    files = _archive_files("llama-cpp-cuda-stable.tar.gz")
    experiment = json.loads(files[layout.EXPERIMENT])
    assert experiment["request_body"]["max_tokens"] > value
    for name in [n for n in files if n.startswith(layout.RECORDS_DIR + "/")]:
        document = json.loads(files[name])
        assert document["response"]["usage"]["completion_tokens"] == value
        document["request_body"][cap] = value
        files[name] = _dump(document)
    experiment["request_body"][cap] = value
    if cap == "max_tokens":  # the protocol states the cap the body sends
        experiment["protocol"]["max_tokens"] = value
    files[layout.EXPERIMENT] = _dump(experiment)
    result = verify_path(write(_resum(files), tmp_path / "b"), VerifyOptions())
    assert result.verdict is Verdict.INCONCLUSIVE
    assert result.classification is not None
    assert all("token cap" in " ".join(c.reasons) for c in result.classification.conditions)


def test_a_reply_made_to_look_short_of_its_cap_contradicts_its_own_timings(
    tmp_path: Path,
) -> None:
    files = _archive_files("llama-cpp-cuda-stable.tar.gz")
    name = sorted(n for n in files if n.startswith(layout.RECORDS_DIR + "/"))[3]
    document = json.loads(files[name])
    for usage in (document["response"]["usage"], document["usage"]):
        usage["completion_tokens"] -= 1
        usage["total_tokens"] -= 1
    files[name] = _dump(document)
    result = verify_path(write(_resum(files), tmp_path / "b"), VerifyOptions())
    assert not result.verified
    errors = [f for f in result.findings if f.check == "telemetry" and f.is_error]
    assert {f.file for f in errors} == {name}
    assert any("timings.predicted_n" in f.message for f in errors)
    assert any("tokens_predicted_total moved by" in f.message for f in errors)  # and its server


def test_an_experiment_that_claims_an_older_version_than_its_records_is_caught(
    tmp_path: Path,
) -> None:
    # Schema 1.0 predates the rules on request and server times: claiming it in
    # experiment.json alone would turn them off for records written at 1.1.
    files = dict(SEED_FILES)
    experiment = json.loads(files[layout.EXPERIMENT])
    experiment["schema_version"] = "1.0"
    files[layout.EXPERIMENT] = _dump(experiment)
    result = verify_path(write(_resum(files), tmp_path / "b"), VerifyOptions())
    assert not result.verified
    versions = [f for f in result.findings if f.check == "schema" and "one version" in f.message]
    assert versions and {f.actual for f in versions} == {"1.1"}
    assert {f.file for f in versions} >= {RECORDS[0], layout.MODEL_MANIFEST}


@pytest.mark.parametrize("started_at", [None, "2026-11-02T09:30:00"])
def test_a_server_without_a_start_time_cannot_dodge_the_one_server_rule(
    tmp_path: Path, started_at: str | None
) -> None:
    files = dict(SEED_FILES)
    experiment = json.loads(files[layout.EXPERIMENT])
    server = experiment["conditions"][1]["servers"][0]
    server["started_at"] = started_at
    files[layout.EXPERIMENT] = _dump(experiment)
    result = verify_path(write(_resum(files), tmp_path / "b"), VerifyOptions())
    assert not result.verified
    assert any(
        f.check == "consistency" and f.pointer == "/conditions/1/servers/0/started_at"
        for f in result.findings
    )


@pytest.mark.parametrize(
    "body", [{"temperature": 0.8}, {"temperature": None}, {}, {"temperature": 1, "top_k": 40}]
)
def test_sampled_replies_decide_nothing(tmp_path: Path, body: dict[str, Any]) -> None:
    files = dict(SEED_FILES)
    for name in [layout.EXPERIMENT, *RECORDS]:
        document = json.loads(files[name])
        request = document["request_body"]
        request.pop("temperature", None)
        request.update(body)
        files[name] = _dump(document)
    result = verify_path(write(_resum(files), tmp_path / "b"), VerifyOptions())
    assert result.verified and result.verdict is Verdict.INCONCLUSIVE
    assert result.classification is not None
    for condition in result.classification.conditions:
        assert "do not ask for greedy replies" in condition.reasons[0]


def test_a_model_file_the_manifest_does_not_list_is_caught(tmp_path: Path) -> None:
    files = dict(SEED_FILES)
    experiment = json.loads(files[layout.EXPERIMENT])
    manifest = json.loads(files[layout.MODEL_MANIFEST])
    tokenizer = next(e for e in manifest["files"] if e["path"] == "tokenizer.json")
    experiment["model"]["model_file"] = "Model.safetensors"  # no such entry (case)
    experiment["model"]["model_sha256"] = tokenizer["sha256"]  # an entry's digest all the same
    files[layout.EXPERIMENT] = _dump(experiment)
    result = verify_path(write(_resum(files), tmp_path / "b"), VerifyOptions())
    assert not result.verified
    assert any(f.check == "manifest" and f.pointer == "/model/model_file" for f in result.findings)
