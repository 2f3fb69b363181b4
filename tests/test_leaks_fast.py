"""The fast leak scan finds exactly what the plain one finds (`leaks_reference.py`).

`verifier.leaks` tries each pattern only where a cheap test says a match can start, and
builds a document's offset table only when its text has a hit; `leaks_reference.py` is the
module as it was before, which runs every pattern over the whole text. Both must give the
same hits (categories, offsets, excerpts, placeholders, pointers) on every input: every
document of every sample bundle (archives included), the hostile corpus and generated text.
"""

from __future__ import annotations

import base64
import bz2
import gzip
import hashlib
import io
import json
import lzma
import re
import sys
import tarfile
import time
import zlib
from collections.abc import Iterable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import leaks_reference as reference
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from verifier import leaks
from verifier.leaks import Known, KnownKind

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "sample_bundles"
HOSTILE = Path(__file__).resolve().parent / "hostile"
MAX_MEMBER_BYTES = 4 << 20  # the hostile corpus's bombs are not read whole

KNOWN = (
    Known("/srv/private/models", "private-path", "/path/to/model", KnownKind.PATH),
    Known("/home/alice", "private-path", "/path/to/home", KnownKind.PATH),
    Known("/d/e//weights", "private-path", "/path/to/weights", KnownKind.PATH),
    Known("alice", "user-name", "<user>", KnownKind.USER),
    Known("al", "user-name", "<user>", KnownKind.USER),
    Known("jo-smith", "user-name", "<user>", KnownKind.USER),
    Known("gpu-box-01", "host-name", "<host>", KnownKind.HOST),
    Known("mlxcel", "host-name", "<host>", KnownKind.HOST),
    Known("s3cr3t-Value.x", "token", "<token>", KnownKind.SECRET),
    Known("opaque-env-value", "environment", "<env>", KnownKind.OPAQUE),
    Known("34.12.5.6", "ip-address", "<ip>", KnownKind.ADDRESS),
    Known("Falcon-X", "private-path", "<private-1>", KnownKind.STRING),
    Known("hf_QmVyeVNlY3JldFRva2Vu", "token", "<token>", KnownKind.SECRET),
)
# What the detectors care about, to build texts from.
FRAGMENTS = (
    "/home/",
    "/home//",
    "/var/home/",
    "/Users/",
    "/Users/Shared",
    "/root/",
    "~",
    "~al/",
    "/tmp/",
    "/var/tmp/",
    "/var/folders/",
    "/private/var/",
    "/dev/shm/",
    "C:\\Users\\",
    "C:\\\\Users\\\\",
    "c:/Users/",
    "c:\\users\\",
    "/mnt/c/Users/",
    "/mnt/c/UsErS/",
    "/cygdrive/d/users/",
    "/c/Users/",
    "/usr/home/",
    "/System/Volumes/Data/Users/",
    "file://localhost/",
    "FILE://LocalHost/",
    "http://localhost/",
    "\\\\wsl$\\Ubuntu\\home\\",
    "//wsl.localhost/Debian/",
    "\\WSL$\\",
    "eyJhbGciOiJIUzI1NiJ9.",
    "34.12.5.6",
    "cuda 34.12.5.6",
    "34.12.5.6.1",
    "lora-34.12.5.6",
    "eyJzdWIiOiIxIn0.",
    ".eyJ",
    "eyJ",
    "/home/./",
    "/./",
    "//",
    "/srv//private/./models",
    "/d/e/weights",
    "/d/./e//weights",
    "@",
    "al@",
    "@gpu-box-01",
    "alice",
    "al",
    "mlxcel",
    "gpu-box-01",
    "gpu-box-01_",
    "jo-smith",
    "JO-SMITH",
    "server-jo-smith.log",
    "github.com/jo-smith/",
    "USER=",
    "USERNAME='",
    'LOGNAME="',
    "HOST=",
    "Dec  5 00:19:12 ",
    "2026-12-05T00:19:12+0000 ",
    "2026-12-05T00:19:12.123Z ",
    "Sat 2026-12-05 00:19:12 UTC ",
    " sshd[1]: ",
    "password ",
    "Tr0ub4dor3x",
    "hostname=",
    "mlxcel:8080",
    ":0.5",
    ".example.com",
    ".local",
    "://",
    "http://",
    "ssh://al@",
    "10.0.0.7",
    "192.168.1.20",
    "8.8.8.8",
    "1.2.3.4",
    "127.0.0.1",
    "fe80::1",
    "::ffff:10.0.0.1",
    "2001:db8::1",
    "%eth0",
    "aa:bb:cc:dd:ee:ff",
    "00-1A-2B-3C-4D-5E",
    ":8080",
    "/24",
    "version ",
    "cuda ",
    "host ",
    "ip=",
    "-----BEGIN ",
    "-----BEGIN RSA PRIVATE KEY-----",
    "-----END RSA PRIVATE KEY-----",
    "PRIVATE KEY",
    "hf_",
    "sk-",
    "sk-proj-",
    "ghp_",
    "github_pat_",
    "glpat-",
    "AIza",
    "AKIA",
    "ASIA",
    "xoxb-",
    "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "a1B2c3D4e5F6g7H8i9J0",
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "0123456789ABCDEF",
    "Authorization: ",
    "authorization",
    "Proxy-Authorization=",
    "Bearer ",
    "Basic ",
    "dXNlcjpwYXNzd29yZA==",
    "api_key",
    "API_KEY=",
    "HF_TOKEN",
    "token",
    "tokens",
    "tokenizer",
    "secret",
    "SECRET",
    "password",
    "passphrase",
    "credential",
    "auth",
    "--api-key",
    "--token",
    "-p",
    "--hf-token=",
    # audit 11's: webhooks, bot tokens, short secret names, Cisco MACs, machine names
    "discord.com/api/webhooks/123456/",
    "bot123456789:AA",
    "Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4",
    "sig=",
    "pass: ",
    "X-Amz-Signature=",
    "hwaddr 3c22.fb12.",
    "3456",
    "ip-10-0-",
    "_path",
    "prompt_tokens",
    "%2F",
    "%2f",
    "%252F",
    "\\/",
    "\\u002f",
    "\\u002F",
    "\\057",
    "\\303\\266",
    "\\\\",
    "\\",
    "/",
    ":",
    "=",
    ".",
    "-",
    "_",
    "+",
    "%",
    '"',
    "'",
    " ",
    "\t",
    "\n",
    "\x00",
    # Invisible characters, HTML references without `;`, account forms, fullwidth forms.
    "\u200b",
    "\u00ad\u2060",
    "&#47",
    "&sol;",
    "&amp;",
    "&amp;#47;",
    "&commat;",
    "&#x2f",
    "&#0047;",
    "user: ",
    '{"login": "',
    "owner\x01",
    "uid=1000(",
    ")",
    "\uff47\uff50\uff55\uff0d\uff42\uff4f\uff58\uff0d\uff10\uff11",
    "\uff41\uff4c@",
    "C:\\Documents and Settings\\",
    "@b\u00fccher.de",
    "j\u00f6ns@",
    # names past ASCII in other cases, and a character `(?i)` reads as an ASCII letter
    "J\u00d6NS",
    "/J\u00f6Ns/",
    "B\u00dcRO-LAB",
    "b\u00fcro-Lab.",
    "JOS\u00c9",
    "w\u00d6rd",
    "\u212aelvin-box",
    "kelvin-box",
    # known values' mojibake past a pattern's match that stops inside them (helper-123)
    "\\\\wsl$\\Ubuntu\\home\\",
    "Zolt\u00c3\u00a1n",
    "tom\u00c3\u00a1\u00c5\u00a1",
    "\u00a7",
    "\u00b7",
    "\u00c3\u00ab",
    "34.12.005.006",
    "remote_addr=",
    "clientIp=",
    "falcon-xs",
    "tokhf_QmVyeVNlY3JldFRva2Vu",
    "aABmAF8AUQBtAFYAeQBlAFYATgBsAFkAMwBKAGwAZABGAFIAdgBhADIAVgB1AA",
    "68665F516d56",
    "\x01",
    "\x02",
    "é",
    "İ",
    "ı",
    "ſ",
    "K",
    "ALICE",
    "Al",
    "GPU-BOX-01",
    "alalal",
    "\ud800",
    "0",
    "42",
    "abc",
    "file://",
    "/path/to/",
    "/srv/private/models",
    "s3cr3t-Value.x",
    "opaque-env-value",
    # Known values in base64, at each alignment, in both alphabets, whole and in part.
    *(
        encode(head + value + b"?>").decode()[cut:]
        for value in (b"/home/alice/x", b"s3cr3t-Value.x", b"jo-smith", b"gpu-box-01")
        for head in (b"", b"x", b"xy")
        for encode in (base64.b64encode, base64.urlsafe_b64encode)
        for cut in (0, 3)
    ),
    "L2hvbWUvYWxpY2",
    "==",
    "/home/ödön/",  # homes of any letters, /users in any case
    "/users/bob",
    "C:\\Users\\Jörg\\x",
    "~ödön/",
    "-----BEGIN PRIVATE KEY-----\nAAAA",
    "2f686f6d652f616c6963652f78",  # the hex of /home/alice/x
    "Cookie: session=8f14e45fceea167a",
    "Set-Cookie: sid=s%3AZ29v; Path=/",
    "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
    "npm_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
    "pypi-AgEIcHlwaS5vcmcCJGM0NTk3ZjM3LWU0MGQtNDRlYS1hZGE1",
    "-I",
    " -L",
    "gsk_",
    "xai-",
    "pplx-",
    "nvapi-",
    "r8_",
    "ya29.",
    "SG.",
    "dop_v1_",
    "_v1_",
    "aB3dE5gH7jK9mN1pQ3sT5vW7",
    "0123456789abcdef0123456789abcdef",
    # ... and wrapped in lines, as MIME and PEM write it (the break inside a core).
    *(
        sep.join(encoded[i : i + width] for i in range(0, len(encoded), width))
        for encoded in (base64.b64encode(b"xy/home/alice/x?>").decode(),)
        for width in (4, 7)
        for sep in ("\n", "\r\n")
    ),
    "\n",
    "\r\n",
    # ... in base64 of base64, in base32's hex alphabet, as separated hex or
    # quoted-printable (in parts too), in ROT13, and as gzip or zlib data in base64
    base64.b64encode(base64.b64encode(b"x/home/alice/x?")).decode(),
    base64.b32hexencode(b"xy/home/alice/x").decode(),
    "2f 68 6f 6d 65 2f 61 6c 69 63 65",
    "2F:68:6F:6D:65:2F:61:6C:69:63:65",
    "=2F=68=6F=6D=65",
    "=2F=61=6C=69=63=65",
    "0x2f, 0x68, 0x6f, 0x6d, 0x65",
    ", 0x2f, 0x61, 0x6c, 0x69, 0x63, 0x65, 0x2f, 0x78",
    "61 6c 40 ",  # a plain user name before `@`, spelled (and `alice@`, in part)
    "97,108,105,99,101,64",
    "=61=6C=69=63=65=40",
    "/ubzr/nyvpr",
    "tch-obk-01",
    base64.b64encode(gzip.compress(b"at /home/alice/x", mtime=0)).decode(),
    base64.urlsafe_b64encode(zlib.compress(b"gpu-box-01 and /home/bob/y")).decode(),
    base64.b64encode(bz2.compress(b"at /home/alice/x")).decode(),
    base64.b64encode(lzma.compress(b"gpu-box-01 and /home/bob/y")).decode(),
    base64.b64encode(bz2.compress(b"one ") + bz2.compress(b"/srv/private/models")).decode(),
    base64.b64encode(gzip.compress(b"x /home/alice/y")[:-3] + b"zzz").decode(),  # its CRC
    "H4sIAAAAAAAAA",
    "eJzLSM3",
    "gpu-box-01".encode("utf-16-le").decode("latin-1"),  # a NUL after each character
    "/\x00h\x00o\x00m\x00e\x00/",
    # ... in base85 (Ascii85 with its frame, RFC 1924's, Z85's), in parts too; reversed and
    # spaced out
    "<~" + base64.a85encode(b"a /srv/private/models").decode() + "~>",
    base64.b85encode(b"xyz s3cr3t-Value.x").decode(),
    base64.b85encode(b"/srv/private/models").decode()[:12],
    base64.b85encode(b"x gpu-box-01!").decode().translate(leaks._Z85),
    base64.a85encode(b"ab /home/alice/x", wrapcol=7, adobe=True).decode(),
    base64.a85encode(b"s3cr3t-Value.x", wrapcol=5).decode().replace("\n", "\r\n"),
    "x.eulaV-t3rc3s",
    "ecila/emoh/",
    "g p u - b o x - 0 1",
    "/.h.o.m.e./.a.l.i.c.e",
)
texts = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=6)), max_size=30).map(
    "".join
)
scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), texts)
documents = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=6), st.dictionaries(texts, inner, max_size=6)),
    max_leaves=30,
)

# Fragments that a hostile text repeats to make a scan read a long run again at each place
# inside it: secret words (a name to the end of its run), names with values (a value to its
# end), flags, token prefixes, addresses, paths, separators.
HOSTILE_UNITS = (
    "key",
    "key.",
    "KEY_",
    "monkey=",
    "monkey:",
    "key\x01",
    "x.key=",
    "-key",
    "--key\x02",
    "--monkey=",
    "--monkey ",
    "-p ",
    "- ",
    # a key that is a flag too: each flag's keys after it read once (helper-121)
    "Ab12Cd34Ef56.--api-key ",
    "Ab12Cd34Ef56,API_KEY=",
    # a flag at each line's end, read on to a YAML list's next item (helper-131: quadratic)
    "# --api-key\n",
    "--api-key #",
    "--api-key,\n",
    "--token\n\n",
    "- --api-key\n- ",
    "token",
    "tokens",
    "auth",
    "passpass",
    "password",
    "secret:",
    "API_KEY=",
    "authorization",
    "authorization:",
    "Proxy-Authorization=",
    "bearer ",
    "Bearer x",
    "sk-",
    "xsk-",
    "x-sk-",  # glued to a word: each word's first token prefix only (leaks._Words)
    "-sk-a",
    "a-eyJ",
    "_nvapi-",
    "-hooks.slack.com/services/",
    "x-ya29.aaaa.",  # a value that runs on past its word, rejected (Google's OAuth)
    "a-task-sk-",
    "sk-1",
    "glpat-",
    "ghp_",
    "github_pat_",
    "xoxb-",
    "hf_",
    "AKIA",
    "AIza",
    "a@",
    "a@b.",
    "a.b@c",
    "1.",
    "1:",
    ":",
    "::%",
    "::%a-",
    "aa:bb:",
    "aa-",
    "-a",
    "a",
    "-",
    ".",
    "=",
    "/",
    "@",
    "~a",
    "~",
    "\x01",
    "\x02",
    "al:",
    "al:x",
    "USER=al",
    "HOST=mlxcel",
    "mlxcel:1",
    "jo-smith.",
    "/jo-smith",
    "-jo-smith",
    "L2hvbWUvYWxpY2",
    "L2hvbWUvYWxpY2Uv",
    "-----BEGIN PRIVATE KEY-----",  # with no END: each to its string's end, read once
    "cookie:",
    "Set-Cookie: a=",
    "sk_live_",
    "npm_",
    "gsk_",
    "xai-",
    "nvapi-",
    "ya29.",
    "SG.",
    "SG.a",
    "dop_v1_",
    "L2hv\n",  # base64 wrapped in lines: every line joined to the next
    "L2hvbWUv\r\n",
    "c3Ny",
    "/al",
    "Al:",
    "opaque-env-value ",
    "a://",
    "ssh://a@",
    "%2F",
    "\\/",
    "é",
    "İ",
    "key=1",
    "/home/",
    "/home/a",
    "/tmp/x",
    "C:\\Users\\a",
    "-----BEGIN A ",
    "PRIVATE KEY",
    "\t",
)
# A text made of a few fragments repeated, then anything.
repeated = st.builds(
    lambda parts, count, tail: "".join(parts) * count + tail,
    st.lists(st.sampled_from(FRAGMENTS + HOSTILE_UNITS), min_size=1, max_size=3),
    st.integers(1, 40),
    texts,
)


@cache
def detectors() -> tuple[leaks.Detector, reference.Detector]:
    known = [
        reference.Known(k.value, k.category, k.placeholder, reference.KnownKind(k.kind.value))
        for k in KNOWN
    ]
    return leaks.Detector(KNOWN), reference.Detector(known)


def same_text(text: str) -> None:
    assert repr(leaks.scan_text(text)) == repr(reference.scan_text(text))
    fast, plain = detectors()
    assert repr(fast.scan_text(text)) == repr(plain.scan_text(text))


# Known values the fast path does not take (empty, not ASCII in any case), or takes oddly.
ODD_KNOWN = (
    (Known("josé", "user-name", "<user>", KnownKind.USER),),
    (Known("", "token", "<token>", KnownKind.SECRET),),
    (
        Known("al", "user-name", "<user>", KnownKind.USER),
        Known("alal", "token", "<token>", KnownKind.SECRET),
        Known("Ünïcode-sécret", "token", "<token>", KnownKind.SECRET),
        Known("/ho", "private-path", "/path/to/p", KnownKind.PATH),
        Known("kk", "host-name", "<host>", KnownKind.HOST),
        Known("si", "host-name", "<host>", KnownKind.HOST),
    ),
    (
        Known("b\u00fcro-lab", "host-name", "<host>", KnownKind.HOST),
        Known("j\u00f6ns", "user-name", "<user>", KnownKind.USER),
        Known("W\u00f6rd", "private-path", "<private-1>", KnownKind.STRING),
        Known("/srv/mod\u00e8les", "private-path", "/path/to/model", KnownKind.PATH),
    ),
    (  # mojibake of names that a pattern's match stops inside (`¡`), and the names
        Known("Zolt\u00c3\u00a1n", "user-name", "<user>", KnownKind.USER),
        Known("Zolt\u00e1n", "user-name", "<user>", KnownKind.USER),
        Known("tom\u00c3\u00a1\u00c5\u00a1", "host-name", "<host>", KnownKind.HOST),
        Known("j\u00f6rg", "user-name", "<user>", KnownKind.USER),
    ),
    (  # a name past ASCII that `(?i)` reads in a text of ASCII alone (`K` as `k`)
        Known("\u212aelvin-box", "host-name", "<host>", KnownKind.HOST),
        Known("J\u00f6ns", "user-name", "<user>", KnownKind.USER),
    ),
    (  # named strings of words (matched with any gap between them), or padded
        Known("Project Zeta", "private-path", "<private-1>", KnownKind.STRING),
        Known("Al Bo", "private-path", "<private-2>", KnownKind.STRING),
        Known(" pad ded", "private-path", "<private-3>", KnownKind.STRING),
    ),
)


def same_text_odd_known(text: str) -> None:
    for known in ODD_KNOWN:
        plain = [
            reference.Known(k.value, k.category, k.placeholder, reference.KnownKind(k.kind.value))
            for k in known
        ]
        fast = leaks.Detector(known).scan_text(text)
        assert repr(fast) == repr(reference.Detector(plain).scan_text(text)), known


def same_document(document: Any) -> None:
    def located(hits: list[Any]) -> list[tuple[Any, ...]]:
        return [(h.path, h.is_key, h.start, h.end, h.pointer, h.where, repr(h.hit)) for h in hits]

    assert located(leaks.scan_document(document)) == located(reference.scan_document(document))
    fast, plain = detectors()
    assert located(fast.scan_document(document)) == located(plain.scan_document(document))
    text = leaks._Flat.text_of(document)
    assert text == reference._Flat.of(document).text
    same_text(text)


def same_bytes(data: bytes) -> None:
    assert repr(leaks.scan_bytes(data)) == repr(reference.scan_bytes(data))


# --- every pattern, alone: tried only where `_Places` says, it finds every match ----------


def always(match: re.Match[str]) -> bool:
    return True


def same_matches(text: str) -> None:
    escapes = [(m.span(), m.groups()) for m in leaks._Decoded._escapes(text)]
    assert escapes == [(m.span(), m.groups()) for m in leaks._Decoded._ESCAPE.finditer(text)]
    places = leaks._Places(text)
    for pattern in leaks._STARTS:
        starts = places.starts(pattern)
        plain = [m.span() for m in reference._matches(pattern, text, always)]
        if starts is None:
            continue
        fast = [m.span() for m in leaks._matches_at(pattern, text, starts, always)]
        assert fast == plain, pattern.pattern
        assert starts == sorted(set(starts))


def same_secret_matches(text: str) -> None:
    """The linear scans of the secret patterns give `_matches`'s accepted matches, whether
    tried at `_Places`'s starts or wherever their finder finds one (starts None)."""
    places = leaks._Places(text)
    for pattern, scan in leaks._LINEAR_SCANS.items():
        plain = [
            (m.span(), m.groupdict())
            for m in reference._matches(pattern, text, reference._accept_token)
        ]
        for starts in (places.starts(pattern), None):
            fast = [(m.span(), m.groupdict()) for m in scan(text, starts)]
            assert fast == plain, (pattern.pattern[:40], starts is None)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts)
def test_each_pattern_is_tried_wherever_it_can_match(text: str) -> None:
    same_matches(text)
    same_secret_matches(text)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(repeated)
def test_repeated_fragments_give_the_same_hits(text: str) -> None:
    same_matches(text)
    same_secret_matches(text)
    same_text(text)
    same_text_odd_known(text)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts)
def test_generated_texts_give_the_same_hits(text: str) -> None:
    same_text(text)
    same_text_odd_known(text)
    same_bytes(text.encode("utf-8", "surrogatepass"))


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents)
def test_generated_documents_give_the_same_hits(document: Any) -> None:
    same_document(document)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "@",
        "a@b",
        "al@gpu-box-01:/home/al",
        "x" * 39 + "@" + "y",
        "keykeykey-key=abcdefgh",
        "--api-key\x02abcdefgh",
        "-" + "a" * 5000 + "token=abcdef123",
        "A" * 40,
        "a1B2" * 10 + "/" + "Zz9" * 14,
        "tokens=abcdefgh token=abcdefgh TOKENIZER=abcdefgh tokenid=abcdefgh1 TOKENi=abcdefgh",
        "--tokenish abcdefgh1 --my_key-token\x02abcdefgh -x-key=abcdefgh",
        "proxy-authorization: Bearer abcdefghijkl0123",
        "authorization" * 3,
        "github_pat_" + "a" * 30,
        "xoxp-" + "1" * 12,
        "gcc -I/home/bob/include -L/tmp/x/lib x-I/home/al --I/home/al -I/root/x",
        "~n/2 ~N/4 ~n/x ~ab/2 ~~n/2 x~n/2",
        "驱动版本为 10.2.1.243 服务器 10.1.2.3 バージョン 10.2.1.4",
        "--api-key 'sk1234abcdXY' --token=\"abcDEF123456\" -password 'x1' --key '' --pass=' x",
        " ".join(
            prefix + "aB3dE5gH7jK9mN1pQ3sT5vW7" * 2
            for prefix in ("gsk_", "xai-", "pplx-", "nvapi-", "r8_", "ya29.", "xgsk_", "-xai-")
        ),
        "SG.aB3dE5gH7jK9mN1pQ3sT5.vW7aB3dE5gH7jK9mN1pQ3sT5vW7aB3dE5gH7jK9mN1pQ3sT dop_v1_"
        + "0a" * 32
        + " dor_v1_"
        + "f" * 64
        + " ya29.c.c0ASRK0GZ8kH3pQ9vLmN2xR7tY1uW4sA6d nvapi-python-bindings-for-windows-and-more",
        "ssh://al@gpu-box-01/x http://mlxcel:8080/ http://gpu-box-01.local/",
        "aa:bb:cc:dd:ee:ff:00 aa-bb-cc-dd-ee-ff",
        "1.2.3.4.5 01.2.3.4 host 8.8.8.8 fe80::1%eth0 ::1 12:34:56",
        "%2Fhome%2Fal%2F \\/home\\/al \\u002ftmp\\u002fx %252Fhome%252Fal",
        "İstanbul Kelvin key=abcdefgh é@x.io",
        "/home/alİce/x ~alıce ſi@KK josé@x /home/josé/ JOSÉ@x",
        "alalal@x /home/alal/ /ho/alal ~alal kk@kk ssh://kk:22/",
        "al:pw@gpu-box-01 al:x/y@z alice:al:pw@h al:al:al: AL:é@x al:\u2003@x al: al@",
        "x/al/al/al/al /srv/al/x:al@b file:///al/x file://al/x ~/al C:\\x\\al /path/to/al/",
        "/" + "a" * 5000 + "/al/x " + "b/" * 3000 + "al/ " + "/c" * 2100 + "/al/",
        "opaque-env-value 10.0.0.7 /home/opaque-env-value opaque-env-value@x",
        "al\u200bice@x 10.0.0\u200b.7 hf_QmVyeVNl\u00adY3JldFRva2Vu",
        "&#47home&#47al &#x2fhome&#x2fal &#47;home&#x2F",
        "&sol;home&sol;al &amp;#47;tmp&amp;#47;x al&commat;box &amp;amp;#47; &solx &sol",
        "&AMP;#47;home&AMP;#47;al &amp;sol;tmp&amp;sol;x &amp;quot; al&plus;x&commat;b.io",
        "https://x.io/-v/home/al/x -I/home/al ~j/2024/x ~n/2.5 ~n/2.5.x 版本号 10.2.1.3",
        "Dec  5 00:19:12 mlxcel sshd[1]: x\n2026-12-05T00:19:12+01:00 MLXCEL k: Dec 5 mlxcel",
        "<34>1 2026-12-05T00:19:12.003Z mlxcel su - 1733357952.123456 mlxcel k:\x00mlxcel",
        "-isystem/home/al x-isystem/home/al -iquote/tmp/x",
        "/var/al/x /usr/lib/al /scratch/al/x /VAR/al /var//al /usr/local/al-x",
        "password Tr0ub4dor3x passwd x1Y2z3W4 xpassword Tr0ub4dor3x password  password A1b2C3d4e",
        '{"token": "Tr0ub4dor3xK9mQ2ab"} token=abc {"token": "Paris"}',
        'user: al {"login": "al"} owner\x01al uid=1000(al) gid=1000(al) groups=1000(al),2(al)',
        "ran on \uff47\uff50\uff55\uff0d\uff42\uff4f\uff58\uff0d\uff10\uff11 \uff41\uff4c@x",
        "falcon-x FALCON-Xs tokhf_QmVyeVNlY3JldFRva2Vu 34.12.005.006 034.12.5.6",
        "C:\\Documents and Settings\\al\\x al@b\u00fccher.de j\u00f6ns@b\u00fcro-lab",
        "b\u00fcro-lab bu\u0308ro-lab xn--bro-lab-n2a W\u00d6RD wo\u0308rd /srv/modE\u0300les/x",
        "remote_addr=81.2.69.142 clientIp=81.2.69.142 chip 81.2.69.142 peer-addr: 81.2.69.142",
        "68665F516d56795156 aABmAF8AUQBtAFYAeQBlAFYATgBsAFkAMwBKAGwAZABGAFIAdgBhADIAVgB1AA==",
        "61 6c 40 62 =61=6C=69=63=65=40=78 97,108,105,99,101,64 61:6c:40:61:6c:40 61-6C-2E",
        'C:\\Users\\Bob Smith\\x "c:\\users\\Jo Ann" /mnt/c/Users/Bob Smith/x /c/Users/a b',
        "\\u{2f}home\\u{2F}al %u002Fhome%u002fal \\U0000002ftmp\\U0000002Fx %u \\u{} \\U12 %u002",
        "b&uuml;ro-lab W&Ouml;RD gpu&hyphen;box&dash;01 &amp;eacute; &eacut &AElig;x &Yuml;",
        "--user\x02al --login al User = al 10.0.0.7.51234 > 10.0.0.7.1.2 10.0.0.7.22: x",
        "rootfs/home/al/x $HOME/../home/al myhome/al myvar/home/al x\\Users\\al a.home/al",
        "myusers/al xusers\\al myUsers/al x/users/al xusr/home/al",
        "Project+Zeta project_zeta Project&nbsp;Zeta al bo AL+-BO  pad ded al\u00a0bo Al\tBo",
        "gpu_box_01 jo_smith GPU_BOX_01.log x_gpu_box_01 gpu_box-01 jo-smith_x",
        "--host\x02mlxcel --master-addr mlxcel sudo -u al -u\x02al python -u al.py --hostx mlxcel",
        "[mlxcel]:29500 mlxcel:/export a:mlxcel:/x [mlxcel] x/mlxcel:/",
        "\\\\mlxcel\\share \\\\mlxcel\\ \\\\mlxcel\\\\x \\\\mlxcel \\mlxcel\\x",
        "opaque-env-value b3BhcXVlLWVudi12YWx1ZQ== 6f70617175652d656e762d76616c7565",
        # an opaque value's core first in a run, a private path's after it (one pass: both)
        "eD1vcGFxdWUtZW52LXZhbHVlIEhPTUU9L2hvbWUvYWxpY2UveA== "
        "6F70617175652d656e762d76616c75653a2f686f6d652f616c696365 "
        "bwBwAGEAcQB1AGUALQBlAG4AdgAt\nAHYAYQBsAHUAZQAgAC8AaABvAG0AZQAvAGEAbABpAGMAZQA=",
        "eulav-vne-euqapo o p a q u e - e n v - v a l u e",
        "${X:-/home/al/x} ${Y-/tmp/y} cache-/home/al --/home/al x/-/tmp/y a.-/home/b ~-/home/b",
        "chown al:al x al:al al:alx xal:al al:al@b al:al:al for user al Invalid user al from",
        "Accepted publickey for al from sudo:    al : TTY ssh mlxcel",
        "ssh\x02mlxcel 127.0.1.1\tmlxcel 127.0.0.1 mlxcel sshmlxcel",
        "of user al invalid user al --master-addr=mlxcel MASTER_ADDR=mlxcel chown al.al",
        "chown al:docker chown al.al.x pip -U al sudo -u al demo:demo OpenSSH mlxcel",
        "chown -R al:al chown --recursive al.al sudo -H -u al doas\x02-u\x02al of user al",
        "Failed password for invalid user al from x invalid user al sudo:\tal : session opened",
        "for user root(uid=0) by al(uid=1000) by al (uid= Postponed publickey for al from",
        # hex dumps of `/home/alice` and `s3cr3t-Value.x`, in the layouts of their tools
        "00000000: 2f68 6f6d 652f 616c  /home/al\n00000008: 6963 650a            ice.\n",
        "00000000  2f 68 6f 6d 65 2f 61 6c  69 63 65 0a 73 33 63 72  |/home/alice.s3cr|\n"
        "00000010  33 74 2d 56 61 6c 75 65  2e 78                    |3t-Value.x|\n0000001a",
        "0000000 682f 6d6f 2f65 6c61 6369 0a65\n0000014\n",
        "2f686f6d652f616c69\n6365 x\n2f686f6d652f616c69\n63650a7333\n",
        "\x0000000000: 3334 2e31 322e 352e  34.12.5.\n00000008: 36 gpu-box-01 cafe babe\n",
        "0x0000:  4500 003c 1c46 4000  E..<.F@.\n0x0008:  2f00 6800 6f00 6d00\n"
        "0x0010:  6500 2f00 6100 6c00 6900 6300 6500\n",
        "2024 1000 tokens\n1000 2000 3000 4000\n  ab cd  ef 01 23 45 67 89  ab\n* \n",
        # values cut by line breaks, a shell's continuation, indentation
        "key s3cr3t-Va\nlue.x and /home/al\n   ice/x 34.12\\\n  .5.6 opaque-env-\r\nvalue",
        "gpu-box-\n01 al\nice x\n\nopaque-env-value\n34.12.5.6\n\n",
        # what tools print around a plain user's or host's name
        "-rw-r--r-- 1 al al 1024 Jan  5 x\ndrwxr-xr-x.  12 al staff 4 Jan\nal  4821 97.3  1.2 x",
        "4821 al  20   0 12 x\nal       pts/0  x\nal:x:1000:1000:: Uid: ( 1000/   al)",
        'for user "al" role "al" does not exist crontab for al Session 3 of user al.',
        "Linux mlxcel 6.8.0-45 connect to host mlxcel port 22 Failed to connect to mlxcel port 8",
        "Could not resolve host: mlxcel Permanently added 'mlxcel,10.0.0.5' PING mlxcel (10.",
        "srun: error: mlxcel: task 0 Via: 1.1 mlxcel //mlxcel/share a//mlxcel/x //mlxcel/",
        "server-34.12.5.6.log worker_34.12.5.6 x6.5.21.43 lora-34.12.5.6.safetensors 1-34.12.5.6",
    ],
)
def test_chosen_texts_give_the_same_hits(text: str) -> None:
    same_matches(text)
    same_secret_matches(text)
    same_text(text)
    same_text_odd_known(text)


MANY_PLACES = {
    leaks._IPV6: ":" * 5000,
    leaks._MAC: "aa-bb-" * 1000,
    leaks._IPV4: "1.1.1.1." * 1000,
    leaks._EMAIL: "a@" * 3000,
    leaks._ACCOUNT: "ab.c@d " * 1000,
    leaks._URL_HOST: "a://" * 2000,
    leaks._PREFIXED_TOKENS: "AKIA" * 2000,
    leaks._AWS_SECRET: ("A" * 40 + " ") * 300,
    leaks._SECRET_MEMBER: "auth= " * 1000,
    leaks._SECRET_FLAG: "-pass " * 1000,
    leaks._AUTH_TOKENS: "bearer " * 1000,
}


@pytest.mark.parametrize("pattern", list(MANY_PLACES), ids=lambda p: p.pattern[:20])
def test_a_pattern_with_too_many_places_searches_as_before(pattern: re.Pattern[str]) -> None:
    text = MANY_PLACES[pattern]
    assert leaks._Places(text).starts(pattern) is None
    assert leaks._Places(text[:60]).starts(pattern) is not None
    same_matches(text)
    same_secret_matches(text)
    same_text(text)
    same_text_odd_known(text)


def test_known_values_are_tried_at_each_of_their_places_however_many() -> None:
    # Unlike a generic pattern, never searched instead: the known values' patterns have no
    # literal to search by, and a search tries each of their lookbehinds at every character
    # (`/al` * 87,381 took 9.7 s of CPU that way, 2.3 s place by place).
    text = "al " * 3000
    fast, _ = detectors()
    (where,) = [r.places for r in fast._regexes if any(k.value == "al" for _, k in r._group)]
    assert list(where.starts(leaks._Places(text)) or [-1]) == list(range(0, len(text), 3))
    same_text(text)
    # A character that `(?i)` reads as an ASCII letter (`İ` as `i`) is read so: `alİce` is
    # a place of `alice` (and of `al`), once.
    odd = text + "al\u0130ce " + text
    assert list(where.starts(leaks._Places(odd)) or [-1]) == [
        at for at in range(len(odd)) if odd.startswith("al", at)
    ]
    same_text(odd)
    found = fast.scan_text("USER=al\u0130ce")
    assert [(h.start, h.end, h.placeholder) for h in found] == [(5, 10, "<user>")]


def test_names_past_ascii_are_tried_only_where_they_can_start() -> None:
    # A user or host name past ASCII (`jörg`, `büro-gpu-07`) has a lead as an ASCII one
    # has: it is tried where `(?i)` reads its first characters, in any case, and nowhere
    # else (it had none: every text was searched by the whole pattern, at each character,
    # and an export of 1,400 records by `jörg` on `büro-gpu-07` took 279 s).
    known = (
        Known("j\u00f6rg", "user-name", "<user>", KnownKind.USER),
        Known("b\u00fcro-gpu-07", "host-name", "<host>", KnownKind.HOST),
        Known("\u212aelvin-box", "host-name", "<host>", KnownKind.HOST),
    )
    detector = leaks.Detector(known)
    (where,) = detector._regexes
    text = "JÖRG on Büro-GPU-07, kelvin-box and KELVIN-BOX; jörg\u0130 j\u00d6rg bÜro x" * 3
    starts = where.places.starts(leaks._Places(text))
    assert starts is not None
    lead = re.compile(r"(?i:(?=j\u00f6rg|b\u00fcro|\u212aelv))")
    assert list(starts) == [m.start() for m in lead.finditer(text)]
    # and in a text of ASCII alone, only the one that `(?i)` can read there
    ascii_text = "kelvin-box jorg buro Kelvin-Box"
    starts = where.places.starts(leaks._Places(ascii_text))
    assert starts is not None and list(starts) == [0, 21]
    plain = reference.Detector(
        [reference.Known(k.value, k.category, k.placeholder, reference.KnownKind(k.kind.value))
         for k in known]
    )  # fmt: skip
    for sample in (text, ascii_text, "/home/J\u00d6RG/x BÜRO-gpu-07.lan"):
        found = detector.scan_text(sample)
        assert repr(found) == repr(plain.scan_text(sample))
        assert found
    found = detector.scan_text("user=J\u00d6RG ssh J\u00d6RG@B\u00dcRO-GPU-07 /srv/x/J\u00f6RG/y")
    assert [h.placeholder for h in found] == ["<user>", "<user>@<host>", "<user>"]


def test_known_patterns_compile_where_a_text_first_needs_them() -> None:
    # Export builds a detector of the values collected so far for each name it embeds in a
    # placeholder: one that never meets the start of a value compiles nothing.
    detector = leaks.Detector(KNOWN, encoded=False)
    assert detector.scan_text("NUM_GPUS LD_LIBRARY_PATH CUDA_VISIBLE_DEVICES") == []
    assert all(r._regex is None and r._split is None for r in detector._regexes)
    hits = detector.scan_text("weights in /srv/private/models/x, token s3cr3t-Value.x")
    assert [h.placeholder for h in hits] == ["/path/to/model", "<token>"]
    assert any(r._regex is not None or r._split is not None for r in detector._regexes)


def test_a_run_is_found_once_whatever_the_places_inside_it() -> None:
    chars = frozenset("ab-")
    assert leaks._run_starts("ab", [0, 1], chars) == [0]
    assert leaks._run_starts("x-ab@", [2, 3], chars) == [1]
    assert leaks._run_starts("-a@b@", [2, 4], chars) == [0, 3]
    assert leaks._run_starts("@@", [0, 1], chars) == []
    assert leaks._run_starts("@@", None, chars) is None


# --- hostile texts: the same hits as the plain scan, and no hang ----------------------------

# What the end of a hostile run can be: nothing, a value, a secret value, a separator.
HOSTILE_TAILS = (
    "", "=abcdefgh1", "_token=abcdefgh1", ": Bearer abcdefghijkl1", "\x02x", " 1",
    # a value in quotes, after a line's continuation, the next item of a printed list
    ' "x', ' "Zq8Wm3Xr5Tb7"', " \\\n x", " \\\n Zq8Wm3Xr5Tb7", "', 'x'", "', 'Zq8Wm3Xr5Tb7'",
    " ^\r\n x", " `\n Zq8Wm3Xr5Tb7", '",\n  "x', '",\n  "Zq8Wm3Xr5Tb7', "', 'Pa55wd'",
    "', 'Pa55word'", ' "Xk9#mP2$vL7!qR4', "`\nZq8Wm3Xr5Tb7",
    # the next item of a YAML or a flow list, past comments; cmd's `^` with no space
    "\n- x", "  # c\n\n  - Zq8Wm3Xr5Tb7", ", Zq8Wm3Xr5Tb7", ",\n x", "^\nZq8Wm3Xr5Tb7",
)  # fmt: skip


@pytest.mark.parametrize("unit", HOSTILE_UNITS)
def test_repeated_fragments_give_the_same_hits_as_the_plain_scan(unit: str) -> None:
    # Short texts: the plain scan reads them again at every place (it is quadratic).
    for head in ("", "x", " -", "--"):
        for tail in HOSTILE_TAILS:
            text = head + unit * (600 // len(unit)) + tail
            same_secret_matches(text)
            same_matches(text)
            same_text(text)
    same_text_odd_known(unit * (600 // len(unit)))
    same_document({"api_key": unit * 50, unit * 50: [unit * 20, unit, "--token", unit * 30]})


@pytest.mark.parametrize("unit", HOSTILE_UNITS)
def test_each_run_is_read_a_bounded_number_of_times(
    unit: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Not timed: the linear scans read names, flags and values through `_end_of`; however
    # many places a run holds, its characters are read a few times in all, never once per
    # place (the text, its decoded views, and a document's text: at most 3 views of a scan).
    read = 0
    plain = leaks._end_of

    def counted(run: re.Pattern[str], text: str, at: int) -> int:
        nonlocal read
        end = plain(run, text, at)
        read += end - at
        return end

    monkeypatch.setattr(leaks, "_end_of", counted)
    text = unit * (30000 // len(unit)) + "=abcdefgh1"
    leaks.scan_text(text)
    detectors()[0].scan_text(text)
    assert read <= 20 * len(text)


# A hang guard, not a speed test: a quarter of a megabyte of one fragment is scanned in well
# under a second on a laptop; a scan that reads each run again at every place inside it took
# minutes to hours (`"key" * 85000`: about 5 minutes).
HANG_CHARS = 1 << 18
HANG_CPU_SECONDS = 10.0


@pytest.mark.parametrize("unit", HOSTILE_UNITS)
def test_a_long_repeated_fragment_cannot_hang_the_scan(unit: str) -> None:
    text = unit * (HANG_CHARS // len(unit))
    started = time.process_time()
    leaks.scan_text(text + "=abcdefgh1")
    leaks.scan_document({"a": text, text: ["--api-key", text], "b": [unit] * 4096})
    detectors()[0].scan_text(text + "@x")
    assert time.process_time() - started < HANG_CPU_SECONDS, "the leak scan is not linear"


@pytest.mark.parametrize("tail", HOSTILE_TAILS)
def test_a_long_flag_name_cannot_hang_the_scan(tail: str) -> None:
    # (helper-126) A flag's name of one secret word after another, then a value too short:
    # the pattern tried every shorter name before a secret word in the run (256 KB before
    # `', 'x'`: minutes). Each way to a value is refused before the pattern is tried.
    text = "--" + "secret" * (HANG_CHARS // 6) + tail
    started = time.process_time()
    leaks.scan_text(text)
    leaks.scan_document({"a": [text, "x"]})
    assert time.process_time() - started < HANG_CPU_SECONDS, "the leak scan is not linear"


@pytest.mark.parametrize("unit", HOSTILE_UNITS)
def test_a_character_read_as_ascii_cannot_hang_the_scan(unit: str) -> None:
    # A text that holds one (`K` for `k`, a fullwidth `Ａ`, `²`) is read in a second view
    # too, and its known values' places are read as `(?i)` reads it: each hit of that view
    # was masked from a copy of the whole hit (`-----BEGIN PRIVATE KEY-----` repeated, each
    # to the string's end: 256 KB took 59 s), and a known value's pattern searched every
    # character (`/al` repeated: 18 s).
    text = unit * (HANG_CHARS // len(unit))
    started = time.process_time()
    for odd in ("\u212a", "\uff21", "\u00b2"):
        leaks.scan_text(text + odd)
    detectors()[0].scan_text(text + "\u212a")
    assert time.process_time() - started < HANG_CPU_SECONDS, "the leak scan is not linear"


# --- every sample bundle and the hostile corpus --------------------------------------------


def _archive_members(data: bytes) -> Iterator[tuple[str, bytes]]:
    """The regular members of a tar (gzip or not), each read up to MAX_MEMBER_BYTES."""
    if data[:2] == b"\x1f\x8b":
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(data)) as stream:
                data = stream.read(64 << 20)
        except (OSError, EOFError):
            return
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            for member in tar:
                if not member.isfile() or member.size > MAX_MEMBER_BYTES:
                    continue
                handle = tar.extractfile(member)
                if handle is not None:
                    yield member.name, handle.read()
    except (tarfile.TarError, OSError, EOFError):
        return


def _files(root: Path) -> Iterator[tuple[str, bytes]]:
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.stat().st_size > MAX_MEMBER_BYTES:
            continue
        data = path.read_bytes()
        name = path.relative_to(REPO).as_posix()
        if path.name.endswith((".tar.gz", ".tgz", ".tar")):
            for member, content in _archive_members(data):
                yield f"{name}!{member}", content
        else:
            yield name, data


def check_file(data: bytes) -> None:
    same_bytes(data)
    try:
        document = json.loads(data)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return
    same_document(document)


@cache
def sample_files() -> tuple[tuple[str, bytes], ...]:
    return tuple(_files(SAMPLES))


def _distinct(files: Iterable[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
    """Each content once, under its first name: check_file is a function of the bytes alone
    (the samples: 1,432 files, 330 distinct, the negative ones being the seed's with one
    edit; the hostile corpus: 13,656 members, 168 distinct)."""
    distinct: dict[bytes, tuple[str, bytes]] = {}
    for name, data in files:
        distinct.setdefault(hashlib.sha256(data).digest(), (name, data))
    return list(distinct.values())


def test_every_sample_bundle_file_gives_the_same_hits() -> None:
    files = _distinct(sample_files())
    names = [name for name, _ in files]
    assert any("!" in name for name in names), "the archives are read too"
    assert any(name.startswith("sample_bundles/negative/") for name in names)
    assert sum(name.endswith(".json") for name in names) > 100
    hits = 0
    for name, data in files:
        try:
            check_file(data)
        except AssertionError as error:
            raise AssertionError(name) from error
        if name.endswith(".json") and data.startswith(b"{"):
            hits += len(reference.scan_document(json.loads(data)))
    assert hits > 0, "some sample holds a hit (the leaked-home-path bundle at least)"


def test_the_hostile_corpus_gives_the_same_hits(tmp_path: Path) -> None:
    if str(HOSTILE) not in sys.path:
        sys.path.insert(0, str(HOSTILE))
    import corpus

    members: list[tuple[str, bytes]] = []
    for case in corpus.CASES:
        folder = tmp_path / case.name
        folder.mkdir()
        path = case.build(folder)
        files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
        for file in files:
            if file.stat().st_size > MAX_MEMBER_BYTES:
                continue
            data = file.read_bytes()
            found = list(_archive_members(data)) or [(file.name, data)]
            members += [(f"{case.name}: {name}", content) for name, content in found]
    assert len(members) > 1000
    distinct = _distinct(members)
    assert len(distinct) > 100
    for name, content in distinct:
        try:
            check_file(content)
        except AssertionError as error:
            raise AssertionError(name) from error


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["://", ":", "/", "bearer", "b", "bear", "er", "x"]), max_size=12))
def test_the_words_found_by_a_pattern_are_all_their_occurrences(parts: list[str]) -> None:
    text = "".join(parts)
    for word, pattern in (("://", leaks._SCHEME_END), ("bearer", leaks._BEARER)):
        assert list(leaks._starts(pattern, text)) == list(leaks._occurrences(text, word))
