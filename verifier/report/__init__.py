"""Output formats of `evidence verify`; each renders the same report document.

A renderer's module loads when that format is asked for: `--format json` loads neither
the text nor the Markdown renderer, nor rich; `--format text` loads rich only where rich
styles the text (a terminal) or lays out what `report.plain` does not.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import IO, Any

from verifier.report.formats import OutputFormat

__all__ = ["RENDERERS", "OutputFormat", "render"]


def _json(report: dict[str, Any], file: IO[str], width: int | None) -> None:
    from verifier.jsontext import chunks_indented  # json.dumps(indent=2)'s, faster

    write = file.write
    for chunk in chunks_indented(report):
        write(chunk)
    write("\n")


def _markdown(report: dict[str, Any], file: IO[str], width: int | None) -> None:
    from verifier.report.common import printable
    from verifier.report.markdown import render_markdown

    file.write(render_markdown(printable(report)))


def _text(report: dict[str, Any], file: IO[str], width: int | None) -> None:
    """rich's layout, as `Console(file=file, width=width)` prints it; laid out by
    report.plain instead where that console writes no styles and report.plain lays the
    report out (the same bytes: tests/test_report_plain.py)."""
    from verifier.report import plain
    from verifier.report.common import printable

    shown = printable(report)
    screen = plain.plain_width(file, width)
    text = None if screen is None else plain.render(shown, screen)
    if text is not None:
        file.write(text)
        file.flush()  # as rich's console does after each print
        return
    from rich.console import Console

    from verifier.report.text import render_text

    render_text(shown, Console(file=file, width=width))


RENDERERS: dict[OutputFormat, Callable[[dict[str, Any], IO[str], int | None], None]] = {
    OutputFormat.TEXT: _text,
    OutputFormat.JSON: _json,
    OutputFormat.MARKDOWN: _markdown,
}


def render(
    report: dict[str, Any], output_format: OutputFormat, file: IO[str], width: int | None = None
) -> None:
    """The report in `output_format` to `file`; text at `width` columns (None: the
    screen's, as rich measures it)."""
    RENDERERS[output_format](report, file, width)
