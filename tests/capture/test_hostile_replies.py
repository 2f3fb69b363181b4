"""Capture against a server whose replies the strict reader refuses: each is recorded as a
reply that is not JSON (its text kept), never the run lost to a traceback (audit_i r7)."""

from __future__ import annotations

import importlib.util
import json
import threading
from collections.abc import Callable, Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from verifier import layout
from verifier.capture import (
    CaptureConfig,
    get_profile,
    parse_conditions,
    prepare_request_body,
    run_capture,
)
from verifier.capture import http as capture_http
from verifier.jsonio import loads_strict
from verifier.schemas import validate

FAKE_SERVER = Path(__file__).with_name("fake_mlxcel_server.py")


def _fake() -> ModuleType:
    """A private copy of the fake server's module, whose reply this test may replace."""
    spec = importlib.util.spec_from_file_location("hostile_fake_mlxcel_server", FAKE_SERVER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _nan(reply: str) -> str:
    return reply.replace('"completion_tokens"', '"extra": NaN, "completion_tokens"')


def _surrogate(reply: str) -> str:
    return reply.replace("howl.", "howl \\ud800.").replace("picked up.", "picked up \\ud800.")


def _deep(reply: str) -> str:
    return reply[:-1] + ', "x": ' + "[" * 100_000 + "]" * 100_000 + "}"


def _duplicate_key(reply: str) -> str:
    return reply.replace('"object"', '"id": "dup", "object"')


HOSTILE: dict[str, Callable[[str], str]] = {
    "nan": _nan,
    "lone-surrogate": _surrogate,
    "nested-100000-deep": _deep,
    "duplicate-key": _duplicate_key,
}


@pytest.fixture
def serve() -> Iterator[Callable[[ModuleType], str]]:
    """Serve a fake module's handler on a free loopback port, in this process."""
    servers: list[ThreadingHTTPServer] = []

    def start(fake: ModuleType) -> str:
        state = fake.State(cache_on=True, metrics=True)
        server = ThreadingHTTPServer(("127.0.0.1", 0), fake.make_handler(state))
        servers.append(server)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def capture(url: str, model_dir: Path, output: Path) -> Any:
    profile = get_profile("mlxcel")
    config = CaptureConfig(
        profile=profile,
        model=model_dir,
        output=output,
        request_body=prepare_request_body(
            None, alias="cache-repro", max_tokens=8, pinned={}, opt_out=profile.opt_out_fields
        ),
        conditions=tuple(parse_conditions([])),
        url=url,
    )
    return run_capture(config)


def raw_documents(output: Path) -> dict[Path, Any]:
    """Every raw document, read back as export reads it, each valid against its schema."""
    schemas = {layout.RAW_RUN: "raw-run", layout.RAW_MODEL_MANIFEST: "raw-model-manifest"}
    found = {output / name: schema for name, schema in schemas.items()}
    found.update({p: "raw-exchange" for p in output.glob("conditions/*/exchanges/*.json")})
    documents = {}
    for path, schema in found.items():
        document = loads_strict(path.read_bytes())
        assert validate(document, schema) == [], path
        documents[path] = document
    return documents


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_reply_the_strict_reader_refuses_is_recorded_as_text(
    name: str,
    serve: Callable[[ModuleType], str],
    model_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """NaN, a lone surrogate, 100,000-deep nesting and a duplicate key: the capture ended
    in `internal error` (ValueError, UnicodeEncodeError, RecursionError) and the run was
    lost; now every request is recorded, its reply as the text the server sent."""
    fake = _fake()
    plain, twist = fake.complete, HOSTILE[name]
    sent: list[str] = []

    def hostile(state: Any, body: dict[str, Any]) -> bytes:
        reply = twist(json.dumps(plain(state, body)))
        sent.append(reply)
        return reply.encode()

    monkeypatch.setattr(fake, "complete", hostile)
    output = tmp_path / "raw"
    summary = capture(serve(fake), model_dir, output)
    assert summary.requests == len(sent) > 0
    documents = raw_documents(output)
    exchanges = [d for p, d in sorted(documents.items()) if "exchanges" in p.parts]
    assert len(exchanges) == len(sent)
    for exchange in exchanges:
        response = exchange["response"]
        assert response["status"] == 200 and response["body"] is None
        assert response["text"] in sent  # the reply as it came, nothing lost
    run = documents[output / layout.RAW_RUN]
    assert any("no output hash" in note for note in run["notes"])


def test_cache_stats_the_strict_reader_refuses_are_not_recorded_as_stats(
    serve: Callable[[ModuleType], str],
    model_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Stats holding NaN (read before and after every request) were written into the
    exchange's telemetry, where the raw writer refused them: now they are not stats."""
    fake = _fake()
    plain = fake.stats

    def hostile(state: Any) -> bytes:
        return json.dumps({**plain(state), "hit_rate": float("nan")}).encode()

    monkeypatch.setattr(fake, "stats", hostile)
    output = tmp_path / "raw"
    summary = capture(serve(fake), model_dir, output)
    assert summary.requests > 0
    documents = raw_documents(output)
    exchanges = [d for p, d in documents.items() if "exchanges" in p.parts]
    assert exchanges
    for exchange in exchanges:
        assert exchange["response"]["body"] is not None  # the reply itself is fine
        for shot in (exchange["telemetry"]["before"], exchange["telemetry"]["after"]):
            assert shot["cache_stats"] is None and shot["cache_stats_status"] == 200


@pytest.mark.parametrize(
    "body",
    [b'{"a": NaN}', b'{"a": "\\ud800"}', b"[" * 1000 + b"]" * 1000, b'{"a": 1, "a": 2}'],
)
def test_http_result_json_is_strict(body: bytes) -> None:
    result = capture_http.HttpResult(200, body, 0.0)
    assert result.json() is None
    assert capture_http.HttpResult(200, b'{"a": [1, "\\u00e9"]}', 0.0).json() == {"a": [1, "é"]}
