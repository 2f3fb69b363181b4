"""Server environment hygiene, process identity, model manifests and profile facts."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from verifier.capture.manifest import hash_model
from verifier.capture.process import (
    build_commit,
    executable_mappings,
    server_environment,
    sha256_file,
)
from verifier.checks.context import has_args
from verifier.cli.capture_cmd import ProfileName
from verifier.errors import CaptureError, UsageError
from verifier.modelfiles import detect_hf_snapshot
from verifier.profiles import PROFILES, get_profile, known_rules
from verifier.profiles.base import LaunchSpec, ResetProof
from verifier.profiles.rules import ProfileRules
from verifier.schemas import validate

INHERITED = {
    "PATH": "/usr/bin",
    "LD_LIBRARY_PATH": "/opt/cuda/lib64",
    "CUDA_VISIBLE_DEVICES": "0",
    "MLXCEL_SDPA_DETERMINISTIC": "1",
    "MLX_USE_CUDA_GRAPHS": "1",
    "MLXFOO": "x",
    "APC_TRACE": "1",
    "LLAMA_ARG_CACHE_RAM": "8192",
    "CUDA_LAUNCH_BLOCKING": "1",
    "CUBLAS_WORKSPACE_CONFIG": ":4096:8",
    "NVIDIA_TF32_OVERRIDE": "0",
    "CUDNN_LOGINFO_DBG": "1",
    "VLLM_ATTENTION_BACKEND": "FLASHINFER",
}


def test_inherited_toggles_are_cleared_and_runtime_paths_kept() -> None:
    env = server_environment(INHERITED)
    assert env == {
        "PATH": "/usr/bin",
        "LD_LIBRARY_PATH": "/opt/cuda/lib64",
        "CUDA_VISIBLE_DEVICES": "0",
        "VLLM_ATTENTION_BACKEND": "FLASHINFER",
    }


def test_profile_prefixes_profile_env_and_condition_settings() -> None:
    vllm = get_profile("vllm")
    env = server_environment(
        INHERITED,
        extra_prefixes=vllm.experiment_env_prefixes,
        profile_env=vllm.extra_env,
        settings={"MLXCEL_SDPA_DETERMINISTIC": "0"},
    )
    assert "VLLM_ATTENTION_BACKEND" not in env
    assert env["VLLM_SERVER_DEV_MODE"] == "1"
    assert env["MLXCEL_SDPA_DETERMINISTIC"] == "0"  # set by the condition, not inherited


def test_own_process_maps_list_hashed_executables() -> None:
    if not Path("/proc/self/maps").exists():
        pytest.skip("no /proc")
    mappings = executable_mappings(os.getpid())
    assert mappings and all(m.path.startswith("/") for m in mappings)
    libc = [m for m in mappings if re.search(r"libc\.so\.6$", m.path)]
    if libc:
        assert libc[0].version == "6" and libc[0].sha256 == sha256_file(Path(libc[0].path))
    assert executable_mappings(2**22 + 12345) == []


def test_build_commit_is_read_from_version_text() -> None:
    assert build_commit("version: 0.5.0-dev (build 1, commit 0c1e570)") == "0c1e570"
    assert build_commit("mlxcel 1.0") is None and build_commit(None) is None


def test_model_directory_manifest(tmp_path: Path) -> None:
    model = tmp_path / "m"
    (model / "sub").mkdir(parents=True)
    (model / ".git").mkdir()
    (model / ".git" / "HEAD").write_text("x")
    (model / "config.json").write_text("{}")
    (model / "model-00001-of-00002.safetensors").write_bytes(b"a" * 10)
    (model / "model-00002-of-00002.safetensors").write_bytes(b"b" * 20)
    (model / "sub" / "tokenizer.json").write_text("{}")
    manifest = hash_model(model)
    assert [f.path for f in manifest.files] == [
        "config.json",
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
        "sub/tokenizer.json",
    ]
    assert manifest.model_file == "model-00002-of-00002.safetensors"
    assert manifest.config_file == "config.json"
    assert validate(manifest.to_json(), "raw-model-manifest") == []


def make_hf_cache(tmp_path: Path) -> Path:
    repo = tmp_path / "hub" / "models--mlx-community--Qwen3-1.7B-4bit"
    blobs = repo / "blobs"
    snapshot = repo / "snapshots" / "3b1b1768f8f8cf8351c712464f906e86c2b8269e"
    blobs.mkdir(parents=True)
    snapshot.mkdir(parents=True)
    (blobs / "aaa").write_bytes(b"weights")
    (blobs / "bbb").write_text("{}")
    (snapshot / "model.safetensors").symlink_to("../../blobs/aaa")
    (snapshot / "config.json").symlink_to("../../blobs/bbb")
    return snapshot


def test_hf_snapshot_links_are_followed_inside_the_repo_and_ids_detected(tmp_path: Path) -> None:
    snapshot = make_hf_cache(tmp_path)
    manifest = hash_model(snapshot)
    assert manifest.repo_id == "mlx-community/Qwen3-1.7B-4bit"
    assert manifest.revision == "3b1b1768f8f8cf8351c712464f906e86c2b8269e"
    sizes = {f.path: f.size for f in manifest.files}
    assert sizes == {"config.json": 2, "model.safetensors": 7}
    given = hash_model(snapshot, repo_id="org/other", revision="main")
    assert (given.repo_id, given.revision) == ("org/other", "main")
    single = hash_model(snapshot / "model.safetensors")
    assert single.files[0].path == "model.safetensors" and single.files[0].size == 7


def test_links_leaving_the_hf_repo_are_refused(tmp_path: Path) -> None:
    snapshot = make_hf_cache(tmp_path)
    outside = tmp_path / "secret.txt"
    outside.write_text("private")
    (snapshot / "leak.json").symlink_to(outside)
    with pytest.raises(CaptureError, match="outside the model's own"):
        hash_model(snapshot)


def test_links_in_a_plain_directory_are_refused(tmp_path: Path) -> None:
    model = tmp_path / "m"
    model.mkdir()
    (tmp_path / "w").write_bytes(b"w")
    (model / "model.gguf").symlink_to(tmp_path / "w")
    with pytest.raises(CaptureError):
        hash_model(model)
    assert detect_hf_snapshot(model) is None


def test_every_profile_has_a_cli_choice_and_valid_versioned_rules() -> None:
    assert {p.value for p in ProfileName} == set(PROFILES)
    for profile in PROFILES.values():
        run_fragment = {"profile_rules": profile.rules.to_json()}
        schema_errors = [
            v
            for v in validate({"schema_version": "1.1", **run_fragment}, "raw-run")
            if v.pointer.startswith("/profile_rules")
        ]
        assert schema_errors == [], profile.name
        # the rules survive the round trip a reviewer's --profile FILE takes
        assert ProfileRules.from_json(profile.rules.to_json()) == profile.rules
        assert known_rules(profile.name, profile.version) is profile.rules
        # what verify expects of the evidence is what capture records
        assert (profile.stats_path is not None) == profile.rules.has_stats, profile.name
        # a cache-off server shows it in its command line: the flag verify looks for
        spec = LaunchSpec(Path("/bin/srv"), Path("/m"), "a", 1, True, Path("/s"))
        argv = tuple(profile.start_argv(spec)) if profile.name != "llama.cpp" else ()
        if argv:
            assert has_args(argv, profile.rules.cache_off_args), profile.name


def launch(tmp_path: Path, *, disabled: bool) -> LaunchSpec:
    return LaunchSpec(Path("/bin/srv"), tmp_path, "cache-repro", 18128, disabled, tmp_path / "s")


def test_mlxcel_argv_follows_servers_md(tmp_path: Path) -> None:
    profile = get_profile("mlxcel")
    argv = profile.start_argv(launch(tmp_path, disabled=False))
    assert argv[1:] == [
        "-m", str(tmp_path), "--alias", "cache-repro", "--host", "127.0.0.1",
        "--port", "18128", "--parallel", "4", "--metrics", "--no-warmup",
    ]  # fmt: skip
    assert profile.start_argv(launch(tmp_path, disabled=True))[-1] == "--no-prompt-cache"
    assert profile.reset_proof is ResetProof.STATS_ENTRIES


def test_llama_cpp_argv_and_model_file(tmp_path: Path) -> None:
    profile = get_profile("llama.cpp")
    (tmp_path / "tiny.gguf").write_bytes(b"GGUF")
    argv = profile.start_argv(launch(tmp_path, disabled=True))
    assert argv[1:3] == ["-m", str(tmp_path / "tiny.gguf")]
    for flag in ("-np", "--cache-ram", "--slot-save-path", "--metrics", "--no-warmup"):
        assert flag in argv
    assert argv[-1] == "--no-cache-prompt"
    assert profile.reset_proof is ResetProof.NEXT_COLD_REQUEST
    (tmp_path / "other.gguf").write_bytes(b"GGUF")
    with pytest.raises(UsageError, match=r"2 \.gguf files"):
        profile.model_argument(tmp_path)


@pytest.mark.parametrize(
    ("name", "flag"), [("vllm", "--no-enable-prefix-caching"), ("sglang", "--disable-radix-cache")]
)
def test_other_profiles_turn_their_cache_off(tmp_path: Path, name: str, flag: str) -> None:
    profile = get_profile(name)
    assert flag in profile.start_argv(launch(tmp_path, disabled=True))
    assert flag not in profile.start_argv(launch(tmp_path, disabled=False))
    assert profile.opt_out_fields is None


def test_unknown_profile_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="known"):
        get_profile("tgi")
