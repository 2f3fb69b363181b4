"""Run the capture protocol against real servers and write the private raw directory."""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from verifier import __version__, layout
from verifier.canonical import OutputHashError, output_hash
from verifier.capture import hostinfo, http, process
from verifier.capture.manifest import hash_model
from verifier.capture.prometheus import parse_metrics
from verifier.errors import CaptureError, UsageError
from verifier.jsonio import dumps_stable, resolve_pointer
from verifier.model import Arm
from verifier.modelfiles import detect_hf_snapshot, sha256_file
from verifier.profiles.base import LaunchSpec, ServerProfile
from verifier.profiles.rules import ResetProof
from verifier.protocol import (
    Capabilities,
    Condition,
    ProtocolSpec,
    Step,
    StepKind,
    build_protocol,
)
from verifier.schemas import SCHEMA_VERSION

SNAPSHOT_TIMEOUT_S = 10.0


class WallTimeout(CaptureError):
    """The whole run exceeded --wall-timeout."""


class CaptureFailed(CaptureError):
    """The run stopped early; run.json records how, and `summary` what was captured."""

    def __init__(self, message: str, summary: CaptureSummary) -> None:
        super().__init__(message)
        self.summary = summary


@dataclass(frozen=True)
class CaptureConfig:
    """What one capture runs: the server, the model, the conditions and the protocol."""

    profile: ServerProfile
    model: Path
    output: Path
    request_body: dict[str, Any]
    conditions: tuple[Condition, ...]
    binary: Path | None = None
    url: str | None = None
    alias: str = "cache-repro"
    spec: ProtocolSpec = field(default_factory=ProtocolSpec)
    port: int = 18128
    wall_timeout_s: float | None = None
    request_timeout_s: float = 600.0
    ready_timeout_s: float = 600.0
    stop_grace_s: float = 10.0
    extra_server_args: tuple[str, ...] = ()
    repo_id: str | None = None
    revision: str | None = None
    argv: tuple[str, ...] = ()
    environ: Mapping[str, str] | None = None  # None: this process's environment


@dataclass(frozen=True)
class RequestEvent:
    """One finished request, for progress displays."""

    condition: str
    phase: str
    arm: str
    index: int  # within the condition, from 1
    total: int
    status: int | None
    output_hash: str | None
    cached_tokens: Any
    elapsed_s: float | None


class ProgressSink(Protocol):
    """What the harness tells a display; the CLI implements it with rich."""

    def begin(self, total_requests: int) -> None: ...
    def note(self, message: str) -> None: ...
    def request_done(self, event: RequestEvent) -> None: ...


class NullProgress:
    def begin(self, total_requests: int) -> None:
        pass

    def note(self, message: str) -> None:
        pass

    def request_done(self, event: RequestEvent) -> None:
        pass


@dataclass
class CaptureSummary:
    """How a capture went: where it wrote, its outcome, its requests and the hashes seen."""

    output: Path
    outcome: str = "completed"
    requests: int = 0
    errors: int = 0
    elapsed_s: float = 0.0
    hashes: dict[tuple[str, str], list[str | None]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def distinct_hashes(self) -> set[str]:
        return {h for values in self.hashes.values() for h in values if h is not None}


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Deadline:
    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self._end = math.inf if seconds is None else time.monotonic() + seconds

    def remaining(self) -> float:
        return self._end - time.monotonic()

    def expired(self) -> bool:
        return self.remaining() <= 0

    def error(self) -> WallTimeout:
        return WallTimeout(f"the run exceeded --wall-timeout {self.seconds:g} s")

    def check(self) -> None:
        if self.expired():
            raise self.error()

    def bound(self, timeout: float) -> float:
        return max(0.0, min(timeout, self.remaining()))


class RawWriter:
    """Writes into the private raw directory: each JSON file via a temporary name and rename."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def create(self) -> None:
        try:
            self.root.mkdir(mode=0o700, parents=False)
        except FileExistsError:
            raise UsageError(f"{self.root} already exists; choose a new --output") from None
        except OSError as exc:
            raise UsageError(f"cannot create {self.root}: {exc.strerror}") from None

    def path(self, relative: str) -> Path:
        return self.root / relative

    def json(self, relative: str, document: Any) -> None:
        target = self.root / relative
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        temporary = target.with_name(f".{target.name}.tmp")
        temporary.write_bytes(dumps_stable(document))
        os.replace(temporary, target)

    def log(self, message: str) -> None:
        with (self.root / layout.RAW_HARNESS_LOG).open("a", encoding="utf-8") as handle:
            handle.write(f"{now()} {message}\n")


@dataclass
class _Server:
    """A server of the capture (None: one attached to, not started) and its document."""

    process: process.ServerProcess | None
    instance: int
    document: dict[str, Any]


class _Run:
    """State of one capture: the config, the deadline, the files written so far."""

    def __init__(self, config: CaptureConfig, progress: ProgressSink) -> None:
        self.config = config
        self.profile = config.profile
        self.progress = progress
        self.writer = RawWriter(config.output)
        self.deadline = Deadline(config.wall_timeout_s)
        self.environ = dict(os.environ if config.environ is None else config.environ)
        self.summary = CaptureSummary(config.output)
        self.lib_hashes: dict[str, str | None] = {}
        self.attached = config.url is not None
        self.base_url = (config.url or f"http://127.0.0.1:{config.port}").rstrip("/")
        self.protocol = build_protocol(
            config.spec,
            Capabilities(
                starts_servers=not self.attached,
                has_opt_out=self.profile.opt_out_fields is not None,
                can_disable_cache=self.profile.can_disable_cache,
                opt_out_missing_reason=self.profile.opt_out_missing_reason,
                has_logprobs=self.profile.rules.logprobs_top_k is not None,
            ),
        )
        self.block_size = self.profile.block_size
        self.run_doc = self._initial_run_doc()
        self.done = 0

    # -- run.json -----------------------------------------------------------------------

    def _initial_run_doc(self) -> dict[str, Any]:
        config, profile = self.config, self.profile
        snapshot = detect_hf_snapshot(config.model)
        return {
            "schema_version": SCHEMA_VERSION,
            "kind": "evidence.raw-run",
            "capture_tool": {"name": "evidence", "version": __version__},
            "argv": list(config.argv),
            "started_at": now(),
            "finished_at": None,
            "notes": self.summary.notes,
            "host": hostinfo.gather(),
            "server": {
                "profile": profile.name,
                "profile_version": profile.version,
                "name": profile.server_name,
                "binary_path": None if config.binary is None else str(config.binary),
                "binary_sha256": None,
                "version": None,
                "build_commit": None,
                "attached": self.attached,
                "url": self.base_url,
                "alias": config.alias,
                "experiment_env_prefixes": list(profile.experiment_env_prefixes),
            },
            "model": {
                "path": str(config.model),
                "repo_id": config.repo_id or (snapshot.repo_id if snapshot else None),
                "revision": config.revision or (snapshot.revision if snapshot else None),
                "model_file": None,
                "config_file": None,
            },
            "request_body": config.request_body,
            "conditions": [
                {"id": c.id, "settings": dict(c.settings)}
                | ({"server_args": list(c.server_args)} if c.server_args else {})
                for c in config.conditions
            ],
            "protocol": self._protocol_doc(),
            "profile_rules": profile.rules.to_json(),
        }

    def _protocol_doc(self) -> dict[str, Any]:
        spec = self.config.spec
        return {
            "cycles": spec.cycles,
            "warm_per_cycle": spec.warm_per_cycle,
            "restart_warm": spec.restart_warm,
            "localize": spec.localize,
            "max_tokens": self.config.request_body["max_tokens"],
            "parallelism": self.profile.parallelism,
            "block_size": self.block_size,
            "opt_out_repeats": spec.opt_out_repeats,
            "disabled_repeats": spec.disabled_repeats,
            "request_timeout_s": self.config.request_timeout_s,
            "wall_timeout_s": self.config.wall_timeout_s,
            "skipped_phases": [
                {"phase": s.phase, "reason": s.reason} for s in self.protocol.skipped
            ],
        }

    def write_run(self) -> None:
        self.run_doc["protocol"] = self._protocol_doc()
        self.writer.json(layout.RAW_RUN, self.run_doc)

    def note(self, message: str) -> None:
        self.summary.notes.append(message)
        self.writer.log(f"note: {message}")
        self.progress.note(message)

    # -- the whole run ------------------------------------------------------------------

    def execute(self) -> None:
        self.writer.log(f"capture started: {len(self.config.conditions)} condition(s)")
        self.write_run()
        self.progress.note(f"hashing the model {self.config.model}")
        manifest = hash_model(self.config.model, self.config.repo_id, self.config.revision)
        self.writer.json(layout.RAW_MODEL_MANIFEST, manifest.to_json())
        model = self.run_doc["model"]
        model.update(repo_id=manifest.repo_id, revision=manifest.revision)
        served = _served_file(self.profile, self.config.model, {f.path for f in manifest.files})
        model.update(model_file=served or manifest.model_file, config_file=manifest.config_file)
        if self.config.binary is not None:
            self._identify_binary(self.config.binary)
        self.write_run()
        if self.attached:
            ready = http.request(
                "GET", self.base_url + self.profile.readiness_path, timeout=self.deadline.bound(10)
            )
            if not ready.ok:
                raise CaptureError(
                    f"no ready server at {self.base_url}: {ready.error or ready.status}"
                )
            if any(c.settings for c in self.config.conditions):
                self.note("attached server: the condition settings are declared, not applied")
        self.progress.begin(len(self.protocol.requests) * len(self.config.conditions))
        for condition in self.config.conditions:
            self._run_condition(condition)

    def _identify_binary(self, binary: Path) -> None:
        server = self.run_doc["server"]
        server["binary_sha256"] = sha256_file(binary)
        env = process.server_environment(
            self.environ, extra_prefixes=self.profile.experiment_env_prefixes
        )
        version = process.version_output(binary, env, timeout=self.deadline.bound(20.0))
        server["version"] = version
        server["build_commit"] = process.build_commit(version)

    def _run_condition(self, condition: Condition) -> None:
        self.writer.log(f"condition {condition.id}: {condition.settings}")
        scratch = Path(tempfile.mkdtemp(prefix="evidence-capture-"))
        server: _Server | None = (
            _Server(None, 1, {}) if self.attached else None
        )  # an attached server is instance 1 and has no server file
        state = _ConditionState(condition, scratch, len(self.protocol.requests))
        try:
            for step in self.protocol.steps:
                self.deadline.check()
                if step.kind is StepKind.START:
                    server = self._start(state, step)
                elif step.kind is StepKind.STOP:
                    if server is not None:
                        self._stop(state, server)
                    server = None
                elif step.kind is StepKind.RESET:
                    state.pending_reset = self._reset(state, step)
                else:
                    assert server is not None, "the protocol starts a server before requests"
                    self._request(state, server, step)
        finally:
            if server is not None and server.process is not None:
                self._stop(state, server)
            shutil.rmtree(scratch, ignore_errors=True)

    # -- servers ------------------------------------------------------------------------

    def _start(self, state: _ConditionState, step: Step) -> _Server:
        config, condition = self.config, state.condition
        assert config.binary is not None
        state.instance += 1
        instance = state.instance
        if not process.port_is_free(config.port):
            raise CaptureError(
                f"port {config.port} on 127.0.0.1 is already in use; the harness only talks to "
                "servers it started itself: choose another --port (or attach with --url)"
            )
        launch = LaunchSpec(
            binary=config.binary,
            model=config.model,
            alias=config.alias,
            port=config.port,
            cache_disabled=step.cache_disabled,
            scratch_dir=state.scratch / f"server-{instance}",
            extra_args=(*config.extra_server_args, *condition.server_args),
        )
        launch.scratch_dir.mkdir(mode=0o700)
        argv = self.profile.start_argv(launch)
        env = process.server_environment(
            self.environ,
            extra_prefixes=self.profile.experiment_env_prefixes,
            profile_env=self.profile.extra_env,
            settings=condition.settings,
        )
        log_path = self.writer.path(layout.raw_server_log_path(condition.id, instance))
        log_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        document: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "kind": "evidence.raw-server",
            "condition": condition.id,
            "instance": instance,
            "cache_disabled": step.cache_disabled,
            "argv": argv,
            "env": env,
            "cwd": str(launch.scratch_dir),
            "pid": None,
            "started_at": now(),
            "ready_at": None,
            "stopped_at": None,
            "exit_code": None,
            "log_path": str(log_path.absolute()),
            "libraries": [],
        }
        cache = "off" if step.cache_disabled else "on"
        self.progress.note(f"{condition.id}: starting server {instance} (cache {cache})")
        proc = process.ServerProcess(argv, env, launch.scratch_dir, log_path)
        server = _Server(proc, instance, document)
        document["pid"] = proc.pid
        self._write_server(state, server)
        self.writer.log(f"server {condition.id}/{instance} pid {proc.pid}: {' '.join(argv)}")
        wall_bound = self.deadline.remaining() < config.ready_timeout_s
        try:
            proc.wait_ready(
                self.base_url + self.profile.readiness_path,
                self.deadline.bound(config.ready_timeout_s),
                self.deadline.error() if wall_bound else None,
            )
            document["ready_at"] = now()
            document["libraries"] = [
                m.to_json() for m in process.executable_mappings(proc.pid, self.lib_hashes)
            ]
            self._write_server(state, server)
        except BaseException:
            self._stop(state, server)
            raise
        return server

    def _stop(self, state: _ConditionState, server: _Server) -> None:
        if server.process is None:
            return
        exit_code = server.process.stop(self.config.stop_grace_s)
        server.document.update(stopped_at=now(), exit_code=exit_code)
        self._write_server(state, server)
        self.writer.log(f"server {state.condition.id}/{server.instance} stopped: {exit_code}")
        server.process = None

    def _write_server(self, state: _ConditionState, server: _Server) -> None:
        path = layout.raw_server_path(state.condition.id, server.instance)
        self.writer.json(path, server.document)

    # -- telemetry ----------------------------------------------------------------------

    def _timeout(self, limit: float) -> float:
        self.deadline.check()
        return self.deadline.bound(limit)

    def snapshot(self) -> dict[str, Any]:
        """Cache stats and the full /metrics text (and its samples), as the server serves them."""
        shot: dict[str, Any] = {"taken_at": now()}
        stats: Any = None
        stats_status: int | None = None
        if self.profile.stats_path is not None:
            result = http.request(
                "GET",
                self.base_url + self.profile.stats_path,
                timeout=self._timeout(SNAPSHOT_TIMEOUT_S),
            )
            stats_status = result.status
            parsed = result.json() if result.ok else None
            stats = parsed if isinstance(parsed, dict) else None
        shot.update(cache_stats=stats, cache_stats_status=stats_status)
        text: str | None = None
        metrics_status: int | None = None
        if self.profile.metrics_path is not None:
            result = http.request(
                "GET",
                self.base_url + self.profile.metrics_path,
                timeout=self._timeout(SNAPSHOT_TIMEOUT_S),
            )
            metrics_status = result.status
            text = result.text if result.ok else None
        shot.update(
            metrics=None if text is None else parse_metrics(text),
            metrics_text=text,
            metrics_status=metrics_status,
        )
        self._learn_block_size(stats)
        return shot

    def _learn_block_size(self, stats: Any) -> None:
        pointer = self.profile.block_size_pointer
        if self.block_size is not None or pointer is None or stats is None:
            return
        try:
            value = resolve_pointer(stats, pointer)
        except KeyError:
            return
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            self.block_size = value

    # -- reset and requests -------------------------------------------------------------

    def _reset(self, state: _ConditionState, step: Step) -> dict[str, Any]:
        call = self.profile.reset
        result = http.request(
            call.method, self.base_url + call.path, timeout=self._timeout(SNAPSHOT_TIMEOUT_S)
        )
        record: dict[str, Any] = {
            "status": result.status,
            "answer": result.json() if result.status is not None else None,
            "proven": None,
            "stats_after": None,
        }
        if result.status is not None and record["answer"] is None and result.body:
            record["answer"] = result.text
        if self.profile.reset_proof is ResetProof.STATS_ENTRIES and self.profile.stats_path:
            stats = self.snapshot()["cache_stats"]
            record["stats_after"] = stats
            record["proven"] = _entries_zero(stats, self.profile.rules.cache_entries_pointer)
        where = f"{state.condition.id} {step.phase}"
        if not result.ok:
            self.note(f"{where}: the cache reset answered {result.status or result.error}")
        if record["proven"] is False:
            self.note(f"{where}: the cache stats after the reset do not show it empty")
        self.writer.log(f"reset {where}: status {result.status}, proven {record['proven']}")
        return record

    def _request(self, state: _ConditionState, server: _Server, step: Step) -> None:
        assert step.arm is not None
        body = dict(self.config.request_body)
        if step.opt_out and self.profile.opt_out_fields:
            body.update(self.profile.opt_out_fields)
        if step.logprobs:
            body.update(self.profile.rules.diagnostic_fields)
        url = self.base_url + self.profile.chat_path
        before = self.snapshot()
        started_at = now()
        wall_bound = self.deadline.remaining() < self.config.request_timeout_s
        result = http.request(
            "POST", url, body, timeout=self._timeout(self.config.request_timeout_s)
        )
        after = self.snapshot() if not result.timed_out else _empty_snapshot()
        state.sequence += 1
        reset, state.pending_reset = state.pending_reset, None
        parsed = result.json() if result.status is not None else None
        exchange = {
            "schema_version": SCHEMA_VERSION,
            "kind": "evidence.raw-exchange",
            "condition": state.condition.id,
            "sequence": state.sequence,
            "phase": step.phase,
            "server_instance": server.instance,
            "claimed_arm": str(step.arm),
            "preceded_by": step.preceded_by,
            "reset": reset,
            "request": {"method": "POST", "url": url, "body": body},
            "response": {
                "status": result.status,
                "headers": result.headers,
                "body": parsed if isinstance(parsed, dict) else None,
                "text": None if isinstance(parsed, dict) else result.text,
                "error": result.error,
            },
            "timing": {"started_at": started_at, "elapsed_s": round(result.elapsed_s, 6)},
            "telemetry": {"before": before, "after": after},
        }
        self.writer.json(layout.raw_exchange_path(state.condition.id, state.sequence), exchange)
        self._account(state, step, result, parsed, reset)
        if result.timed_out:
            if wall_bound:
                raise self.deadline.error()
            raise CaptureError(
                f"request {state.sequence} of {state.condition.id} got no answer within "
                f"--request-timeout {self.config.request_timeout_s:g} s"
            )
        if result.status is None and server.process is not None and not server.process.running():
            raise server.process.failure(f"the server died during request {state.sequence}")

    def _account(
        self,
        state: _ConditionState,
        step: Step,
        result: http.HttpResult,
        parsed: Any,
        reset: dict[str, Any] | None,
    ) -> None:
        assert step.arm is not None
        digest: str | None = None
        if result.ok:
            try:
                digest = output_hash(parsed)
            except OutputHashError as exc:
                self.note(f"{state.condition.id} request {state.sequence}: no output hash ({exc})")
        else:
            self.summary.errors += 1
            self.note(
                f"{state.condition.id} request {state.sequence} failed: "
                f"{result.status or ''} {result.error or ''}".strip()
            )
        cached = _pointer(parsed, self.profile.rules.cached_tokens_pointer)
        where = f"{state.condition.id} request {state.sequence} ({step.phase} {step.arm})"
        numeric = isinstance(cached, int | float) and not isinstance(cached, bool)
        if result.ok and numeric and cached != 0 and step.arm is not Arm.WARM:
            cause = "the reset did not clear the cache" if reset is not None else "not cold"
            self.note(f"{where} reported cached_tokens={cached}: {cause}")
        elif result.ok and step.arm is Arm.WARM and (not numeric or cached == 0):
            self.note(f"{where} reported cached_tokens={cached}: no hit shown")
        self.summary.requests += 1
        self.summary.hashes.setdefault((state.condition.id, str(step.arm)), []).append(digest)
        self.writer.log(
            f"request {state.condition.id}/{state.sequence} {step.phase} {step.arm}: "
            f"status {result.status}, cached {cached}, hash {digest}"
        )
        self.progress.request_done(
            RequestEvent(
                condition=state.condition.id,
                phase=step.phase,
                arm=str(step.arm),
                index=state.sequence,
                total=state.total,
                status=result.status,
                output_hash=digest,
                cached_tokens=cached,
                elapsed_s=result.elapsed_s,
            )
        )


@dataclass
class _ConditionState:
    """Where a condition's capture stands: its scratch dir, server and request counts."""

    condition: Condition
    scratch: Path
    total: int
    instance: int = 0
    sequence: int = 0
    pending_reset: dict[str, Any] | None = None


def _pointer(document: Any, pointer: str | None) -> Any:
    if document is None or pointer is None:
        return None
    try:
        return resolve_pointer(document, pointer)
    except KeyError:
        return None


def _entries_zero(stats: Any, pointer: str | None) -> bool | None:
    entries = _pointer(stats, pointer)
    if isinstance(entries, bool) or not isinstance(entries, int | float):
        return None
    return entries == 0


def _served_file(profile: ServerProfile, model: Path, listed: set[str]) -> str | None:
    """The manifest's name of the file the server is given, where it is given one file of
    the model's folder (llama-server's GGUF beside a `model.safetensors`): the model_file
    is the weights it serves, not the folder's likeliest."""
    if not model.is_dir():
        return None
    try:
        given = profile.model_argument(model)
        name = given.relative_to(model).as_posix()
    except (UsageError, ValueError):  # no one file (an attached server's), or outside
        return None
    return name if given.is_file() and name in listed else None


def _empty_snapshot() -> dict[str, Any]:
    return {"taken_at": now(), "cache_stats": None, "metrics": None, "metrics_text": None}


def check_inputs(config: CaptureConfig) -> None:
    """Refuse what would fail later, before anything is written."""
    if config.output.exists() or config.output.is_symlink():
        raise UsageError(f"{config.output} already exists; choose a new --output")
    if not config.output.parent.is_dir():
        raise UsageError(f"the parent of --output, {config.output.parent}, is not a directory")
    if not config.model.exists():
        raise UsageError(f"the model {config.model} does not exist")
    if (config.binary is None) == (config.url is None):
        raise UsageError("give exactly one of --binary (start servers) or --url (attach)")
    if config.binary is not None and not (
        config.binary.is_file() and os.access(config.binary, os.X_OK)
    ):
        raise UsageError(f"the server binary {config.binary} is not an executable file")
    if config.binary is not None:
        config.profile.model_argument(config.model)  # e.g. llama.cpp needs one .gguf file
    if config.url is not None and len(config.conditions) > 1:
        raise UsageError("an attached server (--url) runs one configuration: give one --condition")


def run_capture(config: CaptureConfig, progress: ProgressSink | None = None) -> CaptureSummary:
    """Run every condition's protocol; write run.json whatever happens.

    Returns the summary of a completed run. A failed or timed-out run raises CaptureFailed
    (its summary attached); Ctrl-C re-raises KeyboardInterrupt. Servers the harness started
    are stopped in every case; an attached server is never stopped.
    """
    check_inputs(config)
    run = _Run(config, progress or NullProgress())
    run.writer.create()
    started = time.monotonic()
    failure: CaptureError | None = None
    try:
        run.execute()
    except WallTimeout as exc:
        run.summary.outcome, failure = "timed-out", exc
    except CaptureError as exc:
        run.summary.outcome, failure = "failed", exc
    except KeyboardInterrupt:
        run.summary.outcome = "interrupted"
        raise
    except BaseException:
        run.summary.outcome = "failed"
        raise
    finally:
        run.summary.elapsed_s = time.monotonic() - started
        if failure is not None:  # recorded, not shown: the caller reports the error itself
            run.summary.notes.append(f"{run.summary.outcome}: {failure.message}")
        run.run_doc.update(finished_at=now(), outcome=run.summary.outcome)
        run.write_run()
        run.writer.log(f"capture {run.summary.outcome}")
    if failure is not None:
        raise CaptureFailed(
            f"capture {run.summary.outcome}: {failure.message}\n"
            f"(partial raw output and run.json are in {config.output})",
            run.summary,
        )
    return run.summary
