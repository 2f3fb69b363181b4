"""SHA256SUMS read strictly: every file listed, every listed file present, every digest equal."""

from __future__ import annotations

from collections.abc import Iterator

from verifier import layout
from verifier.checks.context import BundleContext
from verifier.checksums import parse_sums, sha256_hex
from verifier.model import Finding, Severity

CHECK = "checksums"


def check_checksums(ctx: BundleContext) -> Iterator[Finding]:
    data = ctx.files.get(layout.SHA256SUMS)
    if data is None:
        yield Finding(CHECK, Severity.ERROR, "the bundle has no SHA256SUMS", file=layout.SHA256SUMS)
        return
    entries, problems = parse_sums(data)
    for problem in problems:
        where = f"line {problem.line}: " if problem.line else ""
        yield Finding(CHECK, Severity.ERROR, where + problem.message, file=layout.SHA256SUMS)
    listed = {entry.path for entry in entries}
    for entry in entries:
        content = ctx.files.get(entry.path)
        if content is None:
            yield Finding(
                CHECK,
                Severity.ERROR,
                f"{entry.path} is listed in SHA256SUMS but missing from the bundle",
                file=entry.path,
            )
        elif (actual := sha256_hex(content)) != entry.digest:
            yield Finding(
                CHECK,
                Severity.ERROR,
                "the file does not match its SHA256SUMS digest",
                file=entry.path,
                expected=entry.digest,
                actual=actual,
            )
    for path in sorted(set(ctx.files) - listed - layout.UNSUMMED):
        yield Finding(CHECK, Severity.ERROR, "the file is not listed in SHA256SUMS", file=path)
