"""`--help` at 80 columns: one style of labels, nothing cut off, every option described."""

from __future__ import annotations

import inspect
import itertools
import re
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from verifier.cli import COMMANDS as REGISTRY
from verifier.cli import app, load_command
from verifier.cli.helptext import short_help
from verifier.model import Verdict

COMMANDS = [
    [], ["capture"], ["export"], ["verify"], ["diff"], ["keygen"], ["schema"], ["schema", "show"],
]  # fmt: skip


def _help(path: list[str], columns: int = 80) -> str:
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    return result.stdout


def _commands() -> list[tuple[str, Any]]:
    root = typer.main.get_command(app)
    found = [("evidence", root)]
    stack = [("evidence", root)]
    while stack:
        name, command = stack.pop()
        if name == "evidence":  # the root loads its commands on demand
            subs = {sub: load_command(sub) for sub in REGISTRY}
        else:
            subs = getattr(command, "commands", {})
        for sub_name, sub in subs.items():
            found.append((f"{name} {sub_name}", sub))
            stack.append((f"{name} {sub_name}", sub))
    return found


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_help_fits_80_columns_with_one_label_style(path: list[str]) -> None:
    text = _help(path)
    assert all(len(line) <= 80 for line in text.splitlines())
    assert "…" not in text  # nothing cut off
    assert not re.search(r"<[a-z][^>]*>", text), "typer's <type> labels"
    assert not re.search(r"\[x?[<>=]", text), "range labels such as [x>=1]"


@pytest.mark.parametrize(("name", "command"), _commands(), ids=lambda x: str(x))
def test_every_option_and_argument_is_described(name: str, command: Any) -> None:
    for param in command.params:
        assert (getattr(param, "help", None) or "").strip(), f"{name}: {param.name}"
        metavar = getattr(param, "metavar", None)
        if metavar:
            assert re.fullmatch(r"[A-Z][A-Z_]*", metavar), f"{name}: {param.name} {metavar}"
    # rich keeps the line breaks of a help paragraph: a line that wraps at 80 columns would
    # leave a one-word orphan before the next one.
    lines = re.sub(r"\[/?bold\]|\[/\]", "", inspect.cleandoc(command.help or "")).splitlines()
    for line, after in itertools.pairwise(lines):
        if line.strip() and after.strip():
            assert len(line) <= 77, f"{name}: {line!r}"


def test_capture_help_shows_full_syntax_and_a_llama_cpp_example() -> None:
    text = _help(["capture"])
    flat = " ".join(text.replace("│", " ").split())
    assert "NAME:VAR=VALUE,VAR=VALUE" in text and "det0:MLXCEL_SDPA_DETERMINISTIC=0" in text
    assert "--extra-server-arg=-fa --extra-server-arg=on" in flat
    assert "evidence capture --server-profile llama.cpp" in text
    assert "overrides max_tokens of the --request body" in flat
    assert "Port (1 to 65535)" in flat


def test_verify_help_lists_every_verdict_whole() -> None:
    words = set(re.split(r"[\s,│()]+", _help(["verify"])))
    assert {str(v) for v in Verdict} <= words


def test_the_root_lists_every_command_with_its_own_first_paragraph() -> None:
    """`evidence --help` lists the registry without importing them: each line must be the
    command's own (its docstring's first paragraph), in the order of the list."""
    for name, (_, line) in REGISTRY.items():
        command = load_command(name)
        assert line == short_help(command.help or ""), name
    text = _help([])
    flat = " ".join(text.replace("│", " ").split())
    positions = [flat.index(f" {name} {line.split()[0]}") for name, (_, line) in REGISTRY.items()]
    assert positions == sorted(positions)


def test_help_keeps_examples_and_paragraph_lines() -> None:
    """Example lines are printed as written (not joined into a paragraph), and a long line
    wraps at a space, never inside a word."""
    text = _help(["verify"], columns=60)
    assert "   evidence verify bundle.tar.gz --key signer.pub.pem\n" in text
    assert all(len(line) <= 60 for line in text.splitlines())
    words = set(re.split(r"[\s,│()]+", text))
    assert {str(v) for v in Verdict} <= words


def test_help_markup_is_shown_as_plain_text() -> None:
    text = _help(["keygen"])
    assert "[bold]" not in text and "[/]" not in text
    assert "--sign-key" in text


def test_no_arguments_prints_the_help_and_exits_2() -> None:
    result = CliRunner().invoke(app, [], env={"COLUMNS": "80"})
    assert result.exit_code == 2
    assert "Usage: evidence [OPTIONS] COMMAND" in result.stdout and "Commands" in result.stdout


def test_every_command_module_is_in_the_registry() -> None:
    """A `*_cmd` module left out of verifier.cli.COMMANDS would never load: each is there,
    and registers exactly the commands listed for it."""
    import pkgutil

    import verifier.cli

    modules = {
        f"verifier.cli.{info.name}"
        for info in pkgutil.iter_modules(verifier.cli.__path__)
        if info.name.endswith("_cmd")
    }
    assert modules == {module for module, _ in REGISTRY.values()}
    for module in modules:
        holder = typer.Typer()
        __import__(module, fromlist=["register"]).register(holder)
        names = set(typer.main.get_group(holder).commands)
        assert names == {name for name, (m, _) in REGISTRY.items() if m == module}, module
