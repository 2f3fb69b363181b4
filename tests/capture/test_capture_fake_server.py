"""The harness end to end against a fake mlxcel-server started as --binary."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from verifier import layout
from verifier.capture import (
    CaptureConfig,
    CaptureFailed,
    RequestEvent,
    get_profile,
    parse_conditions,
    prepare_request_body,
    run_capture,
)
from verifier.errors import UsageError
from verifier.export.exporter import ExportOptions, export_bundle
from verifier.jsonio import loads_strict
from verifier.model import Verdict
from verifier.protocol import ProtocolSpec
from verifier.schemas import validate
from verifier.verify import verify_path


def make_config(
    binary: Path,
    model: Path,
    output: Path,
    port: int,
    *,
    conditions: list[str] | None = None,
    env: dict[str, str] | None = None,
    **kwargs: Any,
) -> CaptureConfig:
    profile = get_profile("mlxcel")
    body = prepare_request_body(
        None,
        alias="cache-repro",
        max_tokens=64,
        pinned=profile.pinned_request_fields,
        opt_out=profile.opt_out_fields,
    )
    environ = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/")}
    environ.update(env or {})
    return CaptureConfig(
        profile=profile,
        model=model,
        output=output,
        request_body=body,
        conditions=tuple(parse_conditions(conditions or [])),
        binary=binary,
        port=port,
        environ=environ,
        stop_grace_s=kwargs.pop("stop_grace_s", 3.0),
        ready_timeout_s=kwargs.pop("ready_timeout_s", 20.0),
        **kwargs,
    )


def read(path: Path) -> Any:
    return loads_strict(path.read_bytes())


def server_pids(output: Path) -> list[int]:
    return [read(p)["pid"] for p in sorted(output.glob("conditions/*/servers/*.json"))]


def assert_gone(pid: int) -> None:
    """The process is gone (not even a zombie of ours: the harness reaps what it starts)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    raise AssertionError(f"process {pid} still exists")


def assert_all_valid(output: Path) -> None:
    documents = {
        layout.RAW_RUN: "raw-run",
        layout.RAW_MODEL_MANIFEST: "raw-model-manifest",
    }
    for path in output.glob("conditions/*/servers/*.json"):
        documents[str(path.relative_to(output))] = "raw-server"
    for path in output.glob("conditions/*/exchanges/*.json"):
        documents[str(path.relative_to(output))] = "raw-exchange"
    for relative, schema in documents.items():
        violations = validate(read(output / relative), schema)
        assert violations == [], (relative, violations)


class Recorder:
    def __init__(self) -> None:
        self.total = 0
        self.events: list[RequestEvent] = []
        self.notes: list[str] = []

    def begin(self, total_requests: int) -> None:
        self.total = total_requests

    def note(self, message: str) -> None:
        self.notes.append(message)

    def request_done(self, event: RequestEvent) -> None:
        self.events.append(event)


def test_two_conditions_capture_fourteen_requests_each(
    fake_binary: Path, model_dir: Path, tmp_path: Path, free_port: int
) -> None:
    output = tmp_path / "raw"
    conditions = ["det0:MLXCEL_SDPA_DETERMINISTIC=0", "det1:MLXCEL_SDPA_DETERMINISTIC=1"]
    env = {"MLXCEL_APC_TRACE": "inherited", "CUDA_LAUNCH_BLOCKING": "1", "KEEP_ME": "yes"}
    progress = Recorder()
    config = make_config(
        fake_binary,
        model_dir,
        output,
        free_port,
        conditions=conditions,
        env=env,
        argv=("evidence", "capture"),
    )
    summary = run_capture(config, progress)

    assert summary.outcome == "completed" and summary.requests == 28 and summary.errors == 0
    assert progress.total == 28 and len(progress.events) == 28
    assert_all_valid(output)
    for condition in ("det0", "det1"):
        exchanges = sorted(output.glob(f"conditions/{condition}/exchanges/*.json"))
        assert len(exchanges) == 14
        assert len(list(output.glob(f"conditions/{condition}/servers/*.json"))) == 3
        assert len(list(output.glob(f"conditions/{condition}/servers/*.log"))) == 3

    run = read(output / layout.RAW_RUN)
    assert run["outcome"] == "completed" and run["finished_at"]
    assert run["server"]["binary_sha256"] and "fake" in run["server"]["version"]
    assert run["server"]["build_commit"] == "0123456789abcdef0123456789abcdef01234567"
    assert run["model"]["model_file"] == "model.safetensors"
    assert run["model"]["config_file"] == "config.json"
    assert run["protocol"]["block_size"] == 32 and run["protocol"]["parallelism"] == 4
    assert run["request_body"]["max_tokens"] == 64
    assert run["profile_rules"]["opt_out_fields"] == {"cache_prompt": False}
    assert run["server"]["profile_version"] == run["profile_rules"]["version"]
    assert "metric:mlxcel_prompt_cache_hits_total" in run["profile_rules"]["signals"]["hits"]

    # The fake answers A cold/disabled and B warm: two distinct outputs, split by arm.
    assert len(summary.distinct_hashes) == 2
    warm = set(summary.hashes[("det0", "warm")])
    cold = set(summary.hashes[("det0", "cold")]) | set(summary.hashes[("det0", "server-disabled")])
    assert len(warm) == 1 and len(cold) == 1 and warm != cold

    first = read(output / layout.raw_exchange_path("det0", 1))
    assert first["claimed_arm"] == "cold" and first["preceded_by"] == "cache-reset"
    assert first["reset"]["proven"] is True and first["reset"]["stats_after"]["entries"] == 0
    assert first["response"]["body"]["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    second = read(output / layout.raw_exchange_path("det0", 2))
    assert second["response"]["body"]["usage"]["prompt_tokens_details"]["cached_tokens"] == 32
    before = second["telemetry"]["before"]["metrics"]["mlxcel_prompt_cache_hits_total"]
    after = second["telemetry"]["after"]["metrics"]["mlxcel_prompt_cache_hits_total"]
    assert after - before == 1
    assert "mlxcel_prompt_cache_hits_total" in second["telemetry"]["after"]["metrics_text"]
    opt_out = read(output / layout.raw_exchange_path("det0", 7))
    assert opt_out["request"]["body"]["cache_prompt"] is False
    disabled = read(output / layout.raw_exchange_path("det0", 12))
    assert disabled["claimed_arm"] == "server-disabled" and disabled["server_instance"] == 3
    assert "prompt_tokens_details" not in disabled["response"]["body"]["usage"]
    assert disabled["telemetry"]["after"]["cache_stats"]["enabled"] is False

    server = read(output / layout.raw_server_path("det1", 3))
    assert server["cache_disabled"] is True and "--no-prompt-cache" in server["argv"]
    assert server["env"]["MLXCEL_SDPA_DETERMINISTIC"] == "1"
    assert "MLXCEL_APC_TRACE" not in server["env"] and "CUDA_LAUNCH_BLOCKING" not in server["env"]
    assert server["env"]["KEEP_ME"] == "yes"
    assert server["stopped_at"] and server["exit_code"] is not None
    assert any(
        lib["path"].endswith(("python3", "python")) or lib["sha256"] for lib in server["libraries"]
    )
    for pid in server_pids(output):
        assert_gone(pid)


def test_existing_output_is_refused(
    fake_binary: Path, model_dir: Path, tmp_path: Path, free_port: int
) -> None:
    output = tmp_path / "raw"
    output.mkdir()
    with pytest.raises(UsageError, match="already exists"):
        run_capture(make_config(fake_binary, model_dir, output, free_port))
    assert list(output.iterdir()) == []


def test_a_server_that_fails_to_start_gives_its_log_tail(
    fake_binary: Path, model_dir: Path, tmp_path: Path, free_port: int
) -> None:
    output = tmp_path / "raw"
    config = make_config(fake_binary, model_dir, output, free_port, env={"FAKE_EXIT_AT_START": "1"})
    with pytest.raises(CaptureFailed, match="tensor 'lm_head' missing") as caught:
        run_capture(config)
    assert "exited before it was ready" in caught.value.message
    assert caught.value.summary.outcome == "failed"
    run = read(output / layout.RAW_RUN)
    assert run["outcome"] == "failed"
    assert_all_valid(output)


def test_wall_timeout_stops_the_run_and_its_server(
    fake_binary: Path, model_dir: Path, tmp_path: Path, free_port: int
) -> None:
    output = tmp_path / "raw"
    config = make_config(
        fake_binary,
        model_dir,
        output,
        free_port,
        env={"FAKE_REQUEST_DELAY": "0.4"},
        wall_timeout_s=3.0,
    )
    started = time.monotonic()
    with pytest.raises(CaptureFailed, match="wall-timeout"):
        run_capture(config)
    assert time.monotonic() - started < 3.0 + 5
    assert read(output / layout.RAW_RUN)["outcome"] == "timed-out"
    assert_all_valid(output)
    for pid in server_pids(output):
        assert_gone(pid)


def test_request_timeout_fails_the_run(
    fake_binary: Path, model_dir: Path, tmp_path: Path, free_port: int
) -> None:
    output = tmp_path / "raw"
    config = make_config(
        fake_binary,
        model_dir,
        output,
        free_port,
        env={"FAKE_REQUEST_DELAY": "2"},
        request_timeout_s=0.5,
    )
    with pytest.raises(CaptureFailed, match="request-timeout"):
        run_capture(config)
    assert read(output / layout.RAW_RUN)["outcome"] == "failed"
    for pid in server_pids(output):
        assert_gone(pid)


def test_keyboard_interrupt_stops_servers_and_their_children(
    fake_binary: Path, model_dir: Path, tmp_path: Path, free_port: int
) -> None:
    output = tmp_path / "raw"
    child_file = tmp_path / "child.pid"
    config = make_config(
        fake_binary,
        model_dir,
        output,
        free_port,
        env={
            "FAKE_REQUEST_DELAY": "0.3",
            "FAKE_IGNORE_SIGTERM": "1",
            "FAKE_CHILD_PID_FILE": str(child_file),
        },
        stop_grace_s=0.5,
    )
    timer = threading.Timer(2.0, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            run_capture(config)
    finally:
        timer.cancel()
    assert read(output / layout.RAW_RUN)["outcome"] == "interrupted"
    assert_all_valid(output)
    pids = server_pids(output)
    assert pids
    for pid in pids:
        assert_gone(pid)
    child = int(child_file.read_text())
    try:
        assert_gone(child)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)  # a straggler of this test only, by its id


def test_port_in_use_is_refused_without_talking_to_that_server(
    fake_binary: Path, model_dir: Path, tmp_path: Path, free_port: int
) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", free_port))
        busy.listen()
        with pytest.raises(CaptureFailed, match="already in use"):
            run_capture(make_config(fake_binary, model_dir, tmp_path / "raw", free_port))


def test_a_reset_that_clears_nothing_is_recorded_unproven(
    fake_binary: Path, model_dir: Path, tmp_path: Path, free_port: int
) -> None:
    output = tmp_path / "raw"
    config = make_config(
        fake_binary,
        model_dir,
        output,
        free_port,
        env={"FAKE_RESET_KEEPS_ENTRIES": "1"},
        spec=ProtocolSpec(cycles=2),
    )
    summary = run_capture(config)
    cold = read(output / layout.raw_exchange_path("default", 4))
    assert cold["reset"]["proven"] is False
    assert any("did not clear" in note for note in summary.notes)
    assert any("do not show it empty" in note for note in read(output / layout.RAW_RUN)["notes"])


def test_attach_to_a_running_server_never_stops_it(
    fake_binary: Path, model_dir: Path, tmp_path: Path, free_port: int
) -> None:
    import subprocess

    argv = [
        str(fake_binary),
        "-m",
        str(model_dir),
        "--alias",
        "cache-repro",
        "--host",
        "127.0.0.1",
        "--port",
        str(free_port),
        "--parallel",
        "4",
        "--metrics",
        "--no-warmup",
    ]
    server = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        profile = get_profile("mlxcel")
        deadline = time.monotonic() + 10
        from verifier.capture import http

        while not http.request("GET", f"http://127.0.0.1:{free_port}/health", timeout=1).ok:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        output = tmp_path / "raw"
        config = CaptureConfig(
            profile=profile,
            model=model_dir,
            output=output,
            request_body=prepare_request_body(
                None, alias="cache-repro", max_tokens=8, pinned={}, opt_out=profile.opt_out_fields
            ),
            conditions=tuple(parse_conditions([])),
            url=f"http://127.0.0.1:{free_port}",
        )
        summary = run_capture(config)
        assert summary.requests == 9
        assert server.poll() is None
        run = read(output / layout.RAW_RUN)
        assert run["server"]["attached"] is True and run["server"]["binary_sha256"] is None
        skipped = {s["phase"] for s in run["protocol"]["skipped_phases"]}
        assert skipped == {"restart", "disabled-server"}
        assert not list(output.glob("conditions/*/servers/*"))
        assert_all_valid(output)
        # The skips the attach mode allows keep the verdict, and every report says so.
        export_bundle(ExportOptions(output, tmp_path / "public"))
        result = verify_path(tmp_path / "public")
        assert result.verified, [f for f in result.findings if f.is_error]
        assert result.classification is not None
        (condition,) = result.classification.conditions
        assert any("without the server-disabled control" in r for r in condition.reasons)
        assert result.verdict is condition.verdict is not Verdict.INCONCLUSIVE
    finally:
        server.terminate()
        server.wait(10)
