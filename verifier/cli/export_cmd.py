"""`evidence export`: turn a private raw capture into a public, verified bundle."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from verifier import layout
from verifier.cli.common import Command, boundary, note, program, stderr
from verifier.errors import UsageError

if TYPE_CHECKING:  # the exporter loads only when an export runs
    from verifier.export import ExportSummary


def _print_summary(summary: ExportSummary) -> None:
    from rich.markup import escape
    from rich.table import Table

    from verifier.report.common import printable

    table = Table("redacted, by category (values never shown)", "occurrences", box=None)
    for category, count in summary.redactions.items():
        table.add_row(category, str(count))
    if not summary.redactions:
        table.add_row("(nothing private found)", "0")
    else:
        table.add_row("total occurrences", str(sum(summary.redactions.values())))
    stderr.print(table)
    if summary.kept:
        kept = ", ".join(f"{category} {count}" for category, count in summary.kept.items())
        stderr.print(f"kept where found, as --allow said (published): {kept}")
    stderr.print(
        f"[green]exported[/] {summary.records} records of {len(summary.conditions)} "
        f"condition(s), {len(summary.files)} files -> {escape(printable(str(summary.out_dir)))}"
    )
    if summary.archive is not None:
        stderr.print(f"[green]archive[/]  {escape(printable(str(summary.archive)))}")
    stderr.print(
        f"verified: verdict {summary.verdict}"
        + ("; SHA256SUMS signed" if summary.signed else "; not signed (see --sign-key)")
    )
    stderr.print("Read redaction-ledger.json for where each replacement was made.", style="dim")


def export(
    raw: Annotated[
        Path,
        typer.Argument(
            metavar="RAW_DIR",
            help="The raw capture directory written by `evidence capture` (private).",
        ),
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            metavar="DIR",
            help="The public bundle directory to create; it must not exist.",
        ),
    ],
    archive: Annotated[
        Path | None,
        typer.Option(
            "--archive",
            metavar="FILE",
            help="Also write a reproducible .tar.gz of the bundle here (must not exist): the "
            "same bundle gives the same bytes wherever the same zlib compresses it (its "
            "identity is its SHA256SUMS).",
        ),
    ] = None,
    sign_key: Annotated[
        Path | None,
        typer.Option(
            "--sign-key",
            metavar="FILE",
            help="Ed25519 private key (PEM, from `evidence keygen`): writes SHA256SUMS.sig.",
        ),
    ] = None,
    private_path: Annotated[
        list[str] | None,
        typer.Option(
            "--private-path",
            metavar="TEXT",
            help="Another private path, or a string (a name, a codename) to replace in any "
            "case, inside longer words too; repeat as needed.",
        ),
    ] = None,
    allow: Annotated[
        list[str] | None,
        typer.Option(
            "--allow",
            metavar="VALUE",
            help="Declare a value not private (an address, a name, a path export stopped on): "
            "it is kept where found, with the path below it, and the ledger says so, without "
            "the value; what a hit runs on to past it is still removed; repeat as needed.",
        ),
    ] = None,
    keep_env: Annotated[
        list[str] | None,
        typer.Option(
            "--keep-env",
            metavar="NAME",
            help="Keep this environment variable's value (name or glob such as 'CUDA_*') as "
            "evidence, besides the experiment's toggles; repeat as needed.",
        ),
    ] = None,
) -> None:
    """Export a raw capture as a public evidence bundle, with private data removed.

    [bold]Kept[/]: requests, full responses, output hashes, telemetry, the model
    manifest, server command lines with placeholders (/path/to/mlxcel-server).

    [bold]Dropped[/]: host facts beyond the hardware, environment values other than
    the experiment's toggles, process maps (reduced to library name, version,
    sha256), logs, HTTP headers.

    [bold]Replaced[/]: private paths, user and host names, IP and MAC addresses,
    tokens, e-mail addresses. redaction-ledger.json lists each replacement
    (category, file, JSON pointer, count), never the value.

    Evidence (request bodies, model output, toggles, metric names and labels,
    library versions, hardware facts, counters) is never altered: a private value
    in it stops the export, which names the file and JSON pointer; --allow VALUE
    declares a value not private. The bundle is built beside --out, verified
    (leak scan included) and only then moved into place; a failure or Ctrl-C
    leaves nothing.

    Example:

      evidence export raw --out bundle --archive bundle.tar.gz
        --sign-key keys/evidence-signing-key.pem
    """
    from verifier.export import ExportOptions, export_bundle

    if (raw / layout.SHA256SUMS).is_file() and not (raw / layout.RAW_RUN).exists():
        raise UsageError(
            f"{raw} is a public bundle, not a raw capture: check it with `{program()} verify {raw}`"
        )
    options = ExportOptions(
        raw_dir=raw,
        out_dir=out,
        archive=archive,
        sign_key=sign_key,
        private_paths=tuple(private_path or ()),
        keep_env=tuple(keep_env or ()),
        allowed=tuple(allow or ()),
    )
    summary = export_bundle(options, note)
    # Published whole: an interrupt now would call a finished export "interrupted", and
    # SIGTERM or SIGHUP (which unwind an export as Ctrl-C does) would end it as killed.
    previous = {number: signal.signal(number, signal.SIG_IGN) for number in _PUBLISHED_IGNORES}
    try:
        _print_summary(summary)
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


# Ctrl-C, and the signals the exporter unwinds like it (verifier/export/exporter.py).
_PUBLISHED_IGNORES = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)


def register(app: typer.Typer) -> None:
    app.command(cls=Command)(boundary(export))
