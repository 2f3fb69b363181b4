"""Start and stop the servers this harness owns, with a clean environment, and identify them."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from verifier.capture import http
from verifier.errors import CaptureError
from verifier.modelfiles import sha256_file

# Inherited experiment toggles and debugging overrides that would silently change the run.
STRIPPED_PREFIXES: tuple[str, ...] = ("MLX", "APC_", "LLAMA_", "CUDNN_", "CUBLASLT_")
STRIPPED_NAMES: frozenset[str] = frozenset(
    {
        "CUDA_LAUNCH_BLOCKING",
        "CUBLAS_WORKSPACE_CONFIG",
        "NVIDIA_TF32_OVERRIDE",
        "CUDA_DEVICE_MAX_CONNECTIONS",
        "CUDA_FORCE_PTX_JIT",
        "CUDA_DISABLE_PTX_JIT",
        "CUDA_CACHE_DISABLE",
        "CUDA_MODULE_LOADING",
        "PYTORCH_NO_CUDA_MEMORY_CACHING",
        "TORCH_USE_CUDA_DSA",
        "TORCH_CUDNN_V8_API_DISABLED",
    }
)
LOG_TAIL_LINES = 40
_SONAME_VERSION = re.compile(r"\.so\.([0-9][0-9A-Za-z.]*)$")
_COMMIT = re.compile(r"\b(?:commit|rev|build)[\s:=]*([0-9a-f]{7,40})\b", re.IGNORECASE)


def server_environment(
    inherited: Mapping[str, str],
    *,
    extra_prefixes: Iterable[str] = (),
    profile_env: Mapping[str, str] | None = None,
    settings: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The caller's environment minus inherited toggles, plus the profile's and condition's own."""
    prefixes = STRIPPED_PREFIXES + tuple(extra_prefixes)
    env = {
        name: value
        for name, value in inherited.items()
        if name not in STRIPPED_NAMES and not name.startswith(prefixes)
    }
    env.update(profile_env or {})
    env.update(settings or {})
    return env


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text("utf-8", errors="replace")
    except OSError:
        return "(no log)"
    tail = text.splitlines()[-lines:]
    return "\n".join(tail) if tail else "(the log is empty)"


def port_is_free(port: int) -> bool:
    """Nobody listens on 127.0.0.1:port (connections of a server just stopped do not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def version_output(binary: Path, env: Mapping[str, str], timeout: float = 20.0) -> str | None:
    """What `BINARY --version` prints (stdout and stderr), or None when it fails to run."""
    try:
        done = subprocess.run(
            [str(binary), "--version"],
            env=dict(env),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (done.stdout + done.stderr).decode("utf-8", errors="replace").strip()
    return text[:4000] or None


def build_commit(version_text: str | None) -> str | None:
    match = _COMMIT.search(version_text or "")
    return match.group(1) if match else None


@dataclass(frozen=True)
class MappedFile:
    """An executable file a server process has mapped, with its version and digest."""

    path: str
    version: str | None
    sha256: str | None

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "version": self.version, "sha256": self.sha256}


def executable_mappings(pid: int, cache: dict[str, str | None] | None = None) -> list[MappedFile]:
    """Every file mapped executable in /proc/PID/maps, hashed; [] where there is no /proc."""
    try:
        maps = Path(f"/proc/{pid}/maps").read_text("utf-8", errors="replace")
    except OSError:
        return []
    cache = {} if cache is None else cache
    paths: list[str] = []
    for line in maps.splitlines():
        fields = line.split(maxsplit=5)
        mapped = len(fields) == 6 and "x" in fields[1] and fields[5].startswith("/")
        if mapped and fields[5] not in paths:
            paths.append(fields[5])
    result = []
    for path in paths:
        if path not in cache:
            try:
                cache[path] = None if path.endswith(" (deleted)") else sha256_file(Path(path))
            except OSError:
                cache[path] = None
        match = _SONAME_VERSION.search(Path(path).name)
        result.append(MappedFile(path, match.group(1) if match else None, cache[path]))
    return result


class ServerProcess:
    """One server started by the harness, in its own session so only it (and its children)
    are ever signalled, by its own process-group id."""

    def __init__(self, argv: list[str], env: Mapping[str, str], cwd: Path, log_path: Path):
        self.argv = argv
        self.log_path = log_path
        self._log: IO[bytes] = log_path.open("wb")
        try:
            self.popen = subprocess.Popen(
                argv,
                env=dict(env),
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            self._log.close()
            raise CaptureError(f"cannot start {argv[0]}: {exc}") from None

    @property
    def pid(self) -> int:
        return self.popen.pid

    def running(self) -> bool:
        """Whether the server still runs. It is not reaped here: while it is unreaped its pid,
        and so its process-group id, cannot be reused by anyone else's process."""
        if self.popen.returncode is not None:
            return False
        try:
            info = os.waitid(os.P_PID, self.popen.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return False
        return info is None

    def failure(self, what: str) -> CaptureError:
        """An error naming the server's state and the tail of its log."""
        self._log.flush()
        state = "still running" if self.running() else "exited"
        return CaptureError(
            f"{what} ({state}); last lines of {self.log_path}:\n{log_tail(self.log_path)}"
        )

    def wait_ready(
        self, url: str, timeout: float, timeout_error: CaptureError | None = None
    ) -> None:
        """Poll the readiness URL until it answers 2xx; fail when the server exits or on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            if not self.running():
                raise self.failure("the server exited before it was ready")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise timeout_error or self.failure(
                    f"the server was not ready within {timeout:g} s"
                )
            if http.request("GET", url, timeout=min(2.0, remaining)).ok:
                return
            time.sleep(min(0.1, remaining))

    def stop(self, grace: float = 10.0) -> int | None:
        """SIGTERM the server's group, SIGKILL it after `grace`, then reap; return the exit code."""
        try:
            if self.popen.returncode is None:
                self._signal(signal.SIGTERM)
                if not self._exits_within(grace):
                    self._signal(signal.SIGKILL)
                # Stragglers the server left in its own group; still safe, it is unreaped.
                self._signal(signal.SIGKILL)
                self.popen.wait(grace)
        finally:
            self._log.close()
        return self.popen.returncode

    def _exits_within(self, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while self.running():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True

    def _signal(self, sig: signal.Signals) -> None:
        # The group id is the child's pid (start_new_session made it a session leader).
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, sig)
