"""capture -> export -> verify against a real llama-server with the tiny generated model.

Used by the end-to-end tests and by `python tools/llama_pipeline.py --sample` (which
rewrites the committed real sample `sample_bundles/llama-cpp-real.tar.gz`). Every step
runs the real `evidence` command line in a subprocess, as a user would.
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TOOLS = Path(__file__).resolve().parent
REPO = TOOLS.parent
sys.path.insert(0, str(TOOLS))

from build_llama_server import ensure_llama_server  # noqa: E402
from make_tiny_model import write_tiny_model  # noqa: E402

FIXTURE = REPO / "tests" / "fixtures" / "llama_prompts.json"
SAMPLE = REPO / "sample_bundles" / "llama-cpp-real.tar.gz"
SAMPLE_KEY = REPO / "sample_bundles" / "keys" / "evidence-signing-key.pem"
ALIAS = "tiny"
# Pinned sampling, so server defaults of other builds cannot change the outputs.
PINNED = {"temperature": 0, "top_k": 1, "top_p": 1.0, "min_p": 0.0, "repeat_penalty": 1.0}


def fixture() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(FIXTURE.read_text("utf-8"))
    return data


def extra_server_args() -> list[str]:
    """Flags of the fixture that the llama.cpp profile does not set itself (e.g. -fa on)."""
    flags: list[str] = fixture()["server_flags"]
    profile_owned = {"--alias": 1, "-np": 1, "--cache-ram": 1, "--metrics": 0, "--no-warmup": 0}
    extra: list[str] = []
    index = 0
    while index < len(flags):
        flag = flags[index]
        if flag in profile_owned:
            index += 1 + profile_owned[flag]
            continue
        extra.append(flag)
        index += 1
    return extra


def request_body(prompt: str, max_tokens: int) -> dict[str, Any]:
    return {
        "model": ALIAS,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        **PINNED,
        "seed": 0,
        "stream": False,
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass(frozen=True)
class PipelineRun:
    raw: Path
    public: Path
    archive: Path
    verify: subprocess.CompletedProcess[str]

    @property
    def report(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.verify.stdout)
        return data


def evidence(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "verifier", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=check,
        timeout=900,
    )


def run_pipeline(
    workdir: Path,
    prompt: str,
    *,
    sign_key: Path,
    public_key: Path,
    binary: Path | None = None,
    model: Path | None = None,
    max_tokens: int | None = None,
    conditions: tuple[str, ...] = (),
) -> PipelineRun:
    """Capture one condition with `prompt`, export it signed, verify the archive (JSON)."""
    spec = fixture()
    binary = binary or ensure_llama_server()
    if model is None:
        model = workdir / "tiny.gguf"
        write_tiny_model(model, seed=spec["model_seed"])
    request = workdir / "request.json"
    cap = max_tokens or spec["max_tokens"]
    request.write_text(json.dumps(request_body(prompt, cap)), "utf-8")
    raw, public, archive = workdir / "raw", workdir / "public", workdir / "public.tar.gz"
    extra = [f"--extra-server-arg={arg}" for arg in extra_server_args()]
    evidence(
        "capture", "--server-profile", "llama.cpp", "--binary", str(binary),
        "--model", str(model), "--output", str(raw), "--request", str(request),
        "--alias", ALIAS, "--max-tokens", str(cap), "--cycles", "2",
        "--port", str(free_port()), "--wall-timeout", "300", "--request-timeout", "60",
        *extra, *(f"--condition={c}" for c in conditions),
    )  # fmt: skip
    evidence(
        "export", str(raw), "--out", str(public), "--archive", str(archive),
        "--sign-key", str(sign_key),
    )  # fmt: skip
    verified = evidence(
        "verify", str(archive), "--key", str(public_key), "--format", "json", check=False
    )
    return PipelineRun(raw, public, archive, verified)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--prompt", choices=("flip", "stable"), default="flip")
    parser.add_argument("--sample", action="store_true", help=f"rewrite {SAMPLE.name}")
    args = parser.parse_args()
    prompt = fixture()[args.prompt]["prompt"]
    public_key = SAMPLE_KEY.with_name("evidence-signing-key.pub.pem")
    with tempfile.TemporaryDirectory() as scratch:
        run = run_pipeline(Path(scratch), prompt, sign_key=SAMPLE_KEY, public_key=public_key)
        bundle = run.report["bundles"][0]
        print(f"verdict {bundle['verdict']}, exit {run.verify.returncode}", file=sys.stderr)
        if args.sample:
            shutil.copyfile(run.archive, SAMPLE)
            print(f"wrote {SAMPLE}", file=sys.stderr)


if __name__ == "__main__":
    main()
