"""What the export audit of 2026-12-05 (helper-70) found published, and the hex dumps the
known gaps listed: a private value in a hex dump, cut by a line break, in the columns of
`ls -l`, `ps aux` or `uname -a`, in UTF-16BE, a password inside an environment URL, the
capture's address glued to a word or written backwards, a share written with slashes."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rawfactory import Host, RawFactory
from test_export_audit_hidden import _unescaped

from verifier.export import ExportOptions, export_bundle
from verifier.leaks import Detector, Known, KnownKind
from verifier.verify import verify_path

TOKEN = "hf_QmVyeVNlY3JldFRva2VuRm9yVGVzdHMx"
ADDRESS = "192.168.40.23"
PAYLOAD = f"open /home/alice/models/qwen failed; retry with {TOKEN} from {ADDRESS}\n".encode()


def _factory(extra: Any, **host: Any) -> RawFactory:
    f = RawFactory(host=Host(**host)) if host else RawFactory()
    f.server["env"]["HF_TOKEN"] = TOKEN
    f.server["env"]["SSH_CONNECTION"] = f"{ADDRESS} 51234 10.0.0.5 22"
    f.exchanges()[0]["telemetry"]["before"]["cache_stats"]["extra"] = extra
    return f


def _export(f: RawFactory, tmp_path: Path) -> Path:
    out = tmp_path / "public"
    export_bundle(ExportOptions(f.write(tmp_path / "raw"), out))
    return out


def _extra(out: Path) -> str:
    """The planted text as published (the first record's cache stats `extra`)."""
    for path in sorted((out / "records").rglob("*.json")):
        document = json.loads(path.read_text("utf-8"))
        extra = document["telemetry"]["before"]["cache_stats"].get("extra")
        if extra is not None:
            return str(extra)
    raise AssertionError("no record kept the planted text")


KNOWN = [
    Known("/home/alice", "private-path", "/path/to/home", KnownKind.PATH),
    Known(TOKEN, "token", "<token>", KnownKind.SECRET),
    Known(ADDRESS, "ip-address", "<ip>", KnownKind.ADDRESS),
]


def _assert_gone(out: Path) -> None:
    """No known value in any form the detector reads, in any published string; and verify
    still passes the bundle's leak scan."""
    published = _unescaped(out)
    assert not Detector(KNOWN).scan_text(published), published
    assert not [f for f in verify_path(out).findings if f.check == "leaks"]


# Hex dumps, laid out as each tool lays them out (16 bytes a line).
def _ascii(chunk: bytes) -> str:
    return "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)


def _xxd(data: bytes, offset: str = "{:08x}: ") -> str:
    """`xxd`'s lines (groups of two bytes, then the characters); with `offset`, another
    tool's same layout (`tcpdump -X`'s)."""
    lines = []
    for at in range(0, len(data), 16):
        chunk = data[at : at + 16]
        groups = " ".join(chunk[i : i + 2].hex() for i in range(0, len(chunk), 2))
        lines.append(f"{offset.format(at)}{groups:<39}  {_ascii(chunk)}")
    return "\n".join(lines) + "\n"


def _hexdump_c(data: bytes) -> str:
    lines = []
    for at in range(0, len(data), 16):
        chunk = data[at : at + 16]
        left = " ".join(f"{b:02x}" for b in chunk[:8])
        right = " ".join(f"{b:02x}" for b in chunk[8:])
        lines.append(f"{at:08x}  {left:<23}  {right:<23}  |{_ascii(chunk)}|")
    return "\n".join([*lines, f"{len(data):08x}"]) + "\n"


def _od_x(data: bytes) -> str:
    """`od -x` and `hexdump`: 16-bit little-endian words, octal offsets."""
    padded = data + b"\0" * (len(data) % 2)
    lines = []
    for at in range(0, len(padded), 16):
        chunk = padded[at : at + 16]
        words = " ".join(
            f"{int.from_bytes(chunk[i : i + 2], 'little'):04x}" for i in range(0, len(chunk), 2)
        )
        lines.append(f"{at:07o} {words}")
    return "\n".join([*lines, f"{len(data):07o}"]) + "\n"


def _xxd_p(data: bytes) -> str:
    return "\n".join(data[at : at + 30].hex() for at in range(0, len(data), 30)) + "\n"


def _tcpdump_x(data: bytes) -> str:
    return _xxd(data, "\t0x{:04x}:  ")


LAYOUTS: dict[str, Callable[[bytes], str]] = {
    "xxd": _xxd,
    "hexdump -C": _hexdump_c,
    "od -x": _od_x,
    "xxd -p": _xxd_p,
    "tcpdump -X": _tcpdump_x,
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("encoding", ["utf-8", "utf-16-le"])
def test_a_hex_dump_of_private_values_goes_whole(
    tmp_path: Path, layout: str, encoding: str
) -> None:
    data = PAYLOAD.decode().encode(encoding)
    dump = LAYOUTS[layout](data)
    out = _export(_factory(f"dump of the request:\n{dump}end of dump"), tmp_path)
    published = _extra(out)
    # (`end`, base64 letters, may go with a run of hex lines before it)
    assert published.startswith("dump of the request:\n") and published.endswith(" of dump")
    assert data[16:32].hex() not in published.replace(" ", "")  # no line of the dump is left
    _assert_gone(out)


@pytest.mark.parametrize("tool", [["od", "-A", "x", "-t", "x1z"], ["xxd"], ["hexdump", "-C"]])
def test_a_real_tools_dump_goes_whole(tmp_path: Path, tool: list[str]) -> None:
    if shutil.which(tool[0]) is None:
        pytest.skip(f"{tool[0]} is not installed")
    dump = subprocess.run(tool, input=PAYLOAD, capture_output=True, check=True).stdout.decode()
    out = _export(_factory(f"$ {' '.join(tool)} request.bin\n{dump}"), tmp_path)
    assert PAYLOAD[16:24].hex(" ") not in _extra(out)
    _assert_gone(out)


def test_a_dump_of_nothing_private_is_kept_as_it_is(tmp_path: Path) -> None:
    dump = _xxd(b"the cache warmed up after the second request, as planned.\n")
    planted = f"first bytes:\n{dump}"
    out = _export(_factory(planted), tmp_path)
    assert _extra(out) == planted


@pytest.mark.parametrize(
    "planted",
    [
        f"value: {TOKEN[:15]}\n{TOKEN[15:]} end",  # a terminal's wrap
        f"value: {TOKEN[:15]}\n        {TOKEN[15:]}",  # and the next line indented
        f"curl -H 'Authorization: x {TOKEN[:15]}\\\n{TOKEN[15:]}'",  # a shell's continuation
        f"peer {ADDRESS[:6]}\r\n{ADDRESS[6:]} closed",
        # helper-101: the other line breaks (a terminal's bare CR, NEL, U+2028, VT, FF)
        *(f"value: {TOKEN[:15]}{b}{TOKEN[15:]} end" for b in ("\r", "\n\r", "\x85")),
        *(f"peer {ADDRESS[:6]}{b}{ADDRESS[6:]} closed" for b in ("\u2028", "\v", "\f")),
    ],
)
def test_a_value_cut_by_a_line_break_goes(tmp_path: Path, planted: str) -> None:
    out = _export(_factory(planted), tmp_path)
    published = _extra(out)
    assert TOKEN[15:] not in published and ADDRESS[6:] not in published
    _assert_gone(out)


@pytest.mark.parametrize(
    "planted",
    [
        "-rw-r--r-- 1 quasar quasar 1024 Jan  5 10:00 model.safetensors",
        "drwxr-xr-x.  12 quasar staff 4096 Jan  5 10:00 models",
        "quasar     48213 97.3  1.2 5123456 812345 pts/0 Rl+ 10:00 12:34 llama-server",
        "  48213 quasar    20   0 5123456 812345  12345 R  97.3  1.2  12:34.56 llama-server",
        "quasar   pts/0        2026-12-05 10:00 (10.0.0.5)",
        "quasar:x:1000:1000:Quasar,,,:/srv/q:/bin/bash",
        "  File: x\nAccess: (0644/-rw-r--r--)  Uid: ( 1000/  quasar)   Gid: ( 1000/  quasar)",
        'FATAL:  password authentication failed for user "quasar"',
        'FATAL:  role "quasar" does not exist',
        "crontab: installing new crontab for quasar",
        "systemd[1]: Started session-3.scope - Session 3 of User quasar.",
        "X-Forwarded-User: quasar",
        "user.name=quasar",
        '{"users": ["quasar"], "whoami": "quasar", "acct": "quasar"}',
    ],
)
def test_a_plain_user_name_in_what_tools_print_goes(tmp_path: Path, planted: str) -> None:
    out = _export(_factory(planted, user="quasar", home="/srv/q", cwd="/srv/q/w"), tmp_path)
    published = _extra(out)
    assert "quasar" not in published.replace("Quasar,", ""), published
    assert "<user>" in published


@pytest.mark.parametrize(
    "planted",
    [
        "Linux kestrel 6.8.0-45-generic #45-Ubuntu SMP PREEMPT_DYNAMIC x86_64 GNU/Linux",
        "ssh: connect to host kestrel port 22: Connection refused",
        "curl: (7) Failed to connect to kestrel port 8080 after 0 ms",
        "curl: (6) Could not resolve host: kestrel",
        "Warning: Permanently added 'kestrel,10.0.0.5' (ED25519) to the list of known hosts.",
        "PING kestrel (10.0.0.5) 56(84) bytes of data.",
        "srun: error: kestrel: task 0: Exited with exit code 1",
        "NodeList=kestrel SLURM_NODELIST=kestrel",
        "Via: 1.1 kestrel (squid/6.6)",
        '{"server_name": "kestrel", "fqdn": "kestrel"}',
        "python serve.py --model //kestrel/share/models/qwen",
    ],
)
def test_a_plain_host_name_in_what_tools_print_goes(tmp_path: Path, planted: str) -> None:
    out = _export(_factory(planted, hostname="kestrel"), tmp_path)
    published = _extra(out)
    assert "kestrel" not in published, published
    assert "<host>" in published


@pytest.mark.parametrize(
    "text",
    [
        "the kestrel hovered over the ridge; no host was named",
        "ls -l showed 12 files; the user quasar of the story smiled",
        "a Linux box named in prose: Linux kestrel is not a version",
    ],
)
def test_the_same_words_in_prose_are_kept(tmp_path: Path, text: str) -> None:
    f = _factory(text, user="quasar", home="/srv/q", cwd="/srv/q/w", hostname="kestrel")
    assert _extra(_export(f, tmp_path)) == text


def test_a_password_inside_an_environment_url_goes_alone_too(tmp_path: Path) -> None:
    f = _factory("retry 2/3 with S3cretPassw0rdX; redis-cli -a S3cretPassw0rdX ping")
    f.server["env"]["DATABASE_URL"] = "postgres://svc:S3cretPassw0rdX@db7:5432/prod"
    out = _export(f, tmp_path)
    assert "S3cretPassw0rdX" not in _unescaped(out)


def test_a_default_password_in_an_environment_url_is_no_secret(tmp_path: Path) -> None:
    # `postgres:postgres@` is every tutorial's: the word stays (a secret would go).
    f = _factory("the postgres server answered")
    f.server["env"]["DATABASE_URL"] = "postgres://postgres:postgres@localhost:5432/x"
    out = _export(f, tmp_path)
    assert _extra(out) == "the postgres server answered"


@pytest.mark.parametrize(
    "planted",
    [
        f"log server-{ADDRESS}.log",
        f"worker_{ADDRESS} died",
        f"reversed: {ADDRESS[::-1]}",
        f"utf-16be hex: {TOKEN.encode('utf-16-be').hex()}",
        f"utf-16be base64: {base64.b64encode(TOKEN.encode('utf-16-be')).decode()}",
    ],
)
def test_the_captures_own_values_in_other_forms_go(tmp_path: Path, planted: str) -> None:
    out = _export(_factory(planted), tmp_path)
    published = _extra(out)
    assert ADDRESS not in published and ADDRESS[::-1] not in published
    assert TOKEN.encode("utf-16-be").hex()[8:40] not in published
    assert published != planted


def _with_reply(reply: str, **host: Any) -> RawFactory:
    """A capture whose every answer's content (evidence) is `reply`."""
    f = RawFactory(host=Host(**host))
    for exchange in f.exchanges():
        exchange["response"]["body"]["choices"][0]["message"]["content"] = reply
    return f


@pytest.mark.parametrize(
    ("reply", "host"),
    [
        ("-rw-r--r-- 1 node node 1024 Jan  5 10:00 app.js", {"user": "node"}),
        ("postgres   812  0.0  0.3 215000 24000 ?  Ss 10:00 0:00 postgres", {"user": "postgres"}),
        ('psql: FATAL:  password authentication failed for user "app"', {"user": "app"}),
        (
            "Linux raspberrypi 6.1.21-v8+ #1642 SMP PREEMPT aarch64 GNU/Linux",
            {"hostname": "raspberrypi"},
        ),
        ("ssh: connect to host db port 22: Connection refused", {"hostname": "db"}),
    ],
)
def test_a_plain_name_a_tool_prints_is_kept_in_evidence(
    tmp_path: Path, reply: str, host: dict[str, str]
) -> None:
    """helper-73: a model's reply prints such lines with ordinary names (the node image's
    `node`, Raspberry Pi OS's `raspberrypi`): where the capture's own plain name is one, the
    reply is still published as it is, while the same line in free text loses the name."""
    if "user" in host:
        host = {**host, "home": f"/home/{host['user']}", "cwd": f"/home/{host['user']}/w"}
    f = _with_reply(reply, **host)
    f.exchanges()[0]["telemetry"]["before"]["cache_stats"]["extra"] = reply
    out = _export(f, tmp_path)
    record = json.loads(next((out / "records").rglob("*.json")).read_text("utf-8"))
    assert record["response"]["choices"][0]["message"]["content"] == reply
    assert ("<user>" if "user" in host else "<host>") in _extra(out)


@pytest.mark.parametrize(
    ("text", "known"),
    [
        (
            "self.size = size\n    table = {}",
            Known("zeta", "private-path", "<p>", KnownKind.STRING),
        ),
        ("cd /srv/\napp.py", Known("/srv/app", "private-path", "/path/to/p", KnownKind.PATH)),
        ("the dev\nops team", Known("devops", "user-name", "<user>", KnownKind.USER)),
    ],
)
def test_only_secrets_values_and_addresses_are_read_across_line_breaks(
    text: str, known: Known
) -> None:
    """helper-73: a name, a path or a string named private, read with the lines joined, is
    found where two words meet (`size` and `table` spell `zeta`)."""
    assert Detector([known]).scan_text(text) == []


def test_a_dump_is_read_for_its_readable_runs_alone() -> None:
    from verifier.leaks import _dump_text

    data = (
        b"\x00\xff\x13/home/al\xc3\xb6n/x\x00\x01" + "/srv/ab".encode("utf-16-le") + b"\xfe\xfa\x80"
    )
    assert _dump_text(data).splitlines()[:2] == ["/home/alön/x", "/srv/ab"]
    assert _dump_text(bytes(range(256)) * 4).count("\n") < 40  # binary noise is no text


def test_dumps_past_what_one_text_may_give_go_unread(monkeypatch: pytest.MonkeyPatch) -> None:
    import verifier.leaks as leaks

    monkeypatch.setattr(leaks, "_MOST_INFLATED", 64)
    dump = _xxd(b"nothing private here, only the cache warming up " * 2)
    text = f"first:\n{dump}second:\n{dump}"
    hits = Detector(KNOWN).scan_text(text)
    assert [h.placeholder for h in hits] == [leaks.DUMP_PLACEHOLDER]
    assert text[hits[0].start :].startswith("00000000:") and hits[0].start > len(dump)
