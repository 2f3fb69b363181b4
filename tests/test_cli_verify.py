"""`evidence verify` through the real command line: formats, exit codes, hostile input."""

from __future__ import annotations

import gzip
import io
import json
import shutil
import tarfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from make_samples import resum_tree
from typer.testing import CliRunner

from verifier import layout, schemas
from verifier.cli import app

REPO = Path(__file__).resolve().parent.parent
SEED = REPO / "sample_bundles" / "seed-mlxcel"
KEY = REPO / "sample_bundles" / "keys" / "evidence-signing-key.pub.pem"
NEGATIVE = REPO / "sample_bundles" / "negative"


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "160"})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def test_text_report_shows_verdict_table_and_first_difference() -> None:
    code, out, _ = run("verify", str(SEED))
    assert code == 0
    assert "cache-state-dependent" in out
    assert "sdpa-det-0" in out and "sdpa-det-1" in out
    assert "18" in out and "10" in out
    assert "zero-based code point 397" in out
    assert "no variation within arms in 28 requests" in out
    assert "signature      not checked: the bundle is signed, but no --key was given" in out


def test_json_report_validates_against_its_schema() -> None:
    code, out, _ = run("verify", str(SEED), "--key", str(KEY), "--format", "json")
    report = json.loads(out)
    assert code == 0 and report["exit_code"] == 0
    assert schemas.validate(report, "report") == []
    bundle = report["bundles"][0]
    assert bundle["verdict"] == "cache-state-dependent" and bundle["verified"]
    assert [c["count"] for c in bundle["classification"]["classes"]] == [18, 10]


def test_markdown_is_compact_and_complete() -> None:
    code, out, _ = run("verify", str(SEED), "--format", "markdown")
    assert code == 0
    assert out.startswith("### `cache-state-dependent`")
    header = "| condition | verdict | cold | warm | request-disabled | server-disabled | left out |"
    assert header in out
    assert "First difference in `content` at zero-based code point 397" in out
    # What a maintainer sees without opening anything: the verdict, its sentence, the table.
    assert len(out.split("<details>")[0].splitlines()) < 45


def test_expect_gates_ci() -> None:
    assert run("verify", str(SEED), "--expect", "cache-state-dependent")[0] == 0
    assert run("verify", str(SEED), "--expect", "cache-state-independent")[0] == 3
    assert run("verify", str(SEED), "--expect", "no-such-verdict")[0] == 2


def test_several_bundles_one_row_each_and_the_worst_exit_code(tmp_path: Path) -> None:
    missing = tmp_path / "missing.tar.gz"
    code, out, _ = run(
        "verify", str(SEED), str(NEGATIVE / "tampered-output"), str(missing), "-f", "json"
    )
    report = json.loads(out)
    assert [b["exit_code"] for b in report["bundles"]] == [0, 1, 2]
    assert code == report["exit_code"] == 2
    code, out, _ = run("verify", str(SEED), str(NEGATIVE / "tampered-output"))
    assert code == 1 and "summary" in out


@pytest.mark.parametrize("name", ["link-member.tar.gz", "traversal-member.tar.gz"])
def test_hostile_members_are_refused_without_writing(name: str, tmp_path: Path) -> None:
    before = set(Path.cwd().iterdir())
    code, out, _ = run("verify", str(NEGATIVE / name))
    assert code == 1
    assert "refused" in out or "'..' component" in out
    assert set(Path.cwd().iterdir()) == before
    assert not (REPO / "escaped.json").exists() and not (REPO.parent / "escaped.json").exists()


@pytest.mark.parametrize(
    "content",
    [b"", b"not a bundle", b"\x1f\x8b\x08\x00garbage", gzip.compress(b"not a tar" * 100)],
)
def test_unreadable_input_is_a_clear_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "bundle.tar.gz"
    path.write_bytes(content)
    code, _, err = run("verify", str(path))
    assert code == 2
    assert "Traceback" not in err and "error" in err


def test_limits_are_flags(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for path in sorted(SEED.rglob("*")):
            tar.add(path, arcname=path.relative_to(SEED).as_posix(), recursive=False)
    archive = tmp_path / "seed.tar.gz"
    archive.write_bytes(buffer.getvalue())
    code, _, err = run("verify", str(archive), "--max-members", "3")
    assert code == 1 and "--max-members" in err  # refused as unsafe: not verified
    code, out, _ = run("verify", str(archive))
    assert code == 0, out


def _copy(tmp_path: Path) -> Path:
    target = tmp_path / "bundle"
    shutil.copytree(SEED, target)
    return target


RECORDS = sorted(p.relative_to(SEED).as_posix() for p in (SEED / "records").rglob("*.json"))
HASHED = ["content"]


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    record=st.sampled_from(RECORDS),
    position=st.floats(min_value=0, max_value=1, exclude_max=True),
    replacement=st.characters(codec="utf-8", exclude_categories=("Cs",)),
    resum=st.booleans(),
)
def test_any_single_character_change_of_a_hashed_field_is_caught(
    tmp_path_factory: pytest.TempPathFactory,
    record: str,
    position: float,
    replacement: str,
    resum: bool,
) -> None:
    bundle = _copy(tmp_path_factory.mktemp("t"))
    path = bundle / record
    document = json.loads(path.read_text())
    message = document["response"]["choices"][0]["message"]
    content = message["content"]
    index = int(position * len(content))
    if content[index] == replacement:
        replacement = "#" if replacement != "#" else "%"
    message["content"] = content[:index] + replacement + content[index + 1 :]
    path.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    if resum:
        resum_tree(bundle)
    code, out, _ = run("verify", str(bundle), "-f", "json")
    report = json.loads(out)
    assert code == 1
    checks = {f["check"] for f in report["bundles"][0]["findings"] if f["severity"] == "error"}
    assert "output-hash" in checks
    if not resum:
        assert "checksums" in checks


def test_bundle_text_cannot_reach_the_terminal_or_the_issue_as_markup(tmp_path: Path) -> None:
    bundle = _copy(tmp_path)
    experiment = json.loads((bundle / layout.EXPERIMENT).read_text())
    experiment["hardware"]["cpu"] = "\u001b]0;pwned\u0007\u001b[2J <img src=x> @octocat"
    (bundle / layout.EXPERIMENT).write_text(json.dumps(experiment))
    code, out, _ = run("verify", str(bundle))
    assert code == 1  # the checksums no longer match, but the report is still printed
    assert "\x1b" not in out and "\x07" not in out and "\\u001b" in out
    _, markdown, _ = run("verify", str(bundle), "-f", "markdown")
    assert "`` ]0;pwned" not in markdown and "\\u001b]0;pwned" in markdown
    _, raw_json, _ = run("verify", str(bundle), "-f", "json")
    assert json.loads(raw_json)["bundles"][0]["experiment"]["hardware"]["cpu"].startswith("\x1b")
