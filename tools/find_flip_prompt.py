"""Search a prompt whose greedy output differs between a cold and a warm prompt cache.

Starts the cached llama-server (``build_llama_server.ensure_llama_server``) on the tiny
model (``make_tiny_model.write_tiny_model``), then for prompts drawn deterministically
from a seed: erase slot 0, send a cold request, send the same request warm. A prompt
counts only when every cold and warm response ends by itself (``finish_reason``
"stop", not "length": the verifier calls an experiment whose compared requests all hit
the token cap inconclusive) after at least ``MIN_COMPLETION_TOKENS`` tokens (the model
often stops after 3, too short to show anything), the cold request reused no cache
(``cached_tokens`` 0) and the warm one did (> 0). The first prompt whose cold and warm
outputs differ stably (3 repeats) is the "flip" fixture; the first whose outputs agree
stably is the "stable" one. For the flip prompt it also records whether a
``cache_prompt: false`` request and a ``--no-cache-prompt`` server both give the cold
output. All goes to ``tests/fixtures/llama_prompts.json``.

Server flags (each checked against ``--help``): ``-np 1`` so slot 0 is the only slot,
``--cache-ram 0`` so no host-RAM prompt cache survives an erase, ``--slot-save-path``
because ``POST /slots/0?action=erase`` answers 501 without it, ``--metrics`` for
``/metrics``, ``--no-warmup`` for a faster start, ``-fa on`` because the cold/warm
difference comes from the flash-attention path (``-fa off`` shows no flip).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from build_llama_server import LLAMA_CPP_PYTHON_VERSION, ensure_llama_server
from make_tiny_model import WORDS, write_tiny_model

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO_ROOT / "tests" / "fixtures" / "llama_prompts.json"
MODEL_ALIAS = "tiny"
STABILITY_REPEATS = 3
# The tiny model stops by itself after ~3-100 tokens (median ~40); 128 lets most
# responses end with "stop" rather than the cap.
DEFAULT_MAX_TOKENS = 128
MIN_COMPLETION_TOKENS = 10
REQUEST_TIMEOUT_S = 60.0
STARTUP_TIMEOUT_S = 60.0
# Flags other than paths and the port; recorded in the fixture. "-fa on" pins flash
# attention, which "auto" turns on for the CPU: with "-fa off" the flip disappears.
FIXED_FLAGS: tuple[str, ...] = (
    "--alias",
    MODEL_ALIAS,
    "-np",
    "1",
    "--cache-ram",
    "0",
    "--metrics",
    "--no-warmup",
    "-fa",
    "on",
)
# Added to FIXED_FLAGS for the check that a server without prompt caching gives the
# cold output.
NO_CACHE_PROMPT_FLAG = "--no-cache-prompt"


def _log(message: str) -> None:
    print(f"[find_flip_prompt] {message}", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def server_args(
    binary: Path,
    model: Path,
    port: int,
    slot_dir: Path,
    extra_flags: tuple[str, ...] = (),
    base_flags: tuple[str, ...] = FIXED_FLAGS,
) -> list[str]:
    """The llama-server command line; fails if this build lacks one of the flags."""
    args = [
        str(binary),
        "-m",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--slot-save-path",
        str(slot_dir),
        *base_flags,
        *extra_flags,
    ]
    help_text = subprocess.run(
        [str(binary), "--help"], capture_output=True, text=True, check=False, timeout=60
    ).stdout
    missing = [
        flag
        for flag in args
        if flag.startswith("-")
        and not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", help_text)
    ]
    if missing:
        raise RuntimeError(f"llama-server lacks flags: {missing}")
    return args


@dataclass(frozen=True)
class Reply:
    content: str
    finish_reason: str
    cached_tokens: int
    prompt_tokens: int
    completion_tokens: int
    seconds: float

    @property
    def stopped(self) -> bool:
        """True when the model ended the response itself (EOS), not the token cap, after
        at least MIN_COMPLETION_TOKENS tokens."""
        return self.finish_reason == "stop" and self.completion_tokens >= MIN_COMPLETION_TOKENS


class Server:
    """A running llama-server reached over HTTP on 127.0.0.1."""

    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.base + path,
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=REQUEST_TIMEOUT_S) as resp:
            raw = resp.read().decode()
        return json.loads(raw) if raw.lstrip().startswith(("{", "[")) else raw

    def wait_ready(self, proc: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"llama-server exited with code {proc.returncode}")
            with contextlib.suppress(urllib.error.URLError, ConnectionError, TimeoutError):
                if self.request("GET", "/health").get("status") == "ok":
                    return
            time.sleep(0.1)
        raise RuntimeError("llama-server did not become ready")

    def erase_slot(self) -> None:
        answer = self.request("POST", "/slots/0?action=erase")
        if answer.get("id_slot") != 0:
            raise RuntimeError(f"unexpected erase answer: {answer}")

    def chat(self, prompt: str, max_tokens: int, cache_prompt: bool = True) -> Reply:
        body: dict[str, Any] = {
            "model": MODEL_ALIAS,
            "messages": [{"role": "user", "content": prompt}],
            "temperature": 0,
            "top_k": 1,
            "top_p": 1,
            "min_p": 0,
            "repeat_penalty": 1.0,
            "seed": 0,
            "max_tokens": max_tokens,
            "stream": False,
        }
        if not cache_prompt:
            body["cache_prompt"] = False
        started = time.monotonic()
        answer = self.request("POST", "/v1/chat/completions", body)
        usage = answer["usage"]
        choice = answer["choices"][0]
        return Reply(
            content=choice["message"]["content"],
            finish_reason=str(choice["finish_reason"]),
            cached_tokens=int(usage["prompt_tokens_details"]["cached_tokens"]),
            prompt_tokens=int(usage["prompt_tokens"]),
            completion_tokens=int(usage["completion_tokens"]),
            seconds=time.monotonic() - started,
        )

    def cold_warm(self, prompt: str, max_tokens: int) -> tuple[Reply, Reply]:
        self.erase_slot()
        cold = self.chat(prompt, max_tokens)
        warm = self.chat(prompt, max_tokens)
        if cold.cached_tokens != 0 or warm.cached_tokens == 0:
            raise RuntimeError(
                f"cache state not as intended: cold cached {cold.cached_tokens}, "
                f"warm cached {warm.cached_tokens}"
            )
        return cold, warm


@contextlib.contextmanager
def running_server(
    binary: Path,
    model: Path,
    workdir: Path,
    extra_flags: tuple[str, ...] = (),
    base_flags: tuple[str, ...] = FIXED_FLAGS,
) -> Iterator[Server]:
    port = free_port()
    # One directory per server: the search and the --no-cache-prompt check each start one.
    rundir = Path(tempfile.mkdtemp(prefix="server-", dir=workdir))
    slot_dir = rundir / "slots"
    slot_dir.mkdir()
    args = server_args(binary, model, port, slot_dir, extra_flags, base_flags)
    log_path = rundir / "llama-server.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        _log(f"started llama-server pid {proc.pid} on port {port}")
        try:
            server = Server(port)
            server.wait_ready(proc)
            yield server
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            _log(f"stopped llama-server pid {proc.pid}")


def candidate_prompts(seed: int) -> Iterator[str]:
    # 12 to 30 words make 64 to 130 prompt tokens: measured on this build, cold/warm
    # logprobs then differ by ~1e-3 instead of ~1e-6 for shorter prompts, so flips
    # are far more frequent.
    rng = random.Random(seed)
    while True:
        yield " ".join(rng.choice(WORDS) for _ in range(rng.randint(12, 30)))


def both_stopped(cold: Reply, warm: Reply) -> bool:
    return cold.stopped and warm.stopped


def is_stable(server: Server, prompt: str, max_tokens: int, flips: bool) -> bool:
    """Repeat cold/warm: all colds equal, all warms equal, cold != warm iff flips, and
    every response ended with "stop"."""
    pairs = [server.cold_warm(prompt, max_tokens) for _ in range(STABILITY_REPEATS)]
    if not all(both_stopped(cold, warm) for cold, warm in pairs):
        return False
    colds = {cold.content for cold, _ in pairs}
    warms = {warm.content for _, warm in pairs}
    return len(colds) == 1 and len(warms) == 1 and (colds != warms) == flips


def search(
    server: Server, prompt_seed: int, max_tokens: int, max_prompts: int
) -> tuple[str, str, int]:
    """The first stable flip prompt, the first stable non-flip prompt, prompts tried."""
    flip: str | None = None
    stable: str | None = None
    tried = 0
    skipped = 0
    seen: set[str] = set()
    started = time.monotonic()
    for prompt in candidate_prompts(prompt_seed):
        if flip is not None and stable is not None:
            break
        if tried >= max_prompts:
            raise RuntimeError(
                f"no flip/stable pair among {tried} candidates "
                f"(flip {flip is not None}, stable {stable is not None})"
            )
        if prompt in seen:
            continue
        seen.add(prompt)
        tried += 1
        cold, warm = server.cold_warm(prompt, max_tokens)
        if not both_stopped(cold, warm):
            skipped += 1
            continue
        flips = cold.content != warm.content
        if flips and flip is None and is_stable(server, prompt, max_tokens, flips=True):
            flip = prompt
            _log(f"flip after {tried} prompts: {prompt!r}")
        elif not flips and stable is None and is_stable(server, prompt, max_tokens, flips=False):
            stable = prompt
            _log(f"stable after {tried} prompts: {prompt!r}")
    assert flip is not None and stable is not None
    _log(
        f"searched {tried} prompts in {time.monotonic() - started:.1f} s "
        f"({skipped} skipped: a response hit max_tokens or was too short)"
    )
    return flip, stable, tried


def _describe(cold: Reply, warm: Reply) -> dict[str, Any]:
    return {
        "prompt_tokens": cold.prompt_tokens,
        "cold_finish_reason": cold.finish_reason,
        "warm_finish_reason": warm.finish_reason,
        "cold_completion_tokens": cold.completion_tokens,
        "warm_completion_tokens": warm.completion_tokens,
        "cold_cached_tokens": cold.cached_tokens,
        "warm_cached_tokens": warm.cached_tokens,
    }


def record(server: Server, flip: str, stable: str, max_tokens: int) -> dict[str, Any]:
    """Fresh cold/warm replies for both prompts, and the cache_prompt:false check."""
    cold, warm = server.cold_warm(flip, max_tokens)
    no_cache = server.chat(flip, max_tokens, cache_prompt=False)
    stable_cold, stable_warm = server.cold_warm(stable, max_tokens)
    replies = (cold, warm, no_cache, stable_cold, stable_warm)
    if not all(reply.stopped for reply in replies) or cold.content == warm.content:
        raise RuntimeError("recorded replies differ from the search")
    if stable_cold.content != stable_warm.content:
        raise RuntimeError("stable prompt flipped when recorded")
    _log(
        f"flip: cold {cold.completion_tokens} tokens (cached {cold.cached_tokens}), "
        f"warm {warm.completion_tokens} tokens (cached {warm.cached_tokens}); "
        f"stable: {stable_cold.completion_tokens} tokens, warm cached "
        f"{stable_warm.cached_tokens}; cache_prompt:false equals cold: "
        f"{no_cache.content == cold.content} (cached_tokens {no_cache.cached_tokens}); "
        f"one request took {cold.seconds:.3f} s"
    )
    return {
        "flip": {
            "prompt": flip,
            "cold_content": cold.content,
            "warm_content": warm.content,
            **_describe(cold, warm),
            "no_cache_content_equals_cold": (
                no_cache.content == cold.content and no_cache.cached_tokens == 0
            ),
        },
        "stable": {
            "prompt": stable,
            "content": stable_cold.content,
            **_describe(stable_cold, stable_warm),
        },
    }


def no_cache_prompt_server_equals_cold(
    binary: Path, model: Path, workdir: Path, prompt: str, cold_content: str, max_tokens: int
) -> bool:
    """On a ``--no-cache-prompt`` server, two requests in a row both give the cold
    output and reuse no cache."""
    with running_server(binary, model, workdir, (NO_CACHE_PROMPT_FLAG,)) as server:
        replies = [server.chat(prompt, max_tokens) for _ in range(2)]
    equal = all(r.content == cold_content and r.cached_tokens == 0 for r in replies)
    _log(
        f"--no-cache-prompt server equals cold: {equal} "
        f"(cached_tokens {[r.cached_tokens for r in replies]}, "
        f"finish {[r.finish_reason for r in replies]})"
    )
    return equal


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--model-seed", type=int, default=0)
    parser.add_argument("--prompt-seed", type=int, default=0)
    parser.add_argument("--max-tokens", type=int, default=DEFAULT_MAX_TOKENS)
    parser.add_argument("--max-prompts", type=int, default=5000)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    # A SIGTERM unwinds like Ctrl-C, so the server is stopped in either case.
    signal.signal(signal.SIGTERM, _raise_interrupt)

    binary = ensure_llama_server()
    with tempfile.TemporaryDirectory(prefix="find-flip-") as tmp:
        workdir = Path(tmp)
        model = workdir / "tiny.gguf"
        write_tiny_model(model, seed=args.model_seed)
        try:
            with running_server(binary, model, workdir) as server:
                flip, stable, tried = search(
                    server, args.prompt_seed, args.max_tokens, args.max_prompts
                )
                found = record(server, flip, stable, args.max_tokens)
            found["flip"]["no_cache_prompt_server_equals_cold"] = (
                no_cache_prompt_server_equals_cold(
                    binary, model, workdir, flip, found["flip"]["cold_content"], args.max_tokens
                )
            )
        except KeyboardInterrupt:
            _log("interrupted")
            return 130
    fixture = {
        "model_seed": args.model_seed,
        "prompt_seed": args.prompt_seed,
        "max_tokens": args.max_tokens,
        "min_completion_tokens": MIN_COMPLETION_TOKENS,
        "llama_cpp_python": LLAMA_CPP_PYTHON_VERSION,
        "server_flags": list(FIXED_FLAGS),
        **found,
        "prompts_tried": tried,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(fixture, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    _log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
