"""What export removes from the seed-shaped sample and from the factory's raw captures."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from rawfactory import Host, RawFactory

from verifier.errors import ExportError
from verifier.export import ExportOptions, export_bundle


def _exported_notes(f: RawFactory, tmp_path: Path) -> list[str]:
    """The notes of the public experiment that exporting `f` writes."""
    out = tmp_path / "public"
    export_bundle(ExportOptions(f.write(tmp_path / "raw"), out))
    notes: list[str] = json.loads((out / "experiment.json").read_text())["notes"]
    return notes


def published_bytes(out: Path, archive: Path | None) -> list[tuple[str, bytes]]:
    found = [(str(p.relative_to(out)), p.read_bytes()) for p in out.rglob("*") if p.is_file()]
    if archive is not None:
        found.append(("archive", gzip.decompress(archive.read_bytes())))
    return found


def test_seed_sample_export_removes_every_private_value(seed_raw: Path, tmp_path: Path) -> None:
    out, archive = tmp_path / "public", tmp_path / "public.tar.gz"
    summary = export_bundle(ExportOptions(seed_raw, out, archive=archive))
    assert summary.verdict == "cache-state-dependent"
    private = ["alice", "gb10-lab-07", "/home/", "/tmp/", "hf_", "192.168.", "41017"]
    for name, data in published_bytes(out, archive):
        for value in private:
            assert value.encode() not in data, (name, value)
    experiment = json.loads((out / "experiment.json").read_text())
    server = experiment["conditions"][0]["servers"][0]
    assert server["argv"][:3] == ["/path/to/mlxcel-server", "-m", "/path/to/model"]
    assert set(server["environment"]) == {
        "MLXCEL_APC_TRACE",
        "MLXCEL_CACHE_DIR",
        "MLXCEL_DEVICE",
        "MLXCEL_SDPA_DETERMINISTIC",
    }
    assert server["environment"]["MLXCEL_CACHE_DIR"] == "/path/to/mlxcel-cache-dir"
    assert all(set(lib) == {"name", "version", "sha256"} for lib in experiment["runtime_libraries"])
    assert "/" not in "".join(lib["name"] for lib in experiment["runtime_libraries"])
    assert "user" not in experiment["hardware"] and "hostname" not in experiment["hardware"]
    ledger = json.loads((out / "redaction-ledger.json").read_text())
    categories = {entry["category"] for entry in ledger["entries"]}
    assert {"private-path", "environment-value", "process-map"} <= categories
    assert summary.redactions["process-map"] == 42


def test_ledger_never_holds_a_removed_value(seed_raw: Path, tmp_path: Path) -> None:
    export_bundle(ExportOptions(seed_raw, tmp_path / "public"))
    ledger = (tmp_path / "public" / "redaction-ledger.json").read_text()
    for value in ("alice", "gb10", "mlxcel-isolated-cache", "hf_", "192.168"):
        assert value not in ledger


def test_short_user_name_is_replaced_in_account_contexts_only(tmp_path: Path) -> None:
    f = RawFactory(host=Host(user="al", home="/home/al", cwd="/srv/work", binary="/opt/bin/srv"))
    f.run["notes"] = ["al dente, see /srv/shared/al/file and al@remote", "~al/x"]
    notes = _exported_notes(f, tmp_path)
    assert notes == [
        "al dente, see /srv/shared/<user>/file and <user>@<host>",
        "/path/to/home",
    ]


def test_generic_account_names_are_not_redacted(tmp_path: Path) -> None:
    f = RawFactory(host=Host(user="root", home="/root", cwd="/root/w", binary="/root/srv"))
    f.run["notes"] = ["the root of the problem"]
    notes = _exported_notes(f, tmp_path)
    assert notes == ["the root of the problem"]


def test_secret_flag_values_are_removed_from_argv(tmp_path: Path) -> None:
    f = RawFactory()
    f.server["argv"] += ["--api-key", "abc", "--token=xyz12"]
    out = tmp_path / "public"
    export_bundle(ExportOptions(f.write(tmp_path / "raw"), out))
    experiment = json.loads((out / "experiment.json").read_text())
    argv = experiment["conditions"][0]["servers"][0]["argv"]
    assert argv[-3:] == ["--api-key", "<token>", "--token=<token>"]


def test_keep_env_publishes_a_named_variable(tmp_path: Path) -> None:
    f = RawFactory()
    f.server["env"]["CUDA_VISIBLE_DEVICES"] = "0"
    out = tmp_path / "public"
    export_bundle(ExportOptions(f.write(tmp_path / "raw"), out, keep_env=("CUDA_*",)))
    experiment = json.loads((out / "experiment.json").read_text())
    env = experiment["conditions"][0]["servers"][0]["environment"]
    assert env == {
        "CUDA_VISIBLE_DEVICES": "0",
        "MLXCEL_DEVICE": "cpu",
        "MLXCEL_SDPA_DETERMINISTIC": "1",
    }


def test_private_path_option_takes_paths_and_plain_strings(tmp_path: Path) -> None:
    f = RawFactory()
    f.run["notes"] = [
        "data in /mnt/team-share/run7 for ProjectX (and projectx, ProjectXs)",
        "at falconbox for myfalcon (Falcon's)",
    ]
    out = tmp_path / "public"
    private = ("/mnt/team-share", "ProjectX", "falcon")
    summary = export_bundle(ExportOptions(f.write(tmp_path / "raw"), out, private_paths=private))
    notes = json.loads((out / "experiment.json").read_text())["notes"]
    # A named string goes everywhere: in any case, inside longer words too.
    assert notes == [
        "data in /path/to/private-1/run7 for <private-2> (and <private-2>, <private-2>s)",
        "at <private-3>box for my<private-3> (<private-3>'s)",
    ]
    assert summary.redactions["private-path"] >= 2


def _edit(path: Path, change: Any) -> None:
    document = json.loads(path.read_text())
    change(document)
    path.write_text(json.dumps(document, indent=1))


def test_a_path_after_a_json_escape_is_removed(seed_raw: Path, tmp_path: Path) -> None:
    """In free text that holds JSON or a repr (a server's error body, a note), `\\n` or `\\t`
    comes before a path: its `n` or `t` is no letter of the text before the path."""
    note = 'server said: {"error":"cannot open\\n/home/alice/work/out.bin"}'
    _edit(seed_raw / "run.json", lambda run: run["notes"].append(note))
    error = '{"error":{"message":"load failed:\\n/home/bob/finetunes/q3.safetensors\\t(errno 2)"}}'

    def failed(exchange: dict[str, Any]) -> None:
        exchange["response"].update(status=500, body=None, text=error)

    _edit(seed_raw / "conditions" / "sdpa-det-0" / "exchanges" / "014.json", failed)
    out = tmp_path / "public"
    export_bundle(ExportOptions(seed_raw, out))
    for name, data in published_bytes(out, None):
        for value in (b"/home/alice", b"/home/bob", b"finetunes"):
            assert value not in data, (name, value)
    published = json.loads((out / "experiment.json").read_text())["notes"][-1]
    assert published.startswith('server said: {"error":"cannot open\\n/') and "out.bin" in published


def test_an_error_text_is_cut_only_once_redacted(seed_raw: Path, tmp_path: Path) -> None:
    """A record's error text is published in part; were it cut first, the value it was cut
    in would no longer match its detector, and its first part would be published."""
    token = "hf_QmVyeVNlY3JldFRva2VuRm9yVGVzdHMx"  # the capture's own token (run.json)
    for where, value in ((0, token), (1, "gb10-lab-07"), (2, "192.168.40.23")):
        text = "x" * (512 - len("HTTP 401: ") - 10 + where) + " " + value + " (rejected)"

        def failed(exchange: dict[str, Any], text: str = text) -> None:
            exchange["response"].update(status=401, body=None, text=text)

        _edit(seed_raw / "conditions" / "sdpa-det-0" / "exchanges" / f"01{2 + where}.json", failed)
    out = tmp_path / "public"
    export_bundle(ExportOptions(seed_raw, out))
    for name, data in published_bytes(out, None):
        for part in (token[:12], "gb10-lab", "192.168.40"):
            assert part.encode() not in data, (name, part)
    record = json.loads((out / "records" / "sdpa-det-0" / "012.json").read_text())
    assert len(record["error"]) == 512 and record["error"].startswith("HTTP 401: xxx")


def test_the_hosts_name_is_removed_where_it_is_part_of_a_longer_name(
    seed_raw: Path, tmp_path: Path
) -> None:
    """`gb10-lab-07` (the capture's host) in `gb10-lab-07.acme-corp.com` (its full name, the
    domain with it), `gb10-lab-07.lan`, `det0.gb10-lab-07`, `gb10-lab-07-det0`."""
    note = "ssh to gb10-lab-07.acme-corp.com failed; retried gb10-lab-07.lan, det0.gb10-lab-07"
    _edit(seed_raw / "run.json", lambda run: run["notes"].append(note + " and gb10-lab-07-det0"))
    for server in sorted((seed_raw / "conditions").glob("*/servers/*.json")):
        _edit(server, lambda s: s["argv"].extend(["--api-host", "gb10-lab-07.acme-corp.com"]))
    out = tmp_path / "public"
    export_bundle(ExportOptions(seed_raw, out))
    for name, data in published_bytes(out, None):
        for value in (b"gb10-lab-07", b"acme-corp", b"GB10-LAB-07"):
            assert value not in data, (name, value)
    experiment = json.loads((out / "experiment.json").read_text())
    assert experiment["conditions"][0]["servers"][0]["argv"][-1] == "<host>"
    assert experiment["notes"][-1].endswith("det0.<host> and <host>-det0")


def test_the_hosts_name_as_a_label_of_a_condition_label_is_removed(
    seed_raw: Path, tmp_path: Path
) -> None:
    """A condition's label is free text: `det0.gb10-lab-07` in it loses the host's name."""

    def rename(run: dict[str, Any]) -> None:
        run["conditions"][0]["label"] = "on det0.gb10-lab-07"

    _edit(seed_raw / "run.json", rename)
    out = tmp_path / "public"
    export_bundle(ExportOptions(seed_raw, out))
    label = json.loads((out / "experiment.json").read_text())["conditions"][0]["label"]
    assert label == "on det0.<host>"


def test_an_environment_value_that_is_evidence_is_not_removed(
    seed_raw: Path, tmp_path: Path
) -> None:
    """An environment value is private, but not one that evidence publishes anyway (the
    served model's alias, a condition's server argument): replaced in the free text around
    it, the bundle would contradict itself, or not verify at all."""
    alias = json.loads((seed_raw / "run.json").read_text())["server"]["alias"]

    def served(server: dict[str, Any]) -> None:
        server["env"]["SERVED_NAME"] = alias
        server["env"]["OTHER_NAME"] = "a-private-environment-value"

    for server in sorted((seed_raw / "conditions").glob("*/servers/*.json")):
        _edit(server, served)
    out = tmp_path / "public"
    export_bundle(ExportOptions(seed_raw, out))
    record = json.loads(next((out / "records").rglob("*.json")).read_text())
    assert record["response"]["model"] == record["request_body"]["model"] == alias
    argv = json.loads((out / "experiment.json").read_text())["conditions"][0]["servers"][0]["argv"]
    assert alias in argv
    for name, data in published_bytes(out, None):
        assert b"a-private-environment-value" not in data, name


def test_credentials_in_a_url_are_removed_whatever_overlaps_them(
    seed_raw: Path, tmp_path: Path
) -> None:
    """The password of `https://user:PASSWORD@host`, and the names around it: where one
    replacement overlapped another hit, the text is scanned and redacted again (the
    capture's own user and host in one URL once stopped the export as a bug)."""
    urls = [
        "https://bob:S3cretPassw0rd@example.com/v1",
        "http://bob:S3cretPassw0rd@10.0.0.5:9000/",
        "https://alice:Hunter2Hunter2@gitlab.acme.io/x.git",
        "https://bob:pw@gb10-lab-07/",
    ]
    _edit(seed_raw / "run.json", lambda run: run["notes"].extend(urls))
    for server in sorted((seed_raw / "conditions").glob("*/servers/*.json")):
        _edit(server, lambda s: s["argv"].extend(["--mirror", urls[1]]))
    out = tmp_path / "public"
    export_bundle(ExportOptions(seed_raw, out))
    for name, data in published_bytes(out, None):
        for value in (b"S3cretPassw0rd", b"Hunter2Hunter2", b"gb10-lab-07", b"10.0.0.5"):
            assert value not in data, (name, value)
    notes = json.loads((out / "experiment.json").read_text())["notes"]
    assert notes[-4] == "https://<user>:<token>@example.com/v1"  # (the user: a name too)


def test_a_path_given_to_a_short_option_or_as_a_file_url_is_removed(
    seed_raw: Path, tmp_path: Path
) -> None:
    """`-l/data/logs/x.log` (a short option and its value in one argument), `file:///x`:
    private paths as much as `--log-file=/x`; a known one (the model) after `-m` too."""
    run = json.loads((seed_raw / "run.json").read_text())
    model = run["model"]["path"]
    extra = ["-l/data/acme/logs/run.log", "file:///data/acme/templates/t.jinja", f"-m{model}"]
    for server in sorted((seed_raw / "conditions").glob("*/servers/*.json")):
        _edit(server, lambda s: s["argv"].extend(extra))
    out = tmp_path / "public"
    export_bundle(ExportOptions(seed_raw, out))
    for name, data in published_bytes(out, None):
        for value in (b"/data/acme", model.encode()):
            assert value not in data, (name, value)
    argv = json.loads((out / "experiment.json").read_text())["conditions"][0]["servers"][0]["argv"]
    assert argv[-3].startswith("-l/path/to/") and argv[-2].startswith("file:///path/to/")
    assert argv[-1] == "-m/path/to/model"


def test_an_environment_value_that_spells_a_flag_is_not_removed_from_argv(
    tmp_path: Path,
) -> None:
    """A wrapper's `SERVER_EXTRA_ARGS=--no-prompt-cache`: the value is a flag of the command
    line, public as it is; removed as an opaque value, it took the cache-off flag out of the
    published argv and the export failed its own verification. Other values still go."""
    f = RawFactory()
    f.server["env"]["SERVER_EXTRA_ARGS"] = "--no-prompt-cache"
    f.server["env"]["OTHER_NAME"] = "a-private-environment-value"
    f.run["notes"] = ["started with --no-prompt-cache and a-private-environment-value"]
    out = tmp_path / "public"
    summary = export_bundle(ExportOptions(f.write(tmp_path / "raw"), out))
    assert summary.verdict == "cache-state-dependent"
    experiment = json.loads((out / "experiment.json").read_text())
    servers = experiment["conditions"][0]["servers"]
    off = [s for s in servers if s["cache_disabled"]]
    assert off and all(s["argv"][-1] == "--no-prompt-cache" for s in off)
    assert experiment["notes"] == ["started with --no-prompt-cache and <env:OTHER_NAME>"]
    for name, data in published_bytes(out, None):
        assert b"a-private-environment-value" not in data, name


def test_a_secret_flags_value_that_looks_like_a_flag_is_still_removed(tmp_path: Path) -> None:
    f = RawFactory()
    f.server["argv"] += ["--api-key", "-Xk9secretvalue"]
    f.server["env"]["EXTRA"] = "-Xk9secretvalue"
    f.run["notes"] = ["key -Xk9secretvalue"]
    out = tmp_path / "public"
    export_bundle(ExportOptions(f.write(tmp_path / "raw"), out))
    for name, data in published_bytes(out, None):
        assert b"Xk9secretvalue" not in data, name


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_a_known_private_value_in_base64_is_removed_from_free_text(tmp_path: Path) -> None:
    """The capture's own model path and HF token, base64-encoded (whole, inside a longer
    string, URL-safe): each encoding goes whole, with the known value's placeholder. A
    digest and base64 that holds no known value stay."""
    f = RawFactory()
    token = "hf_QmVyeVNlY3JldFRva2VuRm9yVGVzdHMx"
    f.server["env"]["HF_TOKEN"] = token
    digest = hashlib.sha256(b"weights").hexdigest()
    unrelated = _b64("an ordinary string of bytes, nobody's")
    url_safe = base64.urlsafe_b64encode(f"x{f.host.model}/?".encode()).decode()
    f.run["notes"] = [
        f"model loaded from {_b64(f.host.model)}",
        f"Basic {_b64('alice:' + token)}",
        f"home {_b64('cd ' + f.host.home + '/x')}; again {url_safe}",
        f"weights {digest}, blob {unrelated}",
    ]
    notes = _exported_notes(f, tmp_path)
    assert notes == [
        "model loaded from /path/to/model",
        "Basic <token>",
        "home /path/to/home; again /path/to/model",
        f"weights {digest}, blob {unrelated}",
    ]
    ledger = json.loads((tmp_path / "public" / "redaction-ledger.json").read_text())["entries"]
    categories = {e["category"] for e in ledger if e["pointer"].startswith("/notes/")}
    assert categories == {"private-path", "token"}


@pytest.mark.parametrize(("width", "newline"), [(76, "\n"), (64, "\r\n"), (5, "\n")])
def test_a_known_private_value_in_base64_wrapped_in_lines_is_removed(
    tmp_path: Path, width: int, newline: str
) -> None:
    """Base64 as MIME and PEM write it, wrapped at 76 or 64 columns, with the home path
    across a line break: the whole run of lines goes, the text around it stays."""
    f = RawFactory()
    encoded = _b64("x" * 50 + f.host.home + "/elsewhere" + "y" * 40)
    lines = newline.join(encoded[i : i + width] for i in range(0, len(encoded), width))
    f.run["notes"] = [f"dump:\n{lines}\n(end)"]  # (a line of letters would join the run)
    notes = _exported_notes(f, tmp_path)
    assert notes == ["dump:\n/path/to/home\n(end)"]


def test_a_known_private_value_in_hex_is_removed(tmp_path: Path) -> None:
    f = RawFactory()
    token = "hf_QmVyeVNlY3JldFRva2VuRm9yVGVzdHMx"
    f.server["env"]["HF_TOKEN"] = token
    digest = hashlib.sha256(b"weights").hexdigest()
    f.run["notes"] = [
        f"blob {token.encode().hex()}",
        f"path {(f.host.home + '/x').encode().hex().upper()}",
        f"weights {digest}",
    ]
    notes = _exported_notes(f, tmp_path)
    assert notes == ["blob <token>", "path /path/to/home", f"weights {digest}"]


def test_a_known_private_path_in_base64_in_a_metric_label_stops_the_export(
    tmp_path: Path,
) -> None:
    f = RawFactory()
    label = f'mlxcel_model_info{{model="{_b64(f.host.model)}"}}'
    for exchange in f.exchanges():
        for when in ("before", "after"):
            exchange["telemetry"][when]["metrics"][label] = 1.0
    with pytest.raises(ExportError, match=r"telemetry/after/metrics \(an object key\).*private"):
        export_bundle(ExportOptions(f.write(tmp_path / "raw"), tmp_path / "public"))
    assert not (tmp_path / "public").exists()


def test_a_user_name_percent_encoded_in_utf8_is_removed(tmp_path: Path) -> None:
    """`jörg` in a URL is `j%C3%B6rg` (and `\\xc3\\xb6` in a Python bytes repr): each run of
    escapes that spells one character is read as that character, so the name is found."""
    f = RawFactory(
        host=Host(user="jörg-lindqvist", hostname="lab-host-07", home="/home/jörg-lindqvist",
                  cwd="/home/jörg-lindqvist/work", binary="/opt/mlxcel-server",
                  model="/home/jörg-lindqvist/models/Qwen3-1.7B-4bit"))  # fmt: skip
    f.run["notes"] = [
        "owner=j%C3%B6rg-lindqvist&x=1",
        "b'j\\xc3\\xb6rg-lindqvist'",
        "double: j%25C3%25B6rg-lindqvist",
        "price 5%C2%A0%E2%82%AC stays",
    ]
    notes = _exported_notes(f, tmp_path)
    assert all("lindqvist" not in note for note in notes[:3]), notes
    assert notes[3] == "price 5%C2%A0%E2%82%AC stays"


# --- forms of the capture's own values found since the second audit -------------------------

TOKEN = "hf_QmVyeVNlY3JldFRva2VuRm9yVGVzdHMx"


def test_a_non_ascii_name_or_path_in_its_other_normal_form_is_removed(tmp_path: Path) -> None:
    """A capture with `jöns`, `büro-lab-07` and `modèles` composed (NFC): the same names
    decomposed (NFD), the host in its IDNA form, go with the same placeholders."""
    user, host, model = "j\u00f6ns", "b\u00fcro-lab-07", "/srv/ml/mod\u00e8les/Qwen3-1.7B-4bit"
    f = RawFactory(
        host=Host(user=user, hostname=host, home="/home/" + user, cwd="/srv/work",
                  binary="/opt/mlxcel-server", model=model))  # fmt: skip
    nfd_user, nfd_host, nfd_model = (unicodedata.normalize("NFD", v) for v in (user, host, model))
    f.run["notes"] = [
        f"weights in {nfd_model}/model.safetensors",
        f"ran on {nfd_host} today, http://{nfd_host}:8080/v1",
        "ran on xn--bro-lab-07-9db.acme-corp.com, http://xn--bro-lab-07-9db:8080/v1",
        f"ssh root@{nfd_host}; /srv/shared/{nfd_user}/x",
    ]
    notes = _exported_notes(f, tmp_path)
    assert notes == [
        "weights in /path/to/model/model.safetensors",
        "ran on <host> today, http://<host>:8080/v1",
        "ran on <host>, http://<host>:8080/v1",
        "ssh <user>@<host>; /srv/shared/<user>/x",
    ]


def test_a_name_in_fullwidth_forms_or_with_invisible_characters_is_removed(
    tmp_path: Path,
) -> None:
    f = RawFactory()
    f.server["env"]["HF_TOKEN"] = TOKEN
    fullwidth = "".join(chr(ord(c) + 0xFEE0) for c in f.host.hostname)
    f.run["notes"] = [
        f"ran on {fullwidth}",
        "host lab-host\u200b-07 up; al\u200bice@lab-host-07",
        f"token {TOKEN[:10]}\u200b\u200d{TOKEN[10:]}, soft {TOKEN[:5]}\u00ad{TOKEN[5:]}",
        "peer 192.168\u2060.40.23",
        "a zero\u200bwidth space and a soft\u00adhyphen in prose stay",
    ]
    notes = _exported_notes(f, tmp_path)
    assert notes == [
        "ran on <host>",
        "host <host> up; <user>@<host>",
        "token <token>, soft <token>",
        "peer <ip>",
        "a zero\u200bwidth space and a soft\u00adhyphen in prose stay",
    ]


def test_a_known_secret_glued_to_letters_is_removed(tmp_path: Path) -> None:
    f = RawFactory()
    f.server["env"]["HF_TOKEN"] = TOKEN
    f.server["env"]["API_SECRET"] = "Zq8vN3kLp2Xw7RtY"  # no token prefix: found as known
    f.run["notes"] = [f"tok{TOKEN}", "ref xZq8vN3kLp2Xw7RtYz"]
    notes = _exported_notes(f, tmp_path)
    assert notes == ["tok<token>", "ref x<token>z"]


def test_a_known_value_in_mixed_case_hex_utf16_base64_or_a_padded_address_is_removed(
    tmp_path: Path,
) -> None:
    f = RawFactory()
    f.server["env"]["HF_TOKEN"] = TOKEN
    for exchange in f.exchanges():  # the capture sent its requests to a public address
        exchange["request"]["url"] = "http://81.2.69.142:18128/v1/chat/completions"
    hexed = "".join(c.upper() if i % 3 == 0 else c for i, c in enumerate(TOKEN.encode().hex()))
    utf16 = base64.b64encode((f.host.model + "/x").encode("utf-16-le")).decode()
    f.run["notes"] = [
        f"hex {hexed}",
        f"powershell -EncodedCommand {utf16}",
        f"ps {base64.b64encode(TOKEN.encode('utf-16-le')).decode()}",
        f"blob {_b64('81.2.69.142')}",
        "at 81.2.069.142 and 81.002.069.142",
    ]
    notes = _exported_notes(f, tmp_path)
    assert notes == [
        "hex <token>",
        "powershell -EncodedCommand /path/to/model",
        "ps <token>",
        "blob <ip>",
        "at <ip> and <ip>",
    ]


def test_generic_forms_the_audit_found_are_removed(tmp_path: Path) -> None:
    """HTML references without `;`, the Windows home before Vista, an e-mail address with
    an IDN domain, a public address after a name that ends in `_ip` or `_addr`."""
    f = RawFactory()
    f.run["notes"] = [
        "path &#47home&#47bob&#47x and &#x2fhome&#x2fjoe&#x2fx",
        r"C:\Documents and Settings\bob\Desktop",
        "mail bob.smith@b\u00fccher-corp.de",
        'remote_addr=81.2.69.142 client_ip=81.2.69.142 {"peer_addr": "81.2.69.142"}',
        "clientIp=81.2.69.142; chip 81.2.69.142 stays",
    ]
    notes = _exported_notes(f, tmp_path)
    assert notes == [
        "path /path/to/home and /path/to/home",
        "/path/to/home",
        "mail <email>",
        'remote_addr=<ip> client_ip=<ip> {"peer_addr": "<ip>"}',
        "clientIp=<ip>; chip 81.2.69.142 stays",
    ]


def test_a_plain_user_name_in_account_forms_is_removed(tmp_path: Path) -> None:
    f = RawFactory()
    f.run["notes"] = [
        "uid=1000(alice) gid=1000(alice) groups=1000(alice),27(sudo)",
        '{"user": "alice", "owner": "alice"}',
        "user: alice",
        "alice in wonderland; users: alice",
        "User: Alice, can you help?",  # a chat transcript's speaker
        "Username: alice",  # as docker info prints it
    ]
    notes = _exported_notes(f, tmp_path)
    assert notes == [
        "uid=1000(<user>) gid=1000(<user>) groups=1000(<user>),27(sudo)",
        '{"user": "<user>", "owner": "<user>"}',
        "user: <user>",
        "alice in wonderland; users: alice",
        "User: Alice, can you help?",
        "Username: <user>",
    ]
