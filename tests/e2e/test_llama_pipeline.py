"""End to end against a real llama-server: capture, export, verify, for both fixture prompts.

The first run builds llama-server from the llama-cpp-python sdist (about 4 minutes on 2
cores) into ~/.cache/evidence; later runs reuse it.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from llama_pipeline import PipelineRun, fixture, run_pipeline
from make_tiny_model import write_tiny_model

from verifier import schemas, signing
from verifier.jsonio import loads_strict

pytestmark = pytest.mark.e2e


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if text.encode() in cmdline:
            found.append(int(entry.name))
    return found


@pytest.fixture(scope="module")
def server_binary() -> Path:
    from build_llama_server import ensure_llama_server

    return ensure_llama_server()


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> signing.KeyPairPaths:
    return signing.generate_key_pair(tmp_path_factory.mktemp("keys"))


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path
    # No server may outlive its capture, whatever the test's outcome.
    leftovers = _processes_mentioning(str(tmp_path))
    for pid in leftovers:
        os.kill(pid, 9)
    assert not leftovers, f"server processes left running: {leftovers}"


def _run(workdir: Path, which: str, binary: Path, keys: signing.KeyPairPaths) -> PipelineRun:
    return run_pipeline(
        workdir,
        fixture()[which]["prompt"],
        sign_key=keys.private,
        public_key=keys.public,
        binary=binary,
    )


def _check_report(run: PipelineRun, verdict: str) -> dict[str, object]:
    report = run.report
    assert not schemas.validate(report, "report"), schemas.validate(report, "report")[:3]
    bundle = report["bundles"][0]
    assert bundle["verified"], bundle["findings"]
    assert bundle["verdict"] == verdict, bundle["classification"]["reasons"]
    assert run.verify.returncode == 0
    assert any(
        f["check"] == "signature" and f["message"] == "signature verified"
        for f in bundle["findings"]
    )
    classification = bundle["classification"]
    # every request of the protocol was proven in its claimed arm
    requests = classification["requests"]
    assert len(requests) == 16  # 14 of the protocol, 2 diagnostic
    assert all(r["proven"] for r in requests), [r for r in requests if not r["proven"]]
    assert all(r["finish_reason"] == "stop" for r in requests)
    return bundle


def test_flip_prompt_is_cache_state_dependent(
    workdir: Path, server_binary: Path, keys: signing.KeyPairPaths
) -> None:
    run = _run(workdir, "flip", server_binary, keys)
    bundle = _check_report(run, "cache-state-dependent")
    (condition,) = bundle["classification"]["conditions"]
    assert condition["arms"]["warm"] == {"B": 5}
    assert sum(sum(arm.values()) for arm in condition["arms"].values()) == 14  # judged ones
    assert condition["first_differences"], "a split must show where the outputs differ"
    # The diagnostic phase (logprobs on, never judged) localizes the divergent token.
    diagnosis = condition["diagnosis"]
    assert diagnosis["token_index"] is not None and diagnosis["near_tie"] is not None, diagnosis
    assert diagnosis["cold"]["token"] != diagnosis["warm"]["token"]
    # What the raw capture knew privately is gone from the public archive.
    plain = gzip.decompress(run.archive.read_bytes())
    for private in (str(workdir), str(server_binary), os.environ.get("USER", "root")):
        assert private.encode() not in plain, private


def test_a_split_inside_a_small_token_cap_is_still_a_split(
    workdir: Path, server_binary: Path, keys: signing.KeyPairPaths
) -> None:
    # Every request stops at the cap; the outputs already differ within it.
    run = run_pipeline(
        workdir, fixture()["flip"]["prompt"], sign_key=keys.private, public_key=keys.public,
        binary=server_binary, max_tokens=20,
    )  # fmt: skip
    bundle = run.report["bundles"][0]
    assert bundle["verified"], bundle["findings"]
    assert bundle["verdict"] == "cache-state-dependent", bundle["classification"]["reasons"]
    requests = bundle["classification"]["requests"]
    assert all(r["finish_reason"] == "length" and r["proven"] for r in requests)
    (condition,) = bundle["classification"]["conditions"]
    assert condition["capped"] == 14  # the diagnostic requests are never judged
    assert any("token cap" in reason for reason in condition["reasons"])


def test_stable_prompt_is_cache_state_independent(
    workdir: Path, server_binary: Path, keys: signing.KeyPairPaths
) -> None:
    # A model folder whose GGUF sits beside other weights: the model_file is the file
    # llama-server loads, not the folder's `model.safetensors`.
    folder = workdir / "model"
    folder.mkdir()
    write_tiny_model(folder / "tiny.gguf", seed=fixture()["model_seed"])
    (folder / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
    (folder / "config.json").write_text("{}")
    run = run_pipeline(
        workdir, fixture()["stable"]["prompt"], sign_key=keys.private, public_key=keys.public,
        binary=server_binary, model=folder,
    )  # fmt: skip
    bundle = _check_report(run, "cache-state-independent")
    assert len(bundle["classification"]["classes"]) == 1
    assert bundle["experiment"]["model"]["model_file"] == "tiny.gguf"
    assert not [f for f in bundle["findings"] if f["severity"] != "info"], bundle["findings"]


def test_committed_real_sample_verifies(tmp_path: Path) -> None:
    repo = Path(__file__).resolve().parents[2]
    sample = repo / "sample_bundles" / "llama-cpp-real.tar.gz"
    key = repo / "sample_bundles" / "keys" / signing.PUBLIC_KEY_FILE
    result = subprocess.run(
        [sys.executable, "-m", "verifier", "verify", str(sample), "--key", str(key),
         "--format", "json", "--expect", "cache-state-dependent"],
        cwd=repo, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    report = loads_strict(result.stdout.encode())
    assert report["bundles"][0]["experiment"]["server"]["profile"] == "llama.cpp"


def test_diff_of_the_flip_and_the_stable_capture(
    workdir: Path, server_binary: Path, keys: signing.KeyPairPaths
) -> None:
    (workdir / "flip").mkdir()
    (workdir / "stable").mkdir()
    flip = _run(workdir / "flip", "flip", server_binary, keys)
    stable = _run(workdir / "stable", "stable", server_binary, keys)
    result = subprocess.run(
        [sys.executable, "-m", "verifier", "diff", str(flip.archive), str(stable.archive),
         "--key", str(keys.public), "--format", "json", "--expect-changed"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    document = loads_strict(result.stdout.encode())
    assert not schemas.validate(document, "diff")
    assert document["outcome"] == "changed" and not document["same_request"]
    (condition,) = document["conditions"]
    assert [b["verdict"] for b in condition["bundles"]] == [
        "cache-state-dependent",
        "cache-state-independent",
    ]
    assert condition["changes"][0].startswith("the split is gone")


def test_a_condition_made_of_server_flags_round_trips(
    workdir: Path, server_binary: Path, keys: signing.KeyPairPaths
) -> None:
    # A chunk-size-style control: the same capture with the prefill micro-batch at 8 tokens.
    run = run_pipeline(
        workdir, fixture()["flip"]["prompt"], sign_key=keys.private, public_key=keys.public,
        binary=server_binary, conditions=("default", "ub8:-ub 8"),
    )  # fmt: skip
    bundle = run.report["bundles"][0]
    assert bundle["verified"], [f for f in bundle["findings"] if f["severity"] == "error"]
    conditions = {c["id"]: c for c in bundle["classification"]["conditions"]}
    assert conditions["ub8"]["label"] == "-ub 8"
    # The claimed flags must be what the servers ran with: drop them from one server.
    public = run.public
    doc = loads_strict((public / "experiment.json").read_bytes())
    ub8 = next(c for c in doc["conditions"] if c["id"] == "ub8")
    assert all("-ub" in s["argv"] for s in ub8["servers"])
    argv = ub8["servers"][1]["argv"]
    index = argv.index("-ub")
    del argv[index : index + 2]
    (public / "experiment.json").write_text(json.dumps(doc, indent=2))
    from make_samples import resum_tree

    resum_tree(public)
    tampered = subprocess.run(
        [sys.executable, "-m", "verifier", "verify", str(public), "--format", "json"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    report = loads_strict(tampered.stdout.encode())["bundles"][0]
    assert tampered.returncode == 1
    assert any(
        f["check"] == "servers" and "server arguments" in f["message"] for f in report["findings"]
    ), report["findings"]
