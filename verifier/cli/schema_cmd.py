"""`evidence schema list|show`: the JSON Schemas of every document."""

from __future__ import annotations

import copy
import json
from typing import Annotated, Any

import typer

from verifier import schemas
from verifier.cli.common import Command, Group, boundary, require_stdout
from verifier.errors import UsageError

schema_app = typer.Typer(
    cls=Group, help="List and print the JSON Schemas (Draft 2020-12) of the formats."
)


@schema_app.command("list", cls=Command)
@boundary
def list_schemas() -> None:
    """List every schema by name, with what it describes (`schema show NAME` prints one).

    Example: evidence schema list
    """
    require_stdout("the list")
    from rich.console import Console
    from rich.table import Table

    table = Table("name", "describes", box=None)
    table.columns[0].no_wrap = True
    for name, schema in schemas.load_all().items():
        table.add_row(name, schema.get("title", ""))
    Console().print(table)


@schema_app.command("show", cls=Command)
@boundary
def show_schema(
    name: Annotated[
        str,
        typer.Argument(metavar="NAME", help="Schema name, as `evidence schema list` prints it."),
    ],
    resolved: Annotated[
        bool,
        typer.Option(
            "--resolved",
            help="Embed every schema it refers to (urn:evidence:schema:...), so that a "
            "validator without this tool, such as check-jsonschema, can use it alone.",
        ),
    ] = False,
) -> None:
    """Print one schema as JSON on stdout.

    Example: evidence schema show report --resolved > report.schema.json
    """
    require_stdout("the schema")
    all_schemas = schemas.load_all()
    if name not in all_schemas:
        raise UsageError(f"no schema named {name!r}; known: {', '.join(all_schemas)}")
    schema = self_contained(name, all_schemas) if resolved else all_schemas[name]
    typer.echo(json.dumps(schema, indent=2))


def _references(node: Any) -> set[str]:
    """The schema ids (before any `#`) that `node` refers to with `$ref`."""
    found: set[str] = set()
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and not ref.startswith("#"):
            found.add(ref.split("#", 1)[0])
        for value in node.values():
            found |= _references(value)
    elif isinstance(node, list):
        for value in node:
            found |= _references(value)
    return found


def self_contained(name: str, all_schemas: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The schema with every schema it refers to embedded under `$defs`, each keeping its
    `$id`: a Draft 2020-12 compound document, whose references resolve within itself."""
    by_id = {schema["$id"]: schema for schema in all_schemas.values()}
    root = copy.deepcopy(all_schemas[name])
    embedded: dict[str, Any] = {}
    pending = sorted(_references(root) - {root["$id"]})
    while pending:
        ref = pending.pop()
        if ref in embedded:
            continue
        if ref not in by_id:
            raise UsageError(f"schema {name!r} refers to {ref!r}, which this tool does not have")
        embedded[ref] = copy.deepcopy(by_id[ref])
        pending += sorted(_references(embedded[ref]) - set(embedded) - {root["$id"]})
    defs = root.setdefault("$defs", {})
    for ref, schema in sorted(embedded.items()):
        defs["embedded:" + ref.rsplit(":", 1)[-1]] = schema
    return root


def register(app: typer.Typer) -> None:
    app.add_typer(schema_app, name="schema")
