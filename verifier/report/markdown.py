"""Markdown made to be pasted into a GitHub issue comment.

Open: the verdict and its sentence, the errors of a bundle that is not verified, what was
checked, the per-condition table, the findings. Inside `<details>`: the experiment, the
telemetry, the excluded requests. Several bundles get a summary table first.

Every bundle string is untrusted. It reaches the page only inside a code span (or a fenced
block) whose backtick run is longer than any run in the value, so it can open no link, image,
HTML, mention or emphasis; in a table cell its `|` is escaped, so it cannot end the cell.
Control characters (a newline would end a table row) were escaped by `printable` before.
Text of our own that embeds bundle strings (a reason, a finding) goes through `plain`.
"""

from __future__ import annotations

import re
from typing import Any

from verifier.report.common import (
    ALWAYS_SHOWN,
    ARMS,
    CAVEAT,
    DECLARED,
    MAX_FINDINGS,
    arm_cell,
    caveats,
    class_telemetry_rows,
    condition_names,
    difference_notes,
    divergence_sides,
    excerpt_sides,
    experiment_lines,
    plural,
)

_BACKTICKS = re.compile(r"`+")
# Characters that could start Markdown or HTML syntax in running text.
_PUNCTUATION = re.compile(r"([\\`*_\[\]<>|~&])")
# Words GitHub would turn into a notification, a cross-reference or a link.
_LINKY = re.compile(r"[@#]|://|^www\.", re.IGNORECASE)
EXCERPT_ROOM = 72


def code(value: str) -> str:
    """`value` as an inline code span that nothing inside it can close."""
    if not value:
        return "` `"
    longest = max((len(run) for run in _BACKTICKS.findall(value)), default=0)
    fence = "`" * (longest + 1)
    # A value that starts or ends with a backtick or a space keeps it: CommonMark strips
    # exactly one space on each side when both are present.
    pad = " " if value[0] in "` " or value[-1] in "` " else ""
    return f"{fence}{pad}{value}{pad}{fence}"


def cell(value: str) -> str:
    """A code span for a table cell: a `|` inside it would otherwise end the cell."""
    return code(value).replace("|", "\\|")


def plain(text: str, *, in_table: bool = False) -> str:
    """Running text that may embed bundle strings: escaped, mentions and links made inert.

    A word GitHub would link (`@name`, `#12`, a URL) becomes a code span, where GitHub links
    nothing; every other word has its Markdown punctuation backslash-escaped.
    """
    words = []
    for word in text.split(" "):
        if _LINKY.search(word):
            words.append(cell(word) if in_table else code(word))
        elif _PUNCTUATION.search(word) is None:  # most words: nothing to escape, no sub()
            words.append(word)
        else:
            words.append(_PUNCTUATION.sub(r"\\\1", word))
    return " ".join(words)


def _fence(lines: list[str]) -> list[str]:
    body = "\n".join(lines)
    longest = max((len(run) for run in _BACKTICKS.findall(body)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence + "text", *lines, fence]


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _details(summary: str, body: list[str]) -> list[str]:
    return ["", f"<details><summary>{summary}</summary>", "", *body, "", "</details>"]


def _status(bundle: dict[str, Any]) -> str:
    counts = bundle["finding_counts"]
    status = "verified" if bundle["verified"] else "**not verified**"
    line = (
        f"{status}: {plural(bundle['files'], 'file')} read, "
        f"{plural(counts.get('error', 0), 'error')}, "
        f"{plural(counts.get('warning', 0), 'warning')}"
    )
    if bundle["expected"]:
        same = bundle["expected"] == bundle["verdict"]
        line += "; as expected" if same else f"; expected `{bundle['expected']}`"
    return line


def _findings(findings: list[dict[str, Any]]) -> list[str]:
    rows = []
    for f in findings[:MAX_FINDINGS]:
        where = (f["file"] or "") + (f["pointer"] or "")
        message = plain(f["message"], in_table=True)
        for key in ("expected", "actual"):
            if f[key] is not None:
                message += f"; {key} {cell(f[key])}"
        rows.append([f["severity"], f["check"], cell(where) if where else "", message])
    if len(findings) > MAX_FINDINGS:
        rows.append(["…", "", "", f"{len(findings) - MAX_FINDINGS} more (use --format json)"])
    return _table(["severity", "check", "where", "finding"], rows)


def _checked(bundle: dict[str, Any]) -> list[str]:
    if not bundle["checks"]:
        return []
    passed = [
        c["check"]
        for c in bundle["checks"]
        if c["status"] == "passed" and c["check"] not in ALWAYS_SHOWN
    ]
    lines = [f"- passed: {', '.join(passed)}"] if passed else []
    for check in bundle["checks"]:
        if check["check"] in passed:
            continue
        line = f"- {check['check']}: **{check['status']}**, {plain(check['detail'])}"
        if check["value"] is not None:
            line += " " + code(check["value"])
        if check["sha256"]:
            line += f"; key sha256 (DER) `{check['sha256']}`"
        lines.append(line)
    lines += [
        f"- note: {plain(f['message'])}"
        for f in bundle["findings"]
        if f["severity"] == "info" and f["check"] not in ("signature", "profile")
    ]
    return ["", "Checked:", "", *lines]


def _conditions(bundle: dict[str, Any], classification: dict[str, Any]) -> list[str]:
    verified = bundle["verified"]
    headers = ["condition", *(["verdict"] if verified else []), *ARMS, "left out"]
    rows = []
    for c in classification["conditions"]:
        names, declared = condition_names(c)
        rows.append(
            [
                " ".join(cell(name) for name in [c["id"], *names])
                + (f" ({DECLARED})" if declared else ""),
                *([f"`{c['verdict']}`"] if verified else []),
                *(arm_cell(c["arms"].get(arm, {})) for arm in ARMS),
                str(len(c["excluded"])),
            ]
        )
    lines = ["", *_table(headers, rows)]
    if verified:
        reasons = [
            f"- {code(c['id'])}: " + plain("; ".join(c["reasons"]))
            for c in classification["conditions"]
            if c["reasons"]
        ]
        lines += ["", *reasons] if reasons else []
    return lines


def _difference(classification: dict[str, Any], verified: bool) -> list[str]:
    for c in classification["conditions"]:
        for d in c["first_differences"]:
            labels = (c["baseline_class"] or "?", c["warm_class"] or "?")
            before, left, right = excerpt_sides(d, EXCERPT_ROOM)
            width = max(map(len, labels))
            claimed = ", as claimed (unverified)" if not verified else ""
            return [
                "",
                f"First difference in `{d['field']}` at zero-based code point {d['index']} "
                f"({code(c['id'])}; not a token index){claimed}; {labels[0]}: cold and "
                f"cache-disabled requests, {labels[1]}: warm requests:",
                "",
                *_fence(
                    [
                        f"{labels[0]:<{width}}  {before}{left}",
                        f"{labels[1]:<{width}}  {before}{right}",
                        " " * (width + 2 + len(before)) + "^",
                        *difference_notes(d, labels),
                    ]
                ),
            ]
    return []


def _diagnoses(classification: dict[str, Any]) -> list[str]:
    """The first divergent token of the diagnostic phase: said apart, never a verdict."""
    lines = []
    for c in classification["conditions"]:
        diagnosis = c.get("diagnosis")
        if not diagnosis:
            continue
        line = f"- first divergent token ({code(c['id'])}; diagnostic, not the verdict): "
        if diagnosis["token_index"] is not None:
            sides = divergence_sides(diagnosis, quote=code)
            line += f"zero-based token {diagnosis['token_index']}: " + "; ".join(sides) + ". "
        lines.append(line + plain(diagnosis["note"]))
    return ["", *lines] if lines else []


def _experiment(bundle: dict[str, Any]) -> list[str]:
    experiment = bundle["experiment"]
    if experiment is None:
        return []
    lines = [f"- {key}: {code(value)}" for key, value in experiment_lines(experiment)]
    if experiment["synthetic"]:
        lines.append("- synthetic sample: the outputs are stand-ins")
    return lines


def _classes(classification: dict[str, Any]) -> list[str]:
    rows = [
        [c["label"], cell(c["output_hash"]), str(c["count"])] for c in classification["classes"]
    ]
    return _table(["class", "output hash (SHA-256 of the canonical output)", "requests"], rows)


def _telemetry(classification: dict[str, Any]) -> list[str]:
    rows = []
    for c in classification["conditions"]:
        for row in class_telemetry_rows(c):
            if row.counters:
                deltas = "<br>".join(f"{cell(name)} {delta}" for name, delta in row.counters)
            else:
                deltas = "no counter moved" if row.recorded else "no counter recorded"
            rows.append([cell(c["id"]), row.label, row.arm, str(row.requests), row.cached, deltas])
    headers = ["condition", "class", "arm", "n", "cached tokens", "counter deltas"]
    return _table(headers, rows)


def _excluded(classification: dict[str, Any]) -> list[str]:
    rows = [
        [cell(c["id"]), cell(e["file"]), e["claimed_arm"], plain(e["reason"], in_table=True)]
        for c in classification["conditions"]
        for e in c["excluded"]
    ]
    return _table(["condition", "record", "claimed arm", "why left out"], rows) if rows else []


def _requests(classification: dict[str, Any]) -> list[str]:
    """Every request's proof: what it claimed, whether the telemetry proves it, and why."""
    rows = [
        [
            cell(r["condition"]),
            str(r["sequence"]),
            cell(r["phase"]),
            r["claimed_arm"],
            "yes" if r["proven"] else "**no**",
            cell(r["class"]) if r["class"] else "—",
            "—" if r["cached_tokens"] is None else str(r["cached_tokens"]),
            "—" if r["prompt_tokens"] is None else str(r["prompt_tokens"]),
            cell(r["finish_reason"]) if r["finish_reason"] else "—",
            plain(r["reason"], in_table=True),
        ]
        for r in classification["requests"]
        if isinstance(r, dict) and {"condition", "sequence", "claimed_arm"} <= set(r)
    ]
    headers = ["condition", "#", "phase", "claimed arm", "proven", "class", "cached", "prompt",
               "finish", "proof"]  # fmt: skip
    return _table(headers, rows) if rows else []


def _bundle(bundle: dict[str, Any]) -> list[str]:
    lines = [
        f"### `{bundle['verdict']}`: {code(bundle['name'])}",
        "",
        plain(bundle["summary"]),
    ]
    if bundle["error"] is None:
        lines += ["", _status(bundle)]
    notes = caveats(bundle)
    if notes:
        lines += ["", *(f"- **{CAVEAT}**: {plain(note)}" for note in notes)]
    findings = [f for f in bundle["findings"] if f["severity"] != "info"]
    errors = [f for f in findings if f["severity"] == "error"]
    if errors:
        lines += ["", f"Errors ({len(errors)}):", "", *_findings(errors)]
    lines += _checked(bundle)
    classification = bundle["classification"]
    verified = bundle["verified"]
    if classification is not None and verified:
        lines += _conditions(bundle, classification)
        lines += _difference(classification, verified)
        lines += _diagnoses(classification)
    warnings = [f for f in findings if f["severity"] == "warning"]
    if warnings:
        lines += ["", f"Warnings ({len(warnings)}):", "", *_findings(warnings)]
    if classification is not None and not verified:
        claims = _conditions(bundle, classification)[1:] + _difference(classification, verified)
        lines += _details("what the bundle claims (unverified: it failed verification)", claims)
    details = _experiment(bundle)
    if classification is not None:
        details += ["", *_classes(classification), "", *_telemetry(classification)]
        excluded = _excluded(classification)
        details += ["", *excluded] if excluded else []
        details += ["", "Finite sample: " + plain(classification["bound"]["sentence"]) + "."]
    if details:
        title = "experiment, outputs and telemetry"
        lines += _details(title if verified else title + " (unverified)", details)
    proofs = _requests(classification) if classification is not None else []
    if proofs:
        title = "per-request proofs"
        lines += _details(title if verified else title + " (unverified)", proofs)
    return lines


def _summary(bundles: list[dict[str, Any]]) -> list[str]:
    rows = [
        [
            cell(b["name"]),
            f"`{b['verdict']}`",
            "yes" if b["verified"] else "**no**",
            str(b["finding_counts"].get("error", 0)),
            str(b["finding_counts"].get("warning", 0)),
            str(b["exit_code"]),
        ]
        for b in bundles
    ]
    headers = ["bundle", "verdict", "verified", "errors", "warnings", "exit"]
    return [f"### {plural(len(bundles), 'bundle')}", "", *_table(headers, rows)]


def render_markdown(report: dict[str, Any]) -> str:
    lines: list[str] = []
    if len(report["bundles"]) > 1:
        lines += [*_summary(report["bundles"]), ""]
    for index, bundle in enumerate(report["bundles"]):
        if index:
            lines.append("")
        lines += _bundle(bundle)
    lines += ["", f"<sub>evidence {report['tool']['version']}</sub>"]
    return "\n".join(lines) + "\n"
