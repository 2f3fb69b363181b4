"""`evidence schema list|show`: the JSON Schemas of every document."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from verifier import schemas
from verifier.cli.common import boundary

schema_app = typer.Typer(help="List and print the JSON Schemas (Draft 2020-12) of the formats.")


@schema_app.command("list")
@boundary
def list_schemas() -> None:
    """List every schema by name, with what it describes (`schema show NAME` prints one)."""
    from rich.console import Console
    from rich.table import Table

    table = Table("name", "describes", box=None)
    table.columns[0].no_wrap = True
    for name, schema in schemas.load_all().items():
        table.add_row(name, schema.get("title", ""))
    Console().print(table)


@schema_app.command("show")
@boundary
def show_schema(
    name: Annotated[str, typer.Argument(help="Schema name, as `evidence schema list` prints it.")],
) -> None:
    """Print one schema as JSON on stdout."""
    from verifier.errors import UsageError

    all_schemas = schemas.load_all()
    if name not in all_schemas:
        raise UsageError(f"no schema named {name!r}; known: {', '.join(all_schemas)}")
    typer.echo(json.dumps(all_schemas[name], indent=2))


def register(app: typer.Typer) -> None:
    app.add_typer(schema_app, name="schema")
