"""Rich text for people, in the order a maintainer decides by.

The verdict and one plain sentence; the errors, when the bundle is not verified; what was
checked and what was not; the per-condition counts; then the details. Laid out for 80
columns and more: hashes and file names sit on lines of their own, words are never split,
no line ends in spaces. Every bundle string is a `Text` (never rich markup) and has had its
control characters escaped by `printable` before it reaches this module.
"""

from __future__ import annotations

import re
from typing import Any

from rich import box
from rich.cells import cell_len
from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

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

VERDICT_STYLE = {
    "cache-state-dependent": "bold yellow",
    "cache-state-independent": "bold green",
    "nondeterministic": "bold magenta",
    "inconclusive": "bold blue",
    "invalid": "bold red",
}
STATUS_STYLE = {
    "passed": "green",
    "failed": "bold red",
    "warning": "yellow",
    "not checked": "dim",
    "skipped": "yellow",
}
SEVERITY_STYLE = {"error": "red", "warning": "yellow", "info": "dim"}
_TRAILING = re.compile(r"[ \t]+((?:\x1b\[[0-9;]*m)*)$", re.MULTILINE)
# Characters of one cell each, as rich.cells counts them (printable Latin; no soft hyphen,
# combining mark or wide character): the fast two-column layout takes only these.
_ONE_CELL = re.compile(r"[\x20-\x7e\xa0-\xac\xae-\u02ff]*")


def _title(text: str) -> Text:
    return Text(text, style="bold")


def _indent(renderable: RenderableType, spaces: int = 2) -> Padding:
    return Padding(renderable, (0, 0, 0, spaces))


def _headline(bundle: dict[str, Any]) -> list[RenderableType]:
    verdict = bundle["verdict"]
    counts = bundle["finding_counts"]
    errors, warnings = counts.get("error", 0), counts.get("warning", 0)
    status = (
        Text("verified", style="green")
        if bundle["verified"]
        else Text("NOT verified", style="bold red")
    )
    tally = Text.assemble(
        status,
        f": {plural(bundle['files'], 'file')} read, {plural(errors, 'error')}, "
        f"{plural(warnings, 'warning')}",
    )
    if bundle["expected"]:
        same = bundle["expected"] == verdict
        tally.append("; as expected" if same else f"; expected {bundle['expected']}")
    head = Text.assemble(("verdict: ", "bold"), (verdict, VERDICT_STYLE.get(verdict, "bold")))
    if bundle["error"] is not None:  # nothing was read: the sentence says it all
        return [head, Text(bundle["summary"])]
    notes = [Text.assemble((f"{CAVEAT}:", "bold yellow"), " ", note) for note in caveats(bundle)]
    return [head, Text(bundle["summary"]), tally, *notes]


def _finding_block(finding: dict[str, Any]) -> RenderableType:
    where = (finding["file"] or "") + (finding["pointer"] or "")
    head = Text.assemble((finding["severity"], SEVERITY_STYLE[finding["severity"]]), "  ")
    head.append(finding["check"], style="bold")
    lines: list[RenderableType] = [head]
    if where:
        lines.append(_indent(Text(where)))
    lines.append(_indent(Text(finding["message"])))
    for key in ("expected", "actual"):
        if finding[key] is not None:
            lines.append(_indent(Text(f"{key:<9}{finding[key]}")))
    return _indent(Group(*lines))


def _findings(title: str, findings: list[dict[str, Any]]) -> list[RenderableType]:
    if not findings:
        return []
    parts: list[RenderableType] = [Text(""), _title(f"{title} ({len(findings)})")]
    parts += map(_finding_block, findings[:MAX_FINDINGS])
    if len(findings) > MAX_FINDINGS:
        more = len(findings) - MAX_FINDINGS
        parts.append(_indent(Text(f"… and {more} more (every one is in --format json)")))
    return parts


def _checked(bundle: dict[str, Any]) -> list[RenderableType]:
    if not bundle["checks"]:
        return []
    grid = Table.grid(padding=(0, 2))
    grid.add_column(no_wrap=True, width=NAME_WIDTH)
    grid.add_column()
    passed = [
        c["check"]
        for c in bundle["checks"]
        if c["status"] == "passed" and c["check"] not in ALWAYS_SHOWN
    ]
    if passed:
        grid.add_row(Text("passed", style="green"), Text(", ".join(passed)))
    for check in bundle["checks"]:
        if check["check"] in passed:
            continue
        body = Text.assemble((check["status"], STATUS_STYLE.get(check["status"], "")), ": ")
        body.append(check["detail"])
        if check["value"] is not None:
            body.append(" ")
            body.append(check["value"], style="bold")
        if check["sha256"]:
            body.append("\nkey sha256 (DER):\n" + check["sha256"])
        grid.add_row(Text(check["check"]), body)
    notes = [
        Text(f"note: {f['message']}", style="dim")
        for f in bundle["findings"]
        if f["severity"] == "info" and f["check"] not in ("signature", "profile")
    ]
    return [Text(""), _title("checked"), grid, *notes]


def _conditions(bundle: dict[str, Any], classification: dict[str, Any]) -> list[RenderableType]:
    verified = bundle["verified"]
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    # headers are Text, as every cell: a str would be read as markup (and load rich's
    # table of emoji names, ~2 ms)
    table.add_column(Text("condition"), no_wrap=True)
    if verified:
        table.add_column(Text("verdict"), no_wrap=True)
    table.add_column(Text("arm"), no_wrap=True)
    table.add_column(Text("requests"), no_wrap=True)
    for condition in classification["conditions"]:
        rows = [(arm, arm_cell(condition["arms"].get(arm, {}))) for arm in ARMS]
        rows.append(("left out", str(len(condition["excluded"]))))
        for index, (arm, cell) in enumerate(rows):
            first = index == 0
            cells: list[Text] = [Text(condition["id"] if first else "")]
            if verified:
                verdict = condition["verdict"] if first else ""
                cells.append(Text(verdict, style=VERDICT_STYLE.get(verdict, "")))
            cells += [Text(arm), Text(cell)]
            table.add_row(*cells, end_section=index == len(rows) - 1)
    title = "per condition" if verified else "per condition, as claimed (unverified)"
    parts: list[RenderableType] = [Text(""), _title(title), table]
    for condition in classification["conditions"]:
        names, declared = condition_names(condition)
        line = Text(condition["id"] + ": ", style="bold")
        line.append("; ".join(names) or "no settings")
        if declared:
            line.append(f" ({DECLARED})", style="yellow")
        if verified and condition["reasons"]:
            line.append("; " + "; ".join(condition["reasons"]))
        parts.append(_indent(line))
    return parts


def _facts(experiment: dict[str, Any] | None) -> list[RenderableType]:
    if experiment is None:
        return []
    grid = Table.grid(padding=(0, 2))
    grid.add_column(no_wrap=True, style="dim", width=NAME_WIDTH)
    grid.add_column()
    for key, value in experiment_lines(experiment):
        grid.add_row(Text(key), Text(value))
    parts: list[RenderableType] = [Text(""), _title("experiment"), grid]
    if experiment["synthetic"]:
        parts.append(Text("synthetic sample: the outputs are stand-ins", style="italic yellow"))
    return parts


def _classes(classification: dict[str, Any], verified: bool) -> list[RenderableType]:
    grid = Table.grid(padding=(0, 2))
    for _ in range(3):
        grid.add_column(no_wrap=True)
    for c in classification["classes"]:
        grid.add_row(Text(c["label"]), Text(c["output_hash"]), Text(f"×{c['count']}"))
    title = "outputs (SHA-256 of the canonical output)"
    if not verified:
        title += ", as claimed (unverified)"
    return [Text(""), _title(title), _indent(grid)]


def _differences(
    classification: dict[str, Any], width: int, verified: bool
) -> list[RenderableType]:
    for condition in classification["conditions"]:
        for diff in condition["first_differences"]:
            # One example is enough on screen; the JSON report has all of them.
            labels = (condition["baseline_class"] or "?", condition["warm_class"] or "?")
            gutter = 2 + max(map(cell_len, labels)) + 2
            before, left, right = excerpt_sides(diff, max(width - gutter, 20))
            mark = " " * (gutter + cell_len(before)) + "^"
            where = (
                f"first difference in {diff['field']} at zero-based code point {diff['index']}"
                f" ({condition['id']}; not a token index)"
            )
            if not verified:
                where += ", as claimed (unverified)"
            return [
                Text(""),
                Text(where, style="bold"),
                Text(f"  {labels[0]:<{gutter - 4}}  {before}{left}", no_wrap=True),
                Text(f"  {labels[1]:<{gutter - 4}}  {before}{right}", no_wrap=True),
                Text(mark, no_wrap=True),
                *(_indent(Text(note)) for note in difference_notes(diff, labels)),
                _indent(
                    Text(f"{labels[0]}: cold and cache-disabled; {labels[1]}: warm", style="dim")
                ),
            ]
    return []


def _diagnoses(classification: dict[str, Any]) -> list[RenderableType]:
    """The first divergent token of the diagnostic phase: said apart, never a verdict."""
    parts: list[RenderableType] = []
    for condition in classification["conditions"]:
        diagnosis = condition.get("diagnosis")
        if not diagnosis:
            continue
        head = Text(f"first divergent token ({condition['id']}; diagnostic, not the verdict)")
        parts += [Text(""), Text.assemble((head.plain, "bold"))]
        if diagnosis["token_index"] is not None:
            parts.append(_indent(Text(f"zero-based token {diagnosis['token_index']}:")))
            parts += [_indent(Text(f"  {side}")) for side in divergence_sides(diagnosis)]
        parts.append(_indent(Text(diagnosis["note"], style="dim")))
    return parts


def _telemetry_rows(classification: dict[str, Any]) -> list[tuple[Text, Text]]:
    rows: list[tuple[Text, Text]] = []
    for condition in classification["conditions"]:
        rows.append((Text("  " + condition["id"], style="bold"), Text("")))
        for row in class_telemetry_rows(condition):
            head = f"    {row.label} {row.arm} ×{row.requests}, cached tokens {row.cached}"
            if not row.recorded:
                head += ", no counter recorded"
            elif not row.counters:
                head += ", no counter moved"
            rows.append((Text(head), Text("")))
            for name, delta in row.counters:
                rows.append((Text("      " + name), Text(delta)))
    return rows


def _telemetry_grid(rows: list[tuple[Text, Text]]) -> Table:
    """The rows as rich lays them out: a left column, and a right-justified one that never
    wraps (the reference of `_two_columns`)."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column()
    grid.add_column(no_wrap=True, justify="right")
    for left, right in rows:
        grid.add_row(left, right)
    return grid


def _two_columns(rows: list[tuple[Text, Text]], width: int) -> RenderableType:
    """What `_telemetry_grid(rows)` prints at `width`, for a fraction of its cost (rich
    measures and pads every cell of a grid one by one: ~5 ms of the seed sample's report).

    Only where no cell wraps: every row fits on one line, and every cell is printable
    Latin text (no line break or tab, no combining mark or wide character). Then each
    line is the left cell padded to its column's width (the padding in the cell's style,
    as rich pads a left-justified cell), the two spaces between the columns, and the
    right cell right-justified in its column; otherwise the grid itself. Unstyled right
    cells only (as the telemetry's are). tests/test_report_text.py checks
    that both give the same bytes, to a terminal and to a file.
    """
    plain = [(left.plain, right.plain) for left, right in rows]
    if (
        not rows
        or any(right.style or right.spans for _, right in rows)
        or any(left.spans for left, _ in rows)
        or not all(_ONE_CELL.fullmatch(cell) for pair in plain for cell in pair)
    ):
        return _telemetry_grid(rows)
    left_width = max(len(left) for left, _ in plain)  # one cell a character
    right_width = max(len(right) for _, right in plain) or 1  # rich: at least 1
    if not left_width or left_width + 2 + right_width > width:  # rich drops a 0-wide cell
        return _telemetry_grid(rows)
    lines = Text()
    for index, ((left, _), (left_text, right_text)) in enumerate(zip(rows, plain, strict=True)):
        if index:
            lines.append("\n")
        lines.append(left_text + " " * (left_width - len(left_text)), left.style)
        right_text = right_text.rstrip()  # rich strips a right-justified cell first
        lines.append("  " + " " * (right_width - len(right_text)) + right_text)
    return lines


def _telemetry(classification: dict[str, Any], width: int, verified: bool) -> list[RenderableType]:
    grid = _two_columns(_telemetry_rows(classification), width)
    return [Text(""), _title(claimed("telemetry by output class and arm", verified)), grid]


def _bundle(bundle: dict[str, Any], width: int) -> RenderableType:
    parts: list[RenderableType] = [Rule(Text(bundle["source"], style="bold"), align="left")]
    parts += _headline(bundle)
    findings = [f for f in bundle["findings"] if f["severity"] != "info"]
    parts += _findings("errors", [f for f in findings if f["severity"] == "error"])
    parts += _checked(bundle)
    classification = bundle["classification"]
    if classification is not None:
        parts += _conditions(bundle, classification)
    parts += _findings("warnings", [f for f in findings if f["severity"] == "warning"])
    parts += _facts(bundle["experiment"])
    if classification is not None:
        verified = bundle["verified"]
        parts += _classes(classification, verified)
        parts += _differences(classification, width, verified)
        if verified:  # (a reading of the diagnostic phase of a bundle that failed: none)
            parts += _diagnoses(classification)
        parts += _telemetry(classification, width, verified)
        sample = claimed("finite sample", verified)
        parts += [Text(""), Text(f"{sample}: " + classification["bound"]["sentence"])]
    parts.append(Text(""))
    return Group(*parts)


def _summary(bundles: list[dict[str, Any]]) -> RenderableType:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for header in ("bundle", "verdict", "errors", "warnings", "exit"):
        table.add_column(Text(header), no_wrap=header != "bundle", overflow="fold")
    for b in bundles:
        counts = b["finding_counts"]
        table.add_row(
            Text(b["name"]),
            Text(b["verdict"], style=VERDICT_STYLE.get(b["verdict"], "")),
            Text(str(counts.get("error", 0))),
            Text(str(counts.get("warning", 0))),
            Text(str(b["exit_code"])),
        )
    return Group(_title(f"summary of {plural(len(bundles), 'bundle')}"), table)


def render_text(report: dict[str, Any], console: Console) -> None:
    """Print the report; captured first so that no line is written with trailing spaces."""
    with console.capture() as captured:
        for bundle in report["bundles"]:
            console.print(_bundle(bundle, console.width))
        if len(report["bundles"]) > 1:
            console.print(_summary(report["bundles"]))
    console.file.write(_TRAILING.sub(r"\1", captured.get()))
