"""Scan every file of the bundle for private data that export should have removed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from verifier.checks.context import BundleContext
from verifier.leaks import scan_bytes, scan_text
from verifier.model import Finding, Severity, json_pointer

CHECK = "leaks"


def iter_strings(node: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[str, str]]:
    """Every string of a JSON document, object keys included, with its JSON pointer."""
    if isinstance(node, str):
        yield json_pointer(*path), node
    elif isinstance(node, dict):
        for key, value in node.items():
            yield json_pointer(*path, key), key
            yield from iter_strings(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from iter_strings(value, (*path, index))


def check_leaks(ctx: BundleContext) -> Iterator[Finding]:
    for path, data in sorted(ctx.files.items()):
        if path.endswith(".sig"):
            continue  # raw signature bytes, not text
        if path in ctx.documents:
            for pointer, text in iter_strings(ctx.documents[path]):
                for hit in scan_text(text):
                    yield _finding(path, pointer, hit.category, hit.excerpt)
        else:
            for hit in scan_bytes(data):
                yield _finding(path, None, hit.category, hit.excerpt)


def _finding(path: str, pointer: str | None, category: str, excerpt: str) -> Finding:
    return Finding(
        CHECK,
        Severity.ERROR,
        f"possible {category} published: {excerpt}",
        file=path,
        pointer=pointer,
        actual=excerpt,
    )
