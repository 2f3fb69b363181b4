"""`evidence verify`: check bundles offline and print what the evidence supports."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from verifier.bundle.reader import Limits
from verifier.cli.common import boundary, stderr
from verifier.model import Verdict
from verifier.report import OutputFormat

_DEFAULTS = Limits()


def verify(
    bundles: Annotated[
        list[Path],
        typer.Argument(help="Bundle directories or .tar.gz archives; each gets its own report."),
    ],
    output_format: Annotated[
        OutputFormat,
        typer.Option(
            "--format", "-f", help="text for people, json for machines, markdown for issues."
        ),
    ] = OutputFormat.TEXT,
    key: Annotated[
        Path | None,
        typer.Option("--key", help="Ed25519 public key (PEM): the signature must verify with it."),
    ] = None,
    model_dir: Annotated[
        Path | None,
        typer.Option(
            "--model-dir",
            help="Local model folder (plain or HF snapshot) to rehash against the manifest.",
        ),
    ] = None,
    expect: Annotated[
        Verdict | None,
        typer.Option(
            "--expect", help="Exit 3 when a verified bundle's verdict is not this one (CI gates)."
        ),
    ] = None,
    max_members: Annotated[
        int, typer.Option(help="Most archive members read.", min=1)
    ] = _DEFAULTS.max_members,
    max_member_bytes: Annotated[
        int, typer.Option(help="Largest member, in bytes.", min=1)
    ] = _DEFAULTS.max_member_bytes,
    max_total_bytes: Annotated[
        int, typer.Option(help="Most bytes read in all.", min=1)
    ] = _DEFAULTS.max_total_bytes,
    max_ratio: Annotated[
        float, typer.Option(help="Highest compression ratio accepted.", min=1.0)
    ] = _DEFAULTS.max_ratio,
) -> None:
    """Verify evidence bundles offline and classify what they prove.

    Checks input safety, SHA256SUMS, the signature (with --key), every document's schema,
    the canonical output hashes, the model manifest, the telemetry behind each claimed cache
    arm, and leaks; then gives a verdict per condition and for the experiment.

    Exit codes: 0 verified (whatever the verdict), 1 not verified, 2 usage error or
    unreadable input, 3 verified but the verdict differs from --expect.

    Example: evidence verify bundle.tar.gz --key signer.pub.pem --format markdown
    """
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

    from verifier.errors import UnreadableInput, UnsafeInput, UsageError
    from verifier.report import render
    from verifier.report.document import BundleOutcome, build_report
    from verifier.verify import VerifyOptions, verify_path

    if key is not None and not key.is_file():
        raise UsageError(f"--key {key}: no such file")
    if model_dir is not None and not model_dir.exists():
        raise UsageError(f"--model-dir {model_dir}: no such file or directory")
    limits = Limits(max_members, max_member_bytes, max_total_bytes, max_ratio)
    outcomes = []
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TimeRemainingColumn(),
        console=stderr,
        transient=True,
    ) as progress:
        task = progress.add_task("hashing model", total=None, visible=False)

        def on_progress(description: str, done: int, total: int) -> None:
            progress.update(
                task, description=description, completed=done, total=total, visible=True
            )

        options = VerifyOptions(
            public_key=key, model_dir=model_dir, limits=limits, progress=on_progress
        )
        for path in bundles:
            stderr.print(f"verifying {path}", style="dim")
            try:
                result = verify_path(path, options)
            except (UnreadableInput, UnsafeInput) as exc:
                stderr.print(f"[bold red]error:[/] {exc.message}", soft_wrap=True)
                outcomes.append(
                    BundleOutcome(
                        str(path), None, error=exc.message, expected=expect,
                        unsafe=isinstance(exc, UnsafeInput),
                    )
                )  # fmt: skip
                continue
            outcomes.append(BundleOutcome(str(path), result, expected=expect))
    report = build_report(outcomes)
    render(report, output_format, Console(soft_wrap=output_format is not OutputFormat.TEXT))
    raise typer.Exit(report["exit_code"])


def register(app: typer.Typer) -> None:
    app.command()(boundary(verify))
