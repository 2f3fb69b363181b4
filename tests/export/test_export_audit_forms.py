"""What the export audit found published: an allowed value's hit that swallowed private ones,
names and addresses in forms the scan missed, and key redaction's cost on nested keys."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from rawfactory import PROMPT, Host, RawFactory

from verifier.errors import ExportError
from verifier.export import ExportOptions, export_bundle
from verifier.export.redact import Redactor, collect_private_values
from verifier.leaks import ALLOWED_PLACEHOLDER, Detector, Known, KnownKind
from verifier.raw import load_raw

TOKEN = "hf_QmVyeVNlY3JldFRva2VuRm9yVGVzdHMx"


def _plain(host: str = "falcon") -> RawFactory:
    """A capture whose host name is an ordinary word, and with a secret in its environment."""
    f = RawFactory(host=Host(hostname=host))
    f.server["env"]["HF_TOKEN"] = TOKEN
    return f


def _export(f: RawFactory, tmp_path: Path, **options: Any) -> Path:
    out = tmp_path / "public"
    export_bundle(ExportOptions(f.write(tmp_path / "raw"), out, **options))
    return out


def _extra(out: Path) -> Any:
    record = json.loads((out / "records/c1/001.json").read_text())
    return record["telemetry"]["before"]["cache_stats"]["extra"]


def _published(out: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file())


def _ask_about(f: RawFactory, path: str) -> None:
    """The prompt names `path`: evidence, which export refuses unless it is allowed."""
    for body in [f.run["request_body"], *(e["request"]["body"] for e in f.exchanges())]:
        body["messages"][0]["content"] = f"{PROMPT} Save it to {path}"


def _export_allowing_home(tmp_path: Path, extra: Any) -> Path:
    """The capture whose prompt names /home/user/story.txt, exported with --allow /home/user,
    `extra` planted in the first exchange's free text."""
    f = _plain()
    _ask_about(f, "/home/user/story.txt")
    f.exchanges()[0]["telemetry"]["before"]["cache_stats"]["extra"] = extra
    return _export(f, tmp_path, allowed=("/home/user",))


# --- F1: --allow allows the value and the path below it, not what the hit ran on to ---------


def test_an_allowed_path_does_not_keep_what_its_hit_ran_on_to(tmp_path: Path) -> None:
    out = _export_allowing_home(
        tmp_path,
        [
            f"/home/user/story.txt?owner=alice@falcon&from=192.168.40.23&hf_token={TOKEN}",
            "PYTHONPATH=/home/user/lib:/home/alice/work/x:/home/bob/.local/lib",
            "/home/user/../alice/.ssh/id_ed25519",
        ],
    )
    assert _extra(out) == [
        "/home/user/story.txt?owner=<user>@<host>&from=<ip>&hf_token=<token>",
        "PYTHONPATH=/home/user/lib:/path/to/workdir/x:/path/to/home",
        "/path/to/home",  # a `..` leaves the allowed path: the hit goes whole
    ]
    published = _published(out)
    for private in (TOKEN, "falcon", "192.168.40.23", "/home/alice", "/home/bob", b"alice@"):
        assert (private if isinstance(private, bytes) else private.encode()) not in published
    entries = json.loads((out / "redaction-ledger.json").read_text())["entries"]
    allowed = {
        (e["file"], e["pointer"]) for e in entries if e["placeholder"] == ALLOWED_PLACEHOLDER
    }
    assert ("records/c1/001.json", "/telemetry/before/cache_stats/extra/0") in allowed
    assert ("experiment.json", "/request_body/messages/0/content") in allowed


def test_a_dotdot_after_an_allowed_path_leaves_it(tmp_path: Path) -> None:
    """helper-101: with --allow /tmp/mlxcel-cache, another user's home reached by `..` from
    it was published (the walk stopped at the `..`, and what followed read as no path)."""
    f = _plain()
    planted = "cache at /tmp/mlxcel-cache/../../home/jsmith/.ssh/id_ed25519 and /tmp/mlxcel-cache/a"
    f.exchanges()[0]["telemetry"]["before"]["cache_stats"]["extra"] = planted
    out = _export(f, tmp_path, allowed=("/tmp/mlxcel-cache",))
    assert b"jsmith" not in _published(out)
    assert _extra(out).endswith(" and /tmp/mlxcel-cache/a")


def test_plural_key_names_and_a_wildcard_dns_name_of_the_address(tmp_path: Path) -> None:
    """helper-101: `API_KEYS=...` and `apiKeys: ...` read as no secret's name (`key$`); the
    capture's own address spelled in a nip.io or sslip.io name was published."""
    f = _plain()
    f.server["env"]["SSH_CONNECTION"] = "34.12.5.6 51234 10.0.0.5 22"
    planted = [
        "API_KEYS=Zq7pX2vLm9Rt4KbW,Hn3kQ8wTz5YcR1pD",
        "apiKeys: Zq7pX2vLm9Rt4KbW",
        "ingress at https://app.34.12.5.6.sslip.io/v1 ready",
    ]
    f.exchanges()[0]["telemetry"]["before"]["cache_stats"]["extra"] = planted
    out = _export(f, tmp_path)
    published = _published(out)
    assert b"Zq7pX2vLm9Rt4KbW" not in published and b"34.12.5.6" not in published
    assert _extra(out)[2] == "ingress at https://app.<ip>.sslip.io/v1 ready"


def test_an_allowed_path_does_not_keep_a_private_component_below_it(tmp_path: Path) -> None:
    """A component below the allowed path that is, or holds, a private value is not allowed
    (audit of 032dfa2: the token and the user as path components were published, the
    ledger counting them allowed). What follows is read as it would be without --allow: a
    plain name inside a longer component (`alice-notes`) or a plain host name as a
    directory names no account or machine there either."""
    out = _export_allowing_home(
        tmp_path,
        [
            f"/home/user/{TOKEN}/x",
            "/home/user/alice/notes.txt",
            "/home/user//alice/x",
            "/home/user/192.168.40.23/x",
            "/home/user/docs/report.txt",
        ],
    )
    assert _extra(out) == [
        "/home/user/<token>/x",
        "/home/user/<user>/notes.txt",
        "/home/user//<user>/x",
        "/home/user/<ip>/x",
        "/home/user/docs/report.txt",
    ]


def test_a_list_of_allowed_paths_is_allowed_whole(tmp_path: Path) -> None:
    """PATH=/home/user/p0/bin:...:/home/user/p11/bin with --allow /home/user: every entry is
    allowed (the audit of 032dfa2: past 8 glued values the rest was refused, and no --allow
    could publish it)."""
    f = _plain()
    chain = ":".join(f"/home/user/p{i}/bin" for i in range(12))
    _ask_about(f, f"/home/user/story.txt; export PATH={chain}")
    out = _export(f, tmp_path, allowed=("/home/user",))
    experiment = json.loads((out / "experiment.json").read_text())
    assert chain in experiment["request_body"]["messages"][0]["content"]


def test_what_an_allowed_path_ran_on_to_in_evidence_stops_the_export(tmp_path: Path) -> None:
    f = _plain()
    _ask_about(f, "/home/user/story.txt?owner=alice@falcon")
    with pytest.raises(ExportError) as caught:
        _export(f, tmp_path, allowed=("/home/user",))
    message = caught.value.message
    assert "experiment.json/request_body/messages/0/content" in message
    assert "alice" not in message and "falcon" not in message


def test_allowed_values_glued_in_a_list_are_walked_in_one_pass(tmp_path: Path) -> None:
    """A list of allowed paths, each glued to the next by `:`, is allowed in one walk (not
    one scan per path), and the private path after it is redacted."""
    chain = ":".join(f"/home/user/p{i}" for i in range(40))
    out = _export_allowing_home(tmp_path, f"{chain}:/home/alice/x")
    assert _extra(out) == f"{chain}:/path/to/home/x"
    assert b"/home/alice" not in _published(out)


# --- F6: nested keys are renamed in one pass ---------------------------------------------


def test_nested_keys_are_renamed_in_one_pass_with_the_same_ledger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = RawFactory()
    node: dict[str, Any] = {"leaf": 1}
    for depth in range(30):
        node = {f"lab-host-07-k{depth}": node}
    f.exchanges()[0]["telemetry"]["before"]["cache_stats"]["extra"] = node
    raw = f.write(tmp_path / "raw")
    scans: list[int] = []
    scan = Detector.scan_document

    def counted(self: Detector, document: Any, most: int | None = None) -> Any:
        if "-k29" in json.dumps(document):  # the document that holds the nested keys
            scans.append(1)
        return scan(self, document, most)

    monkeypatch.setattr(Detector, "scan_document", counted)
    out = tmp_path / "public"
    export_bundle(ExportOptions(raw, out))
    assert 0 < len(scans) <= 4  # not a scan per level of keys
    node = _extra(out)
    for depth in reversed(range(30)):
        (key,) = node
        assert key == f"<host>-k{depth}"
        node = node[key]
    entries = json.loads((out / "redaction-ledger.json").read_text())["entries"]
    keys = [e for e in entries if e["file"] == "records/c1/001.json" and "-k" in e["pointer"]]
    # each key's pointer names the keys above it as they are published
    base = "/telemetry/before/cache_stats/extra"
    expected = [
        base + "".join(f"/<host>-k{d}" for d in range(29, depth - 1, -1)) for depth in range(30)
    ]
    assert sorted(e["pointer"] for e in keys) == sorted(expected)
    assert all(e["count"] == 1 and e["category"] == "host-name" for e in keys)


# --- F2: a plain host name where it names the machine ------------------------------------


def test_a_plain_host_name_in_a_member_or_a_header_is_removed(tmp_path: Path) -> None:
    f = _plain()
    f.exchanges()[0]["telemetry"]["before"]["cache_stats"]["extra"] = [
        {"hostname": "falcon", "node_name": "falcon", "Machine": "falcon"},
        "GET /metrics HTTP/1.1\r\nHost: falcon\r\n",
        "hostname: falcon",
        "the falcon flew; Host: falcon is a bird",
    ]
    out = _export(f, tmp_path)
    assert _extra(out) == [
        {"hostname": "<host>", "node_name": "<host>", "Machine": "<host>"},
        "GET /metrics HTTP/1.1\r\nHost: <host>\r\n",
        "hostname: <host>",
        "the falcon flew; Host: falcon is a bird",
    ]


def test_a_plain_host_name_in_hardware_facts_stops_the_export(tmp_path: Path) -> None:
    f = _plain()
    f.run["hardware_extra"] = {"hostname": "falcon"}
    with pytest.raises(ExportError, match=r"experiment.json/hardware/hostname"):
        _export(f, tmp_path)


# --- F3: a plain user name in relative homes and other account spellings -----------------


def test_a_plain_user_name_in_a_relative_home_or_other_account_forms_is_removed(
    tmp_path: Path,
) -> None:
    f = RawFactory()
    f.exchanges()[0]["telemetry"]["before"]["cache_stats"]["extra"] = [
        "tar: Removing leading `/' from member names\nhome/alice/work/x/raw/run.json",
        "../home/alice/.ssh/id_ed25519",
        "Users/alice/Library/Caches/x.bin",
        "..\\..\\Users\\alice\\AppData\\x.bin",
        {"user_name": "alice", "user-name": "alice", "account": "alice"},
        {"username": ["alice"]},
        "Access denied for user 'alice'@'localhost'",
        "USER alice",
        "alice in wonderland; myhome/alice/x; user alice",
    ]
    out = _export(f, tmp_path)
    assert _extra(out) == [
        "tar: Removing leading `/' from member names\nhome/<user>/work/x/raw/run.json",
        "../home/<user>/.ssh/id_ed25519",
        "Users/<user>/Library/Caches/x.bin",
        "..\\..\\Users\\<user>\\AppData\\x.bin",
        {"user_name": "<user>", "user-name": "<user>", "account": "<user>"},
        {"username": ["<user>"]},
        "Access denied for user '<user>'@'localhost'",
        "USER <user>",
        "alice in wonderland; myhome/alice/x; user alice",
    ]


def test_a_relative_home_in_the_manifest_stops_the_export(tmp_path: Path) -> None:
    f = RawFactory()
    f.documents["model-manifest.json"]["files"].append(
        {"path": "home/alice/notes.txt", "size": 1, "sha256": "0" * 64}
    )
    with pytest.raises(ExportError, match=r"model-manifest.json/files/\d+/path"):
        _export(f, tmp_path)


# --- F5: the capture's address padded, or in an SSH session's variables ---------------


def test_the_ssh_sessions_addresses_are_known_private(tmp_path: Path) -> None:
    f = RawFactory()
    f.server["env"]["SSH_CONNECTION"] = "34.99.1.2 51234 192.168.40.7 22"
    f.server["env"]["SSH_CLIENT"] = "34.99.1.2 51234 22"
    known = collect_private_values(load_raw(f.write(tmp_path / "raw")))
    addresses = {k.value for k in known if k.kind is KnownKind.ADDRESS}
    assert {"34.99.1.2", "192.168.40.7"} <= addresses


def test_the_captures_address_padded_is_removed(tmp_path: Path) -> None:
    f = RawFactory()
    f.server["env"]["SSH_CLIENT"] = "34.99.1.2 51234 22"
    for exchange in f.exchanges():  # the capture sent its requests to a public address
        exchange["request"]["url"] = "http://34.12.5.6:18128/v1/chat/completions"
    f.exchanges()[0]["telemetry"]["before"]["cache_stats"]["extra"] = [
        "peer 034.012.005.006",
        '34.99.1.2 - - [02/Nov/2026:09:30:00 +0000] "POST /v1/chat/completions" 200',
        "6.5.12.34 is a version; so is 6.5.12.34.1",
    ]
    out = _export(f, tmp_path)
    assert _extra(out) == [
        "peer <ip>",
        '<ip> - - [02/Nov/2026:09:30:00 +0000] "POST /v1/chat/completions" 200',
        "6.5.12.34 is a version; so is 6.5.12.34.1",
    ]


def test_a_redactor_allows_only_the_path_below_an_allowed_value() -> None:
    redactor = Redactor(
        [Known("alice", "user-name", "<user>", KnownKind.USER)], allowed=("/home/user",)
    )
    text = "/home/user/a.b/c-d?x=1"
    assert redactor.allowed_end(text, 0, len(text)) == len("/home/user/a.b/c-d")
    assert redactor.allowed_end("/home/user", 0, 10) == 10
    # a `..` that leaves it: no part of the hit is allowed (helper-101, helper-102)
    for text in (
        "/home/user/../x",
        "/home/user/a/../../x",
        "/home/user//../x",
        "/home/user/%2E%2e/x",
        "/home/user/x~/../../y",  # helper-103: a component of other characters
    ):
        assert redactor.allowed_end(text, 0, len(text)) is None, text
    text = "/home/user/a/../b.txt"  # below it still: allowed up to the `..`, as before
    assert redactor.allowed_end(text, 0, len(text)) == len("/home/user/a")
    assert redactor.allowed_end("/home/username", 0, 14) is None
