"""Every case of the hostile corpus gets the same JSON report from the fast writer
(verifier/jsontext.py) as from json.dumps, the plain path it stands in for."""

from __future__ import annotations

from pathlib import Path

import pytest
from corpus import CASES, Case
from test_corpus import run_case

from verifier import jsontext


@pytest.mark.parametrize("item", CASES, ids=[c.name for c in CASES])
def test_the_json_writer_changes_no_report(
    item: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = run_case(item, tmp_path)
    with monkeypatch.context() as patched:
        plain_chunks = lambda report: [jsontext.reference_dumps(report)]  # noqa: E731
        patched.setattr(jsontext, "chunks_indented", plain_chunks)
        plain = run_case(item, tmp_path)
    assert fast == plain
