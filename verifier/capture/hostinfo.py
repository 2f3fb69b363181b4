"""Facts about the capture host, gathered cheaply (no slow probes, never fatal)."""

from __future__ import annotations

import getpass
import os
import platform
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Any


def _os_name() -> str:
    try:
        for line in Path("/etc/os-release").read_text("utf-8").splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.partition("=")[2].strip().strip('"')
    except OSError:
        pass
    return f"{platform.system()} {platform.release()}".strip()


def _cpu() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text("utf-8", errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model", "Hardware") and value.strip():
                return value.strip()
    except OSError:
        pass
    return platform.processor() or None


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid()) if hasattr(os, "getuid") else "unknown"


def _nvidia() -> tuple[str | None, dict[str, str]]:
    """GPU name and driver version from nvidia-smi, when it is installed."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None, {}
    try:
        done = subprocess.run(
            [smi, "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None, {}
    first = done.stdout.strip().splitlines()[:1]
    if done.returncode != 0 or not first:
        return None, {}
    name, _, driver = first[0].partition(",")
    return name.strip() or None, {"nvidia": driver.strip()} if driver.strip() else {}


def gather() -> dict[str, Any]:
    """The `host` object of run.json."""
    accelerator, drivers = _nvidia()
    return {
        "user": _user(),
        "hostname": socket.gethostname(),
        "home": str(Path.home()),
        "cwd": os.getcwd(),
        "tmpdir": tempfile.gettempdir(),
        "os": _os_name(),
        "kernel": platform.release() or None,
        "machine": platform.machine(),
        "cpu": _cpu(),
        "cpu_count": os.cpu_count(),
        "accelerator": accelerator,
        "driver_versions": drivers,
        "python": platform.python_version(),
    }
