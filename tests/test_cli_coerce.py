"""The fast option converter (verifier.cli.coerce) against typer's own (pydantic): on every
option and argument of every command, the same value or the same refusal."""

from __future__ import annotations

import enum
import os
from pathlib import Path
from typing import Any

import pytest
import typer.core
from hypothesis import given, settings
from hypothesis import strategies as st
from typer._click.exceptions import BadParameter
from typer.testing import CliRunner

from verifier.cli import COMMANDS, app, load_command
from verifier.cli.coerce import FastValue

REPO = Path(__file__).resolve().parent.parent
SAMPLE = "sample_bundles/seed-mlxcel"


def _leaves(command: Any, path: str) -> list[tuple[str, Any]]:
    if isinstance(command, typer.core.TyperGroup):
        found = []
        for name, sub in command.commands.items():
            found += _leaves(sub, f"{path} {name}")
        return found
    return [(path, command)]


def _params() -> list[tuple[str, Any, Any]]:
    found = []
    for name in COMMANDS:
        for path, command in _leaves(load_command(name), name):
            for param in command.params:
                if isinstance(param, typer.core._TyperParameter):
                    found.append((f"{path} {param.name}", command, param))
    return found


PARAMS = _params()

CURATED = [
    "", " ", "0", "1", "7", "007", "+1", "-1", " 5", "5 ", "1_000", "1e3", "1.5", "1.", ".5",
    "200.0", "0.5", "٣", "１", "10000", "99999999999999999999999", "abc", "nan", "inf",
    "text", "TEXT", "Json", "markdown", "mlxcel", "llama.cpp", "invalid",
    "cache-state-dependent", "x", ".", "/", "/nonexistent/file", SAMPLE, "a b", "-", "~",
]  # fmt: skip


def _outcome(converter: Any, value: Any, param: Any, ctx: Any) -> tuple[str, Any]:
    try:
        result = converter.coerce(value, param=param, ctx=ctx)
    except BadParameter as exc:
        return ("refused", exc.format_message())
    items = [type(x) for x in result] if _seq(result) else None
    return ("value", (type(result), repr(result), items))


def _seq(result: Any) -> bool:
    return isinstance(result, (list, tuple))


def _same(command: Any, param: Any, value: Any) -> None:
    ctx = typer.core._click.Context(command)
    reference = FastValue(param).reference()
    expected = _outcome(reference, value, param, ctx)
    assert _outcome(FastValue(param), value, param, ctx) == expected, (param.name, value)


def _values(param: Any, raw: str) -> list[Any]:
    multi = param.multiple or param.nargs == -1
    return [(raw,), (raw, raw), [raw], raw] if multi else [raw]


@pytest.mark.parametrize(("label", "command", "param"), PARAMS, ids=[p[0] for p in PARAMS])
def test_fast_values_are_typers_on_curated_inputs(label: str, command: Any, param: Any) -> None:
    cwd = os.getcwd()
    os.chdir(REPO)  # relative paths such as the sample resolve as on the command line
    try:
        for default in (param.default, None):
            if not callable(default):
                _same(command, param, default)
        for raw in CURATED:
            for value in _values(param, raw):
                _same(command, param, value)
    finally:
        os.chdir(cwd)


@settings(max_examples=300, deadline=None)
@given(
    index=st.integers(0, len(PARAMS) - 1),
    raw=st.one_of(
        st.text(max_size=12),
        st.from_regex(r"\A[ +-]?[0-9_]{0,22}(\.[0-9]{0,20})?([eE][+-]?[0-9]{1,3})?\s?\Z"),
        st.integers(-(10**20), 10**20).map(str),
        st.floats(allow_nan=True).map(str),
    ),
)
def test_fast_values_are_typers_on_generated_inputs(index: int, raw: str) -> None:
    _, command, param = PARAMS[index]
    for value in _values(param, raw):
        _same(command, param, value)


def test_every_kind_of_option_takes_the_fast_path() -> None:
    """The fast path is not a no-op: each kind of value the tool uses converts without
    typer's converter (which would build a pydantic TypeAdapter)."""
    kinds: set[str] = set()
    for _, command, param in PARAMS:
        fast = FastValue(param)
        annotation = param.type_descriptor.annotation
        sample = {int: "5", float: "2.5", str: "x", Path: "x"}.get(annotation, "x")
        if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
            sample = next(iter(annotation)).value
        value = (sample,) if param.multiple or param.nargs == -1 else sample
        if annotation is bool:
            continue
        fast.coerce(value, param=param, ctx=typer.core._click.Context(command))
        assert fast._reference is None, param.name
        kinds.add(getattr(annotation, "__name__", str(annotation)))
    assert {"int", "float", "str", "Path", "list", "OutputFormat", "Verdict"} <= kinds, kinds


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["verify", SAMPLE, "--max-members", "0"], "Input should be greater than or equal to 1"),
        (["verify", SAMPLE, "--max-members", "many"], "Input should be a valid integer"),
        (["verify", SAMPLE, "--max-ratio", "0.5"], "greater than or equal to 1"),
        (["verify", SAMPLE, "--format", "xml"], "'xml' is not one of 'text', 'json', 'markdown'"),
        (["verify", SAMPLE, "--expect", "yes"], "'yes' is not one of"),
        (["verify", SAMPLE, "--bogus"], "No such option: --bogus"),
        (["verify"], "Missing argument 'BUNDLE"),
        (["nosuch"], "No such command 'nosuch'"),
    ],
)
def test_a_bad_value_is_a_usage_error_in_typers_words(args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 2, result.output
    flat = " ".join(result.stderr.replace("│", " ").split())
    assert message in flat and "Traceback" not in result.stderr
