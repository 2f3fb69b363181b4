"""Names that are ordinary words, versions that look like addresses: evidence is kept as is."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from rawfactory import GATHER, PROMPT, Host, RawFactory
from seed_sample import write_seed_raw

from verifier.errors import ExportError
from verifier.export import ExportOptions, export_bundle
from verifier.leaks import ALLOWED_PLACEHOLDER
from verifier.verify import VerifyOptions, verify_path


def _export(f: RawFactory, tmp_path: Path, **options: object) -> Path:
    out = tmp_path / "public"
    archive = tmp_path / "public.tar.gz"
    raw = f.write(tmp_path / "raw")
    summary = export_bundle(ExportOptions(raw, out, archive=archive, **options))  # type: ignore[arg-type]
    assert summary.verdict == "cache-state-dependent"
    for bundle in (out, archive):
        assert verify_path(bundle, VerifyOptions()).verified
    return out


def _named(user: str, host: str) -> RawFactory:
    return RawFactory(
        host=Host(
            user=user,
            hostname=host,
            home=f"/home/{user}",
            cwd=f"/home/{user}/work",
            binary=f"/home/{user}/bin/mlxcel-server",
            model=f"/home/{user}/models/m",
        )
    )


@pytest.mark.parametrize(
    ("user", "host"),
    [("write", "gather"), ("cache", "prompt"), ("model", "metrics"), ("prompt", "cache")],
)
def test_ordinary_word_names_leave_evidence_unchanged(tmp_path: Path, user: str, host: str) -> None:
    f = _named(user, host)
    f.run["notes"] = [f"captured by {user}@{host} in /home/{user}/work", f"see http://{host}:8080/"]
    out = _export(f, tmp_path)
    experiment = json.loads((out / "experiment.json").read_text())
    assert experiment["request_body"]["messages"][0]["content"] == PROMPT
    assert experiment["notes"] == [
        "captured by <user>@<host> in /path/to/workdir",
        "see http://<host>:8080/",
    ]
    for record in sorted((out / "records").rglob("*.json")):
        document = json.loads(record.read_text())
        assert document["request_body"]["messages"][0]["content"] == PROMPT
        assert GATHER in document["telemetry"]["after"]["metrics"]
    published = b"".join(p.read_bytes() for p in out.rglob("*") if p.is_file())
    assert f"/home/{user}".encode() not in published
    assert f"{user}@".encode() not in published


def test_the_seed_sample_keeps_versions_and_hardware_facts(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    write_seed_raw(raw)
    run = json.loads((raw / "run.json").read_text())
    run["host"]["hostname"] = "gb10.lab.example"
    run["host"]["driver_versions"]["cudnn_runtime"] = "9.1.0.70"
    (raw / "run.json").write_text(json.dumps(run))
    out = tmp_path / "public"
    export_bundle(ExportOptions(raw, out))
    experiment = json.loads((out / "experiment.json").read_text())
    versions = {lib["name"]: lib["version"] for lib in experiment["runtime_libraries"]}
    assert versions["libcublas.so.13.0.2.14"] == "13.0.2.14"
    assert experiment["hardware"]["cudnn_runtime"] == "9.1.0.70"
    assert experiment["hardware"]["accelerator"] == "NVIDIA GB10 (sm_121)"
    assert experiment["hardware"]["machine"] == "aarch64"


def test_versions_in_toggles_and_file_names_are_not_addresses(tmp_path: Path) -> None:
    f = RawFactory()
    f.server["env"]["MLXCEL_LORA_VERSION"] = "1.0.0.1"
    f.documents["model-manifest.json"]["files"].append(
        {"path": "lora-1.0.0.2.safetensors", "size": 1, "sha256": "0" * 64}
    )
    f.run["notes"] = ["built with v1.0.0.1 against cuBLAS 13.0.2.14"]
    out = _export(f, tmp_path)
    experiment = json.loads((out / "experiment.json").read_text())
    environment = experiment["conditions"][0]["servers"][0]["environment"]
    assert environment["MLXCEL_LORA_VERSION"] == "1.0.0.1"
    assert experiment["notes"] == ["built with v1.0.0.1 against cuBLAS 13.0.2.14"]
    manifest = json.loads((out / "model-manifest.json").read_text())
    assert "lora-1.0.0.2.safetensors" in [entry["path"] for entry in manifest["files"]]


def test_an_address_in_the_prompt_stops_the_export_and_can_be_allowed(tmp_path: Path) -> None:
    f = RawFactory()
    for body in [f.run["request_body"], *(e["request"]["body"] for e in f.exchanges())]:
        body["messages"][0]["content"] = "Explain what 10.20.30.40 is."
    raw = f.write(tmp_path / "raw")
    with pytest.raises(ExportError) as caught:
        export_bundle(ExportOptions(raw, tmp_path / "refused"))
    message = caught.value.message
    assert "experiment.json/request_body/messages/0/content (from the raw run.json)" in message
    assert "records/c1/001.json/request_body/messages/0/content" in message
    assert "--allow VALUE" in message and "10.20.30.40" not in message
    assert not (tmp_path / "refused").exists()

    out = tmp_path / "public"
    export_bundle(ExportOptions(raw, out, allowed=("10.20.30.40",)))
    record = json.loads((out / "records/c1/001.json").read_text())
    assert record["request_body"]["messages"][0]["content"] == "Explain what 10.20.30.40 is."
    ledger = (out / "redaction-ledger.json").read_text()
    assert "10.20.30.40" not in ledger
    entries = json.loads(ledger)["entries"]
    allowed = [e for e in entries if e["placeholder"] == ALLOWED_PLACEHOLDER]
    assert {(e["file"], e["pointer"]) for e in allowed} >= {
        ("experiment.json", "/request_body/messages/0/content"),
        ("records/c1/001.json", "/request_body/messages/0/content"),
    }
    assert all(e["category"] == "ip-address" for e in allowed)
    result = verify_path(out, VerifyOptions())
    assert result.verified
    kept = [f for f in result.findings if f.check == "leaks"]
    assert kept and all(f.severity == "info" for f in kept)


def test_a_private_metric_label_stops_the_export(tmp_path: Path) -> None:
    f = RawFactory()
    snapshot = f.exchanges()[0]["telemetry"]["after"]
    snapshot["metrics"]['mlxcel_requests_total{peer="192.168.7.7"}'] = 1.0
    with pytest.raises(
        ExportError, match=r"records/c1/001.json/telemetry/after/metrics \(an object"
    ):
        export_bundle(ExportOptions(f.write(tmp_path / "raw"), tmp_path / "public"))


def test_a_user_named_after_a_path_component_is_refused_in_evidence_only(tmp_path: Path) -> None:
    # (a folder of the user's, `/data/cache`; the system's own `/var/cache` is not one:
    # test_leaks.py::test_a_user_named_as_a_system_folder_is_not_found_in_it)
    f = _named("cache", "box")
    f.run["notes"] = ["files in /data/cache/x"]
    for body in [f.run["request_body"], *(e["request"]["body"] for e in f.exchanges())]:
        body["metadata"] = "/data/cache/x"
    raw = f.write(tmp_path / "raw")
    with pytest.raises(ExportError, match=r"request_body/metadata"):
        export_bundle(ExportOptions(raw, tmp_path / "refused"))
    out = tmp_path / "public"
    export_bundle(ExportOptions(raw, out, allowed=("cache",)))
    experiment = json.loads((out / "experiment.json").read_text())
    assert experiment["request_body"]["metadata"] == "/data/cache/x"
    assert experiment["notes"] == ["files in /data/cache/x"]


@pytest.mark.parametrize(("user", "host"), [("write", "gather"), ("cache", "prompt")])
def test_the_seed_sample_captured_by_ordinary_word_names(
    tmp_path: Path, user: str, host: str
) -> None:
    raw = tmp_path / "raw"
    write_seed_raw(raw)
    for path in [*raw.rglob("*.json"), *raw.rglob("*.log")]:
        text = path.read_text().replace("alice", user).replace("gb10-lab-07", host)
        path.write_text(text)
    out = tmp_path / "public"
    summary = export_bundle(ExportOptions(raw, out, archive=tmp_path / "public.tar.gz"))
    assert summary.verdict == "cache-state-dependent"
    assert verify_path(tmp_path / "public.tar.gz", VerifyOptions()).verified
    run = json.loads((raw / "run.json").read_text())
    experiment = json.loads((out / "experiment.json").read_text())
    assert experiment["request_body"] == run["request_body"]
    label = 'mlxcel_paged_decode_launches_total{path="gather"}'
    for record in sorted((out / "records").rglob("*.json")):
        document = json.loads(record.read_text())
        assert document["request_body"]["messages"] == run["request_body"]["messages"]
        assert label in document["telemetry"]["after"]["metrics"]
    published = b"".join(p.read_bytes() for p in out.rglob("*") if p.is_file())
    for private in (f"/home/{user}", f"{user}@", f"({host})", "192.168.", "hf_"):
        assert private.encode() not in published


def test_json_pointers_and_repositories_are_not_account_paths(tmp_path: Path) -> None:
    f = _named("usage", "box")
    f.run["model"]["repo_id"] = f.documents["model-manifest.json"]["repo_id"] = "org/usage"
    out = _export(f, tmp_path)
    experiment = json.loads((out / "experiment.json").read_text())
    assert experiment["profile_rules"]["cached_tokens_pointer"].startswith("/usage/")
    assert experiment["model"]["repo_id"] == "org/usage"


def test_an_environment_value_does_not_hide_a_private_path_inside_it(tmp_path: Path) -> None:
    f = RawFactory(host=Host(model="/data/models/m"))
    phrase = "weights under /data/models/m today"
    f.server["env"]["ZZ_NOTE"] = phrase  # an opaque value: removed from free text only
    for body in [f.run["request_body"], *(e["request"]["body"] for e in f.exchanges())]:
        body["metadata"] = phrase
    with pytest.raises(ExportError, match=r"experiment.json/request_body/metadata .*private-path"):
        export_bundle(ExportOptions(f.write(tmp_path / "raw"), tmp_path / "public"))


def test_the_servers_public_address_is_removed_wherever_it_appears(tmp_path: Path) -> None:
    # A public IPv4 without a word that says it is an address reads as a version to the
    # detectors; export knows this one from the URLs it sent requests to.
    f = RawFactory()
    url = "http://34.12.5.6:18128/v1/chat/completions"
    f.run["server"]["url"] = "http://34.12.5.6:18128"
    for exchange in f.exchanges():
        exchange["request"]["url"] = url
    f.server["argv"][f.server["argv"].index("127.0.0.1")] = "34.12.5.6"
    f.run["notes"] = ["reached from 34.12.5.6 at noon", "cuda 34.12.5.6.1, lora-34.12.5.6.bin"]
    asked = "Which TensorRT version 34.12.5.6 fixes?"  # a version, and evidence: kept
    for body in [f.run["request_body"], *(e["request"]["body"] for e in f.exchanges())]:
        body["metadata"] = asked
    f.texts["harness.log"] = "sent 28 requests to 34.12.5.6 and 34.12.5.6:18128\n"
    out = _export(f, tmp_path)
    experiment = json.loads((out / "experiment.json").read_text())
    assert experiment["notes"] == [
        "reached from <ip> at noon",
        "cuda 34.12.5.6.1, lora-34.12.5.6.bin",
    ]
    assert experiment["request_body"]["metadata"] == asked
    for path in (p for p in out.rglob("*") if p.is_file()):
        text = path.read_text()
        for kept in (asked, "cuda 34.12.5.6.1, lora-34.12.5.6.bin"):
            text = text.replace(kept, "")
        assert "34.12.5.6" not in text, path
    ledger = json.loads((out / "redaction-ledger.json").read_text())["entries"]
    assert {"experiment.json", "/notes/0", "ip-address"} <= {
        value for e in ledger for value in (e["file"], e["pointer"], e["category"])
    }

    f.run["request_body"]["metadata"] = "ask 34.12.5.6"  # evidence: export stops
    for exchange in f.exchanges():
        exchange["request"]["body"]["metadata"] = "ask 34.12.5.6"
    raw = f.write(tmp_path / "raw-evidence")
    with pytest.raises(ExportError, match="request_body/metadata"):
        export_bundle(ExportOptions(raw, tmp_path / "refused"))


def _published(out: Path, archive: Path) -> bytes:
    files = b"".join(p.read_bytes() for p in out.rglob("*") if p.is_file())
    return files + gzip.decompress(archive.read_bytes())


def test_a_distinctive_user_name_inside_a_token_or_a_url_path_is_removed(tmp_path: Path) -> None:
    """`alice-smith` inside `server-alice-smith.log` and `alice-smith.log`, and as a URL's
    path component: all name the user. The log's own placeholder, built from its file name,
    loses the name too (in experiment.json and in the ledger)."""
    f = _named("alice-smith", "gb10-lab-07")
    log = "/home/alice-smith/work/logs/server-alice-smith.log"
    f.server["log_path"] = log
    f.server["argv"] += ["--log-file", log]
    f.run["notes"] = [
        "server log kept in alice-smith.log",
        "git remote https://github.com/alice-smith/mlxcel",
        "run by Alice-Smith",
    ]
    out = _export(f, tmp_path)
    assert b"alice-smith" not in _published(out, tmp_path / "public.tar.gz").lower()
    experiment = json.loads((out / "experiment.json").read_text())
    assert experiment["notes"] == [
        "server log kept in <user>.log",
        "git remote https://github.com/<user>/mlxcel",
        "run by <user>",
    ]
    assert experiment["conditions"][0]["servers"][0]["argv"][-1] == (
        "/path/to/logs/server-<user>.log"
    )
    ledger = json.loads((out / "redaction-ledger.json").read_text())["entries"]
    assert "/path/to/logs/server-<user>.log" in {e["placeholder"] for e in ledger}


def test_plain_names_in_account_forms_are_removed(tmp_path: Path) -> None:
    """`USER=jdoe`, `LOGNAME='jdoe'`, `HOSTNAME=buildbox`, `buildbox:8080` name the account
    and the machine; the same names as plain words, or before a decimal, do not."""
    f = _named("jdoe", "buildbox")
    f.run["notes"] = [
        "USER=jdoe USERNAME=jdoe LOGNAME='jdoe'",
        'HOSTNAME=buildbox HOST="buildbox"',
        "connecting to buildbox:8080 failed",
        "jdoe wrote the buildbox notes; buildbox:0.5 is a ratio",
    ]
    out = _export(f, tmp_path)
    experiment = json.loads((out / "experiment.json").read_text())
    assert experiment["notes"] == [
        "USER=<user> USERNAME=<user> LOGNAME='<user>'",
        'HOSTNAME=<host> HOST="<host>"',
        "connecting to <host>:8080 failed",
        "jdoe wrote the buildbox notes; buildbox:0.5 is a ratio",
    ]
