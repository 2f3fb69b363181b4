"""`evidence diff`: classes matched by output hash, changes in words, exit codes for CI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from make_samples import _dump, _resum, read_tree
from typer.testing import CliRunner

from verifier import layout, schemas
from verifier.canonical import output_hash
from verifier.cli import app

REPO = Path(__file__).resolve().parent.parent
SEED = REPO / "sample_bundles" / "seed-mlxcel"
NEGATIVE = REPO / "sample_bundles" / "negative"


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "160"})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout


def fixed_build(tmp_path: Path) -> Path:
    """The seed bundle as a later build would give it: warm replies equal the cold ones."""
    files = read_tree(SEED)
    cold_response = json.loads(files["records/sdpa-det-0/001.json"])["response"]
    cold, cold_tokens = (
        cold_response["choices"][0]["message"],
        cold_response["usage"]["completion_tokens"],
    )
    for name in [p for p in files if p.startswith(layout.RECORDS_DIR + "/")]:
        document = json.loads(files[name])
        if document["claimed_arm"] == "warm":
            document["response"]["choices"][0]["message"]["content"] = cold["content"]
            document["output_hash"] = output_hash(document["response"])
            for usage in (document["response"]["usage"], document["usage"]):  # its length too
                usage["total_tokens"] += cold_tokens - usage["completion_tokens"]
                usage["completion_tokens"] = cold_tokens
            files[name] = _dump(document)
    experiment = json.loads(files[layout.EXPERIMENT])
    experiment["server"]["build_commit"] = "f" * 40
    files[layout.EXPERIMENT] = _dump(experiment)
    root = tmp_path / "fixed"
    for name, data in _resum(files).items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root


def test_a_bundle_with_itself_is_the_same(tmp_path: Path) -> None:
    code, out = run("diff", str(SEED), str(SEED), "--format", "json", "--expect-same")
    document = json.loads(out)
    assert code == 0 and document["outcome"] == "same"
    assert not schemas.validate(document, "diff")
    assert document["differences"] == [] and document["same_request"]
    assert all(c["changes"] == ["the split remains, cold unchanged, warm unchanged"]
               for c in document["conditions"])  # fmt: skip
    code, _ = run("diff", str(SEED), str(SEED), "--expect-changed")
    assert code == 3


def test_a_fixed_build_reads_as_the_split_gone(tmp_path: Path) -> None:
    fixed = fixed_build(tmp_path)
    code, out = run("diff", str(SEED), str(fixed), "--format", "json", "--expect-changed")
    document = json.loads(out)
    assert code == 0 and document["outcome"] == "changed"
    (first, second) = document["conditions"][0]["bundles"]
    assert first["arms"]["warm"] == ["B"] and second["arms"]["warm"] == ["A"]
    assert document["conditions"][0]["changes"] == [
        "the split is gone, cold unchanged, warm A (was B)"
    ]
    assert [d["what"] for d in document["differences"]] == ["server build"]
    assert document["first_differences"][0]["classes"] == ["A", "B"]
    code, text = run("diff", str(SEED), str(fixed))
    assert "the split is gone" in text and "server build" in text
    code, markdown = run("diff", str(SEED), str(fixed), "--format", "markdown")
    assert code == 0 and "| 2 | cache-state-independent |" in markdown


def test_an_invalid_bundle_is_reported_not_compared() -> None:
    code, out = run("diff", str(SEED), str(NEGATIVE / "tampered-output"), "--format", "json")
    document = json.loads(out)
    assert code == 1
    assert [b["verified"] for b in document["bundles"]] == [True, False]
    assert all(len(c["bundles"]) == 1 for c in document["conditions"])
    assert any("did not verify" in n for n in document["notes"])


def test_usage_errors(tmp_path: Path) -> None:
    assert run("diff", str(SEED))[0] == 2
    assert run("diff", str(SEED), str(SEED), "--expect-same", "--expect-changed")[0] == 2
    assert run("diff", str(SEED), str(tmp_path / "missing"))[0] == 2


def test_servers_that_ran_with_other_settings_are_a_difference(tmp_path: Path) -> None:
    """Another device and two more options on every server, beyond what the conditions vary:
    diff said the bundles agreed on everything (helper-49)."""
    files = read_tree(SEED)
    experiment = json.loads(files[layout.EXPERIMENT])
    for condition in experiment["conditions"]:
        for server in condition["servers"]:
            server["environment"]["MLXCEL_DEVICE"] = "cpu"
            server["argv"] += ["--ctx-size", "2048"]
    files[layout.EXPERIMENT] = _dump(experiment)
    other = tmp_path / "other"
    for name, data in _resum(files).items():
        (other / name).parent.mkdir(parents=True, exist_ok=True)
        (other / name).write_bytes(data)
    code, out = run("diff", str(SEED), str(other), "--format", "json")
    assert code == 0
    document = json.loads(out)
    assert not schemas.validate(document, "diff")
    (difference,) = document["differences"]
    assert difference["what"] == "server command lines and environment"
    first, second = difference["values"]
    assert first[0]["environment"]["MLXCEL_DEVICE"] == "gpu"
    assert second[0]["environment"]["MLXCEL_DEVICE"] == "cpu"
    assert second[0]["argv"][-2:] == ["--ctx-size", "2048"] and "<port>" in second[0]["argv"]


def every_reply_its_own(tmp_path: Path) -> Path:
    """The seed bundle with each record's reply made its own: as many output classes as
    records (28), the verdict nondeterministic; the bundle still verifies."""
    from bench import _vary_reply

    files = read_tree(SEED)
    records = sorted(p for p in files if p.startswith(layout.RECORDS_DIR + "/"))
    for n, name in enumerate(records):
        document = json.loads(files[name])
        _vary_reply(document, 1_000_000 + n)
        files[name] = _dump(document)
    root = tmp_path / "distinct"
    for name, data in _resum(files).items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root


def test_first_differences_of_many_classes_are_bounded(tmp_path: Path) -> None:
    """A first difference for every pair of classes: 2,240 classes (one a reply) took 57 s
    and 3.85 GB, then ran out of memory (audit_i r6). At most MOST_FIRST_DIFFERENCES are
    listed, and the output says how many pairs were not compared."""
    from verifier.diff import MOST_FIRST_DIFFERENCES

    distinct = every_reply_its_own(tmp_path)
    code, out = run("diff", str(distinct), str(SEED), "--format", "json")
    document = json.loads(out)
    assert code == 0 and not schemas.validate(document, "diff")
    classes = len(document["classes"])
    assert classes >= 28
    assert len(document["first_differences"]) == MOST_FIRST_DIFFERENCES
    assert document["first_differences"][0]["classes"] == ["A", "B"]
    left_out = classes * (classes - 1) // 2 - MOST_FIRST_DIFFERENCES
    (note,) = [n for n in document["notes"] if "not compared for their first difference" in n]
    assert note.startswith(f"{left_out} pair(s) of output classes")
    code, text = run("diff", str(distinct), str(SEED))
    assert text.count("\nfirst difference ") == MOST_FIRST_DIFFERENCES
    assert f"note: {left_out} pair(s)" in text
    code, markdown = run("diff", str(distinct), str(SEED), "--format", "markdown")
    assert markdown.count("\nfirst difference ") == MOST_FIRST_DIFFERENCES
    assert f"> {left_out} pair(s)" in markdown


def test_pairs_compared_for_first_differences_are_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pairs that differ in no text (tool calls only) are compared but not listed: the
    pairs compared are bounded too, not only those listed."""
    from verifier import diff

    monkeypatch.setattr(diff, "MOST_PAIRS_COMPARED", 5)
    distinct = every_reply_its_own(tmp_path)
    code, out = run("diff", str(distinct), str(SEED), "--format", "json")
    document = json.loads(out)
    classes = len(document["classes"])
    assert code == 0 and len(document["first_differences"]) == 5
    assert any(
        n.startswith(f"{classes * (classes - 1) // 2 - 5} pair(s)") for n in document["notes"]
    )


def test_a_few_classes_list_every_pair() -> None:
    code, out = run("diff", str(SEED), str(SEED), "--format", "json")
    document = json.loads(out)
    classes = len(document["classes"])
    assert code == 0 and classes >= 2
    assert len(document["first_differences"]) == classes * (classes - 1) // 2
    assert not any("first difference" in n for n in document["notes"])
