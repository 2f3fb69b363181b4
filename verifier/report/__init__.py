"""Output formats of `evidence verify`; each renders the same report document.

A renderer's module loads when that format is asked for: `--format json` loads neither
the text nor the Markdown renderer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from verifier.report.formats import OutputFormat

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["RENDERERS", "OutputFormat", "render"]


def _json(report: dict[str, Any], console: Console) -> None:
    from verifier.jsontext import chunks_indented  # json.dumps(indent=2)'s, faster

    write = console.file.write
    for chunk in chunks_indented(report):
        write(chunk)
    write("\n")


def _markdown(report: dict[str, Any], console: Console) -> None:
    from verifier.report.common import printable
    from verifier.report.markdown import render_markdown

    console.file.write(render_markdown(printable(report)))


def _text(report: dict[str, Any], console: Console) -> None:
    from verifier.report.common import printable
    from verifier.report.text import render_text

    render_text(printable(report), console)


RENDERERS: dict[OutputFormat, Callable[[dict[str, Any], Console], None]] = {
    OutputFormat.TEXT: _text,
    OutputFormat.JSON: _json,
    OutputFormat.MARKDOWN: _markdown,
}


def render(report: dict[str, Any], output_format: OutputFormat, console: Console) -> None:
    RENDERERS[output_format](report, console)
