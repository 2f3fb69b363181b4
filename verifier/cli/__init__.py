"""The `evidence` command line: thin typer commands over the pure core.

Each `*_cmd` module imports at its top only what its options need (typer and small
enums); the core it drives, rich's widgets, jsonschema and cryptography are imported in
the command's body, so `evidence --help` and each command load only what they use
(tests/test_startup.py checks it).
"""

from __future__ import annotations

import typer

from verifier import __version__
from verifier.cli import (
    capture_cmd,
    diff_cmd,
    export_cmd,
    keys_cmd,
    manifest_cmd,
    schema_cmd,
    verify_cmd,
)
from verifier.cli.common import Group

app = typer.Typer(
    name="evidence",
    help=(
        "Capture, export and verify evidence that an LLM server's greedy reply depends on "
        "its prompt-cache state.\n\n"
        "Pipeline: capture (private raw dir) -> export (public bundle) -> verify (verdict)."
        "\n\nStart with: evidence verify sample_bundles/seed-mlxcel. Terms, protocol, "
        "verdicts and exit codes: docs/EVIDENCE.md."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
    cls=Group,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"evidence {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Capture, export and verify cache-state evidence bundles."""


for _module in (capture_cmd, export_cmd, verify_cmd, diff_cmd, manifest_cmd, keys_cmd, schema_cmd):
    _module.register(app)


def main() -> None:
    app()
