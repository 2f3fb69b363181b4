"""SHA256SUMS in the coreutils format: strict parsing and stable writing.

Strict means: nothing `sha256sum -c` would read differently, and nothing the exporter never
writes. Lines end with a line feed and nothing else (a NEL, U+2028, VT or FF inside a line
is part of it, and refused as a control character in a path, where `sha256sum -c` would
look for a file of that name and fail). Each line is `<64 lower-case hex>  <path>` (or
` *<path>`, binary mode), the path a bundle path in normal form. CRLF, upper-case hex,
coreutils' backslash-escaped names, comments, BSD-style `--tag` lines, duplicates, an
entry for SHA256SUMS itself or its signature, absolute and `..` paths, unsorted lines and
a missing final newline are each a problem with its own message.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import NamedTuple

from verifier import layout

_LINE = re.compile(r"(?P<digest>[0-9A-Fa-f]{64}) (?P<mode>[ *])(?P<path>.*)")
_BSD_TAG = re.compile(r"SHA\d* ?\(")
# More problems than this say nothing new; a hostile file could otherwise hold millions.
MAX_PROBLEMS = 20


class SumsEntry(NamedTuple):
    path: str
    digest: str
    line: int


class SumsProblem(NamedTuple):
    line: int
    message: str


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _code_point(char: str) -> str:
    return f"U+{ord(char):04X}"


def _path_problem(path: str) -> str | None:
    """Why a listed path is refused, or None for a bundle path in normal form."""
    if path == "":
        return "the path is empty"
    odd = next((c for c in path if not c.isprintable()), None)
    if odd is not None:
        return (
            f"the path holds a control or line-separator character ({_code_point(odd)}); "
            "only a line feed ends a line, and no bundle path holds one"
        )
    if "\\" in path:
        return "the path holds a backslash; only '/' separates path components"
    if path.startswith("/"):
        return "the path is absolute; paths are relative to the bundle"
    components = path.split("/")
    if ".." in components:
        return "the path has a '..' component; paths must stay inside the bundle"
    if any(c in ("", ".") for c in components):
        return "the path is not in normal form (an empty or '.' component)"
    if path == layout.SHA256SUMS:
        return "SHA256SUMS lists itself; it cannot hold its own digest"
    if path == layout.SIGNATURE:
        return f"SHA256SUMS lists {layout.SIGNATURE}, which is made over it and so is not in it"
    return None


def _line_problem(line: str) -> tuple[str | None, str, str]:
    """(problem, digest, path) of one line, without its line feed."""
    if line == "":
        return "an empty line", "", ""
    if line.endswith("\r"):
        return "the line ends with a carriage return (CRLF); lines end with a line feed", "", ""
    if line.startswith("\\"):
        return (
            "a backslash-escaped name (as sha256sum writes for a name with a backslash or a "
            "newline); no bundle path needs one",
            "",
            "",
        )
    match = _LINE.fullmatch(line)
    if match is None:
        if _BSD_TAG.match(line):
            return "a BSD-style (--tag) line; expected '<64 hex digits>  <path>'", "", ""
        return f"malformed line {line[:80]!r}; expected '<64 hex digits>  <path>'", "", ""
    digest, path = match["digest"], match["path"]
    if digest != digest.lower():
        return "the digest is not lower-case hex", "", ""
    return _path_problem(path), digest, path


def parse_sums(data: bytes) -> tuple[list[SumsEntry], list[SumsProblem]]:
    """Parse strictly: every line must be `<64 lowercase hex>  <path>` (or ` *<path>`)."""
    entries: list[SumsEntry] = []
    problems: list[SumsProblem] = []
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return [], [SumsProblem(0, f"SHA256SUMS is not valid UTF-8 (at byte {exc.start})")]
    lines = text.split("\n")  # never str.splitlines: it also splits at NEL, U+2028, VT, FF...
    if lines[-1] == "":
        lines.pop()
    else:
        problems.append(SumsProblem(len(lines), "the last line has no newline"))
    seen: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        problem, digest, path = _line_problem(line)
        if problem is None and path in seen:
            problem = f"{path} is listed twice (first on line {seen[path]})"
        if problem is not None:
            problems.append(SumsProblem(number, problem))
            continue
        seen[path] = number
        entries.append(SumsEntry(path, digest, number))
    if not entries and not problems:
        problems.append(SumsProblem(0, "SHA256SUMS lists no file"))
    paths = [e.path for e in entries]
    if paths != sorted(paths):
        problems.append(SumsProblem(0, "lines are not sorted by path"))
    if len(problems) > MAX_PROBLEMS:
        more = len(problems) - MAX_PROBLEMS
        problems = [*problems[:MAX_PROBLEMS], SumsProblem(0, f"and {more} more problems")]
    return entries, problems


def format_sums(files: Mapping[str, bytes]) -> bytes:
    """One line per file, sorted by path, in text mode (two spaces)."""
    lines = [f"{sha256_hex(files[path])}  {path}\n" for path in sorted(files)]
    return "".join(lines).encode("utf-8")
