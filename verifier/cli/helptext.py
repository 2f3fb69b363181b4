"""`--help` as plain text in typer's panel layout, without typer's rich help formatter.

typer's `rich_utils` imports rich's Markdown (markdown-it) and traceback modules, about
30 ms before a line is printed: more than the rest of `evidence --help`. This renders the
same sections (usage, the docstring with its line breaks and examples kept, Arguments,
Options, Commands in boxes) with string formatting; no colours. Usage errors still go
through typer's own error panel (rare, and then the cost does not matter).
"""

from __future__ import annotations

import inspect
import os
import re
import textwrap
from collections.abc import Iterable
from typing import Any

import typer.core

_MARKUP = re.compile(r"(?<!\\)\[(/?[a-z]+( [a-z]+)*|/)\]")  # [bold], [/bold], [/] ...


def plain(text: str) -> str:
    """rich markup as the reader sees it, less its styles."""
    return _MARKUP.sub("", text).replace("\\[", "[")


def width() -> int:
    """The terminal's width (COLUMNS first, as rich and click read it), at most 100."""
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(1).columns
        except OSError:
            columns = 80
    return max(40, min(columns, 100))


def _wrap(line: str, room: int) -> list[str]:
    """One source line within `room` columns, continuation lines at its indentation;
    words (verdicts such as cache-state-dependent, flags) are never split."""
    if len(line) <= room:
        return [line]
    indent = line[: len(line) - len(line.lstrip())]
    return textwrap.wrap(
        line,
        room,
        initial_indent="",
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [line]


def _panel(title: str, rows: list[list[str]], total: int) -> list[str]:
    """A boxed table: every column as wide as its widest cell, the last one (the help
    text) wrapped into what is left; columns empty in every row are dropped. Where too
    little is left (a narrow terminal), the help text goes below its row, indented."""
    last = len(rows[0]) - 1
    columns = [i for i in range(last) if any(row[i] for row in rows)] + [last]
    rows = [[row[i] for i in columns] for row in rows]
    inner = total - 4
    widths = [max(len(cell) for cell in col) for col in zip(*rows, strict=True)][:-1]
    fixed = sum(widths) + 2 * len(widths)
    below = inner - fixed < 24
    room = inner - 4 if below else inner - fixed
    lines = [f"╭─ {title} " + "─" * max(total - len(title) - 5, 0) + "╮"]
    for row in rows:
        head = "  ".join(cell.ljust(w) for cell, w in zip(row[:-1], widths, strict=True))
        body: list[str] = []
        for paragraph in row[-1].split("\n"):
            body += _wrap(paragraph, room)
        if below:
            cells = [head.rstrip()] + ["    " + text for text in body if text]
        else:
            pad = " " * len(head)
            cells = [f"{pad if i else head}  {text}" for i, text in enumerate(body or [""])]
        lines += ["│ " + cell.ljust(inner) + " │" for cell in cells]
    lines.append("╰" + "─" * (total - 2) + "╯")
    return lines


def _param_help(param: Any, ctx: Any) -> str:
    """The help cell: the text, then `[default: ...]` and `[required]`, each on its line."""
    parts = []
    help_value = getattr(param, "help", None)
    if help_value:
        paragraphs = [x.replace("\n", " ").strip() for x in help_value.split("\n\n")]
        parts.append(plain("\n".join(paragraphs).strip()))
    if isinstance(param, (typer.core.TyperOption, typer.core.TyperArgument)):
        default_value = param._extract_default_help_str(ctx=ctx)
        show_default_is_str = isinstance(param.show_default, str)
        if show_default_is_str or (
            default_value is not None and (param.show_default or ctx.show_default)
        ):
            default = param._get_default_string(
                ctx=ctx, show_default_is_str=show_default_is_str, default_value=default_value
            )
            if default:
                parts.append(f"[default: {default}]")
    if param.required:
        parts.append("[required]")
    return "\n".join(parts)


def _param_rows(params: Iterable[Any], ctx: Any) -> list[list[str]]:
    rows = []
    for param in params:
        display = None
        if isinstance(param, typer.core.TyperArgument):
            display = param.display_name_raw
            if param.metavar is None and param.nargs != 1:
                display += "..."
        longs = [o for o in param.opts if "--" in o]
        shorts = [display if display else o for o in param.opts if "--" not in o]
        negative = [o for o in param.secondary_opts if "--" in o]
        display_type = getattr(param, "display_type_rich", None)
        type_cell = (display_type(ctx=ctx) if display_type else None) or ""
        rows.append(
            [
                "*" if param.required else "",
                ",".join(longs),
                ",".join(shorts),
                ",".join(negative),
                type_cell,
                _param_help(param, ctx),
            ]
        )
    return rows


def command_rows(group: Any, ctx: Any) -> list[list[str]]:
    """(name, first paragraph of its help) for each visible command of a group."""
    rows = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is not None and not command.hidden:
            rows.append([name, short_help(command.short_help or command.help or "")])
    return rows


def short_help(help_text: str) -> str:
    """A command's line in its group's list: its docstring's first paragraph."""
    return plain(inspect.cleandoc(help_text).split("\n\n")[0].strip())


def render(command: Any, ctx: Any, commands: list[list[str]] | None = None) -> str:
    """The whole --help page of a command or group (`commands`: a group's rows)."""
    total = width()
    lines = ["", " " + command.get_usage(ctx), ""]
    if command.help:
        text = inspect.cleandoc(command.help).partition("\f")[0]
        first, _, rest = text.partition("\n\n")
        lines += [" " + line for line in _wrap(plain(first.replace("\n", " ").strip()), total - 2)]
        if rest:
            lines.append("")
            for line in plain(rest).split("\n"):
                lines += [(" " + part).rstrip() for part in _wrap(line, total - 2)]
        lines.append("")
    params = [p for p in command.get_params(ctx) if not getattr(p, "hidden", False)]
    arguments = [p for p in params if isinstance(p, typer.core.TyperArgument)]
    options = [p for p in params if not isinstance(p, typer.core.TyperArgument)]
    if arguments:
        lines += _panel("Arguments", _param_rows(arguments, ctx), total)
    if options:
        lines += _panel("Options", _param_rows(options, ctx), total)
    if commands:
        lines += _panel("Commands", commands, total)
    return "\n".join(lines) + "\n"
