"""The text report where rich writes no styles (a file, a pipe), laid out without rich.

There, the text report (`report.text`, through rich) is plain lines; laying them out here
takes a fraction of the time and none of rich's imports (about 25 ms of an `evidence
verify`). This module lays out only what it can lay out exactly as rich does: text of
characters one cell wide each (printable Latin-1, a few signs), wrapped at words as rich
wraps it (`wrap`), indents, the grids and the per-condition table where every column but a
grid's last has its natural width. For anything else (a table too wide for the screen, a
character rich measures otherwise, a screen under 20 columns) `render` returns None and
`report.text` prints the report: it is the reference, and tests/test_report_plain.py
checks that both give the same bytes for every sample bundle, every case of the hostile
corpus and generated reports, at many widths.
"""

from __future__ import annotations

import builtins
import os
import re
import sys
from typing import IO, Any

from verifier.report.common import (
    ALWAYS_SHOWN,
    ARMS,
    CAVEAT,
    DECLARED,
    MAX_FINDINGS,
    NAME_WIDTH,
    arm_cell,
    caveats,
    claimed,
    class_telemetry_rows,
    condition_names,
    difference_notes,
    divergence_sides,
    excerpt_sides,
    experiment_lines,
    plural,
)

# What this module lays out: characters of one cell each, whose only whitespace is the
# space (and the line break, which `wrap` splits at as rich does): printable Latin-1 but
# the no-break space and the soft hyphen, and a few signs.
_SIMPLE = re.compile(r"[\x20-\x7e\xa1-\xac\xae-\xff\n–—…→≤≥]*")
# The telemetry rows' (report.text._two_columns takes only these)
_LATIN = re.compile(r"[\x20-\x7e\xa1-\xac\xae-\xff]*")
_WORD = re.compile(r"\s*\S+\s*")  # rich._wrap's word: leading and trailing spaces with it
_MIN_WIDTH = 20
_RULE = "─"


def _rich_decides() -> bool:
    """Where rich's rules are not the ones below: Windows, IPython, IDLE."""
    return (
        sys.platform == "win32"
        or "get_ipython" in vars(builtins)
        or getattr(sys.stdin, "__module__", "").startswith("idlelib")
    )


def screen_width() -> int | None:
    """The width rich's `Console()` measures the screen at (rich.console.Console.size):
    $COLUMNS, or that of the first of stdin, stdout and stderr that is a terminal, or 80.
    None where rich could decide otherwise (`_rich_decides`, TERM=dumb or unknown)."""
    if _rich_decides() or os.environ.get("TERM", "").lower() in ("dumb", "unknown"):
        return None
    columns = os.environ.get("COLUMNS")
    if columns is not None and columns.isdigit():
        return int(columns)
    for stream, default in ((sys.__stdin__, 0), (sys.__stdout__, 1), (sys.__stderr__, 2)):
        try:
            descriptor = stream.fileno()  # type: ignore[union-attr]
        except Exception:
            descriptor = default
        try:
            return os.get_terminal_size(descriptor).columns or 80
        except (AttributeError, ValueError, OSError):
            continue
    return 80


def plain_width(file: IO[str], width: int | None = None) -> int | None:
    """The width at which rich's `Console(file=file, width=width)` lays out, where that
    console writes no styles (rich.console.Console.is_terminal: the file is no terminal,
    and neither FORCE_COLOR nor TTY_COMPATIBLE is set) and is UTF-8; None elsewhere (and
    where `screen_width` cannot tell): rich prints there. tests/test_report_plain.py
    checks this against rich's Console.
    """
    if (
        _rich_decides()
        or "FORCE_COLOR" in os.environ
        or "TTY_COMPATIBLE" in os.environ
        or not (getattr(file, "encoding", None) or "utf-8").lower().startswith("utf")
    ):
        return None
    try:
        if file.isatty():
            return None
    except (AttributeError, ValueError):
        return None
    return width if width is not None else screen_width()


class Unfit(Exception):
    """Something rich would lay out in a way this module does not: rich prints it."""


def _simple(text: str) -> str:
    if not _SIMPLE.fullmatch(text):
        raise Unfit
    return text


def _breaks(line: str, width: int, fold: bool) -> list[int]:
    """Where rich breaks `line` (rich._wrap.divide_line, for one-cell characters)."""
    breaks: list[int] = []
    offset = 0
    for match in _WORD.finditer(line):
        start, word = match.start(), match.group()
        length = len(word.rstrip())
        if width - offset >= length:
            offset += len(word)
        elif length > width:
            if fold:
                chunks = [word[i : i + width] for i in range(0, len(word), width)]
                for chunk in chunks[:-1]:
                    if start:
                        breaks.append(start)
                    start += len(chunk)
                if start:
                    breaks.append(start)
                offset = len(chunks[-1])
            else:
                if start:
                    breaks.append(start)
                offset = len(word)
        elif offset and start:
            breaks.append(start)
            offset = len(word)
    return breaks


def _fit(piece: str, width: int, overflow: str, wrapped: bool) -> str:
    """One line as rich ends it: spaces past `width` dropped (where wrapped), then cut to fit."""
    if wrapped and len(piece) > width:
        spaces = len(piece) - len(piece.rstrip())
        piece = piece[: len(piece) - min(spaces, len(piece) - width)]
    if len(piece) > width:
        piece = piece[: width - 1] + "…" if overflow == "ellipsis" else piece[:width]
    return piece


def wrap(text: str, width: int, overflow: str = "fold", no_wrap: bool = False) -> list[str]:
    """`text` as rich's Text.wrap lays it out at `width` (`Unfit` where it has other
    characters than this module lays out): split at line breaks, each line broken between
    words, a word longer than a line folded (overflow "fold") or cut with `…` ("ellipsis").
    A line keeps the spaces after its last word that fit, as rich's do."""
    lines = []
    for line in _simple(text).split("\n"):
        if no_wrap:
            pieces = [line]
        else:
            ends = [*_breaks(line, width, overflow == "fold"), len(line)]
            pieces = [line[a:b] for a, b in zip([0, *ends], ends, strict=False)]
        lines += [_fit(piece, width, overflow, not no_wrap) for piece in pieces]
    return lines


def _indent(lines: list[str], spaces: int = 2) -> list[str]:
    return [" " * spaces + line if line else "" for line in lines]


def _grid(
    rows: list[list[str]], width: int, first: int | None = None, wrap_last: bool = False
) -> list[str]:
    """A rich `Table.grid(padding=(0, 2))` of left-justified cells: the first column
    `first` wide where given, the last one wrapped where `wrap_last`, every other column
    (and the last, where not wrapped) no wider than its widest cell, all of it within
    `width` (or `Unfit`)."""
    count = len(rows[0])
    natural = [max(len(line) for row in rows for line in row[i].split("\n")) for i in range(count)]
    widths = [max(w, 1) for w in natural]
    if first is not None:
        widths[0] = first
    pads = [2] * (count - 1) + [0]
    if sum(widths) + sum(pads) > width:
        if not wrap_last:
            raise Unfit
        widths[-1] = width - sum(widths[:-1]) - sum(pads)
        if widths[-1] < 1:
            raise Unfit
    lines = []
    for row in rows:
        cells = []
        for index, cell in enumerate(row):
            last = index == count - 1
            no_wrap = not (last and wrap_last)
            if no_wrap and "\n" in cell:
                raise Unfit
            cells.append(wrap(cell, widths[index], "ellipsis", no_wrap=no_wrap))
        for line_no in range(max(map(len, cells))):
            parts = [
                (cell[line_no] if line_no < len(cell) else "").ljust(w + pad)
                for cell, w, pad in zip(cells, widths, pads, strict=True)
            ]
            lines.append("".join(parts).rstrip(" "))
    return lines


def _table(header: list[str], sections: list[list[list[str]]], width: int) -> list[str]:
    """A rich `Table(box=SIMPLE_HEAD, pad_edge=False, show_edge=False)` of no-wrap cells:
    the header, a rule, the rows, a blank line between sections (or `Unfit`)."""
    rows = [row for section in sections for row in section]
    for cell in [*header, *(c for row in rows for c in row)]:
        if "\n" in _simple(cell):
            raise Unfit
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    total = sum(widths) + 3 * (len(widths) - 1)  # 1 padding, 1 divider, 1 padding
    if total > width or not all(widths):
        raise Unfit

    def line(cells: list[str]) -> str:
        return "   ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip(" ")

    lines = [line(header), _RULE * total]
    for index, section in enumerate(sections):
        if index:
            lines.append("")
        lines += map(line, section)
    return lines


def _headline(bundle: dict[str, Any], width: int) -> list[str]:
    verdict = bundle["verdict"]
    counts = bundle["finding_counts"]
    errors, warnings = counts.get("error", 0), counts.get("warning", 0)
    tally = (
        f"{'verified' if bundle['verified'] else 'NOT verified'}: "
        f"{plural(bundle['files'], 'file')} read, {plural(errors, 'error')}, "
        f"{plural(warnings, 'warning')}"
    )
    if bundle["expected"]:
        same = bundle["expected"] == verdict
        tally += "; as expected" if same else f"; expected {bundle['expected']}"
    lines = wrap(f"verdict: {verdict}", width) + wrap(bundle["summary"], width)
    if bundle["error"] is not None:
        return lines
    lines += wrap(tally, width)
    for note in caveats(bundle):
        lines += wrap(f"{CAVEAT}: {note}", width)
    return lines


def _finding_block(finding: dict[str, Any], width: int) -> list[str]:
    where = (finding["file"] or "") + (finding["pointer"] or "")
    inner = width - 2
    lines = wrap(f"{finding['severity']}  {finding['check']}", inner)
    if where:
        lines += _indent(wrap(where, inner - 2))
    lines += _indent(wrap(finding["message"], inner - 2))
    for key in ("expected", "actual"):
        if finding[key] is not None:
            lines += _indent(wrap(f"{key:<9}{finding[key]}", inner - 2))
    return _indent(lines)


def _findings(title: str, findings: list[dict[str, Any]], width: int) -> list[str]:
    if not findings:
        return []
    lines = ["", *wrap(f"{title} ({len(findings)})", width)]
    for finding in findings[:MAX_FINDINGS]:
        lines += _finding_block(finding, width)
    if len(findings) > MAX_FINDINGS:
        more = len(findings) - MAX_FINDINGS
        lines += _indent(wrap(f"… and {more} more (every one is in --format json)", width - 2))
    return lines


def _checked(bundle: dict[str, Any], width: int) -> list[str]:
    if not bundle["checks"]:
        return []
    passed = [
        c["check"]
        for c in bundle["checks"]
        if c["status"] == "passed" and c["check"] not in ALWAYS_SHOWN
    ]
    rows = [["passed", ", ".join(passed)]] if passed else []
    for check in bundle["checks"]:
        if check["check"] in passed:
            continue
        body = f"{check['status']}: {check['detail']}"
        if check["value"] is not None:
            body += " " + check["value"]
        if check["sha256"]:
            body += "\nkey sha256 (DER):\n" + check["sha256"]
        rows.append([check["check"], body])
    notes = [
        line
        for f in bundle["findings"]
        if f["severity"] == "info" and f["check"] not in ("signature", "profile")
        for line in wrap(f"note: {f['message']}", width)
    ]
    grid = _grid(rows, width, first=NAME_WIDTH, wrap_last=True) if rows else []
    return ["", "checked", *grid, *notes]


def _conditions(bundle: dict[str, Any], classification: dict[str, Any], width: int) -> list[str]:
    verified = bundle["verified"]
    header = ["condition", *(["verdict"] if verified else []), "arm", "requests"]
    sections = []
    for condition in classification["conditions"]:
        arms = [(arm, arm_cell(condition["arms"].get(arm, {}))) for arm in ARMS]
        arms.append(("left out", str(len(condition["excluded"]))))
        section = []
        for index, (arm, cell) in enumerate(arms):
            first = index == 0
            verdict = [condition["verdict"] if first else ""] if verified else []
            section.append([condition["id"] if first else "", *verdict, arm, cell])
        sections.append(section)
    title = "per condition" if verified else "per condition, as claimed (unverified)"
    if not sections:
        raise Unfit  # rich draws a table of no rows: not laid out here
    lines = ["", *wrap(title, width), *_table(header, sections, width)]
    for condition in classification["conditions"]:
        names, declared = condition_names(condition)
        line = condition["id"] + ": " + ("; ".join(names) or "no settings")
        if declared:
            line += f" ({DECLARED})"
        if verified and condition["reasons"]:
            line += "; " + "; ".join(condition["reasons"])
        lines += _indent(wrap(line, width - 2))
    return lines


def _facts(experiment: dict[str, Any] | None, width: int) -> list[str]:
    if experiment is None:
        return []
    rows = [[key, value] for key, value in experiment_lines(experiment)]
    lines = ["", "experiment", *_grid(rows, width, first=NAME_WIDTH, wrap_last=True)]
    if experiment["synthetic"]:
        lines += wrap("synthetic sample: the outputs are stand-ins", width)
    return lines


def _classes(classification: dict[str, Any], verified: bool, width: int) -> list[str]:
    rows = [[c["label"], c["output_hash"], f"×{c['count']}"] for c in classification["classes"]]
    if not rows:
        raise Unfit
    title = "outputs (SHA-256 of the canonical output)"
    if not verified:
        title += ", as claimed (unverified)"
    return ["", *wrap(title, width), *_indent(_grid(rows, width - 2))]


def _differences(classification: dict[str, Any], width: int, verified: bool) -> list[str]:
    for condition in classification["conditions"]:
        for diff in condition["first_differences"]:
            labels = (_simple(condition["baseline_class"] or "?"), condition["warm_class"] or "?")
            gutter = 2 + max(map(len, labels)) + 2
            before, left, right = map(_simple, excerpt_sides(diff, max(width - gutter, 20)))
            where = (
                f"first difference in {diff['field']} at zero-based code point {diff['index']}"
                f" ({condition['id']}; not a token index)"
            )
            if not verified:
                where += ", as claimed (unverified)"
            inner = width - 2
            shown = [
                f"  {labels[0]:<{gutter - 4}}  {before}{left}",
                f"  {labels[1]:<{gutter - 4}}  {before}{right}",
                " " * (gutter + len(before)) + "^",
            ]
            return [
                "",
                *wrap(where, width),
                *(line for text in shown for line in wrap(text, width, no_wrap=True)),
                *(
                    line
                    for note in difference_notes(diff, labels)
                    for line in _indent(wrap(note, inner))
                ),
                *_indent(wrap(f"{labels[0]}: cold and cache-disabled; {labels[1]}: warm", inner)),
            ]
    return []


def _diagnoses(classification: dict[str, Any], width: int) -> list[str]:
    lines: list[str] = []
    for condition in classification["conditions"]:
        diagnosis = condition.get("diagnosis")
        if not diagnosis:
            continue
        head = f"first divergent token ({condition['id']}; diagnostic, not the verdict)"
        lines += ["", *wrap(head, width)]
        if diagnosis["token_index"] is not None:
            lines += _indent(wrap(f"zero-based token {diagnosis['token_index']}:", width - 2))
            for side in divergence_sides(diagnosis):
                lines += _indent(wrap(f"  {side}", width - 2))
        lines += _indent(wrap(diagnosis["note"], width - 2))
    return lines


def _telemetry(classification: dict[str, Any], width: int, verified: bool) -> list[str]:
    """report.text's telemetry rows: where every row fits on a line (as `_two_columns`
    there lays them out), the left cell padded and the right one right-justified."""
    rows: list[tuple[str, str]] = []
    for condition in classification["conditions"]:
        rows.append(("  " + condition["id"], ""))
        for row in class_telemetry_rows(condition):
            head = f"    {row.label} {row.arm} ×{row.requests}, cached tokens {row.cached}"
            if not row.recorded:
                head += ", no counter recorded"
            elif not row.counters:
                head += ", no counter moved"
            rows.append((head, ""))
            rows += [("      " + name, delta) for name, delta in row.counters]
    if not rows or not all(_LATIN.fullmatch(cell) for row in rows for cell in row):
        raise Unfit
    left_width = max(len(left) for left, _ in rows)
    right_width = max(len(right) for _, right in rows) or 1
    if not left_width or left_width + 2 + right_width > width:
        raise Unfit
    grid = [
        (left.ljust(left_width) + "  " + right.rstrip().rjust(right_width)).rstrip(" ")
        for left, right in rows
    ]
    return ["", claimed("telemetry by output class and arm", verified), *grid]


def _rule(title: str, width: int) -> str:
    """rich's `Rule(title, align="left")`: the title, cut with `…` to leave 2 columns."""
    if not title or "\n" in _simple(title):
        raise Unfit
    if len(title) > width - 2:
        title = title[: width - 3] + "…"
    return f"{title} {_RULE * (width - len(title) - 1)}"


def _bundle(bundle: dict[str, Any], width: int) -> list[str]:
    lines = [_rule(bundle["source"], width), *_headline(bundle, width)]
    findings = [f for f in bundle["findings"] if f["severity"] != "info"]
    lines += _findings("errors", [f for f in findings if f["severity"] == "error"], width)
    lines += _checked(bundle, width)
    classification = bundle["classification"]
    if classification is not None:
        lines += _conditions(bundle, classification, width)
    lines += _findings("warnings", [f for f in findings if f["severity"] == "warning"], width)
    lines += _facts(bundle["experiment"], width)
    if classification is not None:
        verified = bundle["verified"]
        lines += _classes(classification, verified, width)
        lines += _differences(classification, width, verified)
        if verified:
            lines += _diagnoses(classification, width)
        lines += _telemetry(classification, width, verified)
        sample = claimed("finite sample", verified)
        lines += ["", *wrap(f"{sample}: " + classification["bound"]["sentence"], width)]
    return [*lines, ""]


def render(report: dict[str, Any], width: int) -> str | None:
    """What `report.text.render_text(report, console)` writes on a console of `width`
    columns that writes no styles; None where this module does not lay it out. `report`
    has had its control characters escaped (`common.printable`), as for render_text."""
    if width < _MIN_WIDTH or len(report["bundles"]) != 1:
        return None  # several bundles: their summary table is left to rich
    try:
        lines = _bundle(report["bundles"][0], width)
    except Unfit:
        return None
    return "".join(line.rstrip(" ") + "\n" for line in lines)  # as render_text, no end spaces
