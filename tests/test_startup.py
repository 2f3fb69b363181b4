"""Start-up: each command imports only what it uses (checked in sys.modules, not timed)."""

from __future__ import annotations

import gc
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import verifier
from verifier.cli import COMMANDS

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "sample_bundles" / "seed-mlxcel"
# The presentation layer: the only modules allowed to import typer and rich.
PRESENTATION = ("verifier.cli", "verifier.report", "verifier.__main__")
HEAVY = ("jsonschema", "cryptography", "verifier.capture.harness", "verifier.export")
# What typer would load for help and option values, and this tool does without:
# typer's rich help formatter (rich.markdown, markdown-it, rich.traceback) and pydantic.
TYPER_EXTRAS = ("typer.rich_utils", "markdown_it", "rich.markdown", "rich.traceback", "pydantic")
COMMAND_MODULES = sorted(module for module, _ in COMMANDS.values())


def _run(code: str) -> tuple[set[str], str]:
    """The modules loaded by running `code` in a fresh interpreter, and what it printed."""
    report = (
        "import json, sys\nsys.__stdout__.write('\\nMODULES ' + json.dumps(sorted(sys.modules)))"
    )
    probe = f"{code}\n{report}"
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert "MODULES " in done.stdout, done.stderr
    printed, modules = done.stdout.rsplit("MODULES ", 1)
    return set(json.loads(modules)), printed


def _modules_after(code: str) -> set[str]:
    return _run(code)[0]


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


def test_top_level_help_loads_no_command_and_no_rich() -> None:
    modules, printed = _run(_cli("--help"))
    assert "Usage: evidence" in printed and "manifest" in printed  # the probe did run the CLI
    assert _top(modules, HEAVY) == []
    assert _top(modules, (*TYPER_EXTRAS, *COMMAND_MODULES, "rich.console")) == []


@pytest.mark.parametrize("command", ["verify", "export", "capture", "manifest", "keygen", "diff"])
def test_command_help_loads_no_core_engine(command: str) -> None:
    modules, printed = _run(_cli(command, "--help"))
    assert f"Usage: evidence {command}" in printed
    assert _top(modules, HEAVY) == []
    assert _top(modules, TYPER_EXTRAS) == []
    own = COMMANDS[command][0]
    assert [m for m in COMMAND_MODULES if m in modules] == [own]  # its own module only


def test_schema_help_loads_no_core_engine() -> None:
    modules, printed = _run(_cli("schema", "show", "--help"))
    assert "Usage: evidence schema show" in printed
    assert _top(modules, (*HEAVY, *TYPER_EXTRAS)) == []


def test_verify_loads_neither_capture_nor_export() -> None:
    modules, printed = _run(_cli("verify", str(SAMPLE), "--format", "json"))
    assert "verifier.verify" in modules and '"verdict"' in printed  # it did verify
    # every document of the sample is valid: the generated validators decide, jsonschema
    # (about 30 ms to import) is not loaded
    assert "verifier._validators.record" in modules
    assert _top(modules, ("jsonschema", "referencing")) == []
    # nor fastjsonschema: the validators raise their own exception (its import would load
    # its code generator, about 2 ms)
    assert _top(modules, ("fastjsonschema",)) == []
    assert _top(modules, ("verifier.capture.harness", "verifier.export")) == []
    assert _top(modules, TYPER_EXTRAS) == []  # nor typer's help formatter, nor pydantic
    # JSON output: neither the text nor the Markdown renderer; no progress bar (no --model-dir)
    assert _top(modules, ("verifier.report.text", "verifier.report.markdown")) == []
    assert _top(modules, ("rich.progress", "rich.live", "rich.table")) == []
    assert [m for m in COMMAND_MODULES if m in modules] == ["verifier.cli.verify_cmd"]
    assert "verifier.cli.helptext" not in modules  # --help's formatter: for --help only


def test_verify_of_a_directory_loads_no_tarfile() -> None:
    """The archive half of the reader (verifier.bundle.archive, and tarfile) loads for an
    archive only."""
    modules, printed = _run(_cli("verify", str(SAMPLE), "-q"))
    assert printed.startswith("cache-state-dependent ")
    assert _top(modules, ("tarfile", "verifier.bundle.archive")) == []
    archive = REPO / "sample_bundles" / "llama-cpp-real.tar.gz"
    modules, printed = _run(_cli("verify", str(archive), "-q"))
    assert printed.startswith("cache-state-dependent ") and "verifier.bundle.archive" in modules


def test_verify_without_a_key_loads_no_cryptography() -> None:
    """A signed bundle verified without --key: the signature's size is checked, and
    cryptography (about 10 ms) is not needed; with --key it is, and the check runs."""
    modules, printed = _run(_cli("verify", str(SAMPLE), "-q"))
    assert printed.startswith("cache-state-dependent ")
    assert _top(modules, ("cryptography",)) == []
    key = REPO / "sample_bundles" / "keys" / "evidence-signing-key.pub.pem"
    modules, printed = _run(_cli("verify", str(SAMPLE), "-q", "--key", str(key)))
    assert printed.startswith("cache-state-dependent ") and "cryptography" in modules


def test_verify_loads_localize_and_modelfiles_only_where_used(tmp_path: Path) -> None:
    """The diagnostic-phase reader (localize) loads for a bundle with a diagnostic phase,
    the model rehasher (modelfiles) for --model-dir: the seed sample needs neither."""
    modules, printed = _run(_cli("verify", str(SAMPLE), "-q"))
    assert printed.startswith("cache-state-dependent ")
    assert _top(modules, ("verifier.localize", "verifier.modelfiles")) == []
    diagnosed = REPO / "sample_bundles" / "llama-cpp-real.tar.gz"  # has a diagnostic phase
    modules, printed = _run(_cli("verify", str(diagnosed), "--format", "json"))
    assert '"token_index"' in printed and "verifier.localize" in modules
    modules, _ = _run(_cli("verify", str(SAMPLE), "-q", "--model-dir", str(tmp_path)))
    assert "verifier.modelfiles" in modules


def test_the_collector_is_off_for_start_up_and_verify_and_on_for_the_rest() -> None:
    """`python -m verifier` and the `evidence` script start with the cyclic collector off
    (start-up makes no garbage); a command's work runs with it on, but verify's (which
    makes next to no cycles: tests/hostile/test_collector.py), which runs with it off."""
    probe = (
        "import gc, sys\n"
        "import verifier.verify as v\n"
        "seen = []\n"
        "real = v.verify_path\n"
        "def spy(*a, **k):\n"
        "    seen.append(gc.isenabled() and gc.get_freeze_count() > 1000)\n"
        "    return real(*a, **k)\n"
        "v.verify_path = spy\n"
        f"sys.argv = ['evidence', 'verify', {str(SAMPLE)!r}, '-q']\n"
        "import verifier.cli.common as common\n"
        "common.end_at_once = lambda: None  # this probe prints after main returns\n"
        "real_loading = common.loading\n"
        "def loading():\n"
        "    seen.append(('loading', gc.isenabled()))\n"
        "    return real_loading()\n"
        "common.loading = loading\n"
        "import verifier.cli as cli\n"
        "real_load = cli.load_command\n"
        "def load_command(name):\n"
        "    seen.append(('start', gc.isenabled()))\n"
        "    return real_load(name)\n"
        "cli.load_command = load_command\n"
        "from verifier.__main__ import main\n"
        "gc.enable()\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(seen, gc.isenabled())\n"
    )
    _, printed = _run(probe)
    assert printed.startswith("cache-state-dependent ")
    # off while the command loads; on in the command's body (boundary), which loads the
    # core with it off for a moment (loading), then verifies with it off (collector_off),
    # and writes with it on again; and what start-up made is frozen out of its walks
    seen = "[('start', False), ('loading', True), False, ('loading', False)] True"
    assert printed.rstrip().endswith(seen)
    assert "verifier.cli:main" not in (REPO / "pyproject.toml").read_text()  # the script too


def test_verify_text_to_a_pipe_loads_no_rich() -> None:
    """To a file or a pipe, report.plain lays the text report out and the progress line
    is written plainly: neither rich's console nor its text is loaded (about 25 ms)."""
    modules, printed = _run(_cli("verify", str(SAMPLE)))
    assert "verifier.report.plain" in modules and "cache-state-dependent" in printed
    assert _top(modules, ("verifier.report.text", "rich.console", "rich.text")) == []
    assert _top(modules, ("verifier.report.markdown", *TYPER_EXTRAS)) == []


def test_verify_text_loads_only_the_text_renderer() -> None:
    """Where rich lays the report out (here: several bundles; a terminal), rich's text
    renderer loads, and no markup is parsed: every string reaches rich as Text (the emoji
    table is not loaded)."""
    modules, printed = _run(_cli("verify", str(SAMPLE), str(SAMPLE)))  # the summary table
    assert "summary of 2 bundles" in printed and "verifier.report.text" in modules
    assert _top(modules, ("verifier.report.markdown", "rich.progress", *TYPER_EXTRAS)) == []
    assert "rich._emoji_codes" not in modules
    styled = "import os\nos.environ['FORCE_COLOR'] = '1'\n" + _cli("verify", str(SAMPLE))
    modules, printed = _run(styled)
    assert "verifier.report.text" in modules and "\x1b[" in printed  # styled, by rich
    assert "rich._emoji_codes" not in modules


def test_a_usage_error_loads_typers_error_panel_not_pydantic_for_good_values() -> None:
    """The error path may load typer's formatter (it words the error); a good value of a
    number option does not load pydantic."""
    modules, _ = _run(_cli("verify", str(SAMPLE), "-q", "--max-members", "5", "--max-ratio", "9"))
    assert "verifier.verify" in modules
    assert _top(modules, ("pydantic", "typer.rich_utils")) == []
    modules, _ = _run(_cli("verify", str(SAMPLE), "--max-members", "0"))
    assert "typer.rich_utils" in modules and "verifier.verify" not in modules


def test_manifest_loads_neither_jsonschema_nor_the_pipeline(tmp_path: Path) -> None:
    (tmp_path / "w.bin").write_bytes(b"w")
    modules = _modules_after(_cli("manifest", str(tmp_path), "-o", str(tmp_path / "m.json")))
    assert (tmp_path / "m.json").is_file()
    assert _top(modules, HEAVY) == []
    # stderr is not a terminal here: no bar is drawn, and rich is not loaded for one
    assert _top(modules, ("rich.progress", "rich.console")) == []


def test_the_probe_sees_an_import() -> None:
    """The helper itself can fail: a module it is told to import shows up."""
    assert "csv" in _modules_after("import csv")
    assert "csv" not in _modules_after("pass")
    assert _top({"rich.console"}, ("rich",)) == ["rich"]


def test_loading_turns_the_collector_off_and_back_on() -> None:
    from verifier.cli.common import loading

    gc.enable()
    with loading():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(ImportError), loading():
        import verifier.no_such_module  # type: ignore[import-not-found]  # noqa: F401
    assert gc.isenabled()


def _undocumented_dataclasses(module: object) -> list[str]:
    """The dataclasses `module` defines without a docstring of their own."""
    return [
        name
        for name, obj in vars(module).items()
        if isinstance(obj, type)
        and obj.__module__ == getattr(module, "__name__", None)
        and "__dataclass_fields__" in obj.__dict__  # made by @dataclass here, not inherited
        and "__dataclass_params__" in obj.__dict__
        and _generated_doc(obj)
    ]


def _generated_doc(cls: type) -> bool:
    """Whether @dataclass wrote the class's docstring: it does so, from inspect.signature
    (about 0.2 ms a class at every start), where the class has none."""
    return (cls.__doc__ or "").startswith(cls.__name__ + "(")


@pytest.mark.parametrize(
    "module", sorted(info.name for info in pkgutil.walk_packages(verifier.__path__, "verifier."))
)
def test_every_dataclass_has_a_docstring(module: str) -> None:
    """A dataclass without one costs every start of the tool an inspect.signature."""
    import importlib

    assert _undocumented_dataclasses(importlib.import_module(module)) == []


def test_an_undocumented_dataclass_is_found() -> None:
    import dataclasses
    import types

    probe = types.ModuleType("probe")

    @dataclasses.dataclass(frozen=True)
    class Plain:
        x: int

    @dataclasses.dataclass(frozen=True)
    class Documented:
        """Said."""

        x: int

    for cls in (Plain, Documented):
        cls.__module__ = "probe"
        setattr(probe, cls.__name__, cls)
    assert _undocumented_dataclasses(probe) == ["Plain"]
