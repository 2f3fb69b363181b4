"""Build llama.cpp's llama-server once and cache it outside the checkout.

The source is the llama.cpp tree vendored in the ``llama-cpp-python`` source
distribution on PyPI (the only network this project reaches). The binary is built
static and CPU-only, then moved atomically into
``${EVIDENCE_CACHE_DIR:-~/.cache/evidence}/llama-server-<version>/llama-server``.

Usage: ``python tools/build_llama_server.py`` prints the binary path as its last
stdout line; progress goes to stderr. Importable: ``ensure_llama_server()``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from types import FrameType

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
BINARY_NAME = "llama-server"
BUILD_JOBS = "2"

CMAKE_FLAGS: tuple[str, ...] = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_BUILD_SERVER=ON",
    # Without this the build downloads prebuilt web UI assets, and there is no network.
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    # A binary that runs on any x86-64/arm64 machine of the project, not only the
    # one that built it; numerics then do not depend on the builder's CPU.
    "-DGGML_NATIVE=OFF",
    "-DGGML_OPENMP=OFF",
)


class BuildError(RuntimeError):
    """The llama-server build could not be completed."""


def _log(message: str) -> None:
    print(f"[build_llama_server] {message}", file=sys.stderr, flush=True)


def cache_root() -> Path:
    configured = os.environ.get("EVIDENCE_CACHE_DIR")
    base = Path(configured) if configured else Path.home() / ".cache" / "evidence"
    return base.expanduser()


def cached_binary_path(version: str = LLAMA_CPP_PYTHON_VERSION, variant: str = "") -> Path:
    """The cache entry; a ``variant`` (e.g. ``cuda-sm90``) keeps other builds apart."""
    suffix = f"-{variant}" if variant else ""
    return cache_root() / f"llama-server-{version}{suffix}" / BINARY_NAME


def binary_works(binary: Path) -> bool:
    """True when ``binary --version`` runs and exits 0."""
    if not binary.is_file() or not os.access(binary, os.X_OK):
        return False
    try:
        result = subprocess.run(
            [str(binary), "--version"],
            capture_output=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return result.returncode == 0


def _run(command: list[str], cwd: Path | None = None) -> None:
    _log("$ " + " ".join(command))
    # Tool output goes to stderr so stdout keeps only the final path. The command runs
    # in its own process group so an interrupt also stops make's compiler children.
    proc = subprocess.Popen(
        command, cwd=cwd, stdout=sys.stderr, stderr=sys.stderr, start_new_session=True
    )
    try:
        returncode = proc.wait()
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait()
        raise
    if returncode != 0:
        raise BuildError(f"command failed with exit code {returncode}: {command[0]}")


def _download_sdist(version: str, dest: Path) -> Path:
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--no-binary",
            ":all:",
            "--dest",
            str(dest),
            f"llama-cpp-python=={version}",
        ]
    )
    archives = sorted(dest.glob("llama_cpp_python-*.tar.gz"))
    if len(archives) != 1:
        raise BuildError(f"expected one llama_cpp_python sdist in {dest}, found {archives}")
    return archives[0]


def _unpack_llama_cpp(archive: Path, dest: Path) -> Path:
    with tarfile.open(archive) as tar:
        tar.extractall(dest, filter="data")
    sources = sorted(dest.glob("*/vendor/llama.cpp/CMakeLists.txt"))
    if len(sources) != 1:
        raise BuildError(f"no vendor/llama.cpp tree found in {archive.name}")
    return sources[0].parent


def _build(
    source: Path, build_dir: Path, flags: tuple[str, ...] = CMAKE_FLAGS, jobs: str = BUILD_JOBS
) -> Path:
    _run(["cmake", "-S", str(source), "-B", str(build_dir), *flags])
    _run(
        [
            "cmake",
            "--build",
            str(build_dir),
            "--config",
            "Release",
            "--target",
            BINARY_NAME,
            "-j",
            jobs,
        ]
    )
    built = build_dir / "bin" / BINARY_NAME
    if not binary_works(built):
        raise BuildError(f"built binary does not run: {built}")
    return built


def ensure_llama_server(
    version: str = LLAMA_CPP_PYTHON_VERSION,
    *,
    variant: str = "",
    extra_flags: tuple[str, ...] = (),
    jobs: str = BUILD_JOBS,
    sdist: Path | None = None,
) -> Path:
    """Return the path of a working cached llama-server, building it if needed.

    The defaults are the CPU build of the tests. ``variant`` names another cache entry,
    built with ``extra_flags`` after ``CMAKE_FLAGS`` (``tools/gpu_sample.py`` builds
    ``cuda-sm90`` so); ``sdist`` is a local source archive of the same layout (the sdist,
    or the pruned one of ``gpu_sample.py pack-source``) for a machine without network.
    """
    target = cached_binary_path(version, variant)
    flags = (*CMAKE_FLAGS, *extra_flags)
    if binary_works(target):
        return target
    final_dir = target.parent
    final_dir.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    # The work dir sits beside the cache entry so the final rename stays on one
    # filesystem (atomic); a killed build leaves only a ".build-*" dir behind.
    prefix = f".build-{final_dir.name}-"
    with tempfile.TemporaryDirectory(prefix=prefix, dir=final_dir.parent) as tmp:
        work = Path(tmp)
        _log(f"building llama-server from llama-cpp-python {version} in {work}")
        archive = sdist if sdist is not None else _download_sdist(version, work / "sdist")
        source = _unpack_llama_cpp(archive, work / "src")
        built = _build(source, work / "build", flags, jobs)
        staged = work / "staged"
        staged.mkdir()
        shutil.copy2(built, staged / BINARY_NAME)
        (staged / "BUILD_INFO.txt").write_text(
            f"llama-cpp-python=={version}\ncmake flags: {' '.join(flags)}\n",
            encoding="utf-8",
        )
        if final_dir.exists() and not binary_works(target):
            # A stale or broken entry (its binary failed the check above).
            shutil.rmtree(final_dir)
        try:
            staged.rename(final_dir)
        except OSError:
            # A concurrent build finished first; keep its result if it works.
            if not binary_works(target):
                raise

    _log(f"built in {time.monotonic() - started:.0f} s")
    if not binary_works(target):
        raise BuildError(f"cached binary does not run: {target}")
    return target


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main() -> int:
    # A SIGTERM unwinds like Ctrl-C: the running cmake is killed and the work dir removed.
    signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        path = ensure_llama_server()
    except BuildError as error:
        _log(f"error: {error}")
        return 1
    except KeyboardInterrupt:
        _log("interrupted; nothing was cached")
        return 130
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
