"""SHA256SUMS in the coreutils format: strict parsing and stable writing."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass

_LINE = re.compile(r"(?P<digest>[0-9a-f]{64}) (?P<mode>[ *])(?P<path>[^\n\r\\]+)")


@dataclass(frozen=True)
class SumsEntry:
    path: str
    digest: str
    line: int


@dataclass(frozen=True)
class SumsProblem:
    line: int
    message: str


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def parse_sums(data: bytes) -> tuple[list[SumsEntry], list[SumsProblem]]:
    """Parse strictly: every line must be `<64 lowercase hex>  <path>` (or ` *<path>`)."""
    entries: list[SumsEntry] = []
    problems: list[SumsProblem] = []
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return [], [SumsProblem(0, "SHA256SUMS is not valid UTF-8")]
    if text and not text.endswith("\n"):
        problems.append(SumsProblem(text.count("\n") + 1, "the last line has no newline"))
    seen: set[str] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        match = _LINE.fullmatch(line)
        if match is None:
            problems.append(SumsProblem(number, f"malformed line: {line[:80]!r}"))
            continue
        path = match["path"]
        if path in seen:
            problems.append(SumsProblem(number, f"{path} is listed twice"))
            continue
        seen.add(path)
        entries.append(SumsEntry(path, match["digest"], number))
    if not entries and not problems:
        problems.append(SumsProblem(0, "SHA256SUMS lists no file"))
    paths = [e.path for e in entries]
    if paths != sorted(paths):
        problems.append(SumsProblem(0, "lines are not sorted by path"))
    return entries, problems


def format_sums(files: Mapping[str, bytes]) -> bytes:
    """One line per file, sorted by path, in text mode (two spaces)."""
    lines = [f"{sha256_hex(files[path])}  {path}\n" for path in sorted(files)]
    return "".join(lines).encode("utf-8")
