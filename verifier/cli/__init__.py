"""The `evidence` command line: thin typer commands over the pure core.

A command's module is imported when that command runs (or its --help is asked for), not
before: `evidence --help` lists the commands from `COMMANDS` without importing one, and
`evidence verify` imports the verify command alone. Each `*_cmd` module imports at its
top only what its options need (typer and small enums); the core it drives, rich's
widgets, jsonschema and cryptography are imported in the command's body
(tests/test_startup.py checks it).
"""

from __future__ import annotations

import importlib
import os
from typing import Any

import typer
import typer.main

from verifier import __version__
from verifier.cli.common import Group

# name -> (module, the line `evidence --help` shows for it: the first paragraph of the
# command's docstring, which tests/test_cli_help.py checks it is).
COMMANDS: dict[str, tuple[str, str]] = {
    "capture": (
        "verifier.cli.capture_cmd",
        "Capture cold, warm and cache-disabled replies of one server into a private raw dir.",
    ),
    "export": (
        "verifier.cli.export_cmd",
        "Export a raw capture as a public evidence bundle, with private data removed.",
    ),
    "verify": (
        "verifier.cli.verify_cmd",
        "Verify evidence bundles offline and classify what they prove.",
    ),
    "diff": ("verifier.cli.diff_cmd", "Compare bundles of the same request, each verified first."),
    "manifest": (
        "verifier.cli.manifest_cmd",
        "Hash every file of a model into a model manifest (JSON), as verify reads it.",
    ),
    "keygen": (
        "verifier.cli.keys_cmd",
        "Make an Ed25519 key pair: a PKCS#8 private key (mode 0600) and its public key.",
    ),
    "schema": (
        "verifier.cli.schema_cmd",
        "List and print the JSON Schemas (Draft 2020-12) of the formats.",
    ),
}

_SETTINGS: dict[str, Any] = {
    "add_completion": False,
    "pretty_exceptions_enable": False,
    "rich_markup_mode": "rich",  # typer's error panels; --help is drawn by cli.helptext
}


def load_command(name: str) -> Any:
    """The click command `name`, built from its module's `register` (imported now)."""
    module = importlib.import_module(COMMANDS[name][0])
    holder = typer.Typer(**_SETTINGS)
    module.register(holder)
    return typer.main.get_group(holder).commands[name]


class Root(Group):
    """The top-level group: commands load on first use; its --help lists `COMMANDS`."""

    def list_commands(self, ctx: Any) -> list[str]:
        return [*COMMANDS, *(name for name in self.commands if name not in COMMANDS)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            self.commands[cmd_name] = load_command(cmd_name)
        return self.commands.get(cmd_name)

    def command_rows(self, ctx: Any) -> list[list[str]]:
        return [[name, line] for name, (_, line) in COMMANDS.items()]


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
    cls=Root,
    **_SETTINGS,
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


def main() -> None:
    _drop_unreadable_sizes()
    app()


# The widest screen a report is laid out for: a wider COLUMNS is read as this many (a
# width of 2,000,000,000 had a report take gigabytes and a minute to pad its lines).
MAX_COLUMNS = 1000


def _drop_unreadable_sizes() -> None:
    """A COLUMNS or LINES that rich would take for a number and then fail to read (it
    tests str.isdigit, which '²' passes and int() refuses) is dropped, as rich ignores one
    that is not a number: a traceback must never be the answer to an odd terminal. So is
    a size of 0 (rich would lay every line out in no width: an empty report), and a COLUMNS
    past MAX_COLUMNS is read as MAX_COLUMNS."""
    for name in ("COLUMNS", "LINES"):
        value = os.environ.get(name)
        if value is None or not value.isdigit():
            continue
        if not value.isdecimal() or int(value) == 0:
            del os.environ[name]
        elif name == "COLUMNS" and int(value) > MAX_COLUMNS:
            os.environ[name] = str(MAX_COLUMNS)
