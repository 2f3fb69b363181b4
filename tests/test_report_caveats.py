"""What the tool found that qualifies a verdict is shown in every format, as its own.

An attached capture (the harness attached to a server it did not start) records no command
line or environment: the conditions' settings are the bundle's word. verify says so in the
experiment's notes; text, Markdown and JSON must show that caveat beside the verdict, and
mark the settings declared, not verified. A phase the tool's plan skips is shown with the
tool's reason; the bundle's own reason, where it differs, only as the bundle's quoted word.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from make_samples import _dump, _resum, resum_tree
from markdown_it import MarkdownIt
from rich.console import Console
from test_report_injection import _Outside
from test_soundness import write
from test_soundness_states import _vllm_files

from verifier import layout, schemas
from verifier.cli import app
from verifier.report.common import printable
from verifier.report.document import BundleOutcome, build_report
from verifier.report.text import render_text
from verifier.verify import verify_path

REPO = Path(__file__).resolve().parent.parent
SEED = REPO / "sample_bundles" / "seed-mlxcel"
ATTACHED = "attached to a server the harness did not start: no command line or environment"
DECLARED = "declared, not verified"
SETTING = "MLXCEL_SDPA_DETERMINISTIC=1"
# The tool's own reasons (verifier/protocol.py build_protocol), as its plan gives them.
RESTART = "attached to a running server (--url): the harness never restarts it"
NO_OFF_SERVER = (
    "attached to a running server (--url): the harness cannot start one with its cache off"
)
NO_OPT_OUT = "the server has no per-request cache opt-out"
FORGED = "not needed: the maintainers confirmed opt-out equals cold on this build"


def _attached(root: Path, reasons: tuple[str, str] = (RESTART, NO_OFF_SERVER)) -> Path:
    """The seed's second condition (MLXCEL_SDPA_DETERMINISTIC=1) as an attached capture:
    no server recorded, the restart and cache-off server phases skipped, as the harness
    writes it; checksums forged anew."""
    shutil.copytree(SEED, root)
    path = root / layout.EXPERIMENT
    experiment = json.loads(path.read_text("utf-8"))
    experiment["server"]["attached"] = True
    experiment["conditions"] = experiment["conditions"][1:]
    experiment["conditions"][0]["servers"] = []
    experiment["protocol"]["skipped_phases"] = [
        {"phase": "restart", "reason": reasons[0]},
        {"phase": "disabled-server", "reason": reasons[1]},
    ]
    path.write_text(json.dumps(experiment), "utf-8")
    shutil.rmtree(root / layout.RECORDS_DIR / "sdpa-det-0")
    for record in (root / layout.RECORDS_DIR / "sdpa-det-1").glob("*.json"):
        if int(record.stem) > 9:  # the restart and cache-off server phases
            record.unlink()
    resum_tree(root)
    return root


def _vllm(root: Path, reason: str) -> Path:
    """A vLLM bundle (the harness started its servers; vLLM has no per-request opt-out, so
    the tool's plan skips that phase) whose skipped phase carries `reason`."""
    files = _vllm_files()
    experiment = json.loads(files[layout.EXPERIMENT])
    experiment["protocol"]["skipped_phases"] = [{"phase": "opt-out", "reason": reason}]
    files[layout.EXPERIMENT] = _dump(experiment)
    return write(_resum(files), root)


def _reports(root: Path) -> dict[str, Any]:
    """The bundle's report in every format: the JSON document, Markdown, text laid out by
    report.plain (the CLI to a file) and by rich (a terminal's layout, without styles)."""
    from typer.testing import CliRunner

    def run(*args: str) -> str:
        result = CliRunner().invoke(app, ["verify", str(root), *args], env={"COLUMNS": "100"})
        assert result.exit_code == 0, result.stdout
        return result.stdout

    document = json.loads(run("-f", "json"))
    assert schemas.validate(document, "report") == []
    console = io.StringIO()
    report = build_report([BundleOutcome(str(root), verify_path(root))])
    render_text(printable(report), Console(file=console, width=100, color_system=None))
    return {
        "json": document["bundles"][0],
        "markdown": run("-f", "markdown"),
        "text": run(),
        "rich": console.getvalue(),
    }


@pytest.fixture(scope="module")
def attached(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _reports(_attached(tmp_path_factory.mktemp("attached") / "bundle"))


@pytest.fixture(scope="module")
def forged(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _reports(_vllm(tmp_path_factory.mktemp("forged") / "bundle", FORGED))


def _joined(text: str) -> str:
    """The text report's words, its wrapping undone."""
    return " ".join(text.split())


def test_the_attached_caveat_is_in_the_json_report(attached: dict[str, Any]) -> None:
    bundle = attached["json"]
    assert bundle["verdict"] == "cache-state-dependent" and bundle["verified"]
    classification = bundle["classification"]
    (caveat,) = classification["caveats"]
    assert caveat.startswith(ATTACHED) and caveat.endswith(DECLARED)
    assert caveat in classification["reasons"]
    assert [c["settings_verified"] for c in classification["conditions"]] == [False]


@pytest.mark.parametrize("layout_by", ["text", "rich"])
def test_the_attached_caveat_is_in_the_text_report_beside_the_verdict(
    attached: dict[str, Any], layout_by: str
) -> None:
    text = attached[layout_by]
    head = _joined(text.split("\nchecked\n", 1)[0])  # the headline: before what was checked
    assert "verdict: cache-state-dependent" in head
    assert f"caveat: {ATTACHED}" in head and head.endswith(DECLARED)
    assert f"sdpa-det-1: {SETTING} ({DECLARED});" in _joined(text)


def test_the_attached_caveat_is_in_the_markdown_report_beside_the_verdict(
    attached: dict[str, Any],
) -> None:
    markdown = attached["markdown"]
    head = markdown.split("\nChecked:\n", 1)[0]
    assert f"- **caveat**: {ATTACHED}" in head
    row = next(line for line in markdown.splitlines() if line.startswith("| `sdpa-det-1`"))
    assert row.startswith(f"| `sdpa-det-1` `{SETTING}` ({DECLARED}) |")
    # said in the tool's words, outside the code spans that hold the bundle's
    outside = _Outside()
    outside.feed(MarkdownIt("commonmark").enable("table").render(markdown))
    assert DECLARED in "".join(outside.text) and ATTACHED in "".join(outside.text)


def test_a_started_capture_has_no_caveat_and_verified_settings() -> None:
    reports = _reports(SEED)
    assert reports["json"]["classification"]["caveats"] == []
    assert all(c["settings_verified"] for c in reports["json"]["classification"]["conditions"])
    for name in ("text", "rich", "markdown"):
        assert "caveat" not in reports[name] and DECLARED not in reports[name]


def _capture_line(report: str) -> str:
    """The capture mode line of a text or Markdown report, its wrapping undone (the text
    report's grid goes on with indented lines)."""
    lines = report.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(CAPTURE))
    end = next(i for i in range(start + 1, len(lines)) if not lines[i].startswith(" "))
    return _joined("\n".join(lines[start:end]))


CAPTURE = ("capture mode", "- capture mode")


@pytest.mark.parametrize("name", ["text", "rich", "markdown"])
def test_a_skipped_phase_is_shown_with_the_tools_reason_and_not_the_bundles(
    forged: dict[str, Any], name: str
) -> None:
    line = _capture_line(forged[name])
    tools, said, bundles = line.partition("; the bundle says:")
    assert f"skipped phases: opt-out ({NO_OPT_OUT})" in tools
    assert "maintainers" not in tools
    assert said and FORGED in bundles
    if name == "markdown":  # quoted: a code span, the bundle's text inert within it
        assert bundles.strip().startswith("`opt-out (not") and bundles.strip().endswith(")`")


def test_the_json_capture_mode_line_keeps_the_bundles_reason_out_of_its_words(
    forged: dict[str, Any],
) -> None:
    (mode,) = [c for c in forged["json"]["checks"] if c["check"] == "capture mode"]
    assert mode["status"] == "skipped"
    assert f"opt-out ({NO_OPT_OUT})" in mode["detail"] and "maintainers" not in mode["detail"]
    assert mode["value"] == f"opt-out ({FORGED})"


def test_the_bundles_reason_equal_to_the_tools_is_not_repeated(tmp_path: Path) -> None:
    reports = _reports(_vllm(tmp_path / "bundle", NO_OPT_OUT))
    (mode,) = [c for c in reports["json"]["checks"] if c["check"] == "capture mode"]
    assert mode["value"] is None and "the bundle says" not in mode["detail"]
    assert "the bundle says" not in reports["markdown"] + reports["text"]


def test_an_attached_capture_shows_the_tools_reasons_for_its_skips(tmp_path: Path) -> None:
    lie = ("skipped: verified equal to a restart by the maintainers", "not needed")
    reports = _reports(_attached(tmp_path / "bundle", lie))
    for name in ("text", "rich", "markdown"):
        tools, _, bundles = _capture_line(reports[name]).partition("; the bundle says:")
        assert f"restart ({RESTART}); disabled-server ({NO_OFF_SERVER})" in tools
        assert "maintainers" not in tools and "maintainers" in bundles


def test_a_hostile_reason_is_escaped_and_cut(tmp_path: Path) -> None:
    reason = "x\nverdict: cache-state-independent\n" + "y" * 5_000
    reports = _reports(_vllm(tmp_path / "bundle", reason))
    for name in ("text", "rich", "markdown"):
        report = reports[name]
        verdicts = [line for line in report.splitlines() if line.startswith("verdict:")]
        assert verdicts == ([] if name == "markdown" else ["verdict: cache-state-dependent"])
        assert "y" * 300 not in report and "characters cut" in _capture_line(report)
