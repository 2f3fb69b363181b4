"""Markdown that reads well pasted into a GitHub issue comment."""

from __future__ import annotations

from typing import Any

from verifier.report.common import ARM_COLUMNS, arm_cell, class_telemetry_rows, experiment_lines

MAX_FINDINGS = 20


def _cell(text: str) -> str:
    """Table-cell text that cannot open HTML, mention people or break the table."""
    for raw, safe in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ("|", "\\|"), ("@", "@\u200b")):
        text = text.replace(raw, safe)
    return text.replace("\n", " ")


def _quote(text: str) -> str:
    return "`" + text.replace("`", "ˋ").replace("\n", "⏎") + "`"


def _bundle(bundle: dict[str, Any]) -> list[str]:
    counts = bundle["finding_counts"]
    status = "verified" if bundle["verified"] else "**not verified**"
    lines = [
        f"### `{bundle['verdict']}`: {_cell(bundle['source'])}",
        "",
        f"{status}: {bundle['files']} files, {counts.get('error', 0)} errors, "
        f"{counts.get('warning', 0)} warnings; signature {bundle['signature']}"
        + (f"; expected `{bundle['expected']}`" if bundle["expected"] else ""),
    ]
    if bundle["error"]:
        lines += ["", f"> {bundle['error']}"]
    experiment = bundle["experiment"]
    if experiment is not None:
        lines.append("")
        lines += [f"- {key}: `{_cell(str(value))}`" for key, value in experiment_lines(experiment)]
        if experiment["synthetic"]:
            lines.append("- synthetic sample: the outputs are stand-ins")
    classification = bundle["classification"]
    if classification is not None:
        headers = ["condition", "verdict", *(h for _, h in ARM_COLUMNS), "left out"]
        lines += ["", "| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
        for c in classification["conditions"]:
            cells = [
                f"`{c['id']}` {_cell(c['label'])}",
                f"`{c['verdict']}`",
                *(arm_cell(c["arms"].get(arm, {})) for arm, _ in ARM_COLUMNS),
                str(len(c["excluded"])),
            ]
            lines.append("| " + " | ".join(cells) + " |")
        lines += ["", "| class | output hash | requests |", "|---|---|---|"]
        lines += [
            f"| {c['label']} | `{c['output_hash']}` | {c['count']} |"
            for c in classification["classes"]
        ]
        shown = False
        for c in classification["conditions"]:
            for d in c["first_differences"]:
                if shown:
                    break
                shown = True
                lines += [
                    "",
                    f"First difference in `{d['field']}` at zero-based code point {d['index']} "
                    f"(`{c['id']}`; not a token index):",
                    f"- {c['baseline_class']} (cold/disabled): {_quote(d['baseline_excerpt'])}",
                    f"- {c['warm_class']} (warm): {_quote(d['warm_excerpt'])}",
                ]
        lines += ["", "| condition | class | arm | n | cached tokens | counter deltas |"]
        lines.append("|---|---|---|---|---|---|")
        for c in classification["conditions"]:
            for row in class_telemetry_rows(c):
                lines.append(f"| `{c['id']}` | " + " | ".join(_cell(x) for x in row) + " |")
        lines += ["", f"Finite sample: {classification['bound']['sentence']}."]
    findings = [f for f in bundle["findings"] if f["severity"] != "info"]
    if findings:
        lines += ["", "<details><summary>findings</summary>", ""]
        lines += ["| severity | check | where | finding |", "|---|---|---|---|"]
        for f in findings[:MAX_FINDINGS]:
            where = (f["file"] or "") + (f["pointer"] or "")
            lines.append(
                f"| {f['severity']} | {f['check']} | `{_cell(where)}` | {_cell(f['message'])} |"
            )
        if len(findings) > MAX_FINDINGS:
            lines.append(f"| … | | | {len(findings) - MAX_FINDINGS} more (use --format json) |")
        lines += ["", "</details>"]
    return lines


def render_markdown(report: dict[str, Any]) -> str:
    lines: list[str] = []
    for bundle in report["bundles"]:
        if lines:
            lines.append("")
        lines += _bundle(bundle)
    lines += ["", f"<sub>evidence {report['tool']['version']}</sub>"]
    return "\n".join(lines) + "\n"
