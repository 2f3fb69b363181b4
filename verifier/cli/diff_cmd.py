"""`evidence diff`: bundles of the same request compared side by side."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from verifier.cli.common import Command, boundary, note, require_stdout, stderr
from verifier.errors import UnreadableInput, UnsafeInput, UsageError
from verifier.report.common import printable
from verifier.report.formats import OutputFormat


def diff(
    bundles: Annotated[
        list[Path],
        typer.Argument(metavar="BUNDLE", help="Two or more bundles (directories or .tar.gz)."),
    ],
    output_format: Annotated[
        OutputFormat,
        typer.Option("--format", "-f", metavar="FORMAT", help="text, json or markdown."),
    ] = OutputFormat.TEXT,
    key: Annotated[
        Path | None,
        typer.Option(
            "--key",
            metavar="FILE",
            help="Ed25519 public key (PEM) every signed bundle must verify with.",
        ),
    ] = None,
    expect_same: Annotated[
        bool, typer.Option("--expect-same", help="Exit 3 unless every arm gave the same classes.")
    ] = False,
    expect_changed: Annotated[
        bool, typer.Option("--expect-changed", help="Exit 3 unless something changed.")
    ] = False,
) -> None:
    """Compare bundles of the same request, each verified first.

    Per condition: the verdict and the output class of each arm, classes matched
    across bundles by output hash, and what differs between them (build, binary,
    model, hardware, libraries, settings, protocol).

    Exit codes: 0 compared, 1 a bundle did not verify, 2 unreadable input or
    usage, 3 the outcome is not the one --expect-same / --expect-changed asked
    for.

    Example: evidence diff before.tar.gz after.tar.gz --expect-changed
    """
    from verifier.diff import DiffInput, diff_bundles, exit_code
    from verifier.report.diff import render_diff_markdown, render_diff_text
    from verifier.verify import VerifyOptions, verify_path

    if len(bundles) < 2:
        raise UsageError("diff needs at least two bundles")
    if expect_same and expect_changed:
        raise UsageError("--expect-same and --expect-changed exclude each other")
    if key is not None and not key.is_file():
        raise UsageError(f"--key {key}: no such file")
    require_stdout("the comparison")
    inputs = []
    for path in bundles:
        note(f"verifying {printable(str(path))}")
        try:
            inputs.append(DiffInput(str(path), verify_path(path, VerifyOptions(public_key=key))))
        except (UnreadableInput, UnsafeInput) as exc:
            from rich.markup import escape

            stderr.print(f"[bold red]error:[/] {escape(printable(exc.message))}", soft_wrap=True)
            inputs.append(DiffInput(str(path), None, exc.message))
    document = diff_bundles(inputs)
    if output_format is OutputFormat.JSON:
        typer.echo(json.dumps(document, indent=2, ensure_ascii=False))
    elif output_format is OutputFormat.MARKDOWN:
        typer.echo(render_diff_markdown(document), nl=False)
    else:
        typer.echo(render_diff_text(document), nl=False)
    expect = "same" if expect_same else "changed" if expect_changed else None
    raise typer.Exit(exit_code(document, expect))


def register(app: typer.Typer) -> None:
    app.command(cls=Command)(boundary(diff))
