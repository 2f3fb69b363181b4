"""Rich text for people: the verdict, the per-condition table, the evidence behind it.

Laid out to stay readable at 80 columns: long values fold onto the next line, they are
never cut with an ellipsis.
"""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console, Group, RenderableType
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from verifier.report.common import ARM_COLUMNS, arm_cell, class_telemetry_rows, experiment_lines

VERDICT_STYLE = {
    "cache-state-dependent": "bold yellow",
    "cache-state-independent": "bold green",
    "nondeterministic": "bold magenta",
    "inconclusive": "bold blue",
    "invalid": "bold red",
}
SEVERITY_STYLE = {"error": "red", "warning": "yellow", "info": "dim"}
SHORT_ARM = {
    "cold": "cold",
    "warm": "warm",
    "request-disabled": "opt-out",
    "server-disabled": "off",
}


def _table(*headers: str, title: str) -> Table:
    table = Table(box=box.SIMPLE_HEAD, title=title, title_justify="left", title_style="bold")
    for header in headers:
        table.add_column(header, overflow="fold")
    return table


def _headline(bundle: dict[str, Any]) -> Text:
    verdict = bundle["verdict"]
    counts = bundle["finding_counts"]
    status = "verified" if bundle["verified"] else "NOT verified"
    headline = Text.assemble(("verdict: ", "bold"), (verdict, VERDICT_STYLE.get(verdict, "bold")))
    headline.append(
        f"\n{status}: {bundle['files']} files, {counts.get('error', 0)} errors, "
        f"{counts.get('warning', 0)} warnings; signature {bundle['signature']}"
    )
    if bundle["expected"]:
        same = bundle["expected"] == verdict
        headline.append("; as expected" if same else f"; expected {bundle['expected']}")
    return headline


def _bundle(bundle: dict[str, Any]) -> RenderableType:
    parts: list[RenderableType] = [
        Rule(Text(bundle["source"], style="bold"), align="left"),
        _headline(bundle),
    ]
    if bundle["error"]:
        parts.append(Text(bundle["error"], style="red"))
    experiment = bundle["experiment"]
    if experiment is not None:
        facts = Table.grid(padding=(0, 2))
        facts.add_column(style="dim", no_wrap=True)
        facts.add_column(overflow="fold")
        for key, value in experiment_lines(experiment):
            facts.add_row(key, value)
        parts += [Text(""), facts]
        if experiment["synthetic"]:
            parts.append(Text("synthetic sample: outputs are stand-ins", style="italic yellow"))
    classification = bundle["classification"]
    if classification is not None:
        parts += [
            Text(""),
            _conditions_table(classification),
            _classes_table(classification),
            Text(""),
            *_differences(classification),
            _telemetry_table(classification),
            Text(""),
            Text("finite sample: " + classification["bound"]["sentence"]),
        ]
        parts += [Text("• " + reason, style="dim") for reason in classification["reasons"]]
    findings = [f for f in bundle["findings"] if f["severity"] != "info"]
    if findings:
        parts.append(_findings_table(findings))
    parts += [
        Text(f"note: {f['message']}", style="dim")
        for f in bundle["findings"]
        if f["severity"] == "info"
    ]
    return Group(*parts)


def _conditions_table(classification: dict[str, Any]) -> Table:
    table = Table(
        box=box.SIMPLE_HEAD, title="per condition", title_justify="left", title_style="bold"
    )
    table.add_column("condition", overflow="fold", ratio=1)
    table.add_column("verdict", no_wrap=True)
    for _, header in ARM_COLUMNS:
        table.add_column(header.replace("cache ", ""), justify="right", overflow="fold")
    table.add_column("left out", justify="right")
    settings = []
    for condition in classification["conditions"]:
        if condition["settings"]:
            pairs = ", ".join(f"{k}={v}" for k, v in condition["settings"].items())
            settings.append(f"{condition['id']}: {pairs}")
        table.add_row(
            condition["id"],
            Text(condition["verdict"], style=VERDICT_STYLE.get(condition["verdict"], "")),
            *(arm_cell(condition["arms"].get(arm, {})) for arm, _ in ARM_COLUMNS),
            str(len(condition["excluded"])),
        )
    if settings:
        table.caption = "\n".join(settings)
        table.caption_justify = "left"
    return table


def _classes_table(classification: dict[str, Any]) -> Table:
    table = Table(box=None, title="outputs (SHA-256 of the canonical output)", title_style="bold",
                  title_justify="left", show_header=False, padding=(0, 1))  # fmt: skip
    table.add_column(no_wrap=True)
    table.add_column(overflow="fold")
    table.add_column(no_wrap=True, justify="right")
    for c in classification["classes"]:
        table.add_row(c["label"], c["output_hash"], f"×{c['count']}")
    return table


def _differences(classification: dict[str, Any]) -> list[RenderableType]:
    for condition in classification["conditions"]:
        for diff in condition["first_differences"]:
            # One example is enough on screen; the JSON report has all of them.
            return [
                Text.assemble(
                    ("first difference", "bold"),
                    f" in {diff['field']} at zero-based code point {diff['index']} "
                    f"({condition['id']}; not a token index)",
                ),
                Text(
                    f"  {condition['baseline_class']} cold/disabled: {diff['baseline_excerpt']!r}"
                ),
                Text(f"  {condition['warm_class']} warm:          {diff['warm_excerpt']!r}"),
                Text(""),
            ]
    return []


def _telemetry_table(classification: dict[str, Any]) -> Table:
    table = Table(box=None, title="telemetry per request, by output class and arm",
                  title_style="bold", title_justify="left", padding=(0, 1))  # fmt: skip
    table.add_column("class, arm", no_wrap=True)
    table.add_column("cached", no_wrap=True)
    table.add_column("counter deltas", overflow="fold")
    for condition in classification["conditions"]:
        table.add_row(Text(condition["id"], style="bold"), "", "")
        for label, arm, n, cached, deltas in class_telemetry_rows(condition):
            table.add_row(f"  {label} {SHORT_ARM.get(arm, arm)} ×{n}", cached, deltas)
    return table


def _findings_table(findings: list[dict[str, Any]]) -> Table:
    table = _table("severity", "check", "where", "finding", title="findings")
    for f in findings:
        where = (f["file"] or "") + (f["pointer"] or "")
        message = f["message"]
        if f["expected"] is not None or f["actual"] is not None:
            message += f" (expected {f['expected']}, actual {f['actual']})"
        severity = Text(f["severity"], style=SEVERITY_STYLE[f["severity"]])
        table.add_row(severity, f["check"], where, message)
    return table


def _summary(bundles: list[dict[str, Any]]) -> Table:
    table = _table("bundle", "verified", "verdict", "errors", "warnings", "exit", title="summary")
    for b in bundles:
        table.add_row(
            b["source"],
            "yes" if b["verified"] else "no",
            Text(b["verdict"], style=VERDICT_STYLE.get(b["verdict"], "")),
            str(b["finding_counts"].get("error", 0)),
            str(b["finding_counts"].get("warning", 0)),
            str(b["exit_code"]),
        )
    return table


def render_text(report: dict[str, Any], console: Console) -> None:
    for bundle in report["bundles"]:
        console.print(_bundle(bundle))
    if len(report["bundles"]) > 1:
        console.print(Rule())
        console.print(_summary(report["bundles"]))
