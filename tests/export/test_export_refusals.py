"""What export refuses: private data in model output, existing targets, broken raw input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rawfactory import RawFactory
from seed_sample import write_seed_raw

from verifier.errors import ExportError, UsageError
from verifier.export import ExportOptions, export_bundle


def _message(f: RawFactory, index: int) -> dict[str, object]:
    message: dict[str, object] = f.exchanges()[index]["response"]["body"]["choices"][0]["message"]
    return message


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("content", "Ask ~alice about it."),
        ("content", "Ask alice@lab-host-07 about it."),
        ("content", "Saved to /home/alice/models/out.txt"),
        ("reasoning_content", "The token is hf_abcdefghijklmnopqrstuvwx12."),
        ("content", "Mail me at bob@corp-mail.net"),
    ],
)
def test_private_value_in_model_output_is_refused_with_file_and_pointer(
    tmp_path: Path, field: str, value: str
) -> None:
    f = RawFactory()
    _message(f, 1)[field] = value
    raw = f.write(tmp_path / "raw")
    with pytest.raises(ExportError) as caught:
        export_bundle(ExportOptions(raw, tmp_path / "public"))
    assert f"records/c1/002.json/response/choices/0/message/{field}" in caught.value.message
    assert "alice" not in caught.value.message and "hf_" not in caught.value.message
    assert not (tmp_path / "public").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["raw"]


def test_private_value_in_a_tool_call_is_refused(tmp_path: Path) -> None:
    f = RawFactory()
    _message(f, 0)["tool_calls"] = [
        {
            "id": "c1",
            "type": "function",
            "function": {"name": "f", "arguments": '{"h": "lab-host-07"}'},
        }
    ]
    with pytest.raises(ExportError, match=r"message/tool_calls/0/function/arguments"):
        export_bundle(ExportOptions(f.write(tmp_path / "raw"), tmp_path / "public"))


def test_existing_out_is_refused_and_left_untouched(factory_raw: Path, tmp_path: Path) -> None:
    out = tmp_path / "public"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(UsageError, match="already exists"):
        export_bundle(ExportOptions(factory_raw, out))
    assert [p.name for p in out.iterdir()] == ["keep.txt"]
    assert (out / "keep.txt").read_text() == "mine"


def test_existing_archive_is_refused_before_any_work(factory_raw: Path, tmp_path: Path) -> None:
    archive = tmp_path / "public.tar.gz"
    archive.write_bytes(b"old")
    with pytest.raises(UsageError, match="already exists"):
        export_bundle(ExportOptions(factory_raw, tmp_path / "public", archive=archive))
    assert archive.read_bytes() == b"old"
    assert not (tmp_path / "public").exists()


def test_non_hashable_success_response_is_refused(tmp_path: Path) -> None:
    f = RawFactory()
    f.exchanges()[1]["response"]["body"]["choices"] = []
    with pytest.raises(ExportError) as caught:
        export_bundle(ExportOptions(f.write(tmp_path / "raw"), tmp_path / "public"))
    assert "conditions/c1/exchanges/002.json/response/body" in caught.value.message
    assert "records/c1/002.json/response" in caught.value.message


def test_schema_violation_in_raw_names_file_and_pointer(tmp_path: Path) -> None:
    f = RawFactory()
    f.server["instance"] = "one"
    with pytest.raises(ExportError, match=r"conditions/c1/servers/1.json/instance"):
        export_bundle(ExportOptions(f.write(tmp_path / "raw"), tmp_path / "public"))


def test_duplicate_keys_in_raw_are_refused(factory_raw: Path, tmp_path: Path) -> None:
    run = factory_raw / "run.json"
    run.write_text(run.read_text().replace('"title": ', '"title": "x", "title": ', 1))
    with pytest.raises(ExportError, match=r"run.json: duplicate key 'title'"):
        export_bundle(ExportOptions(factory_raw, tmp_path / "public"))


@pytest.mark.parametrize("folder", ["exchanges", "servers"])
def test_two_files_of_one_number_are_refused(
    factory_raw: Path, tmp_path: Path, folder: str
) -> None:
    """1.json beside 001.json: one would replace the other, and a record (or a server)
    would be dropped without a word while the summary still counted it (audit 11)."""
    [first] = sorted((factory_raw / "conditions/c1" / folder).glob("*.json"))[:1]
    twin = first.with_name(str(int(first.stem)).zfill(len(first.stem) + 1) + ".json")
    twin.write_bytes(first.read_bytes())
    out = tmp_path / "public"
    refused = rf"{folder}: {twin.name} and {first.name} are both number"
    with pytest.raises(ExportError, match=refused):
        export_bundle(ExportOptions(factory_raw, out))
    assert not out.exists()


def test_unknown_schema_major_is_refused(factory_raw: Path, tmp_path: Path) -> None:
    manifest = factory_raw / "model-manifest.json"
    document = json.loads(manifest.read_text())
    document["schema_version"] = "2.0"
    manifest.write_text(json.dumps(document))
    with pytest.raises(ExportError, match="major version 2"):
        export_bundle(ExportOptions(factory_raw, tmp_path / "public"))


def test_condition_id_with_a_private_value_is_refused(tmp_path: Path) -> None:
    f = RawFactory()
    raw = f.write(tmp_path / "raw")
    # rename the condition on disk and in every document to an address: it names files
    import shutil

    shutil.move(raw / "conditions/c1", raw / "conditions/192.168.1.5")
    for path in raw.rglob("*.json"):
        path.write_text(path.read_text().replace('"c1"', '"192.168.1.5"'))
    with pytest.raises(ExportError, match=r"experiment.json/conditions/0/id \(from the raw run"):
        export_bundle(ExportOptions(raw, tmp_path / "public"))


def test_an_incomplete_capture_is_not_exported(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    write_seed_raw(raw)
    run = json.loads((raw / "run.json").read_text())
    run["outcome"] = "interrupted"
    (raw / "run.json").write_text(json.dumps(run))
    out = tmp_path / "public"
    with pytest.raises(ExportError, match="did not complete"):
        export_bundle(ExportOptions(raw, out))
    assert not out.exists()


def test_a_refused_value_of_a_server_names_the_servers_raw_file(tmp_path: Path) -> None:
    """A toggle of server 3 comes from conditions/<id>/servers/3.json, not run.json."""
    raw = tmp_path / "seed-raw"
    write_seed_raw(raw)
    server = raw / "conditions" / "sdpa-det-1" / "servers" / "3.json"
    document = json.loads(server.read_text())
    document["env"]["MLXCEL_BIND"] = "192.168.40.7"
    server.write_text(json.dumps(document))
    with pytest.raises(ExportError) as caught:
        export_bundle(ExportOptions(raw, tmp_path / "public"))
    lines = [line for line in caught.value.message.splitlines() if "MLXCEL_BIND" in line]
    assert len(lines) == 1 and "(from the raw conditions/sdpa-det-1/servers/3.json)" in lines[0]
    assert "192.168" not in caught.value.message
