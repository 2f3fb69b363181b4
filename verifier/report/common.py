"""Wording shared by the human-readable formats, so text and Markdown say the same thing."""

from __future__ import annotations

import re
from typing import Any

ARM_COLUMNS = (
    ("cold", "cold"),
    ("warm", "warm"),
    ("request-disabled", "opt-out"),
    ("server-disabled", "cache off"),
)


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


def printable(node: Any) -> Any:
    """The report with every control character of bundle text shown as an escape.

    A hostile bundle must not reach the reader's terminal (ANSI/OSC sequences) or hide text
    (bidirectional overrides); the JSON format keeps the exact strings.
    """
    if isinstance(node, str):
        return _CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", node)
    if isinstance(node, dict):
        return {printable(k): printable(v) for k, v in node.items()}
    if isinstance(node, list):
        return [printable(v) for v in node]
    return node


def arm_cell(counts: dict[str, int]) -> str:
    """`6 A` or `5 A + 1 C`; an em dash for an empty arm."""
    if not counts:
        return "—"
    return " + ".join(f"{n} {label}" for label, n in sorted(counts.items()))


def number(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else f"{value:,.3f}"


def deltas_text(deltas: list[float]) -> str:
    return " / ".join(("+" if v > 0 else "") + number(v) for v in deltas)


def counter_name(ref: str) -> str:
    """`metric:x_total` reads as `x_total`; `stats:hits` as `stats.hits`."""
    source, _, name = ref.partition(":")
    if source == "stats":
        return "stats." + name
    return name if source == "metric" else ref


def class_telemetry_rows(condition: dict[str, Any]) -> list[tuple[str, str, str, str, str]]:
    """(class, arm, requests, cached tokens, counters that moved) for one condition."""
    rows = []
    for entry in condition["class_telemetry"]:
        cached = ", ".join("absent" if v is None else str(v) for v in entry["cached_tokens"])
        # Labelled samples (decode paths) are shown even at zero: "fused_v2 +0" is a fact.
        moving = {
            k: v for k, v in entry["counter_deltas"].items() if any(x != 0 for x in v) or "{" in k
        }
        parts = [f"{counter_name(k)} {deltas_text(v)}" for k, v in moving.items()]
        if entry["counter_deltas"] and not parts:
            parts.append("no counter moved")
        rows.append(
            (entry["class"], entry["arm"], str(entry["requests"]), cached, "; ".join(parts) or "—")
        )
    return rows


def experiment_lines(experiment: dict[str, Any] | None) -> list[tuple[str, str]]:
    if experiment is None:
        return []
    server = experiment["server"]
    model = experiment["model"]
    protocol = experiment["protocol"]
    commit = (server.get("build_commit") or "unknown")[:12]
    lines = [
        ("server", f"{server['name']} ({server['profile']} profile), build {commit}"),
        ("binary sha256", server.get("binary_sha256") or "not recorded"),
        ("model", f"{model.get('repo_id') or 'unknown'} @ {model.get('revision') or 'unpinned'}"),
        ("model sha256", model["model_sha256"]),
        ("config sha256", model.get("config_sha256") or "none"),
        (
            "protocol",
            f"{protocol['cycles']} cycles, max_tokens {protocol['max_tokens']}, "
            f"parallelism {protocol.get('parallelism') or 'not recorded'}, "
            f"block size {protocol.get('block_size') or 'not recorded'}",
        ),
    ]
    hardware = ", ".join(f"{k} {v}" for k, v in experiment["hardware"].items() if v)
    if hardware:
        lines.append(("hardware", hardware))
    return lines
