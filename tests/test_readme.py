"""The outputs pasted into README.md are what the tool prints today (`tools/readme_outputs.py`
regenerates them); the README's first screen runs the installed command, not a bare one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import readme_outputs

README = Path(readme_outputs.README).read_text("utf-8")
BLOCKS = readme_outputs.blocks_in(README)


@pytest.mark.parametrize("name", sorted(readme_outputs.OFFLINE))
def test_pasted_output_is_current(name: str) -> None:
    assert name in BLOCKS, f"README.md lost its <!-- output {name} --> block"
    fresh = readme_outputs.OFFLINE[name]()
    assert BLOCKS[name] == fresh, "stale: run .venv/bin/python tools/readme_outputs.py"


def test_every_walk_through_step_has_its_real_output() -> None:
    for name in ("first-capture", "first-keygen", "first-export", "first-verify"):
        assert BLOCKS.get(name, "").startswith("```console\n$ .venv/bin/evidence "), name
    assert "capture completed" in BLOCKS["first-capture"]
    assert "verdict: cache-state-dependent" in BLOCKS["first-verify"]


def test_commands_shown_are_the_installed_ones_and_the_contract_is_in_the_repo() -> None:
    bare = [
        line
        for line in README.splitlines()
        # A bare `evidence` is not on the PATH after `make demo` (the diagram aside).
        if re.match(r"\s*(\$ )?evidence ", line) and "──▶" not in line
    ]
    assert not bare, bare
    assert "../shared" not in README
    assert (Path(readme_outputs.REPO) / "docs" / "EVIDENCE.md").is_file()
