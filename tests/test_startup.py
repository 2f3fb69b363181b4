"""Start-up: each command imports only what it uses (checked in sys.modules, not timed)."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import verifier

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "sample_bundles" / "seed-mlxcel"
# The presentation layer: the only modules allowed to import typer and rich.
PRESENTATION = ("verifier.cli", "verifier.report", "verifier.__main__")
HEAVY = ("jsonschema", "cryptography", "verifier.capture.harness", "verifier.export")


def _modules_after(code: str) -> set[str]:
    """The modules loaded by running `code` in a fresh interpreter."""
    report = (
        "import json, sys\nsys.__stdout__.write('\\nMODULES ' + json.dumps(sorted(sys.modules)))"
    )
    probe = f"{code}\n{report}"
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert "MODULES " in done.stdout, done.stderr
    return set(json.loads(done.stdout.rsplit("MODULES ", 1)[1]))


def _cli(*args: str) -> str:
    """Run the CLI in-process of the probe, swallowing its exit."""
    return (
        "import sys\n"
        f"sys.argv = ['evidence', *{list(args)!r}]\n"
        "from verifier.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
    )


def _top(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(n for n in names if n in modules or any(m.startswith(n + ".") for m in modules))


CORE = sorted(
    info.name
    for info in pkgutil.walk_packages(verifier.__path__, "verifier.")
    if not info.name.startswith(PRESENTATION)
)


def test_the_core_list_is_the_whole_pipeline() -> None:
    for stage in ("verifier.capture.harness", "verifier.export.exporter", "verifier.verify"):
        assert stage in CORE


@pytest.mark.parametrize("module", CORE)
def test_core_modules_import_neither_typer_nor_rich(module: str) -> None:
    assert _top(_modules_after(f"import {module}"), ("typer", "rich")) == []


def test_top_level_help_loads_no_core_engine() -> None:
    modules = _modules_after(_cli("--help"))
    assert "verifier.cli.manifest_cmd" in modules  # the probe did run the CLI
    assert _top(modules, HEAVY) == []


@pytest.mark.parametrize("command", ["verify", "export", "capture", "manifest", "keygen"])
def test_command_help_loads_no_core_engine(command: str) -> None:
    assert _top(_modules_after(_cli(command, "--help")), HEAVY) == []


def test_verify_loads_neither_capture_nor_export() -> None:
    modules = _modules_after(_cli("verify", str(SAMPLE), "--format", "json"))
    assert "verifier.verify" in modules and "verifier._validators.record" in modules  # verified
    assert _top(modules, ("verifier.capture.harness", "verifier.export")) == []


def test_manifest_loads_neither_jsonschema_nor_the_pipeline(tmp_path: Path) -> None:
    (tmp_path / "w.bin").write_bytes(b"w")
    modules = _modules_after(_cli("manifest", str(tmp_path), "-o", str(tmp_path / "m.json")))
    assert (tmp_path / "m.json").is_file()
    assert _top(modules, HEAVY) == []


def test_the_probe_sees_an_import() -> None:
    """The helper itself can fail: a module it is told to import shows up."""
    assert "csv" in _modules_after("import csv")
    assert "csv" not in _modules_after("pass")
    assert _top({"rich.console"}, ("rich",)) == ["rich"]
