"""What the reports say and in which order, at the widths people read them.

Pinned: an invalid bundle claims nothing (no per-condition verdict, excerpts marked
unverified, the errors first); the same sentence and the same arm names in every format;
what was checked (the key's fingerprint, the model rehash); text at 80 and 120 columns with
no split hash or word and no trailing space; Markdown that names the bundle by its file name.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from make_samples import resum_tree
from markdown_it import MarkdownIt
from typer.testing import CliRunner

from verifier import layout, schemas
from verifier.cli import app

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_bundles"
SEED = SAMPLES / "seed-mlxcel"
TAMPERED = SAMPLES / "negative" / "tampered-output"
BAD_SIGNATURE = SAMPLES / "negative" / "bad-signature"
KEY = SAMPLES / "keys" / "evidence-signing-key.pub.pem"
ARMS = ("cold", "warm", "request-disabled", "server-disabled")


def run(*args: str, columns: int = 80) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["verify", *args], env={"COLUMNS": str(columns)})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout


def report(*args: str) -> dict[str, object]:
    _, out = run(*args, "--format", "json")
    document = json.loads(out)
    assert schemas.validate(document, "report") == []
    return document  # type: ignore[no-any-return]


def _order(text: str, *parts: str) -> None:
    positions = [text.index(part) for part in parts]
    assert positions == sorted(positions), list(zip(parts, positions, strict=True))


@pytest.mark.parametrize("bundle", [TAMPERED, BAD_SIGNATURE])
def test_an_invalid_bundle_claims_nothing_and_says_why_first(bundle: Path) -> None:
    code, text = run(str(bundle), "--key", str(KEY))
    assert code == 1
    assert "cache-state-dependent" not in text  # no per-condition verdict, no reason
    _order(text, "verdict: invalid", "The bundle failed verification", "errors (", "checked")
    _order(text, "checked", "per condition, as claimed (unverified)", "experiment")
    assert "outputs (SHA-256 of the canonical output), as claimed (unverified)" in text

    _, markdown = run(str(bundle), "--key", str(KEY), "--format", "markdown")
    opened = markdown.split("<details>")[0]
    assert "cache-state-dependent" not in markdown
    _order(opened, "### `invalid`", "The bundle failed verification", "Errors (", "Checked:")
    assert "as claimed (unverified)" in markdown.split("<details>")[1]

    document = report(str(bundle), "--key", str(KEY))
    (b,) = document["bundles"]  # type: ignore[index]
    assert {c["verdict"] for c in b["classification"]["conditions"]} == {"invalid"}
    assert b["summary"].startswith("The bundle failed verification")


def test_a_wrong_key_fails_the_signature_and_names_the_key() -> None:
    _, text = run(str(BAD_SIGNATURE), "--key", str(KEY))
    assert "signature      failed: SHA256SUMS.sig does not verify with the key" in text
    assert "signature unsigned" not in text and "signature failed" not in text


def test_the_key_fingerprint_is_the_one_openssl_gives() -> None:
    (check,) = [
        c
        for c in report(str(SEED), "--key", str(KEY))["bundles"][0]["checks"]  # type: ignore[index]
        if c["check"] == "signature"
    ]
    assert check["status"] == "passed" and check["value"] == KEY.name
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    der = subprocess.run(
        ["openssl", "pkey", "-pubin", "-in", str(KEY), "-outform", "DER"],
        capture_output=True, check=True,
    ).stdout  # fmt: skip
    import hashlib

    assert check["sha256"] == hashlib.sha256(der).hexdigest()
    _, text = run(str(SEED), "--key", str(KEY))
    assert "\n" + check["sha256"] + "\n" in "\n" + "\n".join(x.strip() for x in text.splitlines())


def test_the_same_sentence_and_arm_names_in_every_format() -> None:
    document = report(str(SEED))
    sentence = document["bundles"][0]["summary"]  # type: ignore[index]
    assert sentence.startswith("Every proven cold and cache-disabled request gave output A")
    assert "in both conditions" in sentence
    _, text = run(str(SEED), columns=400)
    _, markdown = run(str(SEED), "--format", "markdown")
    assert sentence in text and sentence in markdown
    for arm in ARMS:
        assert arm in text and f"| {arm} |" in markdown
    phases = markdown.replace("| `opt-out` |", "")  # a protocol phase, not an arm
    for retired in ("opt-out", "cache off", " off "):
        assert retired not in text.replace("cache-state", "") and retired not in phases


def test_model_files_say_whether_they_were_rehashed(tmp_path: Path) -> None:
    checks = {c["check"]: c for c in report(str(SEED))["bundles"][0]["checks"]}  # type: ignore[index]
    assert checks["model files"]["status"] == "not checked"
    local = tmp_path / "model"
    local.mkdir()
    (local / "config.json").write_text("{}")
    checks = {
        c["check"]: c
        for c in report(str(SEED), "--model-dir", str(local))["bundles"][0]["checks"]  # type: ignore[index]
    }
    assert checks["model files"]["status"] == "failed"
    assert checks["model files"]["detail"].startswith("your copy differs from the manifest")
    assert "config.json" in checks["model files"]["value"]
    assert checks["manifest"]["status"] == "passed"  # the bundle's own manifest is fine
    # Your copy differing is its own result: the reporter's bundle keeps its verdict...
    (bundle,) = report(str(SEED), "--model-dir", str(local))["bundles"]  # type: ignore[misc]
    assert bundle["verified"] and bundle["exit_code"] == 0
    assert not [f for f in bundle["findings"] if f["severity"] != "info"]
    assert bundle["model_dir_findings"]
    # ... unless the reviewer asks for a match.
    code, out = run(str(SEED), "--model-dir", str(local), "--require-model-match")
    assert code == 1 and "verdict: invalid" in out


def attached_seed(tmp_path: Path) -> Path:
    """The seed sample as a capture attached to a server the harness did not start."""
    bundle = tmp_path / "attached"
    shutil.copytree(SEED, bundle)
    experiment = json.loads((bundle / layout.EXPERIMENT).read_text())
    experiment["server"]["attached"] = True
    experiment["protocol"]["skipped_phases"] = [
        {"phase": "disabled-server", "reason": "attached: the harness cannot restart the server"}
    ]
    (bundle / layout.EXPERIMENT).write_text(json.dumps(experiment))
    resum_tree(bundle)
    return bundle


def test_attach_mode_and_skipped_phases_are_stated(tmp_path: Path) -> None:
    bundle = attached_seed(tmp_path)
    checks = {c["check"]: c for c in report(str(bundle))["bundles"][0]["checks"]}  # type: ignore[index]
    mode = checks["capture mode"]
    assert mode["status"] == "skipped" and "(--url)" in mode["detail"]
    assert mode["value"].startswith("disabled-server (attached")
    _, text = run(str(bundle))
    assert "capture mode   skipped: attached to a server the harness did not start" in text


@pytest.mark.parametrize("columns", [80, 120])
@pytest.mark.parametrize("bundles", [[SEED], [TAMPERED], [SEED, TAMPERED, BAD_SIGNATURE]])
def test_text_fits_its_width_without_splitting_words_or_hashes(
    columns: int, bundles: list[Path]
) -> None:
    args = [str(b) for b in bundles]
    _, text = run(*args, "--key", str(KEY), columns=columns)
    lines = text.splitlines()
    assert all(len(line) <= columns for line in lines), max(lines, key=len)
    assert not [line for line in lines if line != line.rstrip()]
    document = report(*args, "--key", str(KEY))
    whole = set(text.split())
    for b in document["bundles"]:  # type: ignore[attr-defined]
        for f in b["findings"]:
            if f["severity"] == "info":
                continue  # notes are said in "checked", not as findings
            for value in (f["expected"], f["actual"]):
                if value and re.fullmatch("[0-9a-f]{64}", value):
                    assert value in whole, value
            if f["file"]:
                assert any(f["file"] in word for word in whole), f["file"]
        for c in b["classification"]["classes"]:
            assert c["output_hash"] in whole
    for word in ("cache-state-dependent", "request-disabled", "server-disabled"):
        if word in text.replace("\n", ""):
            assert word in whole or any(word in w for w in whole)
    for fragment in ("cache-state-depend\n", "request-\n", "server-\n"):
        assert fragment not in text


@pytest.mark.parametrize("columns", [80, 120])
def test_the_first_difference_is_marked_under_both_excerpts(columns: int) -> None:
    _, text = run(str(SEED), columns=columns)
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("first difference"))
    a, b, mark = next(
        (lines[i], lines[i + 1], lines[i + 2])
        for i in range(start, start + 4)
        if lines[i].startswith("  A  ")
    )
    assert b.startswith("  B  ") and mark.strip() == "^"
    column = mark.index("^")
    assert a[5:column] == b[5:column] and a[column] != b[column]
    assert len(a) <= columns and len(b) <= columns


def test_markdown_names_the_bundle_by_its_file_name_only(tmp_path: Path) -> None:
    private = tmp_path / "home" / "alice" / "Downloads" / "seed-mlxcel"
    shutil.copytree(SEED, private)
    _, markdown = run(str(private), "--format", "markdown")
    assert markdown.startswith("### `cache-state-dependent`: `seed-mlxcel`\n")
    assert "alice" not in markdown and str(tmp_path) not in markdown


def test_markdown_opens_what_decides_and_folds_the_details() -> None:
    _, markdown = run(str(SEED), str(TAMPERED), "--format", "markdown")
    html = MarkdownIt("commonmark").enable("table").render(markdown)
    assert html.startswith("<h3>2 bundles</h3>\n<table>")
    summary = html.split("</table>")[0]
    assert "<code>seed-mlxcel</code>" in summary and "<code>tampered-output</code>" in summary
    seed = markdown.split("### `invalid`")[0]
    opened, folded = seed.split("<details>", 1)
    assert "| condition | verdict | cold |" in opened and "First difference" in opened
    assert "counter deltas" in folded and "counter deltas" not in opened
    proofs = folded.split("<summary>per-request proofs</summary>")[1].split("</details>")[0]
    assert len([line for line in proofs.splitlines() if line.startswith("| `sdpa-det-")]) == 28
    assert "\u200b" not in markdown


def test_grammar_of_counts() -> None:
    _, text = run(str(BAD_SIGNATURE), "--key", str(KEY))
    assert "1 error," in text and "1 errors" not in text
    _, markdown = run(str(BAD_SIGNATURE), "--key", str(KEY), "--format", "markdown")
    assert "1 error," in markdown and "1 errors" not in markdown


def test_a_missing_bundle_is_one_plain_sentence(tmp_path: Path) -> None:
    code, text = run(str(tmp_path / "nope"))
    assert code == 2
    assert "could not be read, so nothing was checked" in text
    assert "0 files" not in text and "verified:" not in text


def test_a_declared_skipped_control_is_stated_with_the_verdict() -> None:
    from dataclasses import replace

    from verifier.checks.context import VerifyOptions
    from verifier.report.document import BundleOutcome, bundle_document
    from verifier.verify import verify_path

    result = verify_path(SEED, VerifyOptions())
    assert result.classification is not None
    skipped = "without the server-disabled control (attached: no cache-off server)"
    conditions = tuple(
        replace(c, reasons=(*c.reasons, skipped)) for c in result.classification.conditions
    )
    result = replace(result, classification=replace(result.classification, conditions=conditions))
    document = bundle_document(BundleOutcome(str(SEED), result))
    assert document["summary"].endswith(
        "(28 requests compared), without the server-disabled control: the greedy reply "
        "depends on the prompt-cache state."
    )
