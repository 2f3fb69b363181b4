"""A real GPU sample (issue 12): llama-server on CUDA, flash attention on and off.

``python tools/gpu_sample.py run --out DIR`` does, on one CUDA machine, from this
repository's files:

1. build ``llama-server`` with CUDA (``build_llama_server.py``'s flags plus
   ``-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=<arch>``) into the cache entry
   ``llama-server-0.3.36-cuda-sm<arch>`` beside the CPU one, reused while it works;
2. write the tiny model (``make_tiny_model.py``, seed 0);
3. search, on the GPU (``-ngl 99``), with two servers side by side (flash attention on
   and off), for the first prompt whose greedy reply differs cold vs warm with flash
   attention on (the flip prompt) and the first whose reply is the same cold and warm
   under both settings (the stable prompt), with ``find_flip_prompt.py``'s rules;
4. ``evidence capture`` each prompt with the llama.cpp profile, ``-ngl 99``, and two
   conditions selecting flash attention by environment:
   ``fa-on:LLAMA_ARG_FLASH_ATTN=on`` and ``fa-off:LLAMA_ARG_FLASH_ATTN=off``;
5. ``evidence export`` each capture, signed (``--sign-key``, the test key by default)
   and archived, then ``evidence verify`` each archive.

Written into ``--out``: ``llama-cpp-cuda-flip.tar.gz`` and ``llama-cpp-cuda-stable.tar.gz``
(the public bundles), ``gpu-search.json`` (the prompts and the search's counts),
``gpu-summary.json`` (verdicts, step times, which flash-attention setting each server
logged, the GPU) and ``gpu-raw.tar.gz``: the raw captures, PRIVATE (host paths, the
environment): never publish it; ``evidence export`` makes public bundles of it.

A machine without network cannot download the sdist: here, ``python tools/gpu_sample.py
pack-source --out SRC.tar.gz`` writes a pruned llama.cpp source archive (about 9 MB);
there, ``run --llama-source SRC.tar.gz``. ``run --binary PATH`` skips the build (a CPU
binary and ``--ngl 0`` make a dry run of everything else).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import json
import os
import platform
import queue
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TOOLS = Path(__file__).resolve().parent
REPO = TOOLS.parent
sys.path.insert(0, str(TOOLS))

from build_llama_server import (  # noqa: E402
    LLAMA_CPP_PYTHON_VERSION,
    _download_sdist,
    ensure_llama_server,
)
from find_flip_prompt import (  # noqa: E402
    FIXED_FLAGS,
    Reply,
    Server,
    both_stopped,
    candidate_prompts,
    is_stable,
    running_server,
)
from llama_pipeline import ALIAS, request_body  # noqa: E402
from make_tiny_model import write_tiny_model  # noqa: E402

SIGN_KEY = REPO / "sample_bundles" / "keys" / "evidence-signing-key.pem"
FLIP_ARCHIVE = "llama-cpp-cuda-flip.tar.gz"
STABLE_ARCHIVE = "llama-cpp-cuda-stable.tar.gz"
RAW_ARCHIVE = "gpu-raw.tar.gz"
SEARCH_FILE = "gpu-search.json"
SUMMARY_FILE = "gpu-summary.json"
FA_ENV = "LLAMA_ARG_FLASH_ATTN"
# (condition id, value of LLAMA_ARG_FLASH_ATTN); the 0.3.36 server accepts on/off/auto.
CONDITIONS: tuple[tuple[str, str], ...] = (("fa-on", "on"), ("fa-off", "off"))
# The search's servers: find_flip_prompt's flags without its "-fa on"; each adds its own.
SEARCH_FLAGS: tuple[str, ...] = tuple(FIXED_FLAGS[: FIXED_FLAGS.index("-fa")])
# Log verbosity 4 makes llama-server log its flash-attention setting and GPU offload
# (not per token): server_facts() reads them back, so the summary shows each condition's
# variable took effect.
LOG_FLAGS: tuple[str, ...] = ("-lv", "4")
# What the pruned source archive keeps of vendor/llama.cpp (the build needs app/ and
# scripts/ besides the obvious folders): not the top-level docs/, models/, examples/ or
# tests/, nor any folder named tests inside the kept ones.
SOURCE_DIRS = ("ggml", "src", "include", "common", "tools", "vendor", "cmake", "app", "scripts")
SOURCE_FILES = ("CMakeLists.txt", "CMakePresets.json", "LICENSE")
DROPPED_DIR_NAMES = ("tests", ".git")


def _log(message: str) -> None:
    print(f"[gpu_sample] {message}", file=sys.stderr, flush=True)


@dataclass
class Steps:
    """Wall time of each step, in seconds, in order."""

    seconds: dict[str, float] = field(default_factory=dict)

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[None]:
        _log(f"== {name}")
        started = time.monotonic()
        try:
            yield
        finally:
            self.seconds[name] = round(time.monotonic() - started, 1)
            _log(f"== {name}: {self.seconds[name]} s")


# --- the source archive -------------------------------------------------------------


def pack_source(out: Path, sdist: Path | None = None) -> Path:
    """A pruned copy of the sdist's vendor/llama.cpp (same layout, so
    ``ensure_llama_server(sdist=...)`` reads it), with a one-object git directory so the
    build still reports llama.cpp's commit (``common/CMakeLists.txt`` asks git)."""
    with tempfile.TemporaryDirectory(prefix="gpu-pack-") as tmp:
        work = Path(tmp)
        archive = sdist or _download_sdist(LLAMA_CPP_PYTHON_VERSION, work / "sdist")
        with tarfile.open(archive) as tar:
            tar.extractall(work / "src", filter="data")
        (top,) = (work / "src").iterdir()
        source = top / "vendor" / "llama.cpp"
        pruned_top = work / "pruned" / top.name
        pruned = pruned_top / "vendor" / "llama.cpp"
        pruned.mkdir(parents=True)
        ignore = shutil.ignore_patterns(*DROPPED_DIR_NAMES)
        for name in SOURCE_DIRS:
            shutil.copytree(source / name, pruned / name, symlinks=True, ignore=ignore)
        for name in SOURCE_FILES:
            if (source / name).is_file():
                shutil.copy2(source / name, pruned / name)
        _copy_commit(source, pruned)
        out.parent.mkdir(parents=True, exist_ok=True)
        with tarfile.open(out, "w:gz") as tar:
            tar.add(pruned_top, arcname=top.name)
    _log(f"wrote {out} ({out.stat().st_size / 2**20:.1f} MiB)")
    return out


def _copy_commit(source: Path, pruned: Path) -> None:
    """Give ``pruned`` a git directory holding only llama.cpp's HEAD commit object."""
    if shutil.which("git") is None or not (source / ".git").exists():
        _log("no git or no .git: the build will report commit 'unknown'")
        return
    git = ["git", "-C", str(source)]
    head = subprocess.run(
        [*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    body = subprocess.run([*git, "cat-file", "commit", head], capture_output=True, check=True)
    git_dir = pruned.parent.parent / ".git" / "modules" / "vendor" / "llama.cpp"
    (git_dir / "objects").mkdir(parents=True)
    (git_dir / "refs").mkdir()
    (git_dir / "HEAD").write_text(head + "\n", "utf-8")
    (git_dir / "shallow").write_text(head + "\n", "utf-8")
    (git_dir / "config").write_text(
        "[core]\n\trepositoryformatversion = 0\n\tbare = false\n", "utf-8"
    )
    (pruned / ".git").write_text("gitdir: ../../.git/modules/vendor/llama.cpp\n", "utf-8")
    written = subprocess.run(
        ["git", "-C", str(pruned), "hash-object", "-t", "commit", "-w", "--stdin"],
        input=body.stdout,
        capture_output=True,
        check=True,
    ).stdout.decode()
    if written.strip() != head:
        raise RuntimeError(f"commit object rewritten as {written.strip()}, not {head}")


# --- the build ----------------------------------------------------------------------


def cuda_flags(arch: str) -> tuple[str, ...]:
    flags = ["-DGGML_CUDA=ON", f"-DCMAKE_CUDA_ARCHITECTURES={arch}"]
    if shutil.which("nvcc") is None and Path("/usr/local/cuda/bin/nvcc").is_file():
        flags.append("-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc")
    return tuple(flags)


def build_cuda_server(arch: str, jobs: int, source: Path | None) -> Path:
    return ensure_llama_server(
        variant=f"cuda-sm{arch}", extra_flags=cuda_flags(arch), jobs=str(jobs), sdist=source
    )


# --- the search ---------------------------------------------------------------------


@dataclass
class SearchCounts:
    tried: int = 0
    skipped: int = 0  # a response hit the cap or was too short
    flips_fa_on: int = 0
    flips_fa_off: int = 0
    flips_both: int = 0


@dataclass
class Candidate:
    index: int
    prompt: str
    stopped: bool = False
    flips: dict[str, bool] = field(default_factory=dict)
    kind: str | None = None  # "flip" or "stable" once proven stable
    found: dict[str, Any] | None = None


class Search:
    """Prompts drawn in seed order, tried by several (fa-on, fa-off) server pairs at once;
    results are taken in draw order, so the prompts found are the first in that order
    whatever the timing: a candidate skips a stability check only when an earlier prompt
    has already been proven of that kind."""

    def __init__(self, pairs: list[dict[str, Server]], max_tokens: int) -> None:
        self.free: queue.Queue[dict[str, Server]] = queue.Queue()
        for pair in pairs:
            self.free.put(pair)
        self.max_tokens = max_tokens
        self.lock = threading.Lock()
        self.proven: dict[str, int] = {}

    def _wanted(self, kind: str, index: int) -> bool:
        with self.lock:
            return kind not in self.proven or index < self.proven[kind]

    def _prove(self, kind: str, index: int) -> None:
        with self.lock:
            if self._wanted_unlocked(kind, index):
                self.proven[kind] = index

    def _wanted_unlocked(self, kind: str, index: int) -> bool:
        return kind not in self.proven or index < self.proven[kind]

    def evaluate(self, index: int, prompt: str) -> Candidate:
        servers = self.free.get()
        try:
            return self._evaluate(servers, index, prompt)
        finally:
            self.free.put(servers)

    def _evaluate(self, servers: dict[str, Server], index: int, prompt: str) -> Candidate:
        cap = self.max_tokens
        pairs = {cid: server.cold_warm(prompt, cap) for cid, server in servers.items()}
        result = Candidate(index, prompt)
        result.stopped = all(both_stopped(*pair) for pair in pairs.values())
        if not result.stopped:
            return result
        flips = {cid: cold.content != warm.content for cid, (cold, warm) in pairs.items()}
        result.flips = flips
        if (
            flips["fa-on"]
            and self._wanted("flip", index)
            and is_stable(servers["fa-on"], prompt, cap, flips=True)
        ):
            result.kind = "flip"
        elif (
            not any(flips.values())
            and self._wanted("stable", index)
            and all(is_stable(server, prompt, cap, flips=False) for server in servers.values())
        ):
            result.kind = "stable"
        if result.kind is not None:
            self._prove(result.kind, index)
            result.found = _found(prompt, pairs, flips, index + 1)
        return result


def search_prompts(
    pairs: list[dict[str, Server]],
    prompt_seed: int,
    max_tokens: int,
    max_prompts: int,
    deadline_s: float,
) -> dict[str, Any]:
    """The first stable fa-on flip prompt and the first prompt stable under both."""
    search = Search(pairs, max_tokens)
    counts = SearchCounts()
    found: dict[str, dict[str, Any]] = {}
    started = time.monotonic()
    prompts = _unique(candidate_prompts(prompt_seed))
    pool = ThreadPoolExecutor(max_workers=len(pairs))
    pending: collections.deque[Future[Candidate]] = collections.deque()
    try:
        drawn = 0
        while len(found) < 2:
            while len(pending) < 2 * len(pairs) and drawn < max_prompts:
                pending.append(pool.submit(search.evaluate, drawn, next(prompts)))
                drawn += 1
            if not pending or time.monotonic() - started > deadline_s:
                raise RuntimeError(
                    f"no flip/stable pair in {counts.tried} prompts, "
                    f"{time.monotonic() - started:.0f} s: {counts}"
                )
            result = pending.popleft().result()
            counts.tried += 1
            if not result.stopped:
                counts.skipped += 1
                continue
            counts.flips_fa_on += result.flips["fa-on"]
            counts.flips_fa_off += result.flips["fa-off"]
            counts.flips_both += result.flips["fa-on"] and result.flips["fa-off"]
            if result.kind is not None and result.kind not in found:
                assert result.found is not None
                found[result.kind] = result.found
                _log(
                    f"{result.kind} after {counts.tried} prompts: {result.prompt!r} "
                    f"(flips: {result.flips})"
                )
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    elapsed = time.monotonic() - started
    _log(f"searched {counts.tried} prompts in {elapsed:.1f} s: {counts}")
    return {
        "flip": found["flip"],
        "stable": found["stable"],
        "counts": counts.__dict__,
        "search_seconds": round(elapsed, 1),
        "search_workers": len(pairs),
    }


def _unique(prompts: Iterator[str]) -> Iterator[str]:
    seen: set[str] = set()
    for prompt in prompts:
        if prompt not in seen:
            seen.add(prompt)
            yield prompt


def _found(
    prompt: str, pairs: dict[str, tuple[Reply, Reply]], flips: dict[str, bool], tried: int
) -> dict[str, Any]:
    return {
        "prompt": prompt,
        "after_prompts": tried,
        "flips": flips,
        "replies": {
            cid: {
                "prompt_tokens": cold.prompt_tokens,
                "cold_content": cold.content,
                "warm_content": warm.content,
                "cold_completion_tokens": cold.completion_tokens,
                "warm_completion_tokens": warm.completion_tokens,
                "warm_cached_tokens": warm.cached_tokens,
            }
            for cid, (cold, warm) in pairs.items()
        },
    }


def run_search(
    binary: Path, model: Path, workdir: Path, ngl: int, args: argparse.Namespace
) -> dict[str, Any]:
    with contextlib.ExitStack() as stack:
        pairs = [
            {
                cid: stack.enter_context(
                    running_server(
                        binary,
                        model,
                        workdir,
                        (
                            "-ngl",
                            str(ngl),
                            "-fa",
                            value,
                            "-t",
                            str(args.search_threads),
                            *LOG_FLAGS,
                        ),
                        SEARCH_FLAGS,
                    )
                )
                for cid, value in CONDITIONS
            }
            for _ in range(args.search_workers)
        ]
        return search_prompts(
            pairs, args.prompt_seed, args.max_tokens, args.max_prompts, args.search_deadline_s
        )


# --- capture, export, verify --------------------------------------------------------


def evidence(*args: str, stdout: int | None = None) -> subprocess.CompletedProcess[str]:
    """The real command line, its progress streamed to stderr."""
    _log("$ evidence " + " ".join(args))
    return subprocess.run(
        [sys.executable, "-m", "verifier", *args],
        cwd=REPO,
        stdout=stdout,
        text=True,
        check=False,
        timeout=900,
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def capture(binary: Path, model: Path, raw: Path, prompt: str, ngl: int, max_tokens: int) -> None:
    request = raw.with_name(raw.name + "-request.json")
    request.write_text(json.dumps(request_body(prompt, max_tokens)), "utf-8")
    conditions = [f"--condition={cid}:{FA_ENV}={value}" for cid, value in CONDITIONS]
    done = evidence(
        "capture",
        "--server-profile",
        "llama.cpp",
        "--binary",
        str(binary),
        "--model",
        str(model),
        "--output",
        str(raw),
        "--request",
        str(request),
        "--alias",
        ALIAS,
        "--max-tokens",
        str(max_tokens),
        "--cycles",
        "2",
        "--port",
        str(free_port()),
        "--wall-timeout",
        "300",
        "--request-timeout",
        "60",
        "--extra-server-arg=-ngl",
        f"--extra-server-arg={ngl}",
        *(f"--extra-server-arg={flag}" for flag in LOG_FLAGS),
        *conditions,
    )
    if done.returncode != 0:
        raise RuntimeError(f"capture into {raw} failed with exit code {done.returncode}")


_FA_LINE = re.compile(r"flash_attn\s*=\s*(\S+)")
_OFFLOAD_LINE = re.compile(r"offloaded (\d+/\d+) layers to GPU")


def server_facts(raw: Path) -> dict[str, dict[str, Any]]:
    """Per server log of the capture: the flash-attention setting and the offload that
    llama-server reported itself (so the condition's variable is seen to take effect)."""
    facts: dict[str, dict[str, Any]] = {}
    for log in sorted(raw.glob("conditions/*/servers/*.log")):
        text = log.read_text("utf-8", errors="replace")
        facts[f"{log.parent.parent.name}/{log.stem}"] = {
            "flash_attn": sorted(set(_FA_LINE.findall(text))),
            "offloaded": sorted(set(_OFFLOAD_LINE.findall(text))),
            "cuda_device": "CUDA0" in text,
        }
    return facts


def export_and_verify(raw: Path, public: Path, archive: Path, sign_key: Path) -> dict[str, Any]:
    done = evidence(
        "export",
        str(raw),
        "--out",
        str(public),
        "--archive",
        str(archive),
        "--sign-key",
        str(sign_key),
    )
    if done.returncode != 0:
        raise RuntimeError(f"export of {raw} failed with exit code {done.returncode}")
    public_key = sign_key.with_name(sign_key.name.replace(".pem", ".pub.pem"))
    evidence("verify", str(archive), "--key", str(public_key))
    report = evidence(
        "verify",
        str(archive),
        "--key",
        str(public_key),
        "--format",
        "json",
        stdout=subprocess.PIPE,
    )
    bundle = json.loads(report.stdout)["bundles"][0]
    return {
        "exit_code": report.returncode,
        "verdict": bundle.get("verdict"),
        "conditions": {
            c.get("id", c.get("condition")): c.get("verdict")
            for c in bundle.get("classification", {}).get("conditions", [])
            if isinstance(c, dict)
        },
    }


# --- host facts and the private archive ---------------------------------------------


def gpu_facts() -> dict[str, Any]:
    facts: dict[str, Any] = {"hostname": socket.gethostname(), "cwd": os.getcwd()}
    facts["python"] = platform.python_version()
    for name, command in (
        (
            "nvidia_smi",
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
        ),
        ("nvcc", ["nvcc", "--version"]),
        ("cmake", ["cmake", "--version"]),
        ("git", ["git", "--version"]),
    ):
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=30)
            facts[name] = (
                done.stdout.strip().splitlines()[-1:]
                if name == "nvcc"
                else (done.stdout.strip().splitlines()[:2])
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            facts[name] = f"unavailable: {exc}"
    return facts


def write_private_archive(out: Path, workdir: Path) -> None:
    """The raw captures, the request bodies and the search servers' logs (PRIVATE)."""
    names = sorted(
        p
        for p in workdir.iterdir()
        if p.name.startswith(("raw-", "server-")) or p.name.endswith(".json")
    )
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for path in names:
            tar.add(path, arcname=path.name, filter=_without_slot_files)
    out.write_bytes(buffer.getvalue())
    _log(f"wrote {out} ({len(buffer.getvalue()) / 2**20:.2f} MiB, PRIVATE)")


def _without_slot_files(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    return None if "/slots/" in f"/{info.name}/" and info.isfile() else info


# --- the whole run ------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    out: Path = args.out.absolute()
    out.mkdir(parents=True, exist_ok=True)
    workdir: Path = (args.work or Path(tempfile.mkdtemp(prefix="gpu-sample-"))).absolute()
    workdir.mkdir(parents=True, exist_ok=True)
    steps = Steps()
    summary: dict[str, Any] = {"steps_seconds": steps.seconds, "host": gpu_facts()}
    _log(f"host: {summary['host']}")
    try:
        with steps.step("build"):
            binary = args.binary or build_cuda_server(args.cuda_arch, args.jobs, args.llama_source)
        version = subprocess.run(
            [str(binary), "--version"], capture_output=True, text=True, timeout=60
        )
        summary["server_version"] = (version.stdout + version.stderr).strip().splitlines()
        _log(f"llama-server: {summary['server_version']}")
        with steps.step("model"):
            model = workdir / "tiny.gguf"
            write_tiny_model(model, seed=args.model_seed)
        if args.prompts is not None:
            found = json.loads(args.prompts.read_text("utf-8"))
            _log(f"prompts from {args.prompts}")
        else:
            with steps.step("search"):
                found = run_search(binary, model, workdir, args.ngl, args)
        found |= {
            "model_seed": args.model_seed,
            "prompt_seed": args.prompt_seed,
            "max_tokens": args.max_tokens,
            "ngl": args.ngl,
        }
        (out / SEARCH_FILE).write_text(json.dumps(found, indent=2) + "\n", "utf-8")
        (workdir / SEARCH_FILE).write_text(json.dumps(found, indent=2) + "\n", "utf-8")
        for kind, archive_name in (("flip", FLIP_ARCHIVE), ("stable", STABLE_ARCHIVE)):
            raw = workdir / f"raw-{kind}"
            with steps.step(f"capture {kind}"):
                capture(binary, model, raw, found[kind]["prompt"], args.ngl, args.max_tokens)
            summary[f"{kind}_servers"] = server_facts(raw)
            with steps.step(f"export+verify {kind}"):
                summary[kind] = export_and_verify(
                    raw, workdir / f"public-{kind}", out / archive_name, args.sign_key
                )
            _log(f"{kind}: {summary[kind]}")
    finally:
        (out / SUMMARY_FILE).write_text(json.dumps(summary, indent=2) + "\n", "utf-8")
        with contextlib.suppress(OSError):
            write_private_archive(out / RAW_ARCHIVE, workdir)
        _log(f"work dir {workdir}; steps {steps.seconds}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    go = sub.add_parser("run", help="build, search, capture, export, verify")
    go.add_argument("--out", type=Path, required=True, help="where the results go")
    go.add_argument("--work", type=Path, help="work dir (default: a new temp dir); kept")
    go.add_argument("--binary", type=Path, help="a llama-server to use instead of building")
    go.add_argument("--llama-source", type=Path, help="sdist or pack-source archive")
    go.add_argument("--cuda-arch", default="90", help="CMAKE_CUDA_ARCHITECTURES (90: H100/H200)")
    go.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    go.add_argument("--ngl", type=int, default=99, help="layers offloaded to the GPU")
    go.add_argument("--model-seed", type=int, default=0)
    go.add_argument("--prompt-seed", type=int, default=0)
    go.add_argument("--max-tokens", type=int, default=128)
    go.add_argument("--max-prompts", type=int, default=3000)
    go.add_argument("--search-deadline-s", type=float, default=240.0)
    go.add_argument("--search-workers", type=int, default=4, help="server pairs searching")
    go.add_argument("--search-threads", type=int, default=2, help="-t of a search server")
    go.add_argument("--prompts", type=Path, help=f"a {SEARCH_FILE} to reuse: no search")
    go.add_argument("--sign-key", type=Path, default=SIGN_KEY)
    pack = sub.add_parser("pack-source", help="write the pruned llama.cpp source archive")
    pack.add_argument("--out", type=Path, required=True)
    pack.add_argument("--sdist", type=Path, help="a downloaded sdist (default: download)")
    args = parser.parse_args(argv)
    if args.command == "pack-source":
        pack_source(args.out.absolute(), args.sdist)
        return 0
    return run(args)


if __name__ == "__main__":
    raise SystemExit(main())
