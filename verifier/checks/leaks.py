"""Scan every file of the bundle for private data that export should have removed.

The detectors are export's own (`verifier.leaks`), run over each JSON document as one text
(linear in its size, whatever the number of strings) and over the bytes of other files.
A hit where the ledger says the exporter was told the value is not private (`--allow`) is
reported as information: the author declared it public, and a reviewer sees where.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Any

from verifier import layout
from verifier.checks.context import BundleContext
from verifier.leaks import (
    ALLOWED_PLACEHOLDER,
    TOO_MANY,
    DocumentHit,
    scan_bytes,
    scan_documents,
)
from verifier.model import Finding, Severity

CHECK = "leaks"
# Detector category -> ledger category (as export records an allowed value).
_LEDGER_CATEGORY = {
    "home-path": "private-path",
    "temp-path": "private-path",
    "private-key": "token",
}


def _allowed(ctx: BundleContext) -> set[tuple[str, str, str]]:
    """(file, pointer, ledger category) of each value the ledger says was allowed."""
    ledger: Any = ctx.documents.get(layout.REDACTION_LEDGER)
    entries = ledger.get("entries") if isinstance(ledger, dict) else None
    if not isinstance(entries, list):
        return set()
    return {
        (str(e.get("file")), str(e.get("pointer")), str(e.get("category")))
        for e in entries
        if isinstance(e, dict) and e.get("placeholder") == ALLOWED_PLACEHOLDER
    }


def check_leaks(ctx: BundleContext) -> Iterator[Finding]:
    allowed = _allowed(ctx)
    # The documents go to `scan_documents`, which scans them in batches and so reads a few
    # ahead of the one whose hits it gives; the other files come out where they are in the
    # sorted order, once the documents before them are done. `order` holds each file read
    # ahead, with its bytes where it is not a document, until its findings are out.
    order: deque[tuple[str, bytes | None]] = deque()

    def documents() -> Iterator[Any]:
        for path, data in sorted(ctx.files.items()):
            if path.endswith(".sig"):
                continue  # raw signature bytes, not text
            if path in ctx.documents:
                order.append((path, None))
                yield ctx.documents[path]
            else:
                order.append((path, data))

    for hits in scan_documents(documents(), MOST_HITS):
        path, data = order.popleft()
        while data is not None:  # the other files before this document
            yield from _bytes_findings(path, data)
            path, data = order.popleft()
        yield from _hit_findings(path, hits, allowed)
    for path, data in order:  # the other files after the last document
        if data is not None:  # (always: every document's hits came out above)
            yield from _bytes_findings(path, data)


def _hit_findings(
    path: str, hits: list[DocumentHit], allowed: set[tuple[str, str, str]]
) -> Iterator[Finding]:
    for hit in hits:
        if hit.hit.category == TOO_MANY:  # never one the ledger can allow
            yield _stopped(path, hit.where, hit.hit.excerpt)
            continue
        category = _LEDGER_CATEGORY.get(hit.hit.category, hit.hit.category)
        if (path, hit.pointer, category) in allowed:
            yield Finding(
                CHECK,
                Severity.INFO,
                f"{hit.hit.category} kept: the exporter was told it is not private "
                f"(--allow): {hit.hit.excerpt}",
                file=path,
                pointer=hit.where,
            )
            continue
        yield _finding(path, hit.where, hit.hit.category, hit.hit.excerpt)


def _bytes_findings(path: str, data: bytes) -> Iterator[Finding]:
    for leak in scan_bytes(data, MOST_HITS):
        if leak.category == TOO_MANY:
            yield _stopped(path, None, leak.excerpt)
        else:
            yield _finding(path, None, leak.category, leak.excerpt)


# The private strings the scan finds in one file at most: past them it stops, and the file
# is in error whatever the ledger allows (a hostile file of millions of hits took minutes
# and gigabytes; the findings of one check stop at 1,000 anyway). It stops too in a text of
# more escapes than a scan decodes (`leaks._MOST_ESCAPES`).
MOST_HITS = 1000


def _stopped(path: str, pointer: str | None, why: str) -> Finding:
    """A file the scan stopped in (`leaks.TOO_MANY`): in error, as whatever it holds past
    that place is not known to be free of private values."""
    return Finding(
        CHECK,
        Severity.ERROR,
        f"the leak scan stopped here ({why}): the rest of this file was not read, and "
        "whether it holds private values is not known",
        file=path,
        pointer=pointer,
    )


def _finding(path: str, pointer: str | None, category: str, excerpt: str) -> Finding:
    return Finding(
        CHECK,
        Severity.ERROR,
        f"possible {category} published: {excerpt}",
        file=path,
        pointer=pointer,
        actual=excerpt,
    )
