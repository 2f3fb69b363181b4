"""Every case of the hostile corpus gets the same text report from report.plain as from
rich (report.text, the reference), wherever report.plain lays it out."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from corpus import CASES, Case
from rich.console import Console
from test_corpus import run_case

from verifier.report import plain
from verifier.report.common import printable
from verifier.report.text import render_text

_REPORTED = [c for c in CASES if not c.usage]


@pytest.mark.parametrize("item", _REPORTED, ids=[c.name for c in _REPORTED])
def test_the_plain_layout_is_richs(item: Case, tmp_path: Path) -> None:
    _, out, _ = run_case(item, tmp_path)
    report = printable(json.loads(out))
    for width in (30, 80, 120):
        laid_out = plain.render(report, width)
        if laid_out is None:
            continue
        reference = io.StringIO()
        render_text(report, Console(file=reference, width=width))
        assert laid_out == reference.getvalue(), width


def test_most_of_the_corpus_is_laid_out_plainly(tmp_path: Path) -> None:
    laid_out = 0
    for index, item in enumerate(_REPORTED):
        folder = tmp_path / str(index)
        folder.mkdir()
        _, out, _ = run_case(item, folder)
        laid_out += plain.render(printable(json.loads(out)), 80) is not None
    assert laid_out >= len(_REPORTED) // 2
