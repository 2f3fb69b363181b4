"""Rich text for people: the verdict, the per-condition table, the evidence behind it."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console, Group, RenderableType
from rich.panel import Panel
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


def _bundle(bundle: dict[str, Any]) -> RenderableType:
    parts: list[RenderableType] = []
    verdict = bundle["verdict"]
    headline = Text.assemble(("verdict: ", "bold"), (verdict, VERDICT_STYLE.get(verdict, "bold")))
    counts = bundle["finding_counts"]
    status = "verified" if bundle["verified"] else "NOT verified"
    headline.append(
        f"   ({status}; {bundle['files']} files, {counts.get('error', 0)} errors, "
        f"{counts.get('warning', 0)} warnings; signature {bundle['signature']})"
    )
    if bundle["expected"]:
        mark = "as expected" if bundle["expected"] == verdict else f"expected {bundle['expected']}"
        headline.append(f"   [{mark}]")
    parts.append(headline)
    if bundle["error"]:
        parts.append(Text(bundle["error"], style="red"))

    experiment = bundle["experiment"]
    if experiment is not None:
        facts = Table.grid(padding=(0, 2))
        for key, value in experiment_lines(experiment):
            facts.add_row(Text(key, style="dim"), value)
        parts.append(facts)
        if experiment["synthetic"]:
            parts.append(Text("synthetic sample: outputs are stand-ins", style="italic yellow"))

    classification = bundle["classification"]
    if classification is not None:
        parts.append(_conditions_table(classification))
        classes = Table(
            "class",
            "output hash (sha256 of canonical output)",
            "requests",
            box=box.SIMPLE_HEAD,
            title="output classes",
            title_justify="left",
        )
        for c in classification["classes"]:
            classes.add_row(c["label"], c["output_hash"], str(c["count"]))
        parts.append(classes)
        parts.extend(_differences(classification))
        parts.append(_telemetry_table(classification))
        parts.append(Text("finite sample: " + classification["bound"]["sentence"]))
        for reason in classification["reasons"]:
            parts.append(Text("• " + reason, style="dim"))
    findings = [f for f in bundle["findings"] if f["severity"] != "info"]
    infos = [f for f in bundle["findings"] if f["severity"] == "info"]
    if findings:
        parts.append(_findings_table(findings))
    for info in infos:
        parts.append(Text(f"note: {info['message']}", style="dim"))
    return Panel(Group(*parts), title=bundle["source"], title_align="left", box=box.ROUNDED)


def _conditions_table(classification: dict[str, Any]) -> Table:
    table = Table(box=box.SIMPLE_HEAD, title="per condition", title_justify="left")
    table.add_column("condition")
    table.add_column("settings")
    table.add_column("verdict")
    for _, header in ARM_COLUMNS:
        table.add_column(header, justify="right")
    table.add_column("left out", justify="right")
    for condition in classification["conditions"]:
        table.add_row(
            condition["id"],
            ", ".join(f"{k}={v}" for k, v in condition["settings"].items()) or "—",
            Text(condition["verdict"], style=VERDICT_STYLE.get(condition["verdict"], "")),
            *(arm_cell(condition["arms"].get(arm, {})) for arm, _ in ARM_COLUMNS),
            str(len(condition["excluded"])),
        )
    return table


def _differences(classification: dict[str, Any]) -> list[RenderableType]:
    out: list[RenderableType] = []
    for condition in classification["conditions"]:
        for diff in condition["first_differences"]:
            out.append(
                Text.assemble(
                    ("first difference ", "bold"),
                    f"({condition['id']}, {diff['field']}, zero-based code point {diff['index']}):",
                )
            )
            out.append(
                Text(f"  {condition['baseline_class']} cold/disabled: {diff['baseline_excerpt']!r}")
            )
            out.append(Text(f"  {condition['warm_class']} warm:          {diff['warm_excerpt']!r}"))
            return out  # one example is enough on screen; JSON has all of them
    return out


def _telemetry_table(classification: dict[str, Any]) -> Table:
    table = Table(
        "condition",
        "class",
        "arm",
        "n",
        "cached tokens",
        "counter deltas per request",
        box=box.SIMPLE_HEAD,
        title="telemetry by output class and arm",
        title_justify="left",
    )
    for condition in classification["conditions"]:
        for row in class_telemetry_rows(condition):
            table.add_row(condition["id"], *row)
    return table


def _findings_table(findings: list[dict[str, Any]]) -> Table:
    table = Table(
        "severity",
        "check",
        "where",
        "finding",
        box=box.SIMPLE_HEAD,
        title="findings",
        title_justify="left",
    )
    for f in findings:
        where = (f["file"] or "") + (f["pointer"] or "")
        message = f["message"]
        if f["expected"] is not None or f["actual"] is not None:
            message += f" (expected {f['expected']}, actual {f['actual']})"
        table.add_row(
            Text(f["severity"], style=SEVERITY_STYLE[f["severity"]]), f["check"], where, message
        )
    return table


def _summary(bundles: list[dict[str, Any]]) -> Table:
    table = Table(
        "bundle",
        "verified",
        "verdict",
        "errors",
        "warnings",
        "exit",
        box=box.SIMPLE_HEAD,
        title="summary",
        title_justify="left",
    )
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
        console.print(_summary(report["bundles"]))
