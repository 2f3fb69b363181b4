"""`evidence capture`: run the cache-state protocol against a server into a private raw dir."""

from __future__ import annotations

import enum
import math
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text

if TYPE_CHECKING:  # the harness and rich.progress load only when a capture runs
    from rich.progress import Progress

    from verifier.capture import CaptureSummary, RequestEvent
from verifier.cli.common import Command, boundary, program, stderr, stderr_console
from verifier.errors import InvalidDocument, UsageError
from verifier.inputs import read_small_file
from verifier.jsonio import loads_strict


class ProfileName(enum.StrEnum):
    """The --server-profile choices; a test checks they match the profile registry."""

    MLXCEL = "mlxcel"
    LLAMA_CPP = "llama.cpp"
    VLLM = "vllm"
    SGLANG = "sglang"


class RichProgress:
    """The harness's progress sink, drawn with rich on stderr."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.task = progress.add_task("starting", total=None)

    def begin(self, total_requests: int) -> None:
        self.progress.update(self.task, total=total_requests, description="requests")

    def note(self, message: str) -> None:
        from rich.markup import escape

        self.progress.console.print(f"[dim]{escape(message)}[/]", soft_wrap=True)

    def request_done(self, event: RequestEvent) -> None:
        digest = event.output_hash[:12] if event.output_hash else "no hash"
        status = "" if event.status == 200 else f" [red]HTTP {event.status}[/]"
        self.progress.update(
            self.task,
            advance=1,
            description=(
                f"{event.condition} {event.phase} {event.arm} {event.index}/{event.total} "
                f"cached={event.cached_tokens} {digest}{status}"
            ),
        )


class PlainProgress:
    """The harness's progress sink where stderr is no terminal (CI, `| tee`): one plain line
    per request and per note, so that a long run never looks stuck."""

    def __init__(self) -> None:
        self.done = 0
        self.total: int | None = None

    def begin(self, total_requests: int) -> None:
        self.total = total_requests
        stderr.print(Text(f"{total_requests} requests to send"))

    def note(self, message: str) -> None:
        stderr.print(Text(message), soft_wrap=True)

    def request_done(self, event: RequestEvent) -> None:
        self.done += 1
        digest = event.output_hash[:12] if event.output_hash else "no hash"
        status = "" if event.status == 200 else f", HTTP {event.status}"
        took = "" if event.elapsed_s is None else f", {event.elapsed_s:.1f} s"
        stderr.print(
            Text(
                f"request {self.done}/{self.total or '?'}: {event.condition} {event.phase} "
                f"{event.arm}, cached {event.cached_tokens}, {digest}{status}{took}"
            ),
            soft_wrap=True,
        )


def _condition_specs(specs: list[str]) -> list[str]:
    """Name the part a --condition lacks before the parser judges what is left of it."""
    for spec in specs:
        if ":" not in spec and "=" in spec:
            raise UsageError(
                f"--condition {spec!r} has no ':' between its name and its settings: write "
                "NAME:VAR=VALUE, e.g. --condition det0:MLXCEL_SDPA_DETERMINISTIC=0"
            )
    return specs


# The most cycles a capture runs (three requests each, with a proven reset): far past any
# sweep's need, and a plan that fits in memory.
MAX_CYCLES = 10_000
MAX_TOKENS = 2**31 - 1  # the widest token cap a server's request field takes
# The longest timeout: 30 days (a socket's timeout overflows the clock past some 9e9 s).
MAX_SECONDS = 30 * 24 * 3600


def _read_request(path: Path | None) -> dict[str, Any] | None:
    if path is None:
        return None
    data = read_small_file(path, "--request", 16 << 20)  # a request body: some kilobytes
    try:
        document = loads_strict(data)
    except InvalidDocument as exc:
        raise UsageError(f"--request {path}: {exc.message}") from None
    if not isinstance(document, dict):
        raise UsageError(f"--request {path} is not a JSON object")
    return document


def _print_summary(summary: CaptureSummary) -> None:
    from rich.table import Table

    table = Table(title=f"capture {summary.outcome}", title_justify="left")
    for column in ("condition", "arm", "requests", "output hashes"):
        table.add_column(column)
    for (condition, arm), hashes in summary.hashes.items():
        distinct = sorted({h[:12] if h else "(none)" for h in hashes})
        table.add_row(condition, arm, str(len(hashes)), ", ".join(distinct))
    if summary.hashes:
        stderr.print(table)
    outputs = len(summary.distinct_hashes)
    stderr.print(
        Text(
            f"{summary.requests} requests ({summary.errors} errored), {outputs} distinct "
            f"output {'hash' if outputs == 1 else 'hashes'}, {summary.elapsed_s:.1f} s. "
            f"Raw (private) output: {summary.output}"
        ),
        soft_wrap=True,
    )
    if summary.outcome == "completed":
        stderr.print(Text(f"Next: {program()} export {summary.output} --out PUBLIC_DIR"))
    else:
        stderr.print(
            Text(
                f"The raw output of this {summary.outcome} capture is kept for diagnosis in "
                f"{summary.output} (its server logs included); a retry needs a new --output, "
                "or remove that folder first."
            ),
            soft_wrap=True,
        )


def _interrupt_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def capture(
    server_profile: Annotated[
        ProfileName,
        typer.Option(
            "--server-profile",
            metavar="PROFILE",
            help="Which server: mlxcel, llama.cpp, vllm or sglang. The profile holds its "
            "flags, cache reset, opt-out field and telemetry.",
        ),
    ],
    model: Annotated[
        Path,
        typer.Option(
            "--model", metavar="PATH", help="Model directory or file (hashed, never uploaded)."
        ),
    ],
    output: Annotated[
        Path,
        typer.Option(
            "--output",
            metavar="DIR",
            help="New directory for the private raw capture; it must not exist.",
        ),
    ],
    binary: Annotated[
        Path | None,
        typer.Option(
            "--binary",
            metavar="FILE",
            help="Server executable the harness starts and stops (or give --url).",
        ),
    ] = None,
    url: Annotated[
        str | None,
        typer.Option(
            "--url",
            metavar="URL",
            help="Attach to a server you started (never stopped); the restart and "
            "cache-off phases are then skipped, and the bundle says so.",
        ),
    ] = None,
    request: Annotated[
        Path | None,
        typer.Option(
            "--request",
            metavar="FILE",
            help="JSON chat-completions body to send (default: the seed report's story prompt).",
        ),
    ] = None,
    condition: Annotated[
        list[str] | None,
        typer.Option(
            "--condition",
            metavar="SPEC",
            help="A server setting to compare, as NAME:VAR=VALUE or "
            "NAME:VAR=VALUE,VAR=VALUE; repeat for each condition. Example: "
            "det0:MLXCEL_SDPA_DETERMINISTIC=0 (default: one condition, default, with no "
            "setting).",
        ),
    ] = None,
    cycles: Annotated[
        int,
        typer.Option(
            "--cycles",
            metavar="N",
            min=1,
            max=MAX_CYCLES,
            help=f"Reset, cold, warm, warm cycles (1 to {MAX_CYCLES}).",
        ),
    ] = 2,
    no_localize: Annotated[
        bool,
        typer.Option(
            "--no-localize",
            help="Skip the diagnostic phase. By default, after the protocol, one cold and one "
            "warm request with logprobs on a fresh server find the first divergent token "
            "(never part of the verdict; skipped where the profile has no logprobs).",
        ),
    ] = False,
    max_tokens: Annotated[
        int | None,
        typer.Option(
            "--max-tokens",
            metavar="N",
            min=1,
            max=MAX_TOKENS,
            help="Token cap of every request (1 to 2^31-1); overrides max_tokens of the "
            "--request body. Without either: 800.",
        ),
    ] = None,
    port: Annotated[
        int,
        typer.Option(
            "--port",
            metavar="PORT",
            min=1,
            max=65535,
            help="Port (1 to 65535) on 127.0.0.1 for the servers the harness starts; not "
            "used with --url.",
        ),
    ] = 18128,
    wall_timeout: Annotated[
        float | None,
        typer.Option(
            "--wall-timeout",
            metavar="SECONDS",
            help="Bound of the whole run (default: none).",
        ),
    ] = None,
    request_timeout: Annotated[
        float,
        typer.Option("--request-timeout", metavar="SECONDS", help="Bound of each request."),
    ] = 600.0,
    ready_timeout: Annotated[
        float,
        typer.Option("--ready-timeout", metavar="SECONDS", help="Bound of each server start."),
    ] = 600.0,
    extra_server_arg: Annotated[
        list[str] | None,
        typer.Option(
            "--extra-server-arg",
            metavar="ARG",
            help="One more argument for every server command line; repeat for each. A value "
            "that starts with a dash needs the = form: --extra-server-arg=-fa "
            "--extra-server-arg=on",
        ),
    ] = None,
    alias: Annotated[
        str,
        typer.Option(
            "--alias", metavar="NAME", help="Model name the server serves and the body names."
        ),
    ] = "cache-repro",
    repo_id: Annotated[
        str | None,
        typer.Option(
            "--repo-id",
            metavar="REPO",
            help="Model repository, e.g. mlx-community/Qwen3-1.7B-4bit (found by itself in "
            "a Hugging Face cache).",
        ),
    ] = None,
    revision: Annotated[
        str | None,
        typer.Option("--revision", metavar="REV", help="Pinned model revision (commit)."),
    ] = None,
) -> None:
    """Capture cold, warm and cache-disabled replies of one server into a private raw dir.

    Per condition: fresh server, proven reset, cold/warm/warm (x --cycles); three
    per-request opt-outs; restart, cold/warm; a cache-off server, three requests.
    Requests are serialized; telemetry is snapshotted before and after each one.

    Example with llama.cpp (the server a newcomer can build: make llama-server):

      evidence capture --server-profile llama.cpp
        --binary ~/.cache/evidence/llama-server-0.3.36/llama-server
        --model tiny.gguf --output raw --request request.json --max-tokens 128
        --extra-server-arg=-fa --extra-server-arg=on

    Example with mlxcel (the seed report's run, two conditions):

      evidence capture --server-profile mlxcel --binary ./mlxcel-server
        --model ./Qwen3-1.7B-4bit --output ./raw-det
        --condition det0:MLXCEL_SDPA_DETERMINISTIC=0
        --condition det1:MLXCEL_SDPA_DETERMINISTIC=1
        --cycles 2 --max-tokens 800 --port 18128 --wall-timeout 1500

    The output directory must not exist; it holds private paths and environments:
    publish only what [bold]evidence export[/] makes of it. Terms, protocol and
    verdicts: docs/EVIDENCE.md.
    """
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    from verifier.capture import (
        CaptureConfig,
        CaptureFailed,
        ProtocolSpec,
        get_profile,
        parse_conditions,
        prepare_request_body,
        run_capture,
    )

    for option, seconds in (
        ("--wall-timeout", wall_timeout),
        ("--request-timeout", request_timeout),
        ("--ready-timeout", ready_timeout),
    ):
        if seconds is not None and not (math.isfinite(seconds) and 0 < seconds <= MAX_SECONDS):
            raise UsageError(
                f"{option} {seconds}: give a number of seconds above 0, at most {MAX_SECONDS:,}"
            )
    profile = get_profile(server_profile.value)
    body = prepare_request_body(
        _read_request(request),
        alias=alias,
        max_tokens=max_tokens,
        pinned=profile.pinned_request_fields,
        opt_out=profile.opt_out_fields,
    )
    config = CaptureConfig(
        profile=profile,
        model=model.absolute(),
        output=output.absolute(),
        request_body=body,
        conditions=tuple(parse_conditions(_condition_specs(condition or []))),
        binary=None if binary is None else binary.absolute(),
        url=url,
        alias=alias,
        spec=ProtocolSpec(cycles=cycles, localize=not no_localize),
        port=port,
        wall_timeout_s=wall_timeout,
        request_timeout_s=request_timeout,
        ready_timeout_s=ready_timeout,
        extra_server_args=tuple(extra_server_arg or ()),
        repo_id=repo_id,
        revision=revision,
        argv=tuple(sys.argv),
    )
    previous = signal.signal(signal.SIGTERM, _interrupt_on_sigterm)
    try:
        if stderr.is_terminal:
            with Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=stderr_console(),
                transient=True,
            ) as bar:
                summary = run_capture(config, RichProgress(bar))
        else:
            summary = run_capture(config, PlainProgress())
    except CaptureFailed as failed:
        _print_summary(failed.summary)
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)
    _print_summary(summary)


def register(app: typer.Typer) -> None:
    app.command(cls=Command)(boundary(capture))
