"""Every case of the hostile corpus through the real command line: its exact outcome, in time."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from corpus import CASES, Case
from typer.testing import CliRunner

from verifier.cli import app

SECONDS = 10.0


def _strict(text: str) -> Any:
    def refuse(name: str) -> Any:
        raise ValueError(f"{name} in the JSON report")

    return json.loads(text, parse_constant=refuse)


def run_case(item: Case, folder: Path) -> tuple[int, str, str]:
    path = item.build(folder)
    args = [a.replace("{folder}", str(folder)) for a in item.args]
    result = CliRunner().invoke(app, ["verify", str(path), "-f", "json", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def outcome_of(item: Case, folder: Path) -> dict[str, Any]:
    """What verify made of the case, in the terms a Case states."""
    code, out, err = run_case(item, folder)
    assert "Traceback" not in err and "internal error" not in err, err
    if item.usage:
        return {"exit_code": code, "stdout": out, "stderr": err}
    report = _strict(out)
    (bundle,) = report["bundles"]
    errors = [f for f in bundle["findings"] if f["severity"] == "error"]
    return {
        "exit_code": code,
        "bundle_exit_code": bundle["exit_code"],
        "verified": bundle["verified"],
        "error": bundle["error"],
        "findings": [(f["check"], f["message"]) for f in errors],
        "stderr": err,
    }


def test_the_corpus_is_large_and_named_uniquely() -> None:
    names = [c.name for c in CASES]
    assert len(names) == len(set(names))
    assert len(CASES) >= 40
    assert {c.group for c in CASES} == {"archive", "json", "sha256sums", "signature"}


@pytest.mark.parametrize("item", CASES, ids=[c.name for c in CASES])
def test_hostile_case(item: Case, tmp_path: Path) -> None:
    started = time.monotonic()
    got = outcome_of(item, tmp_path)
    elapsed = time.monotonic() - started
    assert elapsed < SECONDS, f"{item.name} took {elapsed:.1f} s"
    assert got["exit_code"] == item.exit_code, got
    if item.usage:
        assert item.error is not None and item.error in got["stderr"], got
        assert got["stdout"] == ""
        return
    assert got["bundle_exit_code"] == item.exit_code
    assert got["verified"] is (item.exit_code == 0)
    if item.error is not None:
        assert got["error"] is not None and item.error in got["error"], got
        assert got["findings"] == []
        return
    assert got["error"] is None, got
    for expected in item.findings:
        assert expected in got["findings"], (expected, got["findings"])
    failing = {check for check, _ in got["findings"]}
    assert failing == {check for check, _ in item.findings} | item.other_checks, got["findings"]
