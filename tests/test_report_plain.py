"""report.plain lays the text report out as rich does (report.text, the reference), where
rich writes no styles; and it tells where that is as rich's Console does."""

from __future__ import annotations

import copy
import io
import os
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

from verifier.checks.context import VerifyOptions
from verifier.cli.common import note
from verifier.report import OutputFormat, plain, render
from verifier.report.common import printable
from verifier.report.document import BundleOutcome, build_report
from verifier.report.text import render_text
from verifier.verify import verify_path

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_bundles"
BUNDLES = sorted(
    {p.parent for p in SAMPLES.rglob("SHA256SUMS")} | set(SAMPLES.rglob("*.tar.gz")),
    key=str,
)
WIDTHS = (20, 27, 33, 40, 52, 60, 71, 79, 80, 81, 100, 120, 200)


def _reference(report: dict[str, Any], width: int) -> str:
    """What `evidence verify` printed to a file or a pipe before report.plain: rich's."""
    file = io.StringIO()
    render_text(printable(report), Console(file=file, width=width))
    return file.getvalue()


def _same_where_laid_out(report: dict[str, Any], width: int) -> bool:
    """report.plain gives rich's bytes, or declines; whether it laid the report out."""
    laid_out = plain.render(printable(report), width)
    if laid_out is not None:
        assert laid_out == _reference(report, width), width
    return laid_out is not None


@cache
def _report(bundle: Path) -> dict[str, Any]:
    return build_report([BundleOutcome(str(bundle), verify_path(bundle, VerifyOptions()))])


@pytest.mark.parametrize("bundle", BUNDLES, ids=lambda p: str(p.relative_to(SAMPLES)))
def test_every_sample_prints_the_same_both_ways(bundle: Path) -> None:
    laid_out = [width for width in WIDTHS if _same_where_laid_out(_report(bundle), width)]
    assert {80, 120, 200} <= set(laid_out) or not laid_out


def test_the_samples_are_laid_out_here_at_the_usual_widths() -> None:
    """The test above is not only of the fallback: at 80 columns and more every sample
    (but one of a character rich measures otherwise) is laid out here."""
    for width in (80, 120, 200):
        declined = [b for b in BUNDLES if plain.render(printable(_report(b)), width) is None]
        assert len(declined) <= 2, (width, declined)
    assert plain.render(printable(_report(SAMPLES / "seed-mlxcel")), 80) is not None


# Strings as a hostile bundle could have them (after printable): of the characters laid
# out here, or with others (wide, combining, zero-width, no-break space, soft hyphen,
# tab), long words, runs of spaces, line breaks.
def _joined(pieces: list[str], most: int) -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(pieces), max_size=most).map("".join)


_LAID_OUT = _joined([*"ab c-_=.:/'", "  ", *"é×—…→", "x" * 30], 40)
_OTHER = _joined([*"ab c-", "漢", "😀", "\u0301", "\u200b", "\xa0", "\xad", "\t", "\n"], 30)
_STRING = st.one_of(_LAID_OUT, _LAID_OUT, _LAID_OUT, _OTHER)


def _strings(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(node, str):
        return [path]
    if isinstance(node, dict):
        return [p for k, v in node.items() for p in _strings(v, (*path, k))]
    if isinstance(node, list):
        return [p for i, v in enumerate(node) for p in _strings(v, (*path, i))]
    return []


_SHOWN_SAMPLES = ("seed-mlxcel", "negative/hidden-prompt-change", "negative/tampered-output")


@settings(max_examples=250, deadline=None)
@given(
    st.sampled_from(_SHOWN_SAMPLES),
    st.data(),
    st.sampled_from((20, 24, 40, 61, 80, 97, 132)),
)
def test_any_strings_print_the_same_both_ways(sample: str, data: st.DataObject, width: int) -> None:
    report = copy.deepcopy(_report(SAMPLES / sample))
    paths = _strings(report["bundles"][0])
    for path in data.draw(st.lists(st.sampled_from(paths), max_size=8)):
        node = report["bundles"][0]
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = data.draw(_STRING)
    try:
        _reference(report, width)
    except (KeyError, TypeError, ValueError):  # a string rich's layout cannot take either
        return
    _same_where_laid_out(report, width)


def test_the_generated_strings_are_laid_out_here_too() -> None:
    """The test above is not only of the fallback: many of its reports are laid out here."""
    laid_out = 0

    @settings(max_examples=100, deadline=None, database=None, derandomize=True)
    @given(st.data())
    def count(data: st.DataObject) -> None:
        nonlocal laid_out
        report = copy.deepcopy(_report(SAMPLES / "seed-mlxcel"))
        bundle = report["bundles"][0]
        bundle["summary"] = data.draw(_LAID_OUT)
        bundle["checks"][0]["detail"] = data.draw(_LAID_OUT)
        bundle["findings"] = [{**f, "message": data.draw(_STRING)} for f in bundle["findings"]]
        laid_out += _same_where_laid_out(report, data.draw(st.sampled_from((40, 80, 97))))

    count()
    assert laid_out >= 25


def test_more_findings_than_shown_print_the_same_both_ways() -> None:
    report = copy.deepcopy(_report(SAMPLES / "negative" / "tampered-output"))
    bundle = report["bundles"][0]
    errors = [f for f in bundle["findings"] if f["severity"] == "error"]
    warning = {**errors[0], "severity": "warning", "expected": "x", "actual": "y"}
    bundle["findings"] = [*errors * 30, *[warning] * 25]
    _same_where_laid_out(report, 40)
    for width in (80, 120):
        assert _same_where_laid_out(report, width)
    shown = _reference(report, 80)
    assert f"… and {len(errors) * 30 - 20} more (every one" in shown
    assert "… and 5 more (every one" in shown


def test_a_wide_character_or_several_bundles_are_left_to_rich() -> None:
    report = copy.deepcopy(_report(SAMPLES / "seed-mlxcel"))
    assert plain.render(printable(report), 80) is not None
    wide = copy.deepcopy(report)
    wide["bundles"][0]["summary"] = "漢字 " * 10
    assert plain.render(printable(wide), 80) is None
    two = copy.deepcopy(report)
    two["bundles"] *= 2
    assert plain.render(printable(two), 80) is None
    assert plain.render(printable(report), 19) is None


# Text for `wrap`: words, runs of spaces and line breaks, words longer than a line.
_WRAPPED = _joined([*"abc-. \né—…", "   ", "w" * 12], 60)


@settings(max_examples=600, deadline=None)
@given(
    _WRAPPED,
    st.integers(1, 30),
    st.sampled_from(["fold", "ellipsis"]),
    st.booleans(),
)
def test_wrap_is_richs(text: str, width: int, overflow: str, no_wrap: bool) -> None:
    console = Console(file=io.StringIO(), width=200)
    expected = Text(text).wrap(console, width, overflow=overflow, no_wrap=no_wrap)  # type: ignore[arg-type]
    assert plain.wrap(text, width, overflow, no_wrap) == [line.plain for line in expected]


def test_the_characters_laid_out_are_one_cell_each_and_no_space_but_the_space() -> None:
    laid_out = [chr(c) for c in range(0x3000) if plain._SIMPLE.fullmatch(chr(c))]
    assert len(laid_out) > 190
    for char in laid_out:
        assert plain._SIMPLE.fullmatch(char)
        if char != "\n":
            assert cell_len(char) == 1, repr(char)
            assert (re.fullmatch(r"\s", char) is not None) == (char == " "), repr(char)
    for char in ("\xa0", "\xad", "\t", "漢", "\u0301", "\u200b", "\x1b"):
        assert not plain._SIMPLE.fullmatch(char)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class _Ascii(io.StringIO):
    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "ascii"


_ENVIRONMENTS = (
    {},
    {"COLUMNS": "97"},
    {"COLUMNS": "0"},
    {"COLUMNS": "abc"},
    {"FORCE_COLOR": "1"},
    {"FORCE_COLOR": ""},
    {"TTY_COMPATIBLE": "1"},
    {"TTY_COMPATIBLE": "0"},
    {"TERM": "dumb"},
    {"NO_COLOR": "1", "COLUMNS": "120"},
)


@pytest.mark.parametrize("environ", _ENVIRONMENTS, ids=str)
@pytest.mark.parametrize("kind", [io.StringIO, _Terminal, _Ascii])
@pytest.mark.parametrize("width", [None, 64])
def test_plain_width_is_richs(
    environ: dict[str, str], kind: type[io.StringIO], width: int | None, monkeypatch: Any
) -> None:
    for name in ("COLUMNS", "FORCE_COLOR", "TTY_COMPATIBLE", "TERM", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    file = kind()
    console = Console(file=file, width=width)
    laid_out = plain.plain_width(file, width)
    if laid_out is not None:  # where it says rich writes no styles, at this width
        assert console.color_system is None and not console.options.ascii_only
        assert laid_out == console.width
    if kind is io.StringIO and not {"FORCE_COLOR", "TTY_COMPATIBLE", "TERM"} & set(environ):
        assert laid_out is not None  # and it does say so for a file, in a plain environment
    screen = plain.screen_width()
    if screen is not None:
        assert screen == Console().width
    elif "TERM" not in environ:
        pytest.fail("screen_width declined in a plain environment")


def test_render_writes_what_rich_writes_to_a_file_or_a_terminal() -> None:
    report = _report(SAMPLES / "seed-mlxcel")
    for kind in (io.StringIO, _Terminal):
        for width in (40, 80, 150):
            file = kind()
            render(report, OutputFormat.TEXT, file, width)
            reference = kind()
            render_text(printable(report), Console(file=reference, width=width))
            assert file.getvalue() == reference.getvalue(), (kind, width)
    styled = _Terminal()
    render(report, OutputFormat.TEXT, styled, 80)
    assert "\x1b[" in styled.getvalue()  # a terminal still gets rich's styles


@pytest.mark.parametrize(
    "message",
    ["verifying sample_bundles/seed-mlxcel", "verifying " + "long/path " * 20, "a  b\nc", "漢字"],
)
@pytest.mark.parametrize("columns", ["80", "33"])
def test_a_note_is_what_rich_prints_on_stderr(
    message: str, columns: str, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE"):
        monkeypatch.delenv(name, raising=False)
    note(message)
    written = capsys.readouterr().err
    Console(stderr=True, highlight=False).print(Text(message, style="dim"))
    assert written == capsys.readouterr().err
    assert os.environ["COLUMNS"] == columns
