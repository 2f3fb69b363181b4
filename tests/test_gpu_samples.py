"""The committed GPU samples (issue 12): their verdicts, what they say of the GPU, and
that nothing of the capturing machine is left in them. No GPU is needed."""

from __future__ import annotations

import gzip
import itertools
import json
import random
import re
import subprocess
import sys
import tarfile
import time
import zlib
from pathlib import Path
from typing import Any

import gpu_sample
import pytest
from find_flip_prompt import Reply, candidate_prompts

from verifier.checks.context import VerifyOptions
from verifier.leaks import scan_bytes
from verifier.verify import verify_path

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_bundles"
PUBLIC_KEY = SAMPLES / "keys" / "evidence-signing-key.pub.pem"
EXPECTED: dict[str, Any] = json.loads((SAMPLES / "CUDA_EXPECTED.json").read_text("utf-8"))
NAMES = sorted(EXPECTED["samples"])


def members(archive: Path) -> dict[str, bytes]:
    with tarfile.open(archive, "r:gz") as tar:
        return {
            info.name: tar.extractfile(info).read()  # type: ignore[union-attr]
            for info in tar.getmembers()
            if info.isfile()
        }


def experiment(archive: Path) -> dict[str, Any]:
    (data,) = [v for k, v in members(archive).items() if k.endswith("experiment.json")]
    document: dict[str, Any] = json.loads(data)
    return document


@pytest.mark.parametrize("name", NAMES)
def test_gpu_sample_verifies_with_its_expected_verdicts(name: str) -> None:
    expected = EXPECTED["samples"][name]
    result = verify_path(SAMPLES / name, VerifyOptions(public_key=PUBLIC_KEY))
    assert result.verified, [f for f in result.findings if f.is_error]
    assert result.verdict == expected["verdict"]
    classification = result.classification
    assert classification is not None
    verdicts = {c.condition.id: c.verdict for c in classification.conditions}
    assert verdicts == expected["conditions"]
    assert {c.label: c.count for c in classification.classes} == expected["classes"]
    for condition in classification.conditions:
        warm = next(t for t in condition.class_telemetry if t.arm == "warm")
        assert warm.cached_tokens == (expected["warm_cached_tokens"],)
        assert warm.counter_deltas["metric:llamacpp:prompt_tokens_cached_total"] == (
            float(expected["warm_cached_tokens"]),
        )
        difference = expected["first_difference"]
        if difference is not None and condition.condition.id == difference["condition"]:
            first = condition.first_differences[0]
            assert (first.field, first.index) == (difference["field"], difference["index"])
        else:
            assert condition.first_differences == ()


@pytest.mark.parametrize("name", NAMES)
def test_gpu_sample_expect_gate_on_the_command_line(name: str) -> None:
    expected = EXPECTED["samples"][name]
    done = subprocess.run(
        [sys.executable, "-m", "verifier", "verify", str(SAMPLES / name), "--key",
         str(PUBLIC_KEY), "--expect", expected["verdict"]],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == expected["exit_code"], done.stdout + done.stderr


@pytest.mark.parametrize("name", NAMES)
def test_gpu_sample_names_the_gpu_and_its_libraries(name: str) -> None:
    expected = EXPECTED["samples"][name]
    document = experiment(SAMPLES / name)
    hardware = document["hardware"]
    assert hardware["accelerator"] == expected["accelerator"]
    assert hardware["nvidia"] == expected["driver"]
    libraries = {lib["name"]: lib for lib in document["runtime_libraries"]}
    for library in expected["runtime_libraries"]:
        assert library in libraries, sorted(libraries)
        assert re.fullmatch(r"[0-9a-f]{64}", libraries[library]["sha256"])
    settings = {c["id"]: c["settings"] for c in document["conditions"]}
    assert settings == {"fa-on": {"LLAMA_ARG_FLASH_ATTN": "on"},
                        "fa-off": {"LLAMA_ARG_FLASH_ATTN": "off"}}  # fmt: skip
    for condition in document["conditions"]:
        for server in condition["servers"]:
            assert server["argv"][-4:] == ["-ngl", "99", "-lv", "4"]
    (message,) = document["request_body"]["messages"]
    assert message["content"] == expected["prompt"]


@pytest.mark.parametrize("name", NAMES)
def test_gpu_sample_holds_nothing_of_the_capturing_machine(name: str) -> None:
    archive = SAMPLES / name
    machine = EXPECTED["capturing_machine"]
    hostname = re.compile(rb"(?<![\w.-])" + re.escape(machine["hostname"].encode()) + rb"(?![\w-])")
    blobs = {"(decompressed archive)": gzip.decompress(archive.read_bytes()), **members(archive)}
    for member, data in blobs.items():
        for path in machine["paths"]:
            assert path.encode() not in data, f"{name}: {member} holds {path!r}"
        assert not hostname.search(data), f"{name}: {member} holds the host name"
        if member != "(decompressed archive)":
            assert scan_bytes(data) == [], f"{name}: {member}"


def test_gpu_samples_are_small() -> None:
    for name in NAMES:
        assert (SAMPLES / name).stat().st_size < 64 * 1024, name


def test_gpu_sample_script_writes_the_committed_names() -> None:
    assert gpu_sample.CONDITIONS == (("fa-on", "on"), ("fa-off", "off"))
    assert set(NAMES) == {gpu_sample.FLIP_ARCHIVE, gpu_sample.STABLE_ARCHIVE}


def test_server_facts_read_the_settings_llama_server_logged(tmp_path: Path) -> None:
    log = tmp_path / "conditions" / "fa-on" / "servers" / "1.log"
    log.parent.mkdir(parents=True)
    log.write_text(
        "I load_tensors: offloaded 3/3 layers to GPU\n"
        "I load_tensors:        CUDA0 model buffer size =     0.26 MiB\n"
        "I llama_context: flash_attn            = enabled\n",
        "utf-8",
    )
    facts = gpu_sample.server_facts(tmp_path)
    assert facts == {
        "fa-on/1": {"flash_attn": ["enabled"], "offloaded": ["3/3"], "cuda_device": True}
    }


class FakeServer:
    """cold_warm answers by the prompt: fa-on flips where `flips_on` says, fa-off never."""

    def __init__(self, flips: bool) -> None:
        self.flips = flips

    def cold_warm(self, prompt: str, max_tokens: int) -> tuple[Reply, Reply]:
        time.sleep(random.random() / 1000)  # a different finishing order each run
        cold = Reply(prompt, "stop", 0, 70, 20, 0.0)
        flipped = self.flips and flips_on(prompt)
        warm = Reply(prompt + ("!" if flipped else ""), "stop", 69, 70, 20, 0.0)
        return cold, warm


def flips_on(prompt: str) -> bool:
    return zlib.crc32(prompt.encode()) % 23 == 0


def test_search_finds_the_first_prompts_in_draw_order_with_any_number_of_workers() -> None:
    draws = list(itertools.islice(candidate_prompts(0), 2000))
    first_flip = next(i for i, p in enumerate(draws) if flips_on(p))
    first_stable = next(i for i, p in enumerate(draws) if not flips_on(p))
    for workers in (1, 3, 8):
        pairs = [{"fa-on": FakeServer(True), "fa-off": FakeServer(False)} for _ in range(workers)]
        found = gpu_sample.search_prompts(pairs, 0, 128, 2000, 60.0)  # type: ignore[arg-type]
        assert found["flip"]["prompt"] == draws[first_flip]
        assert found["flip"]["after_prompts"] == first_flip + 1
        assert found["stable"]["prompt"] == draws[first_stable]
        assert found["flip"]["flips"] == {"fa-on": True, "fa-off": False}
        assert found["counts"]["flips_fa_off"] == 0


def test_every_report_format_shows_the_gpu_and_its_runtime_libraries() -> None:
    from typer.testing import CliRunner

    from verifier.cli import app

    sample = str(SAMPLES / "llama-cpp-cuda-flip.tar.gz")
    outputs = {
        fmt: CliRunner().invoke(app, ["verify", sample, "-f", fmt], env={"COLUMNS": "200"}).stdout
        for fmt in ("text", "markdown", "json")
    }
    for fmt, out in outputs.items():
        assert "NVIDIA H200" in out and "580.159.04" in out, fmt
        assert "13.1.0.3" in out and "<ip>" not in out, fmt  # a version stays a version
    assert "libcublas 13.1.0.3" in outputs["text"] and "libcudart 13.0.96" in outputs["markdown"]
