"""Every case of the hostile corpus through the real command line: its exact outcome, in time."""

from __future__ import annotations

import json
import tarfile
import time
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
from corpus import CASES, REPO, SEED, Case, by_name, seed_files, table
from typer.testing import CliRunner

from verifier import layout
from verifier.bundle.reader import Limits
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


def test_the_smuggled_archive_is_what_tar_ignore_zeros_would_extract(tmp_path: Path) -> None:
    """Why data after the end-of-archive is refused: `tar -xzif` reads a different experiment."""
    path = by_name("second-tar-after-end-of-archive").build(tmp_path)
    with tarfile.open(path, "r:gz", ignore_zeros=True) as archive:
        copies = [
            handle.read()
            for member in archive.getmembers()
            if member.name == layout.EXPERIMENT
            and (handle := archive.extractfile(member)) is not None
        ]
    assert len(copies) == 2 and copies[0] != copies[1]
    assert copies[0] == seed_files()[layout.EXPERIMENT]


def test_one_bundle_failing_never_stops_the_reports_of_the_others(tmp_path: Path) -> None:
    """Every kind of failure in one call: each bundle gets its own entry, the worst exit wins."""
    names = [
        "second-tar-after-end-of-archive",  # findings
        "truncated-gzip",  # unreadable
        "gzip-bomb",  # unsafe
        "millions-of-tiny-strings",  # findings, from the JSON layer
        "sums-nel-separator",
        "signature-of-one-byte",
    ]
    paths = []
    for name in names:
        folder = tmp_path / name
        folder.mkdir()
        paths.append(str(by_name(name).build(folder)))
    args = ["verify", str(SEED), *paths, str(SEED), "-f", "json", "--max-ratio", "100000"]
    result = CliRunner().invoke(app, args)
    assert "Traceback" not in result.stderr
    report = _strict(result.stdout)
    codes = [b["exit_code"] for b in report["bundles"]]
    assert codes == [0, 1, 2, 1, 1, 1, 1, 0]
    assert result.exit_code == report["exit_code"] == 2
    assert [b["source"] for b in report["bundles"]] == [str(SEED), *paths, str(SEED)]


@pytest.mark.parametrize("output_format", ["text", "markdown", "json"])
def test_every_format_reports_an_unreadable_bundle_without_a_traceback(
    output_format: str, tmp_path: Path
) -> None:
    path = by_name("corrupted-gzip-crc").build(tmp_path)
    result = CliRunner().invoke(app, ["verify", str(path), "-f", output_format])
    assert result.exit_code == 2
    assert "Traceback" not in result.stderr + result.stdout
    assert "the CRC-32 in the gzip trailer does not match the data" in result.stderr


def test_security_md_lists_every_case_and_every_limit() -> None:
    text = (REPO / "SECURITY.md").read_text(encoding="utf-8")
    assert table() in text, "run `python tests/hostile/corpus.py` and paste the table"
    for limit in fields(Limits):
        flag = "--" + limit.name.replace("_", "-")
        assert f"`{flag}`" in text, flag
        assert flag in CliRunner().invoke(app, ["verify", "--help"], env={"COLUMNS": "200"}).stdout
