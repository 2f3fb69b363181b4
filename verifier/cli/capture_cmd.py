"""`evidence capture`: run the cache-state protocol against a server into a private raw dir."""

from __future__ import annotations

import enum
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Any

import typer

from verifier.cli.common import boundary, stderr

if TYPE_CHECKING:  # the harness and rich.progress load only when a capture runs
    from rich.progress import Progress

    from verifier.capture import CaptureSummary, RequestEvent


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
        self.progress.console.print(f"[dim]{message}[/]", soft_wrap=True)

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


def _read_request(path: Path | None) -> dict[str, Any] | None:
    from verifier.errors import InvalidDocument, UsageError
    from verifier.jsonio import loads_strict

    if path is None:
        return None
    try:
        document = loads_strict(path.read_bytes())
    except OSError as exc:
        raise UsageError(f"cannot read --request {path}: {exc.strerror}") from None
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
    stderr.print(
        f"{summary.requests} requests ({summary.errors} errored), "
        f"{len(summary.distinct_hashes)} distinct output hash(es), "
        f"{summary.elapsed_s:.1f} s. Raw (private) output: {summary.output}"
    )
    if summary.outcome == "completed":
        stderr.print(f"Next: evidence export {summary.output} --out PUBLIC_DIR")


def _interrupt_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def capture(
    server_profile: Annotated[
        ProfileName,
        typer.Option(
            "--server-profile", help="Which server: its flags, cache reset, opt-out, telemetry."
        ),
    ],
    model: Annotated[
        Path, typer.Option("--model", help="Model directory or file (hashed, never uploaded).")
    ],
    output: Annotated[
        Path, typer.Option("--output", help="New directory for the private raw capture.")
    ],
    binary: Annotated[
        Path | None, typer.Option("--binary", help="Server executable to start and stop.")
    ] = None,
    url: Annotated[
        str | None,
        typer.Option("--url", help="Attach to a running server instead (never stopped)."),
    ] = None,
    request: Annotated[
        Path | None,
        typer.Option("--request", help="JSON chat-completions body (default: the seed's)."),
    ] = None,
    condition: Annotated[
        list[str] | None,
        typer.Option(
            "--condition",
            help="NAME:VAR=VALUE[,VAR=VALUE...]; repeat for each condition.",
        ),
    ] = None,
    cycles: Annotated[int, typer.Option("--cycles", min=1, help="Reset/cold/warm cycles.")] = 2,
    max_tokens: Annotated[
        int | None, typer.Option("--max-tokens", min=1, help="Token cap (default 800).")
    ] = None,
    port: Annotated[int, typer.Option("--port", min=1, max=65535)] = 18128,
    wall_timeout: Annotated[
        float | None, typer.Option("--wall-timeout", help="Bound of the whole run, seconds.")
    ] = None,
    request_timeout: Annotated[
        float, typer.Option("--request-timeout", help="Bound of each request, seconds.")
    ] = 600.0,
    ready_timeout: Annotated[
        float, typer.Option("--ready-timeout", help="Bound of each server start, seconds.")
    ] = 600.0,
    extra_server_arg: Annotated[
        list[str] | None,
        typer.Option(
            "--extra-server-arg",
            help="Extra server argument; repeat. Write --extra-server-arg=--flag=value.",
        ),
    ] = None,
    alias: Annotated[str, typer.Option("--alias", help="Model name served.")] = "cache-repro",
    repo_id: Annotated[
        str | None, typer.Option("--repo-id", help="Model repository (detected in HF caches).")
    ] = None,
    revision: Annotated[
        str | None, typer.Option("--revision", help="Pinned model revision.")
    ] = None,
) -> None:
    """Capture cold, warm and cache-disabled replies of one server into a private raw dir.

    Per condition: fresh server, proven reset, cold/warm/warm (x --cycles); three
    per-request opt-outs; restart, cold/warm; a cache-off server, three requests.
    Requests are serialized; telemetry is snapshotted before and after each one.

    Example (the seed report's run):

      evidence capture --server-profile mlxcel --binary ./mlxcel-server
        --model ./Qwen3-1.7B-4bit --output ./raw-det
        --condition det0:MLXCEL_SDPA_DETERMINISTIC=0
        --condition det1:MLXCEL_SDPA_DETERMINISTIC=1
        --cycles 2 --max-tokens 800 --port 18128 --wall-timeout 1500

    The output directory must not exist; it holds private paths and environments:
    publish only what [bold]evidence export[/] makes of it.
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
        conditions=tuple(parse_conditions(condition or [])),
        binary=None if binary is None else binary.absolute(),
        url=url,
        alias=alias,
        spec=ProtocolSpec(cycles=cycles),
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
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=stderr,
            transient=True,
        ) as bar:
            summary = run_capture(config, RichProgress(bar))
    except CaptureFailed as failed:
        _print_summary(failed.summary)
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)
    _print_summary(summary)


def register(app: typer.Typer) -> None:
    app.command()(boundary(capture))
