"""`evidence diff` in words: text for people, Markdown for issues (JSON is the document)."""

from __future__ import annotations

from typing import Any

from verifier.report.common import ARMS, printable
from verifier.report.markdown import plain


def _md(text: object) -> str:
    """Bundle text in a Markdown table cell or line, made inert as verify's report does."""
    return plain(" ".join(str(text).split()), in_table=True)


def _arms(arms: dict[str, list[str]]) -> str:
    return ", ".join(f"{arm} {'/'.join(arms[arm])}" for arm in ARMS if arm in arms) or "none"


def _value(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {_value(v)}" for k, v in value.items())
    if isinstance(value, list):
        return "; ".join(_value(v) for v in value)
    return "null" if value is None else str(value)


def render_diff_text(document: dict[str, Any]) -> str:
    doc = printable(document)
    lines = [f"outcome: {doc['outcome']}", *(f"note: {n}" for n in doc["notes"]), ""]
    for index, bundle in enumerate(doc["bundles"], start=1):
        state = "verified" if bundle["verified"] else f"not compared: {bundle['error']}"
        lines.append(f"[{index}] {bundle['source']}: {bundle['verdict']} ({state})")
    lines.append("")
    for condition in doc["conditions"]:
        lines.append(f"condition {condition['id']}")
        for index, entry in enumerate(condition["bundles"], start=1):
            shown = "absent" if entry is None else f"{entry['verdict']}: {_arms(entry['arms'])}"
            lines.append(f"  [{index}] {shown}")
        for index, change in enumerate(condition["changes"], start=2):
            lines.append(f"  [{index}] vs [1]: {change}")
        if condition["settings_differ"]:
            lines.append("  its settings differ between the bundles")
    if doc["classes"]:
        lines.append("")
        lines.append("classes (matched by output hash)")
        for c in doc["classes"]:
            where = ", ".join(f"[{i + 1}]" for i in c["bundles"])
            lines.append(f"  {c['label']}  {c['output_hash']}  in {where}")
    lines.append("")
    if doc["differences"]:
        lines.append("what differs between the bundles")
        for d in doc["differences"]:
            lines.append(f"  {d['what']}:")
            for index, value in enumerate(d["values"], start=1):
                lines.append(f"    [{index}] {_value(value)}")
    else:
        lines.append("the bundles agree on server, model, hardware, libraries and protocol")
    for d in doc["first_differences"]:
        a, b = d["classes"]
        lines.append(f"first difference {a} vs {b} in {d['field']} at code point {d['index']}")
        lines.append(f"  {a}: {d['left_excerpt']!r}")
        lines.append(f"  {b}: {d['right_excerpt']!r}")
    return "\n".join(line.rstrip() for line in lines) + "\n"


def render_diff_markdown(document: dict[str, Any]) -> str:
    doc = printable(document)
    out = [f"### evidence diff: **{doc['outcome']}**", ""]
    out += [f"> {_md(n)}" for n in doc["notes"]] + ([""] if doc["notes"] else [])
    out += ["| # | bundle | verdict | verified |", "|---|---|---|---|"]
    for index, bundle in enumerate(doc["bundles"], start=1):
        name = bundle["source"].replace("\\", "/").rsplit("/", 1)[-1]
        out.append(
            f"| {index} | {_md(name)} | {bundle['verdict']} | "
            f"{'yes' if bundle['verified'] else 'no: ' + _md(bundle['error'])} |"
        )
    for condition in doc["conditions"]:
        out += ["", f"**condition {_md(condition['id'])}**", ""]
        out += ["| # | verdict | arms | vs 1 |", "|---|---|---|---|"]
        changes = ["", *condition["changes"]]
        for index, entry in enumerate(condition["bundles"], start=1):
            change = _md(changes[index - 1]) if index - 1 < len(changes) else ""
            if entry is None:
                out.append(f"| {index} | absent | | |")
            else:
                out.append(
                    f"| {index} | {entry['verdict']} | {_md(_arms(entry['arms']))} | {change} |"
                )
    if doc["differences"]:
        out += ["", "**what differs**", ""]
        for d in doc["differences"]:
            values = " / ".join(f"[{i}] {_md(_value(v))}" for i, v in enumerate(d["values"], 1))
            out.append(f"- {_md(d['what'])}: {values}")
    for d in doc["first_differences"]:
        a, b = d["classes"]
        out += ["", f"first difference {a} vs {b} in {d['field']} at code point {d['index']}:", ""]
        out.append(f"- {a}: {_md(d['left_excerpt'])}")
        out.append(f"- {b}: {_md(d['right_excerpt'])}")
    return "\n".join(out) + "\n"
