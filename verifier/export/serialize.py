"""The bytes of a public document: `jsonio.dumps_stable`'s, built without json's generators.

`json.dumps` with `indent` runs the pure-Python encoder, one generator per container level
for every value; on a 10,000-record export that was the largest cost left in export's own
code. `dumps_public` writes the same text through `verifier.jsontext` (the writer the JSON
report uses too), with NaN and the infinities refused as `dumps_stable` refuses them;
`dumps_stable` stays the reference: tests/export/test_export_serialize.py checks the bytes
are the same.
"""

from __future__ import annotations

from typing import Any

from verifier.jsontext import dumps_each, dumps_indented


def dumps_public(document: Any) -> bytes:
    """`dumps_stable(document)`, byte for byte."""
    return (dumps_indented(document, allow_nan=False) + "\n").encode("utf-8")


def dumps_public_each(documents: list[Any]) -> list[bytes]:
    """`dumps_public` of each document, the documents written together (`dumps_each`: a
    bundle's records share their keys). Where any is refused, each is written on its own,
    so that the refusal is the first `dumps_public` makes, in the documents' order."""
    try:
        return [(text + "\n").encode("utf-8") for text in dumps_each(documents, allow_nan=False)]
    except Exception:  # said again, in order, by the plain path
        return [dumps_public(document) for document in documents]
