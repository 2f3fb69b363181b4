"""Parse the Prometheus text exposition format into flat `{"name{label=\"v\"}": value}` samples."""

from __future__ import annotations

import math
import re

_NAME = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
_LABEL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}


def _parse_labels(text: str, pos: int) -> tuple[dict[str, str], int]:
    """Parse `{a="x",b="y"}` starting at `text[pos] == "{"`; return labels and the end index."""
    labels: dict[str, str] = {}
    pos += 1
    while True:
        while pos < len(text) and text[pos] in " \t,":
            pos += 1
        if pos < len(text) and text[pos] == "}":
            return labels, pos + 1
        match = _LABEL_NAME.match(text, pos)
        if match is None:
            raise ValueError("bad label name")
        name = match.group()
        pos = _blanks(text, match.end())
        if text[pos : pos + 1] != "=":
            raise ValueError("bad label value")
        pos = _blanks(text, pos + 1)
        if text[pos : pos + 1] != '"':
            raise ValueError("bad label value")
        pos += 1
        value: list[str] = []
        while True:
            if pos >= len(text):
                raise ValueError("unterminated label value")
            char = text[pos]
            if char == "\\" and pos + 1 < len(text):
                value.append(_ESCAPES.get(text[pos + 1], "\\" + text[pos + 1]))
                pos += 2
            elif char == '"':
                pos += 1
                break
            else:
                value.append(char)
                pos += 1
        labels[name] = "".join(value)


def _blanks(text: str, pos: int) -> int:
    """The index of the first character at or after `pos` that is no blank or tab (the
    format's token separators, which it allows between any two tokens of a line)."""
    while pos < len(text) and text[pos] in " \t":
        pos += 1
    return pos


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def sample_key(name: str, labels: dict[str, str]) -> str:
    """`name{a="x",b="y"}` with labels sorted by name; just `name` without labels."""
    if not labels:
        return name
    inner = ",".join(f'{key}="{_escape(labels[key])}"' for key in sorted(labels))
    return f"{name}{{{inner}}}"


def _parse_line(line: str) -> tuple[str, float] | None:
    match = _NAME.match(line)
    if match is None:
        return None
    name = match.group()
    pos = match.end()
    labels: dict[str, str] = {}
    brace = _blanks(line, pos)  # (`name {a="x"} 1` is `name{a="x"} 1`, as Prometheus reads it)
    if brace < len(line) and line[brace] == "{":
        labels, pos = _parse_labels(line, brace)
    rest = line[pos:].split()
    if not rest or (pos < len(line) and line[pos] not in " \t"):
        return None
    value = float(rest[0])  # accepts NaN/+Inf; those are dropped below
    if not math.isfinite(value):
        return None  # JSON cannot carry them, and no cache counter is ever one
    return sample_key(name, labels), value


def parse_metrics(text: str) -> dict[str, float]:
    """Every finite sample of an exposition; comments, blank and malformed lines are skipped."""
    samples: dict[str, float] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            parsed = _parse_line(line)
        except (ValueError, IndexError):
            continue
        if parsed is not None:
            samples[parsed[0]] = parsed[1]
    return samples


def family_total(samples: dict[str, float], family: str) -> float | None:
    """Sum of every sample of a family (any labels); None when the family is absent."""
    values = [v for k, v in samples.items() if k == family or k.startswith(family + "{")]
    return sum(values) if values else None
