"""The text report's fast two-column layout prints what rich's grid prints (the reference)."""

from __future__ import annotations

import io
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console, RenderableType
from rich.text import Text

from verifier.bundle.reader import Limits
from verifier.checks.context import VerifyOptions
from verifier.report.common import printable
from verifier.report.document import BundleOutcome, build_report
from verifier.report.text import _telemetry_grid, _telemetry_rows, _two_columns
from verifier.verify import verify_path

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_bundles"
BUNDLES = sorted(
    {p.parent for p in SAMPLES.rglob("SHA256SUMS")} | set(SAMPLES.rglob("*.tar.gz")),
    key=str,
)
WIDTHS = (30, 60, 80, 120, 200)
# a file, a terminal of 16 colours, one of true colour: styles are written as escapes
CONSOLES: tuple[dict[str, Any], ...] = (
    {},
    {"force_terminal": True, "color_system": "standard"},
    {"force_terminal": True, "color_system": "truecolor"},
)


def _printed(renderable: RenderableType, width: int, options: dict[str, Any]) -> str:
    console = Console(file=io.StringIO(), width=width, **options)
    with console.capture() as captured:
        console.print(renderable)
    return captured.get()


@cache
def _classification(bundle: Path) -> dict[str, Any] | None:
    outcome = BundleOutcome(str(bundle), verify_path(bundle, VerifyOptions(limits=Limits())))
    classification: dict[str, Any] | None = printable(build_report([outcome]))["bundles"][0][
        "classification"
    ]
    return classification


def _same(rows: list[tuple[Text, Text]], width: int) -> None:
    for options in CONSOLES:
        expected = _printed(_telemetry_grid(rows), width, options)
        assert _printed(_two_columns(rows, width), width, options) == expected, (width, options)


def test_the_samples_have_telemetry_to_lay_out() -> None:
    classified = [c for c in map(_classification, BUNDLES) if c is not None]
    assert len(classified) >= 10
    fast = [c for c in classified if isinstance(_two_columns(_telemetry_rows(c), 80), Text)]
    assert len(fast) >= 10  # the fast layout is taken for them at 80 columns


@pytest.mark.parametrize("bundle", BUNDLES, ids=lambda p: str(p.relative_to(SAMPLES)))
def test_every_sample_prints_the_same_telemetry_both_ways(bundle: Path) -> None:
    classification = _classification(bundle)
    if classification is None:
        pytest.skip("not classified: no telemetry section")
    rows = _telemetry_rows(classification)
    for width in WIDTHS:
        _same(rows, width)


# cells that fit on a line or not, with spaces at either end; of printable Latin (the
# fast layout's), or with wide, combining and zero-width characters too (the grid's); in
# one list in ten, a tab or a line break (the grid's too)
_LATIN = st.text(st.sampled_from([*"ab x-_{}=\"'.×é\xa0ÿ"]), max_size=14)
_ANY = st.text(
    st.sampled_from([*"ab x-_{}=\"'.×é\xa0\xadÿ", "漢", "😀", "\u0301", "\u200b"]), max_size=14
)
_STYLES = st.sampled_from(["", "bold", "dim", "italic yellow"])


@st.composite
def _rows(draw: st.DrawFn) -> list[tuple[Text, Text]]:
    cell = _LATIN if draw(st.booleans()) else _ANY
    cells = draw(st.lists(st.tuples(cell, _STYLES, cell), max_size=6))
    rows = [(Text(a, style=style), Text(b)) for a, style, b in cells]
    if rows and draw(st.integers(0, 9)) == 0:
        index = draw(st.integers(0, len(rows) - 1))
        left, right = rows[index]
        broken = Text(left.plain + draw(st.sampled_from(["\t", "\n", "\nb", "\tb"])))
        rows[index] = (broken, right) if draw(st.booleans()) else (left, broken)
    return rows


@settings(max_examples=300, deadline=None)
@given(_rows(), st.sampled_from(WIDTHS))
def test_any_rows_print_the_same_both_ways(rows: list[tuple[Text, Text]], width: int) -> None:
    _same(rows, width)


def test_the_generated_rows_take_the_fast_layout_too() -> None:
    """The test above is not only of the grid's fallback: many of its rows take the fast path."""
    fast = 0

    @settings(max_examples=100, deadline=None, database=None, derandomize=True)
    @given(_rows(), st.sampled_from(WIDTHS))
    def count(rows: list[tuple[Text, Text]], width: int) -> None:
        nonlocal fast
        fast += isinstance(_two_columns(rows, width), Text)

    count()
    assert fast >= 15


def test_a_row_too_wide_or_a_line_break_takes_the_grid() -> None:
    wide = [(Text("x" * 79), Text("+1"))]
    assert not isinstance(_two_columns(wide, 80), Text)
    assert isinstance(_two_columns(wide, 83), Text)
    broken = [(Text("a\nb"), Text(""))]
    assert not isinstance(_two_columns(broken, 80), Text)
    styled = [(Text("a"), Text("+1", style="bold"))]  # a styled right cell: the grid
    assert not isinstance(_two_columns(styled, 80), Text)
    _same(styled, 80)
