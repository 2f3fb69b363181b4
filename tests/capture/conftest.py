"""Fixtures of the capture tests: a fake mlxcel-server binary, a free port, a tiny model dir."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

FAKE_SERVER = Path(__file__).with_name("fake_mlxcel_server.py")


@pytest.fixture
def fake_binary(tmp_path: Path) -> Path:
    """The fake server as an executable script whose shebang is this interpreter."""
    binary = tmp_path / "bin" / "mlxcel-server"
    binary.parent.mkdir()
    source = FAKE_SERVER.read_text("utf-8").split("\n", 1)[1]
    binary.write_text(f"#!{sys.executable}\n{source}", "utf-8")
    binary.chmod(0o755)
    return binary


@pytest.fixture
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    model = tmp_path / "Qwen3-1.7B-4bit"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "qwen3"}\n', "utf-8")
    (model / "model.safetensors").write_bytes(b"\x00" * 4096)
    (model / "tokenizer.json").write_text("{}\n", "utf-8")
    return model
