"""Output formats of `evidence verify`; each renders the same report document."""

from __future__ import annotations

import enum
import json
from collections.abc import Callable
from typing import Any

from rich.console import Console

from verifier.report.common import printable
from verifier.report.markdown import render_markdown
from verifier.report.text import render_text


class OutputFormat(enum.StrEnum):
    TEXT = "text"
    JSON = "json"
    MARKDOWN = "markdown"


def _json(report: dict[str, Any], console: Console) -> None:
    console.file.write(json.dumps(report, indent=2, ensure_ascii=False) + "\n")


def _markdown(report: dict[str, Any], console: Console) -> None:
    console.file.write(render_markdown(printable(report)))


def _text(report: dict[str, Any], console: Console) -> None:
    render_text(printable(report), console)


RENDERERS: dict[OutputFormat, Callable[[dict[str, Any], Console], None]] = {
    OutputFormat.TEXT: _text,
    OutputFormat.JSON: _json,
    OutputFormat.MARKDOWN: _markdown,
}


def render(report: dict[str, Any], output_format: OutputFormat, console: Console) -> None:
    RENDERERS[output_format](report, console)
