"""The leak scanner: each category found, and the look-alikes of model output left alone."""

from __future__ import annotations

import base64
import bz2
import gzip
import hashlib
import itertools
import json
import lzma
import re
import time
import zlib
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verifier import leaks
from verifier.leaks import (
    CATEGORIES,
    Detector,
    Known,
    KnownKind,
    LeakHit,
    scan_bytes,
    scan_document,
    scan_text,
)

HF_TOKEN = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123456"
GROQ = "gsk_8fJ2kLq9ZxW4vBn7Tm1sYc3Ra6Hd0PeU5gKoWq2E"
XAI = "xai-" + "Q2w3E4r5T6y7U8i9O0p1A2s3D4f5G6h7" * 2
GOOGLE_OAUTH = "ya29.a0AfB_byC9dEfGhIjKlMnOpQr0123456"
PPLX = "pplx-" + "4f9e2a7b1c8d3e6f0a5b9c2d7e1f8a3b" * 2
GOOGLE_SERVICE = "ya29.c.c0ASRK0GZ8kH3pQ9vLmN2xR7tY1uW4sA6dF8gJ0kL2"
OPENAI_KEY = "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0kLmN"
GITHUB_TOKEN = "ghp_" + "0123456789abcdefABCDEF0123456789abcd"


def categories(text: str) -> list[str]:
    return [hit.category for hit in scan_text(text)]


@pytest.mark.parametrize(
    ("text", "category", "found"),
    [
        ("model at /home/alice/models/q4.gguf", "home-path", "/home/alice/models/q4.gguf"),
        ("cache /Users/bob/Library/Caches/x", "home-path", "/Users/bob/Library/Caches/x"),
        ("HF_HOME=/root/.cache/huggingface", "home-path", "/root/.cache/huggingface"),
        ("C:\\Users\\carol\\models\\m.gguf", "home-path", "C:\\Users\\carol\\models\\m.gguf"),
        ('"C:\\\\Users\\\\carol\\\\m.gguf"', "home-path", "C:\\\\Users\\\\carol\\\\m.gguf"),
        ("socket /tmp/llama-8080.sock", "temp-path", "/tmp/llama-8080.sock"),
        ("TMPDIR=/var/tmp/run42/", "temp-path", "/var/tmp/run42/"),
        ("/var/folders/zz/zyxvpxvq6csfxvn_n0000000000000/T/", "temp-path", None),
        ("/private/var/folders/ab/T/x", "temp-path", "/private/var/folders/ab/T/x"),
        ("/dev/shm/sem.llama", "temp-path", "/dev/shm/sem.llama"),
        ("listening on 192.168.1.20:8080", "ip-address", "192.168.1.20"),
        ("peer 10.0.0.7.", "ip-address", "10.0.0.7"),
        ("host 8.8.8.8 answered", "ip-address", "8.8.8.8"),
        ("addr fe80::1ff:fe23:4567:890a%eth0 up", "ip-address", "fe80::1ff:fe23:4567:890a%eth0"),
        ("addr 2001:db8::8a2e:370:7334", "ip-address", "2001:db8::8a2e:370:7334"),
        ("ether 3c:22:fb:12:ab:9e", "mac-address", "3c:22:fb:12:ab:9e"),
        ("MAC 00-1A-2B-3C-4D-5E", "mac-address", "00-1A-2B-3C-4D-5E"),
        (f"HF_TOKEN={HF_TOKEN}", "token", HF_TOKEN),
        (f"key {OPENAI_KEY} used", "token", OPENAI_KEY),
        (GITHUB_TOKEN, "token", GITHUB_TOKEN),
        ("github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "token", None),
        ("AWS AKIAIOSFODNN7EXAMPLE", "token", "AKIAIOSFODNN7EXAMPLE"),
        ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.sig", "token", None),
        ('"authorization": "Basic dXNlcjpwYXNzd29yZA=="', "token", None),
        ("curl -H 'bearer abcdef0123456789xyz'", "token", "abcdef0123456789xyz"),
        ("xoxb-123456789012-1234567890123-AbCdEf", "token", None),
        (
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\n",
            "private-key",
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
        ),
        ("-----BEGIN OPENSSH PRIVATE KEY-----", "private-key", None),
        ("contact alice.smith@corp.co.uk today", "email", "alice.smith@corp.co.uk"),
        ("<bob+ci@mail.example-corp.io>", "email", "bob+ci@mail.example-corp.io"),
    ],
)
def test_each_category_is_found(text: str, category: str, found: str | None) -> None:
    hits = scan_text(text)
    assert [hit.category for hit in hits] == [category]
    hit = hits[0]
    assert text[hit.start : hit.end] == (found if found is not None else text[hit.start : hit.end])
    assert hit.excerpt != text[hit.start : hit.end]
    assert "…" in hit.excerpt


def test_every_category_has_a_positive_case() -> None:
    text = " ".join(
        [
            "/home/alice/x",
            "/tmp/abc",
            "192.168.0.2",
            "3c:22:fb:12:ab:9e",
            HF_TOKEN,
            "a@corp.io",
            "ssh zed@buildbox",
            "http://buildbox:8080/",
            "-----BEGIN PRIVATE KEY-----",  # last: with no END, the rest of the text is its
        ]
    )
    assert sorted(categories(text)) == sorted(CATEGORIES)


@pytest.mark.parametrize(
    "text",
    [
        hashlib.sha256(b"x").hexdigest(),
        f"sha256:{hashlib.sha256(b'y').hexdigest()}",
        "/path/to/model",
        "/path/to/mlxcel-server --model /path/to/model --port 8080",
        "/home/<user>/models",
        "/Users/<user>/x",
        "ssh <user>@<host>",
        "cuda 12.4, cudnn 9.13.0, driver 580.178.04, torch 2.5.1+cu124",
        "v1.2.3.4 and build 1.2.3.4.5",
        "2026-11-30T12:34:56Z",
        "2026-11-30T12:34:56.123456+00:00",
        "at 12:34:56 the run ended; 01:02:03:04 elapsed",
        "The answer is 42. Pi is 3.14159, e is 2.71828, and 1.5e-3 is small.",
        "Scores: 0.91, 0.87 and 0.95 (n=12, p<0.05).",
        "e.g. the model, i.e. the server, etc.",
        "127.0.0.1",
        "127.8.9.10",
        "localhost:8080 and 0.0.0.0:8080",
        "::1",
        "[::1]:8080",
        "::",
        "std::vector<int> and a::b::c",
        "300.1.2.3 and 1.2.3.256 and 01.02.03.04",
        "00:00:00:00:00:00",
        "user@example.com and admin@localhost",
        "hf_hub_download and sk-learn",
        "sk-this-is-a-long-kebab-case-name-without-digits",
        "an sk-learn_compatible_estimator_api and sk-learn-compatible-estimator-api",
        "Bearer tokens are sent in the Authorization header.",
        "Authorization: Bearer <token>",
        "Authorization: Bearer $HF_TOKEN",
        "the user's home directory /home/ and /tmp/ are placeholders",
        "/srv/home/alice is not a home path here",
        "a temp dir such as /tmp",
        "uuid 123e4567-e89b-12d3-a456-426614174000",
    ],
)
def test_look_alikes_are_not_leaks(text: str) -> None:
    assert scan_text(text) == []


def test_token_excerpt_never_holds_the_secret() -> None:
    for token in (HF_TOKEN, OPENAI_KEY, GITHUB_TOKEN, "AKIAIOSFODNN7EXAMPLE"):
        (hit,) = scan_text(f"x {token} y")
        assert hit.category == "token"
        secret_tail = token[-8:]
        assert secret_tail not in hit.excerpt
        assert len(hit.excerpt) < len(token) // 2 + 4


def test_authorization_header_keeps_the_scheme_in_the_excerpt() -> None:
    (hit,) = scan_text("Authorization: Bearer abcdefghij0123456789")
    assert hit.excerpt.startswith("Authorization: Bearer ")
    assert "0123456789" not in hit.excerpt


def test_private_key_excerpt_is_the_header_only() -> None:
    (hit,) = scan_text("-----BEGIN EC PRIVATE KEY-----\nSECRETBODY\n-----END EC PRIVATE KEY-----")
    assert hit.excerpt == "-----BEGIN EC PRIVATE KEY-----…"


def test_path_excerpt_masks_the_middle() -> None:
    (hit,) = scan_text("/home/alice/private/notes.txt")
    assert hit.excerpt.startswith("/home/al")
    assert hit.excerpt.endswith(".txt")
    assert "alice/private" not in hit.excerpt


def test_overlapping_matches_are_reported_once() -> None:
    hits = scan_text("Authorization: Bearer hf_" + "a" * 30 + "1 at /home/al/10.1.2.3/x")
    assert [h.category for h in hits] == ["token", "home-path"]


def test_hits_are_in_order_with_offsets() -> None:
    text = "a@corp.io then 10.1.1.1 then /tmp/x"
    hits = scan_text(text)
    assert [text[h.start : h.end] for h in hits] == ["a@corp.io", "10.1.1.1", "/tmp/x"]
    assert all(isinstance(h, LeakHit) for h in hits)


def test_scan_bytes_decodes_utf8_and_tolerates_bad_bytes() -> None:
    hits = scan_bytes("résumé at /home/zoë/cv".encode() + b"\xff\xfe /tmp/q")
    assert [h.category for h in hits] == ["home-path", "temp-path"]


def test_pathological_input_is_fast() -> None:
    inputs = [
        "a" * 100_000 + "@",
        "a@" + "b" * 100_000,
        "a@" + "b." * 50_000,
        ":" * 100_000,
        "1." * 100_000,
        "-----BEGIN PRIVATE KEY-----" * 2000,
        "Authorization: " * 10_000,
        "/home/" * 20_000,
        "eyJ" * 100_000,
        "eyJaaaaaaaaaaaa.eyJaaaa." * 20_000,
    ]
    started = time.perf_counter()
    for text in inputs:
        scan_text(text)
    assert time.perf_counter() - started < 5


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=500))
def test_hits_never_overlap_and_stay_in_bounds(text: str) -> None:
    hits = scan_text(text)
    for hit in hits:
        assert 0 <= hit.start < hit.end <= len(text)
        assert hit.category in CATEGORIES
    for before, after in itertools.pairwise(hits):
        assert before.end <= after.start


@pytest.mark.parametrize(
    ("text", "category", "found"),
    [
        ("at \\/home\\/bob\\/m.gguf now", "home-path", "\\/home\\/bob\\/m.gguf"),
        ("at \\u002fhome\\u002fbob\\u002fm now", "home-path", "\\u002fhome\\u002fbob\\u002fm"),
        # the wider escapes of a code point: JavaScript's and Rust's, Python's, `escape()`'s
        ("at \\u{2f}home\\u{2f}bob\\u{2f}m now", "home-path", "\\u{2f}home\\u{2f}bob\\u{2f}m"),
        ("at \\U0000002fhome\\U0000002Fbob now", "home-path", "\\U0000002fhome\\U0000002Fbob"),
        ("p %u002Fhome%u002Fal%u002Fx", "home-path", "%u002Fhome%u002Fal%u002Fx"),
        ("q=%2Fhome%2Fal%2Fx&y", "home-path", "%2Fhome%2Fal%2Fx&y"),
        ("q=%2fhome%2fal%2fx", "home-path", "%2fhome%2fal%2fx"),
        ("open file:///home/al/x", "home-path", "///home/al/x"),
        ("see /home//al/x", "home-path", "/home//al/x"),
        ("see ~al/notes", "home-path", "~al/notes"),
        ("see /var/home/al/x", "home-path", "/var/home/al/x"),
        ("C:\\Users\\al\\m.gguf", "home-path", "C:\\Users\\al\\m.gguf"),
        ("c:\\users\\al\\m.gguf", "home-path", "c:\\users\\al\\m.gguf"),
        ("D:/USERS/Al/x", "home-path", "D:/USERS/Al/x"),
        # a Windows user's folder with a space, before a separator or a quote
        ("C:\\Users\\Bob Smith\\AppData\\x", "home-path", "C:\\Users\\Bob Smith\\AppData\\x"),
        ('cd "C:\\Users\\Bob Smith"', "home-path", "C:\\Users\\Bob Smith"),
        ("C:\\Users\\Bob and more", "home-path", "C:\\Users\\Bob"),
        ("see /mnt/c/Users/Jo Ann Lee/x y", "home-path", "/mnt/c/Users/Jo Ann Lee/x"),
        ("see /mnt/c/Users/al/x", "home-path", "/mnt/c/Users/al/x"),
        ("see /cygdrive/d/users/al/x", "home-path", "/cygdrive/d/users/al/x"),
        ("open file://localhost/home/al/x", "home-path", "/home/al/x"),
        ("see /home/./al/x", "home-path", "/home/./al/x"),
        ("see /Users/././al", "home-path", "/Users/././al"),
        ("see /./home/al/x", "home-path", "/./home/al/x"),
        ("see /var/./home//al", "home-path", "/var/./home//al"),
        ("see /usr/home/al/x", "home-path", "/usr/home/al/x"),
        ("see /System/Volumes/Data/Users/al", "home-path", "/System/Volumes/Data/Users/al"),
        ("see /mnt/c/UsErS/al/x", "home-path", "/mnt/c/UsErS/al/x"),
        ("see /mnt/./c/Users/./al", "home-path", "/mnt/./c/Users/./al"),
        ("git bash /c/Users/al/x", "home-path", "/c/Users/al/x"),
        ("open FILE://LocalHost/home/al/x", "home-path", "/home/al/x"),
        ("open \\\\wsl$\\Ubuntu\\home\\al\\x now", "home-path", "\\\\wsl$\\Ubuntu\\home\\al\\x"),
        ("at //wsl.localhost/Debian/root/x", "home-path", "//wsl.localhost/Debian/root/x"),
        ("addr fdab:cdef::abcd up", "ip-address", "fdab:cdef::abcd"),
        ("addr ::ffff:10.1.2.3 up", "ip-address", "::ffff:10.1.2.3"),
        ("http://[fe80::1%25eth0]:8080/", "ip-address", "fe80::1%25eth0"),
        ("connected to 34.12.5.6", "ip-address", "34.12.5.6"),
        ("http://34.12.5.6:8080/", "ip-address", "34.12.5.6"),
        ("Authorization: Bearer abcdefghijklmnopQRST", "token", "abcdefghijklmnopQRST"),
        ("HF_TOKEN=abcdefghij", "token", "abcdefghij"),
        ('"db_password": "correcthorse"', "token", "correcthorse"),
        ("--hf_token=abc", "token", "abc"),
        ("--api-key abcdEFGH1234", "token", "abcdEFGH1234"),
        ("gcc -I/home/bob/include -O2 x.c", "home-path", "/home/bob/include"),
        ("gcc -isystem/home/bob/include x.c", "home-path", "/home/bob/include"),
        ("notes in ~j/2024/notes.txt", "home-path", "~j/2024/notes.txt"),
        ("ld -L/tmp/build-7/lib", "temp-path", "/tmp/build-7/lib"),
        ("key wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "token", None),
        ("ssh zed@buildbox", "user-name", "zed@buildbox"),
        ("key sk-abcdefghijklmnopqrstuvwxyz ok", "token", "sk-abcdefghijklmnopqrstuvwxyz"),
        ("key sk-proj-AbCdEfGhIjKlMnOpQrStUv ok", "token", "sk-proj-AbCdEfGhIjKlMnOpQrStUv"),
        (
            "session eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.SflKxwRJSMeKKF2QT4fw ok",
            "token",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.SflKxwRJSMeKKF2QT4fw",
        ),
        ("none eyJhbGciOiJub25lIn0.eyJzdWIiOiIxIn0. ok", "token", None),
        ("http://buildbox.lan:8080/x", "host-name", "buildbox.lan"),
    ],
)
def test_every_form_is_found_where_it_is(text: str, category: str, found: str | None) -> None:
    hits = scan_text(text)
    assert [hit.category for hit in hits] == [category]
    if found is not None:
        assert text[hits[0].start : hits[0].end] == found


@pytest.mark.parametrize(
    "text",
    [
        "libcublas 13.0.2.14",
        "13.0.2.14",
        "cudnn_runtime 9.1.0.70",
        "v1.0.0.1",
        "1.0.0.1",
        "lora-1.0.0.2.safetensors",
        "libcublas.so.13.0.2.14",
        "version: 10.2.1.243",
        "驱动版本为 10.2.1.243、バージョン：10.2.1.243、버전 10.2.1.243",  # in CJK prose
        "org/model and https://huggingface.co/org/model",
        "prompt_tokens: 42, cached_tokens_pointer: /usage/prompt_tokens",
        '"eos_token": "<|im_end|>", "token": "Hello"',
        "upgrade from 1.0.0.1 to 1.0.0.2",
        "pip install foo@latest",
        "e466f5118b8e25d0c9a295ab017468db77b87313",
        "--api-key <token> and HF_TOKEN=<token>",
        "the --api-key flag",
        # a quoted value is most often a placeholder in a reply that explains a command
        "llama-server --api-key \"sk-no-key-required\" --token='your_token_here'",
        '--api-key \'not-needed\' --token="$HF_TOKEN" --api-key "YOUR_API_KEY"',
        "the search takes ~n/2 steps, ~N/4 on average, ~n/2.5 at most.",  # maths, not a home
        "https://example.com/docs/-v/home/al/x",  # a URL's path, as without the `-v`
        "版本号 10.2.1.243、버전은 10.2.1.243、バージョンが10.2.1.243",
        "GET https://example.com/api/users/al/x and /v1/users/bob",
        "/mnt/data/users/al",
        "https://example.localhost/home/al",
        "http://localhost/home/index.html and http://localhost/tmp/x",
        "eyJ alone, eyJabc.eyJ.x, and xeyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abc",
    ],
)
def test_versions_and_public_words_are_not_leaks(text: str) -> None:
    assert scan_text(text) == []


def test_a_document_is_scanned_as_one_text_with_each_hit_located() -> None:
    document = {
        "a": {"api_token": "abcdefgh", "argv": ["--api-key", "x", "--port", "1"]},
        "v": {"version": "13.0.2.14", "notes": ["ok", "see /home/al/x"]},
        "/home/bo/k": 1,
    }
    found = {(hit.where, hit.hit.category) for hit in scan_document(document)}
    assert found == {
        ("/a/api_token", "token"),
        ("/a/argv/1", "token"),
        ("/v/notes/1", "home-path"),
        (" (an object key)", "home-path"),
    }


def test_a_document_of_many_short_strings_is_scanned_quickly() -> None:
    document = {"items": [f"s{i % 997}" for i in range(300_000)], "x": "see /home/al/x"}
    started = time.perf_counter()
    hits = scan_document(document)
    assert time.perf_counter() - started < 5
    assert [hit.where for hit in hits] == ["/x"]


def test_escaped_and_repeated_input_is_fast() -> None:
    started = time.perf_counter()
    for text in ("%2F" * 50_000, "\\u002f" * 30_000, "/" * 100_000, "\\/" * 50_000):
        scan_text(text)
    assert time.perf_counter() - started < 5


@pytest.mark.parametrize(
    "text",
    [
        "SECRET_" + "X" * 70 + "=Hunter2Hunter2x",
        "--inference-gateway-organization-specific-upstream-provider-access-password hunter2x9",
        "CLIENT_SECRET_FOR_THE_PRODUCTION_ENVIRONMENT_OF_THE_INFERENCE_GATEWAY_SERVICES: Hunter2x9",
    ],
)
def test_a_secret_behind_a_long_name_is_found(text: str) -> None:
    """However long the name around its secret word (a bound on it once let these through)."""
    assert [hit.category for hit in scan_text(text)] == ["token"]


@pytest.mark.parametrize("escape", ["\\n", "\\t", "\\r", "\\b", "\\f", '\\"'])
def test_a_path_after_a_json_escape_is_found(escape: str) -> None:
    """Text that holds JSON or a repr: the letter of `\\n` is no letter before the path."""
    hits = scan_text(f'{{"error":"cannot open{escape}/home/alice/work/out.bin"}}')
    assert [h.category for h in hits] == ["home-path"]
    assert scan_text("cannot open\\\\n/home/alice") != []  # escaped twice: the second view


@pytest.mark.parametrize(
    "url",
    [
        "https://bob:S3cretPassw0rd@example.com/v1",
        "http://bob:pw@10.0.0.5:9000/",
        "git+ssh://deploy:hunter2@git.example.org/x.git",
    ],
)
def test_a_password_in_a_urls_credentials_is_found(url: str) -> None:
    password = url.split("://", 1)[1].split("@", 1)[0].split(":", 1)[1]
    hits = [h for h in scan_text(f"mirror {url} used") if h.category == "token"]
    assert len(hits) == 1
    start = len("mirror ") + url.index(":" + password + "@") + 1
    assert (hits[0].start, hits[0].end) == (start, start + len(password))
    assert password not in hits[0].excerpt or len(password) < 5
    assert scan_text("see https://bob:<token>@example.com/v1") == []  # its placeholder: no hit


@pytest.mark.parametrize(
    "text",
    [
        "see \\x2fhome\\x2falice\\x2fx",
        "see &#47;home&#47;alice&#47;x",
        "see &#x2F;home&#x2f;alice/x",
    ],
)
def test_a_path_in_c_or_html_escapes_is_found(text: str) -> None:
    assert [h.category for h in scan_text(text)] == ["home-path"]
    assert scan_text("&#1114112; &#x110000; &#9999999;") == []  # past Unicode: decoded as U+FFFD


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("https://acct.blob.core.windows.net/m/q.bin?sv=2022-11-02&sp=r&sig=Qm9ndXNTYXNTaWdu%3D",
         "Qm9ndXNTYXNTaWdu%3D"),
        ("?X-Amz-Credential=AKID%2F20261201&X-Amz-Signature=9f86d081884c7d659a2feaa0c55ad015",
         "9f86d081884c7d659a2feaa0c55ad015"),
        ("login pass=Tr0ub4dor3xyz", "Tr0ub4dor3xyz"),
        ("DB_PWD: Tr0ub4dor3xyz", "Tr0ub4dor3xyz"),
        ('{"signature": "MEUCIQDx9f86d081884c7d"}', "MEUCIQDx9f86d081884c7d"),
        ("&Signature=/vjbyPxybdZaNmGa+yT272YEAiv4=", "/vjbyPxybdZaNmGa+yT272YEAiv4="),
        ("X-Hub-Signature-256: sha256=757107ea0eb2509fc211221cce984b8a37570b6d",
         "sha256=757107ea0eb2509fc211221cce984b8a37570b6d"),
    ],
)  # fmt: skip
def test_a_signature_or_password_under_a_short_name_is_found(text: str, secret: str) -> None:
    """audit 11: `sig`, `Signature`, `pass` and `pwd` name secrets too, where what they name
    looks like one (`_tokenish`) and is no path."""
    at = text.index(secret)
    assert any(
        h.category == "token" and h.start <= at and at + len(secret) <= h.end
        for h in scan_text(text)
    )


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=Zm9vYmFyYmF6cXV4Zm9v"
         "YmFyYmF6cXV4Zm9vYmFy+/==;EndpointSuffix=core.windows.net",
         "Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4Zm9vYmFy+/=="),
        ("Endpoint=sb://acme.servicebus.windows.net/;SharedAccessKeyName=RootManage;"
         "SharedAccessKey=AbCdEf0123456789AbCdEf0123456789AbCdEf01234=",
         "AbCdEf0123456789AbCdEf0123456789AbCdEf01234="),
        ('{"accountKey": "Zm9vYmFyYmF6cXV4Zm9v"}', "Zm9vYmFyYmF6cXV4Zm9v"),
    ],
)  # fmt: skip
def test_an_azure_connection_strings_key_is_found(text: str, secret: str) -> None:
    """Azure's connection strings name their key in camel case (`AccountKey=`,
    `SharedAccessKey=`), which no `*_KEY` rule reads; the key's name beside it
    (`SharedAccessKeyName=`) and other camel-case keys (`primaryKey`, `sortKey`) name no
    secret."""
    at = text.index(secret)
    hits = [h for h in scan_text(text) if h.category == "token"]
    assert len(hits) == 1
    assert hits[0].start <= at and at + len(secret) <= hits[0].end
    assert secret not in hits[0].excerpt
    for spared in (
        "primaryKey=user_id",
        '{"sortKey": "created_at"}',
        "cacheKey=prefix-abc",
        "AccountKey=<your-key>",
        "SharedAccessKeyName=RootManageSharedAccessKey",
    ):
        assert [h for h in scan_text(spared) if h.category == "token"] == [], spared


@pytest.mark.parametrize(
    "text",
    ["PWD=/path/to/home/work", "pwd: ./build", '{"signature": "unsigned"}',
     "signature: verified", "design=Tr0ub4dor3xyz", "bypass=Tr0ub4dor3xyz", "pass=ok",
     "signal: abcdef123456", "sig=100",
     # the fresh-eyed audit's: test results, compiler passes, code and algorithms' signatures
     "PASS: test-tokenizer-0", "ok 1 - pass: test_cache_hit", "Compiler pass: LoopVectorize",
     "pass=GGML_TYPE_F16", "render_pass: ShadowMap2", '{"compile_pass": "O3_fast"}',
     "The method signature: foo_bar(x) is deprecated.", "sig: SIGUSR1", "sig: RSA-SHA256",
     "signature: HMAC-SHA256", "signature=Ed25519Verified", '{"sig": "v1.2.3"}',
     '{"signature": "sha256:ab12cd"}', "PWD: app_v2", "pwd=src/main", "PWD=D:\\work\\x-2128",
     "--pass 2", "--pass-through Tr0ub4dor3xyz"],
)  # fmt: skip
def test_the_short_names_spare_paths_words_and_longer_names(text: str) -> None:
    assert [h for h in scan_text(text) if h.category == "token"] == []


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("eth0 hwaddr 3c22.fb12.3456 up", "3c22.fb12.3456"),
        ("mac 3C22.FB12.3456.", "3C22.FB12.3456"),
        ('{"mac":"3c22.fb12.3456"}', "3c22.fb12.3456"),
        ("client ip-192-168-40-23.ec2.internal", "ip-192-168-40-23"),
        ("node ip-10-0-3-17", "ip-10-0-3-17"),
        ("pod k8s-ip-10-0-3-17 and", "ip-10-0-3-17"),
        ("NODE_IP-10-0-3-17", "IP-10-0-3-17"),
    ],
)
def test_cisco_macs_and_addresses_in_machine_names_are_found(text: str, found: str) -> None:
    (hit,) = scan_text(text)
    assert text[hit.start : hit.end] == found


@pytest.mark.parametrize(
    "text",
    ["build 2024.1203.0001", "ip-127-0-0-1", "ip-300-1-1-1", "zip-10-0-0-1", "ip-10-0-0-1-2",
     "mac 0000.0000.0000", "mac ffff.ffff.ffff", "hash e3b0.c442.98fc", "cafe.babe.dead",
     "model version 2024.1203.abcd"],
)  # fmt: skip
def test_dotted_numbers_loopback_and_longer_names_are_not_addresses(text: str) -> None:
    assert scan_text(text) == []


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("log of worker_10.0.3.17 follows", "10.0.3.17"),
        ("node-10.0.3.18: ready", "10.0.3.18"),
        ("pod_172.16.4.2", "172.16.4.2"),
        ("server-192.168.40.23:8000", "192.168.40.23"),
        ('{"from": "gpu-box_100.64.1.9"}', "100.64.1.9"),
        ("link-169.254.3.4", "169.254.3.4"),
        ("hôte-192.168.3.17", "192.168.3.17"),  # after a letter past ASCII
        ("节点_172.16.3.17", "172.16.3.17"),
        ("node1-10.0.3.17", "10.0.3.17"),  # a machine's word, its number, one or two glues
        ("ray-worker__10.0.3.17", "10.0.3.17"),
        ("gpuHost-10.0.3.17", "10.0.3.17"),
        # helper-99: an address after a word that ends a snake-case name, not a version's
        ("spark_driver: 10.0.3.17", "10.0.3.17"),
        ("inference_runtime: 10.0.3.17", "10.0.3.17"),
        # helper-101: a name a wildcard DNS service answers with the address it spells
        ("http://10.20.30.40.nip.io:8000/v1", "10.20.30.40"),
        ("ingress app.192.168.3.4.SSLIP.IO ready", "192.168.3.4"),
        ("https://34.12.5.6.sslip.io/x", "34.12.5.6"),  # a public one after `://`
        ("workers-10.0.3.17", "10.0.3.17"),
        ("node-01-10.0.3.17", "10.0.3.17"),  # helper-103
        ("node1.10.0.3.17.nip.io", "10.0.3.17"),
    ],
)
def test_a_private_address_glued_after_a_word_is_found(text: str, found: str) -> None:
    """helper-95: a private IPv4 address glued after a word by a dash or an underscore was
    published by export and passed by verify, as were its digits in any other name."""
    (hit,) = scan_text(text)
    assert (hit.category, text[hit.start : hit.end]) == ("ip-address", found)


@pytest.mark.parametrize(
    "text",
    [
        "lora-34.12.5.6",  # a public one so glued reads as a version
        "server-8.8.8.8",
        "lora-10.0.0.7.bin",  # inside a longer name
        "x_10.0.3.17_y",
        "a100-10.0.3.17",  # after a digit
        "TensorRT-10.0.1.6",  # a version word before it
        "tensorrt-10.0.1.6-cp311-none-linux_x86_64.whl",
        "trt_version: 10.0.1.6",
        "TensorRT 10.0.1.6 and libnvinfer 10.0.1.6",
        "cuda_10.0.3.17",
        # helper-99: versions of 10 glued to a package's name; reserved ranges
        "libnvinfer-dev_10.0.1.6-1+cuda12.4_amd64.deb",
        "libcurand-dev-10.3.5.147-h99ab3db_1.conda",
        "openjdk-10.0.2.13",
        "mask-255.255.255.0",
        "pod-192.0.2.10",
        "34.12.5.6.sslip.io.example",  # not the service's own name
        "see 1.2.3.4.nip.io",  # a public one only where a word says it is an address
    ],
)
def test_a_version_glued_after_a_word_is_not_an_address(text: str) -> None:
    assert scan_text(text) == []


def test_a_path_in_octal_escapes_is_found() -> None:
    """audit 11: bash's `$'\\057home...'` and git's quoted paths write bytes in octal."""
    text = "printf $'\\057home\\057alice\\057.cache' and /home/\\303\\266d\\303\\266n/src"
    assert [h.category for h in scan_text(text)] == ["home-path", "home-path"]
    view = leaks._Decoded.of("\\057x\\400\\08")
    assert isinstance(view, leaks._Decoded) and view.text == "/x\\400\\08"


def test_the_user_of_a_urls_credentials_is_found() -> None:
    """(helper-124) The password went, and the name it is the password of was published."""
    import leaks_reference as reference

    text = "clone https://jdoe-ml:S3cretPassw0rd@git.example.org/x.git and http://bob:pw@nas.lan/"
    for scan in (scan_text, reference.scan_text):
        found = {(h.category, text[h.start : h.end]) for h in scan(text)}
        assert {("user-name", "jdoe-ml"), ("token", "S3cretPassw0rd")} <= found
        assert ("user-name", "bob") in found
    assert [h.placeholder for h in scan_text(text) if text[h.start : h.end] == "bob"] == ["<user>"]
    # no user, or no credentials: no name
    assert scan_text("redis://:Hunter2SecretXYZ@localhost:6379/0")[0].category == "token"
    assert len(scan_text("redis://:Hunter2SecretXYZ@localhost:6379/0")) == 1
    assert scan_text("see https://example.org/a:b and ftp://anonymous@ftp.example.org/") == []


@pytest.mark.parametrize(
    "text",
    [
        # a script that spaces its words: as a Latin name, wherever it ends
        "C:\\Users\\\u0930\u093e\u092e\\x",  # राम: a vowel sign after the first letter
        "/home/\u0930\u093e\u092e",
        "/Users/\u0645\u062d\u0645\u0651\u062f/x",  # محمّد: a shadda
        '{"cwd": "/home/\u0645\u062d\u0645\u062f"}',
        "C:\\Users\\Nguy\u1ec5n\\x",
        "\\\\wsl$\\Ubuntu\\home\\\u0930\u093e\u092e",
        # CJK, kana, Hangul: two characters or more, before a separator
        "C:\\Users\\\u674e\u96f7\\Desktop\\run.log",
        "/home/\u674e\u96f7/run.log",
        "\\\\wsl$\\Ubuntu\\home\\\u5c71\u7530\\x",
        "C:\\Users\\\u5c71\u7530 \u592a\u90ce\\x",
        "/home/\u30b8\u30e7\u30f3\u30fb\u30b9\u30df\u30b9/Documents",  # ジョン・スミス
        "C:\\Users\\\uae40\ubbfc\uc218\\x",  # 김민수
        "C:\\Users\\li\u674e\u96f7\\x",  # a glued script's letters after a Latin one
        # (helper-127) the POSIX spelling of a Windows home: its words after a space
        "/mnt/c/Users/Jos\u00e9 Garc\u00eda/x",
        "/mnt/c/Users/\u0645\u062d\u0645\u062f \u0639\u0644\u064a/x",
        "/mnt/c/Users/\u5c71\u7530 \u592a\u90ce/x",
    ],
)
def test_a_home_of_a_name_in_any_script_is_found(text: str) -> None:
    """(helper-125's P1-4) A home's name in a script past Latin, Greek and Cyrillic was no
    name: `C:\\Users\\李雷\\Desktop` was published whole."""
    import leaks_reference as reference

    # the whole path is the hit (in the JSON text, the member's string)
    path = text.removeprefix('{"cwd": "').removesuffix('"}')
    start = len("open ") + text.index(path)
    for scan in (scan_text, reference.scan_text):
        hits = scan(f"open {text}")
        assert [(h.category, h.start, h.end) for h in hits] == [
            ("home-path", start, start + len(path))
        ], text


@pytest.mark.parametrize(
    "prose",
    [
        # (helper-126) prose that glues a word to a folder's name; Thai, Lao, Khmer,
        # Myanmar and Tibetan names are none of a generic home's: their prose is written so
        "\u7528\u6237\u76ee\u5f55\u90fd\u5728/home/\u4e0b\u3002",  # 用户目录都在/home/下。
        "\u628a/home/\u4e0e/var/\u5206\u5f00",  # 把/home/与/var/分开
        "/Users/\u4e0e/Volumes/\u7684\u533a\u522b",
        "\u4f4d\u4e8eC:\\Users\\\u4e0b",  # 位于C:\Users\下
        'C:\\Users\\\u4e0b\u7684"AppData"\u6587\u4ef6\u5939',  # C:\Users\下的"AppData"文件夹
        # 사용자 디렉터리는 /home/에 있습니다
        "\uc0ac\uc6a9\uc790 \ub514\ub809\ud130\ub9ac\ub294 /home/\uc5d0 \uc788\uc2b5\ub2c8\ub2e4",
        "\u0e44\u0e1f\u0e25\u0e4c\u0e43\u0e19/home/\u0e2b\u0e23\u0e37\u0e2d/usr/",  # (Thai)
        "/home/\u060c /var/",  # an Arabic comma
    ],
)
def test_prose_of_scripts_that_glue_words_is_no_home(prose: str) -> None:
    import leaks_reference as reference

    for scan in (scan_text, reference.scan_text):
        assert [h for h in scan(prose) if h.category == "home-path"] == [], prose


@pytest.mark.parametrize(
    ("text", "after"),
    [
        ("C:\\Users\\bob\u7684MAC\u5730\u5740\u662faa:bb:cc:dd:ee:ff", "aa:bb:cc:dd:ee:ff"),
        ("C:\\Users\\bob\u7684\u5730\u5740fe80::1ff:fe23:4567:890a", "fe80::1ff:fe23:4567:890a"),
        ("\\\\wsl$\\U\\home\\bob\u7684MAC\u662faa:bb:cc:dd:ee:ff", "aa:bb:cc:dd:ee:ff"),
        ("C:\\Users\\bob\u7684\u90ae\u7bb1\u662falice@corp.com", "alice@corp.com"),
    ],
)
def test_a_windows_home_does_not_run_on_into_the_prose_after_it(text: str, after: str) -> None:
    """(helper-127) A Windows home's name that took any letter ran on through CJK prose
    glued to it (`C:\\Users\\bob的MAC地址是aa:...`) and hid the next value's start from its
    own pattern: `:bb:cc:dd:ee:ff` was published."""
    import leaks_reference as reference

    for scan in (scan_text, reference.scan_text):
        found = [text[h.start : h.end] for h in scan(text)]
        assert found[-1] == after and found[0].endswith("bob"), found


@pytest.mark.parametrize(
    ("text", "published"),
    [
        # a name with an apostrophe (its part after `'` was published)
        ("C:\\Users\\o'brien\\Desktop\\x y", "/path/to/home y"),
        ("C:\\Documents and Settings\\O\u2019Brien\\x y", "/path/to/home y"),
        ("/home/d'angelo/run.log y", "/path/to/home y"),
        ("~o'brien/x y", "/path/to/home y"),
        # (helper-130) in a name's later word, after a letter past ASCII, as Hebrew's geresh
        ("C:\\Users\\Mary O'Brien\\x y", "/path/to/home y"),
        ("\\\\wsl$\\Ubuntu\\home\\Mary O\u2019Brien\\x y", "/path/to/home y"),
        ("/mnt/c/Users/Jos\u00e9 O'Brien/x y", "/path/to/home y"),
        ("/home/zo\u00eb'brien/x y", "/path/to/home y"),
        ("/home/\u05d2'\u05d5\u05df/x y", "/path/to/home y"),
        ("C:\\Users\\o'brien: permission denied", "/path/to/home: permission denied"),
        # ... as a shell quotes it in a quoted word, and YAML and SQL (helper-131)
        ("echo '/home/o'\"'\"'brien/x'", "echo '/path/to/home'"),
        ("cd '/home/o'\\''brien' && ls", "cd '/path/to/home' && ls"),
        ("'path': '/home/o''brien/x'", "'path': '/path/to/home'"),
        # ... not a quote that closes a path, nor one before a list's next item
        ("cd 'C:\\Users\\bob' && ls '/home/al', 'x'",
         "cd '/path/to/home' && ls '/path/to/home', 'x'"),
        # ... nor one glued to an address's start (helper-130)
        ("C:\\Users\\bob'aa:bb:cc:dd:ee:ff", "/path/to/home'<mac>"),
        ("C:\\Users\\al'root@buildhost", "/path/to/home'<user>@<host>"),
        ("C:\\Users\\al'fe80::1ff:fe23:4567:890a", "/path/to/home'<ip>"),
        # a glued script's name at its text's end, at a line's end or a space, before a quote
        # that closes it (no prose follows it there)
        ("C:\\Users\\li\u674e\u96f7", "/path/to/home"),
        ("C:\\Users\\\u674e\u96f7", "/path/to/home"),
        ("HOME=/home/\u674e\u96f7\nPATH=/usr/bin", "HOME=/path/to/home\nPATH=/usr/bin"),
        ('{"cwd": "C:\\\\Users\\\\\u674e\u96f7"}', '{"cwd": "/path/to/home"}'),
        ("cd '/home/\u674e\u96f7' && ls", "cd '/path/to/home' && ls"),
        ('cd "C:\\Users\\\u5c71\u7530 \u592a\u90ce"', 'cd "/path/to/home"'),
        ("C:\\Users\\\u674e\u96f7 found 10.0.0.5", "/path/to/home found <ip>"),
        ("PATH=/home/\u674e\u96f7:/usr/bin", "PATH=/path/to/home"),
        # ... and before what ends a word of code or of a shell (helper-131)
        ("C:\\Users\\\u674e\u96f7>dir", "/path/to/home>dir"),
        ("ls /home/\u674e\u96f7|head; `/home/\u674e\u96f7`, (/home/\u674e\u96f7)",
         "ls /path/to/home|head; `/path/to/home`, (/path/to/home)"),
        ("ls /home/\u674e\u96f7,/home/\u97e9\u6885\u6885", "ls /path/to/home,/path/to/home"),
        ("/home/\u4e0b", "/home/\u4e0b"),  # (one character: prose's)
        # the home's parent before Vista, below a mount, by its short name
        ("/mnt/c/Documents and Settings/bob/x y", "/path/to/home y"),
        ("TEMP=C:\\DOCUME~1\\bob\\LOCALS~1\\Temp", "TEMP=/path/to/home"),
        ("c:\\docume~1\\al\\x y", "/path/to/home y"),  # (as `os.path.normcase` writes it)
        # (helper-134) a Windows name's later words before a line's or a text's end, or what
        # ends a word of code or a shell; a CJK name before CJK's closing punctuation or
        # `: `; `DOCUME~1` below a mount; an apostrophe before a uid
        ("USERPROFILE=C:\\Users\\Bob Smith\nHOME=x", "USERPROFILE=/path/to/home\nHOME=x"),
        ("PS C:\\Users\\Mary O'Brien> ls", "PS /path/to/home> ls"),
        ("\u300cC:\\Users\\\u5c71\u7530\u300d", "\u300c/path/to/home\u300d"),
        ("**C:\\Users\\\u674e\u96f7**", "**/path/to/home**"),
        ("bash: cd: /home/\u674e\u96f7: x", "bash: cd: /path/to/home x"),
        ("/mnt/c/DOCUME~1/bob/x y", "/path/to/home y"),
        ("/home/o'brien:1000 y", "/path/to/home y"),
        # an HTML reference after a Windows path's `\` is none of a shell's escapes
        ("C:\\Users\\&Ouml;zil\\x y", "/path/to/home y"),
    ],
)  # fmt: skip
def test_a_homes_name_with_an_apostrophe_or_at_a_texts_end(text: str, published: str) -> None:
    """(session 26's list, helper-130) `C:\\Users\\o'brien\\` published `'brien`, and
    `C:\\Users\\li李雷` at a text's end `李雷`."""
    import leaks_reference as reference

    for scan in (leaks.scan_text, reference.scan_text):
        assert _replaced(text, scan(text)) == published


def test_a_glued_scripts_name_at_a_strings_end_in_a_document() -> None:
    import leaks_reference as reference

    document = {"home": "/home/\u674e\u96f7", "cwd": "C:\\Users\\\u5c71\u7530 \u592a\u90ce"}
    for scan in (leaks.scan_document, reference.scan_document):
        assert sorted((h.path, h.hit.category) for h in scan(document)) == [
            (("cwd",), "home-path"),
            (("home",), "home-path"),
        ]


def test_a_known_value_with_an_apostrophe_in_doubled_single_quotes() -> None:
    """(helper-134) YAML's, SQL's and PowerShell's single quotes double a `'`: a known
    secret or user that holds one was published so."""
    import leaks_reference as reference

    text = "password: 'Xk9''mP2$vL7!qR4'\nCREATE USER 'o''brien'@'localhost';"
    values = [("Xk9'mP2$vL7!qR4", KnownKind.SECRET, "<s>"), ("o'brien", KnownKind.USER, "<u>")]
    known = [Known(v, "k", p, kind) for v, kind, p in values]
    plain = [reference.Known(v, "k", p, reference.KnownKind(kind.value)) for v, kind, p in values]
    for detector in (Detector(known), reference.Detector(plain)):
        assert _replaced(text, detector.scan_text(text)) == (
            "password: '<s>'\nCREATE USER '<u>'@'localhost';"
        )


def test_a_known_user_in_a_python_repr_that_quotes_it_with_double_quotes() -> None:
    """(helper-134) Python's repr writes a string that holds `'` in `"` among keys in `'`:
    `environ({'USER': "o'brien"})` published the name."""
    import leaks_reference as reference

    text = "environ({'USER': \"o'brien\"}) {'users': [\"o'brien\"]}"
    known = [Known("o'brien", "user-name", "<user>", KnownKind.USER)]
    plain = [reference.Known("o'brien", "user-name", "<user>", reference.KnownKind.USER)]
    for detector in (Detector(known), reference.Detector(plain)):
        assert _replaced(text, detector.scan_text(text)) == (
            "environ({'USER': \"<user>\"}) {'users': [\"<user>\"]}"
        )


def test_a_known_user_below_documents_and_settings_is_an_account() -> None:
    """A plain known name after `Documents and Settings`, whose spaces end the word the
    name is in, was no account's: the part a home's match left was published."""
    import leaks_reference as reference

    text = (
        "C:\\Documents and Settings\\ann(2)\\x and c:/documents and settings/ann(2)/y"
        # (helper-130) before a profile's suffix, below a mount, a share, a backup's folder;
        # below its short name
        " C:\\Documents and Settings\\ann(2).DOMAIN\\x /mnt/c/Documents and Settings/ann(2)/x"
        " \\\\srv\\c$\\Documents and Settings\\ann(2)\\x"
        " D:\\backup\\Documents and Settings\\ann(2)\\x C:\\DOCUME~1\\ann(2)\\x"
    )
    known = [Known("ann(2)", "user-name", "<user>", KnownKind.USER)]
    plain = [reference.Known("ann(2)", "user-name", "<user>", reference.KnownKind.USER)]
    for detector in (Detector(known), reference.Detector(plain)):
        assert _replaced(text, detector.scan_text(text)) == (
            "/path/to/home<user>\\x and /path/to/home<user>/y"
            " /path/to/home<user>.DOMAIN\\x /path/to/home<user>/x"
            " \\\\srv\\c$\\Documents and Settings\\<user>\\x"
            " D:\\backup\\Documents and Settings\\<user>\\x /path/to/home<user>\\x"
        )


@pytest.mark.parametrize(
    ("text", "published"),
    [
        # a raw `@` in the password: the last `@` before the host ends it
        ("https://bob:p@ss@w0rd@db.corp.lan/x", "https://<user>:<token>@<host>/x"),
        # an apostrophe in the user's name
        ("https://o'brien:pw123456@example.com/x", "https://<user>:<token>@example.com/x"),
        # a port and a query are no credentials
        ("http://localhost:3000?next=user@example.com",
         "http://localhost:3000?next=user@example.com"),
        ("['http://localhost:8080', 'ops@example.com']",
         "['http://localhost:8080', 'ops@example.com']"),
        ("redis://:Hunter2#Secret@localhost:6379", "redis://:<token>@localhost:6379"),
        # (helper-130) a password that starts with digits after no user; an e-mail address
        # as the user; a user's `#`; no port of an IPv6 literal, nor before a quote
        ("redis://:1234#Secret@localhost:6379", "redis://:<token>@localhost:6379"),
        ("postgres://admin:2024#Pass!x@dbhost/x", "postgres://<user>:<token>@<host>/x"),
        ("https://a#b:s3cr!t99@dbhost/x", "https://<user>:<token>@<host>/x"),
        ("git clone https://alice@corp-mail.de:S3cr!t99x@git.corp.lan/x.git",
         "git clone https://<user>:<token>@<host>/x.git"),
        ("'http://[::1]:8080?next=ops@corp-mail.de'", "'http://[::1]:8080?next=<email>'"),
        ("'http://localhost:8080'+'ops@corp-mail.de'", "'http://localhost:8080'+'<email>'"),
    ],
)  # fmt: skip
def test_a_urls_credentials_as_url_parsers_read_them(text: str, published: str) -> None:
    """(session 26's list) `https://bob:p@ss@w0rd@host` published `ss@w0rd`, and
    `https://o'brien:PW@host` the password; `http://localhost:3000?next=user@example.com`
    was read as credentials."""
    import leaks_reference as reference

    for scan in (leaks.scan_text, reference.scan_text):
        assert _replaced(text, scan(text)) == published


def test_a_password_without_a_user_in_a_url_is_found() -> None:
    text = "cache backend down: redis://:Hunter2SecretXYZ@localhost:6379/0 refused"
    hits = [h for h in scan_text(text) if h.category == "token"]
    assert [text[h.start : h.end] for h in hits] == ["Hunter2SecretXYZ"]


# --- the capture's own user and host names (export's known values) -------------------------

NAMES = Detector(
    [
        Known("alice-smith", "user-name", "<user>", KnownKind.USER),
        Known("jdoe", "user-name", "<user>", KnownKind.USER),
        Known("buildbox", "host-name", "<host>", KnownKind.HOST),
        Known("gb10-lab-07", "host-name", "<host>", KnownKind.HOST),
    ]
)


def named(text: str) -> list[str]:
    """What the names' detector finds in a text, each hit as the text it covers."""
    return [text[hit.start : hit.end] for hit in NAMES.scan_text(text)]


@pytest.mark.parametrize(
    ("text", "found"),
    [
        # A distinctive user name as a token of its own, inside a longer one too.
        ("server-alice-smith.log", ["alice-smith"]),
        ("alice-smith.log", ["alice-smith"]),
        ("run_by_alice-smith", ["alice-smith"]),
        ("https://github.com/alice-smith/mlxcel", ["alice-smith"]),
        ("org/alice-smith", ["alice-smith"]),
        ("ALICE-SMITH", ["ALICE-SMITH"]),
        ("malice-smith", []),
        ("alice-smith2", []),
        # A distinctive host name as a label, `_` around it too.
        ("server_gb10-lab-07.log", ["gb10-lab-07.log"]),
        ("gb10-lab-070", []),
        # Plain names in account forms.
        ("USER=jdoe", ["jdoe"]),
        ("env: USERNAME=jdoe LOGNAME='jdoe'", ["jdoe", "jdoe"]),
        ('export USER="jdoe"', ["jdoe"]),
        ("SUDO_USER=jdoe", ["jdoe"]),
        ("HOSTNAME=buildbox", ["buildbox"]),
        ("--host=buildbox", ["buildbox"]),
        ("connecting to buildbox:8080 failed", ["buildbox"]),
        ("(buildbox:443)", ["buildbox"]),
        # ... and the same names where they name nothing.
        ("jdoe wrote it", []),
        ("USER=jdoe2", []),
        ("USERS=jdoe", []),
        ("org/jdoe", []),
        ("buildbox", []),
        ("buildbox:0.5", []),
        ("buildbox:808080", []),
        ("a.buildbox:80", []),
        ("/buildbox:80", []),
        ("my-buildbox:80", []),
        ("x:buildbox:80", []),
        # A plain host name as the first label of its full name (audit 11), not of code.
        ("ran on buildbox.lan", ["buildbox.lan"]),
        ("buildbox.cluster.local:22", ["buildbox.cluster.local"]),
        ("ssh buildbox.acme-corp.io.", ["buildbox.acme-corp.io"]),
        ("buildbox.py, buildbox.run(), x.buildbox.lan, buildbox.lanx", []),
        # A plain user name as a URL's user (audit 11): `_AccountNames` took it for a path.
        ("http://jdoe@127.0.0.1:8080/v1", ["jdoe"]),
        ("ftp://jdoe:hunter2@localhost/", ["jdoe", "hunter2"]),  # (and the password)
        ("https://example.org/jdoe/x", []),
    ],
)
def test_the_captures_names_are_found_where_they_name_someone(text: str, found: list[str]) -> None:
    assert named(text) == found


def test_a_bounded_scan_stops_at_its_most_and_says_where() -> None:
    text = "fe80::1%eth0 " * 5000  # an address with a zone every 13 characters
    assert len(leaks.scan_text(text)) == 5000
    bounded = leaks.scan_text(text, 10)
    assert [h.category for h in bounded[:-1]] == [leaks.IP_ADDRESS] * (len(bounded) - 1)
    assert bounded[-1].category == leaks.TOO_MANY and "10 private strings" in bounded[-1].excerpt
    assert 0 < bounded[-1].start < 13 * 12  # where it stopped: by the tenth hit


def test_a_bounded_scan_stops_at_a_text_of_too_many_escapes() -> None:
    text = "%41" * (leaks._MOST_ESCAPES + 10)  # decodes to AAAA...: no hit, only cost
    assert leaks.scan_text(text) == []
    (stopped,) = leaks.scan_text(text, 1000)
    assert stopped.category == leaks.TOO_MANY and "escapes" in stopped.excerpt
    assert stopped.start == 3 * leaks._MOST_ESCAPES  # the first escape past the bound
    assert leaks.scan_text("%41" * 100 + " /home/al/x", 1000)[0].category == leaks.HOME_PATH


def test_the_ledger_cannot_allow_a_scan_that_stopped() -> None:
    from verifier.checks import leaks as check
    from verifier.leaks import DocumentHit, LeakHit

    stopped = DocumentHit(("s",), False, 0, 1, LeakHit(leaks.TOO_MANY, 0, 1, "1000 or more"))
    allowed = {("records/x.json", "/s", leaks.TOO_MANY)}
    (finding,) = check._hit_findings("records/x.json", [stopped], allowed)
    assert finding.is_error and "stopped here (1000 or more)" in finding.message


@pytest.mark.parametrize(
    "path",
    ["/home/ödön/models/x.gguf", "/Users/Émilie/Desktop/run.txt", "/home/Émilie/x",
     "C:\\Users\\Jörg\\Documents\\bench.txt", "~ödön/x", "/home/Дмитрий/x"],
)  # fmt: skip
def test_a_home_of_any_letters_or_case_is_found_whole(path: str) -> None:
    (hit,) = leaks.scan_text(f"copied from {path} today")
    assert hit.category == leaks.HOME_PATH
    assert (hit.start, hit.end) == (len("copied from "), len("copied from ") + len(path))


def test_a_private_key_with_no_end_line_goes_to_the_end_of_its_string() -> None:
    text = "log: -----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\nQUJD"
    (hit,) = leaks.scan_text(text)
    assert hit.category == leaks.PRIVATE_KEY and (hit.start, hit.end) == (5, len(text))
    (hit,) = leaks.scan_document({"a": text, "b": "kept"})[0:1]
    assert hit.path == ("a",) and hit.end == len(text) - 0 - 0


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("Cookie: session=8f14e45fceea167a5a36", "session=8f14e45fceea167a5a36"),
        ("Set-Cookie: sid=s%3AZ29vZGJ5ZQ.Xy12Ab9; Path=/", "sid=s%3AZ29vZGJ5ZQ.Xy12Ab9; Path=/"),
        ("Cookie: theme=dark; sid=8f14e45fceea", "theme=dark; sid=8f14e45fceea"),
        ("Cookie: sid=123456789", "sid=123456789"),  # a number of 9 digits or more is an id
        ("Cookie: c_user=100012345678901", "c_user=100012345678901"),
        ("Cookie: Path=9f86d081884c7d659a2f", "Path=9f86d081884c7d659a2f"),  # no attributes
        ("Set-Cookie: Domain=abc123def456ghi789jkl", "Domain=abc123def456ghi789jkl"),
        ("Set-Cookie: sid=9f8e7d6c5b4a; Path=/", "sid=9f8e7d6c5b4a; Path=/"),
        ('{"Cookie": "a=b; sid=8f3a9c2e71b04d5fa6c1e9b2"}', "a=b; sid=8f3a9c2e71b04d5fa6c1e9b2"),
        ("POST https://hooks.slack.com/services/T0123ABCD/B0123ABCD/abcdefghijklmnopqrstuvwx ok",
         "hooks.slack.com/services/T0123ABCD/B0123ABCD/abcdefghijklmnopqrstuvwx"),
        ("key sk_live_4eC39HqLyjWDarjtT1zdp7dc here", "sk_live_4eC39HqLyjWDarjtT1zdp7dc"),
        ("rk_test_abcdefghij0123456789", "rk_test_abcdefghij0123456789"),
        ("npm_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8", "npm_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"),
        # audit 11: webhooks and bot tokens with no prefix of their own
        ("POST https://discord.com/api/webhooks/112233445566778899/Zm9vYmFyYmF6cXV4Zm9vYmFy ok",
         "discord.com/api/webhooks/112233445566778899/Zm9vYmFyYmF6cXV4Zm9vYmFy"),
        ("https://discordapp.com/api/webhooks/1122334455/abcdefghijklmnopqrstuvwx",
         "discordapp.com/api/webhooks/1122334455/abcdefghijklmnopqrstuvwx"),
        ("https://Discord.com/api/webhooks/1122334455/abcdefghijklmnopqrstuvwx",  # a host's case
         "Discord.com/api/webhooks/1122334455/abcdefghijklmnopqrstuvwx"),
        ("https://discord.com/api/v10/webhooks/1122334455/abcdefghijklmnopqrstuvwx",
         "discord.com/api/v10/webhooks/1122334455/abcdefghijklmnopqrstuvwx"),
        ("TG 12345678901:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawq",
         "12345678901:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawq"),
        ("https://api.telegram.org/bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawq/sendMessage",
         "bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawq"),
        ("TG 1234567890:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawq.",
         "1234567890:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawq"),
        # the API keys of inference providers, and Google's OAuth, SendGrid's, DigitalOcean's
        ("GROQ " + GROQ, GROQ),
        ("key=" + XAI + " x", XAI),
        ("pplx " + PPLX, PPLX),
        ("nvapi-Ab_Cd-Ef0123456789GhIjKlMn_op" * 2, "nvapi-Ab_Cd-Ef0123456789GhIjKlMn_op" * 2),
        ("r8_Xy7Wv6Ut5Sr4Qp3On2Ml1Kj0IhGfEdCbA9", "r8_Xy7Wv6Ut5Sr4Qp3On2Ml1Kj0IhGfEdCbA9"),
        ("curl -H 'x: " + GOOGLE_OAUTH + "' ", GOOGLE_OAUTH),
        ("a " + GOOGLE_SERVICE + ".", GOOGLE_SERVICE),
        ("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 ok",
         "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"),
        ("dop_v1_" + "9f" * 32, "dop_v1_" + "9f" * 32),
    ],
)  # fmt: skip
def test_cookies_webhooks_and_the_tokens_of_stripe_pypi_and_npm(text: str, secret: str) -> None:
    (hit,) = leaks.scan_text(text)
    assert hit.category == leaks.TOKEN and text[hit.start : hit.end] == secret


@pytest.mark.parametrize(
    "text",
    ["cookie: lang=en", "the cookie: yum", "sk_learn_model", "npm_config_cache",
     "see discord.com/api/webhooks/ for how", "at 12:30 the 123456789:AA line",
     "x1234567890:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawq", "xai-org/grok-1",
     "the xai-grok-2-vision-1212 model", "SG.value", "dop_v1_notakey", "r8_", "nvapi-short",
     "pip install nvapi-python-bindings-for-windows-and-linux-builds",
     "SG.configuration_manager.default_settings_x", "ya29.some_long_identifier_here_xxxxxx",
     "nvapi-python-bindings-for-windows-and-more-2024",
     "pplx-PerplexityClientConfigurationHelperLibrary"],
)  # fmt: skip
def test_words_that_look_like_those_tokens_are_not(text: str) -> None:
    assert leaks.scan_text(text) == []


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("restarted srv-" + HF_TOKEN + " after", HF_TOKEN),
        ("key file run_" + OPENAI_KEY + " used", OPENAI_KEY),
        ("/var/log/srv-" + GITHUB_TOKEN + ".log", GITHUB_TOKEN),
        ("job_" + GROQ, GROQ),
        # `sk-` in `task` is after a letter: no token, and not the word's first token prefix
        ("/var/log/task-" + HF_TOKEN + ".log", HF_TOKEN),
        ("flask-" + OPENAI_KEY, OPENAI_KEY),
        ("EAST_ASIA_" + HF_TOKEN, HF_TOKEN),  # an AWS key's prefix is tried on its own
        # keys some providers write in hex (DeepSeek's, OpenRouter's)
        ("prod-sk-0123456789abcdef0123456789abcdef", "sk-0123456789abcdef0123456789abcdef"),
        ("prod_sk-or-v1-" + "0123456789abcdef" * 4, "sk-or-v1-" + "0123456789abcdef" * 4),
        # after a letter past ASCII (no English word holds the prefix): `isalnum` said a word
        ("密钥" + HF_TOKEN + " 已撤销", HF_TOKEN),
        ("令牌：" + OPENAI_KEY, OPENAI_KEY),
        ("ключ" + GITHUB_TOKEN, GITHUB_TOKEN),
        ("服务-" + HF_TOKEN, HF_TOKEN),
        ("密钥sk-0123456789abcdef0123456789abcdef", "sk-0123456789abcdef0123456789abcdef"),
    ],
)
def test_a_token_glued_to_a_word_by_a_dash_or_an_underscore(text: str, secret: str) -> None:
    (hit,) = leaks.scan_text(text)
    assert hit.category == leaks.TOKEN and text[hit.start : hit.end] == secret


@pytest.mark.parametrize(
    "text",
    [
        "x" + HF_TOKEN,  # inside a longer word
        "sk-learn-sk-compatible-estimators",  # not its word's first token prefix
        "nvapi-python-bindings_nvapi-python-bindings-for-windows-and-linux",
        # glued, but no random key's mixed case: a revision, a model's name, prose
        "/models/Llama-2-7b-hf_8cca527612d856d7d32bd94f8103728d614eb852",
        "CodeLlama-7b-hf_01234567890123456789012",
        "opus-mt-en-sk-finetuned-legal-2023",
        "hugs-xoxo-lots-of-love-and-kisses",
        "model = load_hf_PretrainedTokenizerFast(path)",  # camel case
        "def test_load_hf_AutoModelForCausalLM():",  # camel case: vowels of words
        "feat-hf_TokenizerFastLoadingFixV2",
        "bert-base-sk-Cased-Finetuned-NER-v2",
        # helper-99: after a letter past ASCII, a word's value is no key's (as glued)
        "Gdańsk-Rebiechowo-Airport-GDN",
        "Værk_test_abcdefghijklmnopqr",
        "加载hf_AutoModelForCausalLM",
    ],
)
def test_a_token_prefix_inside_a_word_is_not_glued(text: str) -> None:
    assert leaks.scan_text(text) == []


@pytest.mark.parametrize(
    "text",
    ["GET /users/42/profile HTTP/1.1", "工作日为周一~周五。", "用户目录都在/home/下。",
     "Le dossier « /home/\u00a0» ...", "The folder “/Users/” holds them", "see /home/… for files",
     "Set-Cookie: theme=dark-mode-on; Path=/", "Cookie: consent=accepted_all",
     "Cookie: lang=en; theme=dark; tz=UTC", "Set-Cookie: id=a3fWa; Expires=Thu, 21 Oct 2021",
     "see hooks.slack.com/services/ for how",
     # Set-Cookie's attributes, and numbers and dates, are no sessions
     "Set-Cookie: cookie_consent=accepted; Path=/; Max-Age=31536000",
     "cookie: lang=en; seen_banner=20240101", "Cookie: consent_at=2024-01-01T10:00:00",
     "Set-Cookie: lang=en-US; Path=/; Domain=example.com; Max-Age=86400",
     "Set-Cookie: id=a3fWa; Expires=Thu, 21 Oct 2021 07:28:00 GMT; Secure; HttpOnly"],
)  # fmt: skip
def test_prose_paths_punctuation_and_preferences_are_not_private(text: str) -> None:
    assert leaks.scan_text(text) == []


def test_a_session_cookie_in_a_json_header_is_found_without_its_quotes() -> None:
    text = '{"headers": {"Cookie": "sid=8f3a9c2e71b04d5fa6c1e9b2"}}'
    (hit,) = leaks.scan_text(text)
    assert text[hit.start : hit.end] == "sid=8f3a9c2e71b04d5fa6c1e9b2"


# --- forms found since the second export audit ---------------------------------------------


@pytest.mark.parametrize(
    ("text", "found"),
    [
        # Invisible characters inside a value: read as if they were not there.
        ("peer 192.168\u200b.40.23", "192.168\u200b.40.23"),
        (
            "token hf_QmVyeVNl\u200bY3JldFRva2VuRm9yVGVzdHMx",
            "hf_QmVyeVNl\u200bY3JldFRva2VuRm9yVGVzdHMx",
        ),
        (
            "use hf_QmVyeVNl\u00adY3JldFRva2VuRm9yVGVzdHMx",
            "hf_QmVyeVNl\u00adY3JldFRva2VuRm9yVGVzdHMx",
        ),
        ("k=ab\u2060\ufeff\u200c\u200dcd ssh jd\u200boe@buildbox", "jd\u200boe@buildbox"),
        # HTML numeric references without `;`: the digits read as far as they go.
        ("path &#47home&#47jdoe&#47x", "&#47home&#47jdoe&#47x"),
        ("path &#x2fhome&#x2fjdoe&#x2fx", "&#x2fhome&#x2fjdoe&#x2fx"),
        # HTML's named references, and a numeric one escaped twice (`&amp;#47;`)
        ("path &sol;home&sol;jdoe&sol;x", "&sol;home&sol;jdoe&sol;x"),
        ("path &amp;#47;home&amp;#47;jdoe&amp;#47;x", "&amp;#47;home&amp;#47;jdoe&amp;#47;x"),
        ("ssh jdoe&commat;buildbox", "jdoe&commat;buildbox"),
        ("mail jdoe&plus;llm&commat;gmail.com", "jdoe&plus;llm&commat;gmail.com"),
        ("path &AMP;#47;home&AMP;#47;jdoe", "&AMP;#47;home&AMP;#47;jdoe"),
        # The Windows home before Vista.
        (r"C:\Documents and Settings\alice\Desktop", r"C:\Documents and Settings\alice\Desktop"),
        ("c:/documents and settings/alice", "c:/documents and settings/alice"),
        # An e-mail address whose domain (or local part) has letters past ASCII: all of it.
        ("mail alice@b\u00fccher.de now", "alice@b\u00fccher.de"),
        ("mail j\u00f6ns.berg@b\u00fccher-corp.de", "j\u00f6ns.berg@b\u00fccher-corp.de"),
        # A public address after a name that ends in an address word.
        ("remote_addr=81.2.69.142 status=200", "81.2.69.142"),
        ("client_ip=81.2.69.142", "81.2.69.142"),
        ('{"client_ip": "81.2.69.142"}', "81.2.69.142"),
        ("peer_addr: 81.2.69.142", "81.2.69.142"),
        ("x-real-ip: 81.2.69.142", "81.2.69.142"),
        ("clientIp=81.2.69.142 ", "81.2.69.142"),
        ("remoteAddress: 81.2.69.142", "81.2.69.142"),
    ],
)
def test_a_value_in_a_form_the_audit_found_is_found(text: str, found: str) -> None:
    assert [text[h.start : h.end] for h in scan_text(text)] == [found]


@pytest.mark.parametrize(
    "text",
    [
        "chip 81.2.69.142",  # a word that only ends in `ip`
        "equip=81.2.69.142",
        "tooltip: 81.2.69.142",
        "gossip 81.2.69.142",
        "a soft\u00adhyphen and a zero\u200bwidth space in prose",
        "&#47 alone, &#x2f; and &#x2fabc",  # `&#x2fabc` is U+2FABC, as HTML reads it
        "AT&amp;T &lt;b&gt; &sol &solhome&sol;x",  # a name needs its `;`
        "&quot;/&quot; &amp;/home &amp;amp;",  # what HTML writers write is no escape here
        "mail alice@b\u00fccher.example",  # a documentation domain
    ],
)
def test_the_new_forms_leave_their_look_alikes_alone(text: str) -> None:
    assert scan_text(text) == []


def test_html_named_references_are_read_as_their_characters() -> None:
    text = "&sol;&bsol;&commat;&colon;&period;&lowbar;&amp;#47;&quot;&num;&amp;&amp;sol;"
    view = leaks._Decoded.of(text)
    assert isinstance(view, leaks._Decoded)
    assert view.text == '/\\@:._&#47;"#&&sol;'
    assert view.original(0, len(view.text)) == (0, len(text))
    # what `html.escape` writes is read too: a password holding `&`, `"` or `<` is
    # published so in an HTML page
    view = leaks._Decoded.of("AT&amp;T &quot;x&quot; &lt;b&gt; &#x27;y&apos;")
    assert isinstance(view, leaks._Decoded)
    assert view.text == "AT&T \"x\" <b> 'y'"


def test_amp_and_latin_letters_are_read_without_their_semicolon_and_qp_s_equals_sign() -> None:
    view = leaks._Decoded.of("&uumlro &ampy =3D &sol w &sol;x &OElig &Uuml")
    assert isinstance(view, leaks._Decoded)
    assert view.text == "\u00fcro &y = &sol w /x &OElig \u00dc"


def test_the_symbols_of_mojibake_are_read_from_their_named_references() -> None:
    """(helper-123's F9) PHP's `htmlentities` of mojibake (`jÃ¶rg`, `ErdÅ‘s`) writes its
    symbols by name: `j&Atilde;&para;rg` was not read as `jÃ¶rg`, and `rg` was published.
    Only with their `;` (`&copy=2` of a query is no `©`)."""
    view = leaks._Decoded.of("j&Atilde;&para;rg Erd&Aring;&lsquo;s &copy=2 &trade;")
    assert isinstance(view, leaks._Decoded)
    assert view.text == "j\u00c3\u00b6rg Erd\u00c5\u2018s &copy=2 \u2122"
    import leaks_reference as reference

    text = "cd /home/j&Atilde;&para;rg/x"
    known = [Known("j\u00f6rg", "user-name", "<user>", KnownKind.USER)]
    plain = [reference.Known("j\u00f6rg", "user-name", "<user>", reference.KnownKind.USER)]
    for detector in (Detector(known), reference.Detector(plain)):
        assert [text[h.start : h.end] for h in detector.scan_text(text)] == [
            "/home/j&Atilde;&para;rg/x"
        ]
    # (helper-131) ... after a Windows path's `\`, which is no shell's escape of `&` there
    text = "C:\\Users\\&Atilde;&lsquo;u&Atilde;&plusmn;o\\x"
    known = [Known("\u00d1u\u00f1o", "user-name", "<user>", KnownKind.USER)]
    plain = [reference.Known("\u00d1u\u00f1o", "user-name", "<user>", reference.KnownKind.USER)]
    for detector in (Detector(known), reference.Detector(plain)):
        assert _replaced(text, detector.scan_text(text)) == "/path/to/home<user>\\x"


def test_an_html_reference_without_a_semicolon_reads_its_digits_greedily() -> None:
    view = leaks._Decoded.of("&#47home&#x2fabc&#0000047;x&#99999999999")
    assert isinstance(view, leaks._Decoded)
    assert view.text == "/home\U0002fabc/x\ufffd"


KNOWN_FORMS = Detector(
    [
        Known("jdoe", "user-name", "<user>", KnownKind.USER),
        Known("j\u00f6ns", "user-name", "<user>", KnownKind.USER),
        Known("b\u00fcro-lab-07", "host-name", "<host>", KnownKind.HOST),
        Known("gb10-lab-07", "host-name", "<host>", KnownKind.HOST),
        Known("/srv/ml/mod\u00e8les", "private-path", "/path/to/model", KnownKind.PATH),
        Known("/home/jdoe", "private-path", "/path/to/home", KnownKind.PATH),
        Known("hf_QmVyeVNlY3JldFRva2VuRm9yVGVzdHMx", "token", "<token>", KnownKind.SECRET),
        Known("pw4short", "token", "<token>", KnownKind.SECRET),
        Known("Falcon-Prototype", "private-path", "<private-1>", KnownKind.STRING),
        Known("eli", "private-path", "<private-2>", KnownKind.STRING),
        Known("81.2.69.142", "ip-address", "<ip>", KnownKind.ADDRESS),
    ]
)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


ESCAPED_CWD = b'{"cwd":"\\/home\\/jdoe\\/work"}'
TOKEN_HEX = b"hf_QmVyeVNlY3JldFRva2VuRm9yVGVzdHMx".hex()


@pytest.mark.parametrize(
    ("text", "found"),
    [
        # The other normal form of a name or path with letters past ASCII; a host's IDNA form.
        ("/srv/shared/jo\u0308ns/x", [("jo\u0308ns", "<user>")]),
        ("ran on bu\u0308ro-lab-07 today", [("bu\u0308ro-lab-07", "<host>")]),
        ("ran on xn--bro-lab-07-9db today", [("xn--bro-lab-07-9db", "<host>")]),
        ("http://XN--BRO-LAB-07-9DB:8080/v1", [("XN--BRO-LAB-07-9DB", "<host>")]),
        ("in /srv/ml/mode\u0300les/q", [("/srv/ml/mode\u0300les", "/path/to/model")]),
        # Fullwidth forms of an ASCII name.
        (
            "ran on \uff47\uff42\uff11\uff10\uff0d\uff4c\uff41\uff42\uff0d\uff10\uff17",
            [("\uff47\uff42\uff11\uff10\uff0d\uff4c\uff41\uff42\uff0d\uff10\uff17", "<host>")],
        ),
        # Invisible characters inside a known value.
        ("host gb10-lab\u200b-07 up", [("gb10-lab\u200b-07", "<host>")]),
        # A long secret glued to letters; a short one only as a token of its own.
        (
            "tokhf_QmVyeVNlY3JldFRva2VuRm9yVGVzdHMxZ",
            [("hf_QmVyeVNlY3JldFRva2VuRm9yVGVzdHMx", "<token>")],
        ),
        ("pw4short xpw4shorty", [("pw4short", "<token>")]),
        # A named string in any case, inside longer words too.
        (
            "codename falcon-prototype, FALCON-PROTOTYPES",
            [("falcon-prototype", "<private-1>"), ("FALCON-PROTOTYPE", "<private-1>")],
        ),
        ("elibox, myeli", [("eli", "<private-2>"), ("eli", "<private-2>")]),
        # Hex in mixed case, base64 of UTF-16LE, an address in base64 or zero-padded.
        (
            f"hex {TOKEN_HEX[:20].upper()}{TOKEN_HEX[20:]}",
            [(f"{TOKEN_HEX[:20].upper()}{TOKEN_HEX[20:]}", "<token>")],
        ),
        (
            f"ps {_b64('/home/jdoe/x'.encode('utf-16-le'))}",
            [(_b64("/home/jdoe/x".encode("utf-16-le")), "/path/to/home")],
        ),
        (f"blob {_b64(b'81.2.69.142')}", [(_b64(b"81.2.69.142"), "<ip>")]),
        (
            "at 81.2.069.142 and 81.002.69.142",
            [("81.2.069.142", "<ip>"), ("81.002.69.142", "<ip>")],
        ),
        # ... and joined by dashes or underscores, as in a cloud machine's name (audit 11).
        (
            "ip-81-2-69-142.ec2.internal, 81_2_069_142; not 81-2-69-1420 or 981-2-69-142",
            [("ip-81-2-69-142", "<ip>"), ("81_2_069_142", "<ip>")],  # (the generic's span)
        ),
        # audit 11: base32 and the hex of UTF-16LE; an address as one number or in octal;
        # base64 of a JSON document that escapes a path's slashes.
        ("x " + _b64(ESCAPED_CWD), [(_b64(ESCAPED_CWD), "/path/to/home")]),
        (
            f"b32 {base64.b32encode(b'in /home/jdoe/x').decode()}",
            [(base64.b32encode(b"in /home/jdoe/x").decode().rstrip("="), "/path/to/home")],
        ),
        (
            f"b32 {base64.b32encode(b'in /home/jdoe/x').decode().lower()}",
            [(base64.b32encode(b"in /home/jdoe/x").decode().rstrip("=").lower(), "/path/to/home")],
        ),
        (
            f"w {'/home/jdoe/x'.encode('utf-16-le').hex()}",
            [("/home/jdoe/x".encode("utf-16-le").hex(), "/path/to/home")],
        ),
        (
            "http://1359103374:22/ http://0x5102458e/ http://0x5102458E/ 0121.02.0105.0216",
            [
                ("1359103374", "<ip>"),
                ("0x5102458e", "<ip>"),
                ("0x5102458E", "<ip>"),
                ("0121.02.0105.0216", "<ip>"),
            ],
        ),
        ("not 13591033740 or 0x5102458e0", []),
        # A plain user name as the value of an account's member, and in id(1)'s output.
        ("user: jdoe", [("jdoe", "<user>")]),
        ('{"user": "jdoe", "Login":"jdoe"}', [("jdoe", "<user>"), ("jdoe", "<user>")]),
        ("{'owner': 'jdoe'}", [("jdoe", "<user>")]),
        ("username\x01jdoe", [("jdoe", "<user>")]),
        ("Username: jdoe, Login: jdoe", [("jdoe", "<user>"), ("jdoe", "<user>")]),
        ("USER: jdoe; Owner: jdoe", [("jdoe", "<user>"), ("jdoe", "<user>")]),
        (
            "uid=1000(jdoe) gid=1000(jdoe) groups=1000(jdoe),27(sudo)",
            [("jdoe", "<user>"), ("jdoe", "<user>"), ("jdoe", "<user>")],
        ),
        # ... and where it names nothing: a chat transcript's speaker is no account's member.
        ("jdoe wrote: user: jdoe2, users: jdoe", []),
        ("User: Jdoe asks.", []),
        ("(jdoe) 3(jdoe) uid=1000(jdoe2)", []),
    ],
)
def test_a_known_value_in_a_form_the_audit_found_is_found(
    text: str, found: list[tuple[str, str]]
) -> None:
    hits = KNOWN_FORMS.scan_text(text)
    assert [(text[h.start : h.end], h.placeholder) for h in hits] == found


_HOME = b"in /home/jdoe/x"
_GZIP = _b64(gzip.compress(_HOME, mtime=0))
_ZLIB = base64.urlsafe_b64encode(zlib.compress(b"on gb10-lab-07", 9)).decode().rstrip("=")
_BZIP2 = _b64(bz2.compress(_HOME))
_XZ = base64.urlsafe_b64encode(lzma.compress(b"on gb10-lab-07")).decode()
_B32HEX = base64.b32hexencode(b"xy /home/jdoe/x").decode()
_TWICE = _b64(_b64(_HOME).encode())
_A85 = "<~" + base64.a85encode(b"in gb10-lab-07").decode() + "~>"
_B85 = base64.b85encode(b"x /home/jdoe/x").decode()
_Z85 = base64.b85encode(b"ab /home/jdoe").decode().translate(leaks._Z85)
_B85_GROUP = base64.b85encode(b"4sho").decode()  # one group of pw4short
_A85_LINES = base64.a85encode(b"ab/home/jdoe/x", wrapcol=6).decode().replace("\n", "\r\n")
_REVERSED_TOKEN = "hf_QmVyeVNlY3JldFRva2VuRm9yVGVzdHMx"[::-1]
_WRAPPED = base64.encodebytes(gzip.compress(_HOME + bytes(range(256)) * 3, mtime=0)).decode()


@pytest.mark.parametrize(
    ("text", "found"),
    [
        # gzip or zlib data in base64 (the URL-safe alphabet too)
        (f"blob {_GZIP} end", [(_GZIP, "/path/to/home")]),
        (f"z={_ZLIB};", [(_ZLIB, "<host>")]),
        # bzip2's and xz's (its URL-safe `_Td6WFo` too)
        (f"blob {_BZIP2} end", [(_BZIP2, "/path/to/home")]),
        (f"x={_XZ}&y", [(_XZ, "<host>")]),
        # wrapped in lines, as `gzip -c | base64` writes it
        (f"log:\n{_WRAPPED}", [(_WRAPPED.rstrip("\n"), "/path/to/home")]),
        # base64 of base64; base32 in its hex alphabet, with its padding
        (f"b {_TWICE}", [(_TWICE, "/path/to/home")]),
        (f"b {_B32HEX} x", [(_B32HEX, "/path/to/home")]),
        (f"b {_B32HEX.lower()}", [(_B32HEX.lower(), "/path/to/home")]),
        # hex a pair a byte, separated, in any case; quoted-printable
        ("h 2f 68 6f 6d 65 2f 6a 64 6f 65 x", [("2f 68 6f 6d 65 2f 6a 64 6f 65", "/path/to/home")]),
        ("h 67:62:31:30:2D:6C:61:62:2D:30:37", [("67:62:31:30:2D:6C:61:62:2D:30:37", "<host>")]),
        ("h =2F=68=6F=6D=65=2F=6A=64=6F=65", [("=2F=68=6F=6D=65=2F=6A=64=6F=65", "/path/to/home")]),
        ("h 0x67, 0x62, 0x31, 0x30, 0x2d, 0x6c", []),
        # the capture's address before a port as tcpdump writes it; not inside a longer number
        ("IP 81.2.69.142.51234 > 10.0.0.1.22: Flags", [("81.2.69.142", "<ip>")]),
        ("v 81.2.69.142.1.2 81.2.69.142.123456", []),
        # a plain user name given to a flag, as an argument of its own or in text
        ("ssh --login jdoe box; User = jdoe", [("jdoe", "<user>"), ("jdoe", "<user>")]),
        ("--user\x02jdoe --username jdoex", [("jdoe", "<user>")]),
        # a distinctive name with its dashes written as underscores
        ("on gb10_lab_07, up", [("gb10_lab_07", "<host>")]),
        # HTML's named references of Latin letters and of the hyphen
        ("node b&uuml;ro-lab-07 down", [("b&uuml;ro-lab-07", "<host>")]),
        ("h gb10&hyphen;lab&dash;07 x", [("gb10&hyphen;lab&dash;07", "<host>")]),
        ("&Uuml;ber &eacute;t&eacute;", []),
        ("gb10&amp;hyphen;lab-07", [("gb10&amp;hyphen;lab-07", "<host>")]),
        # ... a Latin-1 letter's without its `;`, as HTML reads it
        ("node b&uumlro-lab-07 down", [("b&uumlro-lab-07", "<host>")]),
        # quoted-printable: a letter past ASCII as its bytes (`=C3=BC`, in either case), and
        # the `=` before a value as `=3D`
        ("host b=C3=BCro-lab-07 up", [("b=C3=BCro-lab-07", "<host>")]),
        ("path=3D/srv/ml/mod=C3=A8les/x", [("/srv/ml/mod=C3=A8les", "/path/to/model")]),
        ("path=3D/srv/ml/mod=c3=a8les/x", [("/srv/ml/mod=c3=a8les", "/path/to/model")]),
        ("HOME=3D/home/jdoe", [("/home/jdoe", "/path/to/home")]),
        # a plain user name where it names an account, before `@` (as `_known_pattern`
        # finds it in text); not before another character
        ("u 6a 64 6f 65 40 61 62", [("6a 64 6f 65 40", "<user>")]),
        ("u =6A=64=6F=65=40=61", [("=6A=64=6F=65=40", "<user>")]),
        ("u [106, 100, 111, 101, 64, 97]", [("106, 100, 111, 101, 64", "<user>")]),
        ("u 6a 64 6f 65 2e 61 62 and 6a 64 6f 65", []),
        # ... in decimal, as a list of the bytes prints
        (
            "b [47, 104, 111, 109, 101, 47, 106, 100, 111, 101, 47]",
            [("47, 104, 111, 109, 101, 47, 106, 100, 111, 101", "/path/to/home")],
        ),
        (
            "b 103,98,49,48,45,108,97,98,45,48,55",
            [("103,98,49,48,45,108,97,98,45,48,55", "<host>")],
        ),
        (
            "c {0x2f, 0x68, 0x6f, 0x6d, 0x65, 0x2f, 0x6a, 0x64, 0x6f, 0x65}",
            [("0x2f, 0x68, 0x6f, 0x6d, 0x65, 0x2f, 0x6a, 0x64, 0x6f, 0x65", "/path/to/home")],
        ),
        # ROT13 of a path or a distinctive name; an address's octets in hex or of 4 digits
        ("cd /ubzr/wqbr/k", [("/ubzr/wqbr", "/path/to/home")]),
        ("on to10-yno-07.", [("to10-yno-07", "<host>")]),
        ("http://0x51.0x2.0x45.0x8e/", [("0x51.0x2.0x45.0x8e", "<ip>")]),
        (
            "http://0x51.0x02.0x45.0x8e/ 0121.0002.0105.0216",
            [("0x51.0x02.0x45.0x8e", "<ip>"), ("0121.0002.0105.0216", "<ip>")],
        ),
        # not compressed data, or holding nothing private; ROT13 of a plain user name
        ("H4sIAAAAAAAAAAAAAAAAAAAA eJzzSM3JyVcozy/KSQEAGKsEPQ== wqbr", []),
        # base85: Ascii85 (its frame goes with the run), RFC 1924's alphabet, Z85's
        (f"a85 {_A85} x", [(_A85, "<host>")]),
        (f"b {_B85} y", [(_B85, "/path/to/home")]),
        (f"z {_Z85} y", [(_Z85, "/path/to/home")]),
        # ... wrapped in lines (`a85encode(wrapcol=...)`): the run of lines, from a line of
        # printable characters before it (`x`) to the last such line
        (f"x\n{_A85_LINES}\n\nok", [(f"x\n{_A85_LINES}", "/path/to/home")]),
        # ... not where the value holds only one whole group there (10 bytes, after 1), nor
        # a group of 5 characters alone (found in text by chance)
        (f"b {base64.b85encode(b'y/home/jdoe/').decode()} {_B85_GROUP}", []),
        # written backwards: a literal, as a secret is
        (
            "cd eodj/emoh/ x, 70-bal-01bg.",
            [("eodj/emoh/", "/path/to/home"), ("70-bal-01bg", "<host>")],
        ),
        # ... spaced out, and a short or plain value not (`1 2 3 4 5 6` is a count)
        (
            "pw 4 p w 4 s h o r t; trohs4wp.",
            [("p w 4 s h o r t", "<token>"), ("trohs4wp", "<token>")],
        ),
        (f"t {_REVERSED_TOKEN}.", [(_REVERSED_TOKEN, "<token>")]),
        # spaced out, by spaces or dots
        ("on g b 1 0 - l a b - 0 7.", [("g b 1 0 - l a b - 0 7", "<host>")]),
        ("in /.h.o.m.e./.j.d.o.e ok", [("/.h.o.m.e./.j.d.o.e", "/path/to/home")]),
    ],
)
def test_a_known_value_encoded_again_is_found(text: str, found: list[tuple[str, str]]) -> None:
    hits = KNOWN_FORMS.scan_text(text)
    assert [(text[h.start : h.end], h.placeholder) for h in hits] == found


@pytest.mark.parametrize(
    ("text", "found"),
    [
        # (helper-119's F2) shell-quoted around its `'`, as shlex.quote and bash write it
        ("mysql --password='Tr0ub'\"'\"'4dor&3Horse'", "Tr0ub'\"'\"'4dor&3Horse"),
        ("mysql --password='Tr0ub'\\''4dor&3Horse'", "Tr0ub'\\''4dor&3Horse"),
        # (F5) a secret in capitals or small letters
        ("tok HF_QMVYEVNLY3JLDFRVA2VURM9YVGVZDHMX.", "HF_QMVYEVNLY3JLDFRVA2VURM9YVGVZDHMX"),
        ("tok hf_qmvyevnly3jldfrva2vurm9yvgvzdhmx.", "hf_qmvyevnly3jldfrva2vurm9yvgvzdhmx"),
        # (F6) UTF-8 read as Latin-1 or Windows-1252; the single-byte bytes in base64 or hex
        ("on b\u00c3\u00bcro-lab-07 ok", "b\u00c3\u00bcro-lab-07"),
        ("in /srv/ml/mod\u00c3\u00a8les/x", "/srv/ml/mod\u00c3\u00a8les"),
        ("USER=j\u00c3\u00b6ns", "j\u00c3\u00b6ns"),  # (a user name where it names one)
        ("http://m\u00c3\u00bcller:8080/v1", "m\u00c3\u00bcller"),  # (a host like a word)
        (
            "blob " + base64.b64encode("/srv/ml/mod\u00e8les/x".encode("latin-1")).decode(),
            base64.b64encode("/srv/ml/mod\u00e8les/x".encode("latin-1")).decode(),
        ),
        (
            "hex " + "/srv/ml/mod\u00e8les".encode("cp1252").hex(),
            "/srv/ml/mod\u00e8les".encode("cp1252").hex(),
        ),
    ],
)
def test_a_known_value_in_the_ways_tools_mangle_it(text: str, found: str) -> None:
    """A known value shell-quoted, in another case, as mojibake, in a single-byte encoding:
    found by the fast scan and the reference alike."""
    import leaks_reference as reference

    known = [*_MANGLED_KNOWN, Known("Tr0ub'4dor&3Horse", "token", "<token>", KnownKind.SECRET)]
    plain = [
        reference.Known(k.value, k.category, k.placeholder, reference.KnownKind(k.kind.value))
        for k in known
    ]
    for detector in (Detector(known), reference.Detector(plain)):
        assert [text[h.start : h.end] for h in detector.scan_text(text)] == [found]


_MANGLED_KNOWN = [
    Known("j\u00f6ns", "user-name", "<user>", KnownKind.USER),
    Known("m\u00fcller", "host-name", "<host>", KnownKind.HOST),
    Known("b\u00fcro-lab-07", "host-name", "<host>", KnownKind.HOST),
    Known("/srv/ml/mod\u00e8les", "private-path", "/path/to/model", KnownKind.PATH),
    Known("hf_QmVyeVNlY3JldFRva2VuRm9yVGVzdHMx", "token", "<token>", KnownKind.SECRET),
]


@pytest.mark.parametrize(
    "text",
    [
        "PASSWORD Password",  # a secret's other case only where it is a key's shape
        "try the default admin123 or ADMIN123",  # ... or 16 characters (helper-121)
        "caf\u00c3\u00a9 na\u00c3\u00afve",  # mojibake of no known value
        "jos\u00c3\u00a9 said hi",  # a plain user name's, only where it names an account
        "on b\u00c3\u00bcro today",  # a plain host name's not
        # a 4-byte name's Latin-1 bytes in base64: 4 characters, found by chance
        "img " + base64.b64encode("\u00d1o\u00f1o".encode("latin-1")).decode() + "AAAA",
    ],
)
def test_mangled_forms_of_no_known_value_are_no_hit(text: str) -> None:
    detector = Detector(
        [
            Known("password", "token", "<token>", KnownKind.SECRET),
            Known("Admin123", "token", "<token>", KnownKind.SECRET),
            Known("jos\u00e9", "user-name", "<user>", KnownKind.USER),
            Known("b\u00fcro", "host-name", "<host>", KnownKind.HOST),
            Known("\u00d1o\u00f1o", "private-path", "<private-1>", KnownKind.STRING),
        ]
    )
    assert [text[h.start : h.end] for h in detector.scan_text(text)] == []


def test_a_windows_home_of_a_mojibake_name_goes_whole() -> None:
    """(helper-121) A Windows home's name stopped at a mojibake's symbol (`¶`), and the
    known name's mojibake, which starts inside it, was dropped: `¶rg` was published."""
    import leaks_reference as reference

    text = "C:\\Users\\j\u00c3\u00b6rg\\notes.txt and C:\\Users\\jos\u00c3\u00a9\\x"
    known = Known("j\u00f6rg", "user-name", "<user>", KnownKind.USER)
    plain = reference.Known(
        known.value, known.category, known.placeholder, reference.KnownKind.USER
    )
    for detector in (Detector([known]), reference.Detector([plain]), Detector()):
        hits = detector.scan_text(text)
        assert [text[h.start : h.end] for h in hits] == [
            "C:\\Users\\j\u00c3\u00b6rg\\notes.txt",
            "C:\\Users\\jos\u00c3\u00a9\\x",
        ]
    # ... as an account's user and host are (helper-122: `root@mÃ` left `¼ller`)
    text = "ssh root@m\u00c3\u00bcller; ssh j\u00c3\u00b6rg@box"
    for scan in (leaks.scan_text, reference.scan_text):
        found = [text[h.start : h.end] for h in scan(text)]
        assert found == ["root@m\u00c3\u00bcller", "j\u00c3\u00b6rg@box"]
    # ... not the quotes and marks around a word (`«`, `»`, `¡`, `¿`)
    text = "\u00e9crivez \u00e0 \u00abalice@lab-07\u00bb, \u00a1bob@lab-08!"
    for scan in (leaks.scan_text, reference.scan_text):
        assert [text[h.start : h.end] for h in scan(text)] == ["alice@lab-07", "bob@lab-08"]


def _replaced(text: str, hits: list[leaks.LeakHit]) -> str:
    out: list[str] = []
    at = 0
    for hit in hits:
        out += [text[at : hit.start], hit.placeholder]
        at = hit.end
    return "".join(out) + text[at:]


@pytest.mark.parametrize(
    ("names", "text", "published"),
    [
        # a home's name stopped at a character no name takes (`&`, a letter of another
        # script), and the known name that runs on past it was dropped
        (("o&brien",), "C:\\Users\\o&brien\\Desktop\\x", "/path/to/home<user>\\Desktop\\x"),
        (("o&brien",), "\\\\wsl$\\Ubuntu\\home\\o&brien\\x", "/path/to/home<user>\\x"),
        # (helper-124) ... before punctuation that a name's end did not list (`)`, `.`, `;`)
        (
            ("anne(2)",),
            "(C:\\Users\\anne(2)). /Users/anne(2);",
            "(/path/to/home<user>). /path/to/home<user>;",
        ),
        (("anne(2)",), "\\\\wsl$\\U\\home\\anne(2).", "/path/to/home<user>."),
        # (helper-125's P1-3) ... before a profile's suffix, which a name's end refuses as a
        # file's (`alice.txt`): after a home's parent, the name is its user's
        (("o&brien",), "C:\\Users\\o&brien.000\\Desktop", "/path/to/home<user>.000\\Desktop"),
        (("o&brien",), "C:/USERS/O&BRIEN.CORP/x", "/path/to/home<user>.CORP/x"),
        (("anne(2)",), "/home/anne(2).bak/x", "/path/to/home<user>.bak/x"),
        (("anne(2)",), "/Users//anne(2).000/x", "/path/to/home<user>.000/x"),
        (("o&brien",), "C:\\Users\\o&brien_old\\x", "/path/to/home<user>_old\\x"),  # (helper-127)
        (("o&brien",), "C:\\Users\\o&brien-PC\\x", "/path/to/home<user>-PC\\x"),
        (("o&brien",), "\\\\wsl$\\Ubuntu\\home\\o&brien.1\\x", "/path/to/home<user>.1\\x"),
        (("Bob Smith",), "(C:\\Users\\Bob Smith)", "(/path/to/home)"),  # (the home's, whole)
        # (a home's name now takes letters of every script: the home's match is the whole)
        (("li\u674e\u96f7",), "//wsl.localhost/Ubuntu/home/li\u674e\u96f7/b.log", "/path/to/home"),
        # a Windows home's name stops at `¡`, `«` (mojibake no name takes: they follow
        # words too): the rest of the known name's mojibake is a hit of its own
        (
            ("Zolt\u00e1n", "Zolt\u00c3\u00a1n"),
            "C:\\Users\\Zolt\u00c3\u00a1n\\AppData\\run.log",
            "/path/to/home<user>\\AppData\\run.log",
        ),
        (("zo\u00eb", "zo\u00c3\u00ab"), "C:/Users/zo\u00c3\u00ab/x", "/path/to/home<user>/x"),
        (("jo\u00cc\u02c6rg",), "C:/Users/jo\u00cc\u02c6rg/x", "/path/to/home"),  # (`ˆ`: a letter)
        # an account found first, its host stopped at `¡`: the rest of the known host's mojibake
        (
            ("tom\u00e1\u0161", "tom\u00c3\u00a1\u00c5\u00a1"),
            "ssh root@tom\u00c3\u00a1\u00c5\u00a1 failed",
            "ssh <user>@<host><host> failed",
        ),
    ],
)
def test_a_known_value_is_never_published_in_part(
    names: tuple[str, ...], text: str, published: str
) -> None:
    """(helper-123) Where a pattern's match stops inside a known value's and was taken
    first, the rest of the known value was dropped with it, and published."""
    import leaks_reference as reference

    def known_of(name: str) -> Known:
        if name.startswith("tom"):
            return Known(name, "host-name", "<host>", KnownKind.HOST)
        return Known(name, "user-name", "<user>", KnownKind.USER)

    known = [known_of(n) for n in names]
    plain = [
        reference.Known(k.value, k.category, k.placeholder, reference.KnownKind(k.kind.value))
        for k in known
    ]
    for detector in (Detector(known), reference.Detector(plain)):
        assert _replaced(text, detector.scan_text(text)) == published


def test_only_a_known_value_is_taken_past_the_match_before_it() -> None:
    """A pattern's match that runs on past a known value's is not: a home path that runs
    past a known model path would name the model's files `/path/to/home`."""
    known = [
        Known("/home/alice/models/Q", "private-path", "/path/to/model", KnownKind.PATH),
        Known("alice", "user-name", "<user>", KnownKind.USER),
    ]
    text = "/home/alice/models/Q/model.safetensors and /home/alice/x"
    assert _replaced(text, Detector(known).scan_text(text)) == (
        "/path/to/model/model.safetensors and /path/to/home"
    )


@pytest.mark.parametrize(
    ("text", "published"),
    [
        # an account after a symbol that no name's mojibake puts there (d22401b had them
        # all stand for the name's: `·ops@gpu-node-9` was published)
        (
            "mirror \u00b7ops@gpu-node-9 and \u00a7root@build-host-3",
            "mirror \u00b7<user>@<host> and \u00a7<user>@<host>",
        ),
        ("ssh j\u00c3\u00b6rg@box", "ssh <user>@<host>"),
        # names past ASCII with no value known: a WSL home's, a Windows name of two words
        ("\\\\wsl$\\Ubuntu\\home\\j\u00f6rg\\x y", "/path/to/home y"),
        ("C:\\Users\\Bob M\u00c3\u00bcller\\AppData\\x y", "/path/to/home y"),
        ("\\\\wsl$\\U\\home\\j\u00c3\u00b6rg\\x y", "/path/to/home y"),
        # what follows a name is not the name's (helper-124, helper-125)
        ("C:\\Users\\Jos\u00e9\u2014aa:bb:cc:dd:ee:ff", "/path/to/home\u2014<mac>"),
        ("C:\\Users\\Strau\u00df\xa0root@build-host-3 y", "/path/to/home\xa0<user>@<host> y"),
        ("C:\\Users\\bob\u2014aa:bb:cc:dd:ee:ff", "/path/to/home\u2014<mac>"),
        ("\\\\wsl$\\Ubuntu\\home\\bob\u00bbroot@build-host-3", "/path/to/home\u00bb<user>@<host>"),
        (
            "\u201cC:\\Users\\bob\u201d, C:\\Users\\bob\xa0is here",
            "\u201c/path/to/home\u201d, /path/to/home\xa0is here",
        ),
        (
            "\u2018C:\\Users\\bob\u2019 files \u00abC:\\Users\\bob\u00bb",
            "\u2018/path/to/home\u2019 files \u00ab/path/to/home\u00bb",
        ),
    ],
)
def test_names_with_symbols_and_letters_past_ascii(text: str, published: str) -> None:
    """A Windows or WSL home's name takes letters past ASCII and the Latin-1 symbols of
    mojibake (`MÃ¼ller`), and not what follows a name (punctuation, a no-break space, the next
    token): 0921f72 took every symbol, and `C:\\Users\\bob—aa:bb:..` published the MAC
    address's tail (helper-124); f7180f5 took one after any letter that can lead UTF-8, and
    `C:\\Users\\José—...` did (helper-125)."""
    import leaks_reference as reference

    for scan in (leaks.scan_text, reference.scan_text):
        assert _replaced(text, scan(text)) == published


def test_a_plain_user_name_alone_is_found_spelled_before_its_at() -> None:
    """With no value to look for in base64 (a plain user name is none), its account form
    spelled a byte at a time is still looked for."""
    detector = Detector([Known("jdoe", "user-name", "<user>", KnownKind.USER)])
    text = "ssh 6a:64:6f:65:40:6c:61:62"
    assert [(text[h.start : h.end], h.placeholder) for h in detector.scan_text(text)] == [
        ("6a:64:6f:65:40", "<user>")
    ]


@pytest.mark.parametrize(
    "value",
    [
        "/home/jdoe/x",
        "gb10-lab-07",
        "/srv/ml/mod\u00e8les",
        "~!@#$%^&*()_+{}|:<>?",
        "zzzzzz",
        "a\tb\tc\td\x01e",  # bytes of one digit in decimal (audit 30)
        "jdoe@",  # a user name before `@`, of two letters or more
        "al@",
    ],
)
def test_each_spelling_of_the_bytes_is_where_the_gate_lets_them_be_searched(value: str) -> None:
    """`_SEPARATED_BYTES` is a necessary condition: a text without a match is not searched."""
    for spelled in leaks.separated_bytes(value.encode()):
        assert leaks._SEPARATED_BYTES.search(spelled.lower()), spelled


def test_a_plain_value_is_not_looked_for_spelled_out() -> None:
    """Counting, or listing letters or numbers, spells no secret: a value of letters only or
    digits only, or of fewer than 8 characters, is not looked for spaced out, dotted or in
    decimal bytes (audit 30: a reply that counts would have stopped an export)."""
    detector = Detector(
        [
            Known("123456", "token", "<token>", KnownKind.SECRET),
            Known("abcdefgh", "token", "<token>", KnownKind.SECRET),
            Known("12345678", "token", "<token>", KnownKind.SECRET),
        ]
    )
    text = (
        "1 2 3 4 5 6 7 8 9, 1.2.3.4.5.6.7.8, a b c d e f g h i, "
        f"{list(range(40, 60))}, {list(b'abcdefghi')}"
    )
    assert detector.scan_text(text) == []


def test_a_string_seen_before_gives_its_hits_at_its_new_place() -> None:
    """The encoded forms' hits of a string are kept and taken again (a sweep repeats its
    prompts and replies): each at the string's place in the document that holds it."""
    detector = Detector([Known("/home/jdoe/x", "private-path", "/path/to/home", KnownKind.PATH)])
    blob = _b64(b"at /home/jdoe/x")
    assert [h.pointer for h in detector.scan_document({"a": blob})] == ["/a"]
    again = detector.scan_document({"b": ["x", f"{blob} {blob}"], "c": blob})
    assert [(h.pointer, h.start, h.end) for h in again] == [
        ("/b/1", 0, len(blob)),
        ("/b/1", len(blob) + 1, 2 * len(blob) + 1),
        ("/c", 0, len(blob)),
    ]


def test_base85_cores_are_each_alphabets_encoding() -> None:
    # ZeroMQ's test vector (RFC 32): Python before 3.13 has no z85encode to compare with
    vector = bytes([0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B])
    assert leaks.base85_cores(vector) == [
        base64.a85encode(vector).decode(),
        base64.b85encode(vector).decode(),
        "HelloWorld",
    ]


def test_a_known_value_in_utf16_read_as_latin1_is_found() -> None:
    spread = "gb10-lab-07".encode("utf-16-le").decode("latin-1")  # JSON: g\u0000b\u0000...
    hits = KNOWN_FORMS.scan_document({"log": f"on {spread}.", "keys": ["g", "b", "1"]})
    # (the character after the last NUL goes with the run: it could be UTF-16's too)
    assert [(h.pointer, h.start, h.end, h.hit.placeholder) for h in hits] == [
        ("/log", 3, 3 + len(spread) + 1, "<host>")
    ]
    # one-letter strings one after another are no such run: their letters spell nothing known
    assert KNOWN_FORMS.scan_document({"a": "j", "b": "d", "c": "o", "d": "e"}) == []


def test_compressed_data_is_read_only_by_export_and_only_so_far() -> None:
    blob = _b64(gzip.compress(b"at /home/bob/y", mtime=0))
    assert scan_text(f"x {blob}") == []  # verify: the generic detectors, on the text alone
    # export: only the values it knows (binary data spells user@host and the like)
    assert KNOWN_FORMS.scan_text(f"x {blob}") == []
    binary = _b64(gzip.compress(bytes(range(256)) * 64 + b"S@H a@bc.de 10.1.2.3", mtime=0))
    assert KNOWN_FORMS.scan_text(binary) == []
    bomb = _b64(gzip.compress(b"\0" * (8 << 20) + b" /home/jdoe/x", mtime=0))
    # past _MOST_INFLATED bytes nothing is read, so what follows goes (fail closed; audit 30:
    # before, the bomb itself was kept, the path inside it unread)
    assert [h.placeholder for h in KNOWN_FORMS.scan_text(bomb)] == [leaks.UNREAD_PLACEHOLDER]
    # ... and compressed data after that is not read at all: it goes too
    text = f"{bomb} {blob} eJxLLqlQSE8yNNDNSUzSNTBXSM1LAQA8qwXh eJabcdefghijklmn"
    hits = KNOWN_FORMS.scan_text(text)
    assert [(h.start, h.placeholder) for h in hits] == [
        (0, leaks.UNREAD_PLACEHOLDER),
        (len(bomb) + 1, leaks.UNREAD_PLACEHOLDER),
        (len(bomb) + 2 + len(blob), leaks.UNREAD_PLACEHOLDER),
    ]


def test_compressed_data_is_read_as_the_tools_read_it() -> None:
    """Each stream in turn (gzip members, bzip2 and xz streams), and of a stream whose check
    fails what came out before the fault, as `gzip -dc` and `xz -dc` print it (audit 30)."""
    for compress in (gzip.compress, bz2.compress, lzma.compress):
        two = _b64(compress(b"first ") + compress(b"/home/jdoe/x"))
        assert [h.placeholder for h in KNOWN_FORMS.scan_text(two)] == ["/path/to/home"]
    broken_gzip = bytearray(gzip.compress(b"model at /home/jdoe/x\n"))
    broken_gzip[-6] ^= 1  # its CRC-32
    broken_xz = bytearray(lzma.compress(b"model at /home/jdoe/x\n"))
    broken_xz[-13 - (int.from_bytes(broken_xz[-8:-4], "little") + 1) * 4] ^= 1  # its check
    for broken in (broken_gzip, broken_xz):
        hits = KNOWN_FORMS.scan_text(f"blob {_b64(bytes(broken))}")
        assert [h.placeholder for h in hits] == ["/path/to/home"]


def test_data_that_does_not_decompress_costs_its_part_of_the_budget() -> None:
    """bzip2 decodes a whole block (up to 900 kB) before it checks it: each stream counts as
    its block's size, read or not, so a text of broken blocks is soon past the budget, and
    the rest is not read (audit 30: 45 bytes each, 2,000 of them took 9 s). The first is
    read whole (its 898 kB, then the fault); the second only in part, the budget spent: it
    goes, as the others, which are not read at all."""
    broken = bytearray(bz2.compress(b"ab" * 449000))
    broken[10] ^= 1
    blob = _b64(bytes(broken))
    hits = KNOWN_FORMS.scan_text(" ".join([blob] * 4))
    assert [(h.start, h.placeholder) for h in hits] == [
        (n * (len(blob) + 1), leaks.UNREAD_PLACEHOLDER) for n in (1, 2, 3)
    ]


def test_a_known_value_read_out_of_other_data_keeps_its_kind() -> None:
    """An opaque value (removed from free text only, never a reason to stop an export) stays
    opaque in UTF-16 or in compressed data; audit 16 found it made identifying there."""
    detector = Detector([Known("production-east-1", "environment", "<env>", KnownKind.OPAQUE)])
    spread = "production-east-1".encode("utf-16-le").decode("latin-1")
    packed = _b64(zlib.compress(b"region production-east-1, zone b, rack 7, row 12"))
    for text in (spread, packed):
        assert [(h.placeholder, h.identifying) for h in detector.scan_text(text)] == [
            ("<env>", False)
        ]


@pytest.mark.parametrize(
    "encode",
    [
        lambda data: _b64(data),
        lambda data: data.hex(),
        lambda data: base64.b32encode(data).decode(),
        lambda data: _b64(data.decode().encode("utf-16-le")),
        lambda data: data.decode().encode("utf-16-le").decode("latin-1"),  # a NUL after each
    ],
)
def test_an_opaque_value_first_in_an_encoded_run_hides_no_identifying_one(
    encode: Callable[[bytes], str],
) -> None:
    """Environment values (opaque) are looked for encoded too; a run that holds one and, further
    on, a private path is the path's: identifying, so it stops an export in evidence (the
    first version of this named the run after the value that starts first in it)."""
    detector = Detector(
        [
            Known("xterm-256color", "environment", "<env>", KnownKind.OPAQUE),
            Known("/home/alice", "private-path", "/path/to/home", KnownKind.PATH),
        ]
    )
    text = encode(b"TERM=xterm-256color\nHOME=/home/alice\n")
    hits = detector.scan_text(text)
    assert [(h.placeholder, h.identifying) for h in hits][:1] == [("/path/to/home", True)]
    alone = detector.scan_text(encode(b"TERM=xterm-256color\nLANG=C\n"))
    assert [(h.placeholder, h.identifying) for h in alone] == [("<env>", False)]


def test_overlapping_hex_spellings_are_each_found() -> None:
    """audit 16: a base64 run's padding took the `=` that starts quoted-printable."""
    detector = Detector(
        [
            Known("/srv/data/x1", "private-path", "<p>", KnownKind.PATH),
            Known("data/x1/tok", "token", "<t>", KnownKind.SECRET),
        ]
    )
    qp = "".join(f"={c:02X}" for c in b"/srv/data/x1/tok")
    text = _b64(b"/srv/data/x1") + qp
    hits = detector.scan_text(text)
    # (the path's quoted-printable runs from the base64's `=` to inside the token's: what
    # the two leave of it, `=2F=73=72=76=2F` of `/srv/`, is its own hit)
    assert [h.placeholder for h in hits] == ["<p>", "<p>", "<t>"]
    assert [h.end for h in hits] == [hits[1].start, hits[2].start, len(text)]


def test_a_string_named_private_is_not_looked_for_in_rot13() -> None:
    """A named string is found inside any word, in any case: its ROT13 could be a word."""
    detector = Detector([Known("abjurer", "private-path", "<private-1>", KnownKind.STRING)])
    assert detector.scan_text("nowhere to go") == []


def test_a_detector_without_encodings_finds_the_values_as_they_are() -> None:
    """What export builds while it collects values (for placeholders' texts): the values and
    their spellings, no encoded form; the whole detector scans every public file at the end."""
    known = [Known("/home/jdoe/x", "private-path", "/path/to/home", KnownKind.PATH)]
    plain = Detector(known, encoded=False)
    encoded = _b64(b"at /home/jdoe/x")
    assert [h.placeholder for h in plain.scan_text("in /home/jdoe/x")] == ["/path/to/home"]
    assert plain.scan_text(f"b {encoded} /ubzr/wqbr/k") == []
    assert len(Detector(known).scan_text(f"b {encoded} /ubzr/wqbr/k")) == 2


# --- export audit: names and addresses in forms the scan missed, allowed spans hidden ------


@pytest.mark.parametrize(
    ("text", "found"),
    [
        # A plain host name as the value of a member or line that names the machine.
        ('{"hostname": "buildbox", "pid": 41027}', ["buildbox"]),
        ("host\x01buildbox", ["buildbox"]),
        ("NODE_NAME=buildbox node: 'x' {'machine': 'buildbox'}", ["buildbox", "buildbox"]),
        ('"computer_name":"buildbox", host-name=buildbox', ["buildbox", "buildbox"]),
        ("GET /metrics HTTP/1.1\r\nHost: buildbox\r\nAccept: */*", ["buildbox"]),
        ("hostname: buildbox", ["buildbox"]),
        ("Hostname:\tbuildbox  \n", ["buildbox"]),
        # ... and as the host of a system log's line, after its time
        ("Dec  5 00:19:12 buildbox llama-server[812]: loaded", ["buildbox"]),
        ("2026-12-05T00:19:12+0000 buildbox kernel: x", ["buildbox"]),
        ("2026-12-05T00:19:12+01:00 BUILDBOX systemd[1]: ok", ["BUILDBOX"]),
        ("2026-12-05T00:19:12.123456+00:00 buildbox sshd(pam_unix)[1]: x", ["buildbox"]),
        ("Dec 05 00:19:12.123 buildbox (sd-pam)[1]: x", ["buildbox"]),
        ("2026-12-05T00:19:12.003Z buildbox kernel: x", ["buildbox"]),
        ("Sat 2026-12-05 00:19:12 CEST buildbox sshd[1]: x", ["buildbox"]),
        ("Sat 2026-12-05 00:19:12 +03 buildbox sshd[1]: x", ["buildbox"]),
        ("2026-12-05T00:19:12.123456789Z buildbox kernel: x", ["buildbox"]),
        ("1733357952.123456 buildbox sshd[1]: x", ["buildbox"]),
        ("<34>1 2026-12-05T00:19:12.003Z buildbox su - ID47 - x", ["buildbox"]),
        # ... not where the word names nothing: prose after `Host:`, other keys, longer values.
        ("Host: buildbox is our podcast", []),
        ("Dec 15 00:19:12 buildbox is idle; at 00:19:12 buildbox kernel: x", []),
        # ... nor a name the line's next word does not show to be its host (no program)
        ("2026-12-05T00:19:12Z buildbox 127.0.0.1:8080 2026-12-05T00:19:12Z buildbox 12:00", []),
        ("the buildbox machine; hosts: buildbox; hostname=buildbox2", []),
        ('{"hostname": "buildbox-2"}', []),
        # ... nor prose that ends a line after `node:` or `machine:` (the audit of 032dfa2)
        ("The node: buildbox\nStep 1 - Machine: buildbox", []),
    ],
)
def test_a_plain_host_name_is_found_where_a_member_names_the_machine(
    text: str, found: list[str]
) -> None:
    assert named(text) == found


@pytest.mark.parametrize(
    ("text", "found"),
    [
        # A plain user name in a home relative to `/` or to a relative directory.
        ("tar: x\nhome/jdoe/work/raw/run.json", ["jdoe"]),
        ("../home/jdoe/.ssh/id_ed25519 ./home/jdoe", ["jdoe", "jdoe"]),
        ('"Users/jdoe/Library/x" var/home/jdoe/y', ["jdoe", "jdoe"]),
        ("..\\..\\Users\\jdoe\\AppData\\x", ["jdoe"]),
        # ... and in other account spellings.
        ('{"user_name": "jdoe"} user-name=jdoe account=jdoe', ["jdoe", "jdoe", "jdoe"]),
        # (the second: that document as its flattening writes it, the list's item after
        # the member's name by ITEM_SEP)
        ('{"username": ["jdoe"]} username\x02jdoe', ["jdoe", "jdoe"]),
        ("Access denied for user 'jdoe'@'localhost'", ["jdoe"]),
        ('"jdoe"@"%"', ["jdoe"]),
        ("220 ready\r\nUSER jdoe\r\n331", ["jdoe"]),
        # ... not where the word is no home's or account's.
        ("myhome/jdoe/x homes/jdoe/z a.home/jdoe", []),
        # ... and below a home directory that is a component of a longer path
        ("extracted rootfs/home/jdoe/.cache x/var/home/jdoe", ["jdoe", "jdoe"]),
        ("x/home/jdoe/y $HOME/../home/jdoe", ["jdoe", "jdoe"]),
        ("user jdoe; User jdoe; 'jdoe' @ 'x'; accounts: jdoe", []),
        ("Sign in with your jdoe account: jdoe Developer Program; Account: jdoe", []),
    ],
)
def test_a_plain_user_name_is_found_in_relative_homes_and_account_spellings(
    text: str, found: list[str]
) -> None:
    hits = KNOWN_FORMS.scan_text(text)
    assert [text[h.start : h.end] for h in hits if h.placeholder == "<user>"] == found


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("peer 081.002.069.142, 81.2.69.142", ["081.002.069.142", "81.2.69.142"]),
        ("081.2.69.142:22 and 81.002.069.142", ["081.2.69.142", "81.002.069.142"]),
        # the reverse order is not looked for (its places would be every short number)
        ("142.69.2.81.in-addr.arpa", []),
        # a longer number is none
        ("0081.2.69.142 and 1081.2.69.142", []),
    ],
)
def test_the_captures_address_is_found_padded(text: str, found: list[str]) -> None:
    hits = KNOWN_FORMS.scan_text(text)
    assert [text[h.start : h.end] for h in hits if h.placeholder == "<ip>"] == found


def test_the_new_forms_are_found_as_the_plain_scan_finds_them() -> None:
    """The fast scan's places (an address's first octet, padded or not) miss none of them."""
    import leaks_reference as reference

    known = [
        Known("jdoe", "user-name", "<user>", KnownKind.USER),
        Known("buildbox", "host-name", "<host>", KnownKind.HOST),
        Known("81.2.69.142", "ip-address", "<ip>", KnownKind.ADDRESS),
        Known("4.3.2.1", "ip-address", "<ip>", KnownKind.ADDRESS),
        Known("0.3.2.10", "ip-address", "<ip>", KnownKind.ADDRESS),
    ]
    plain = reference.Detector(
        [
            reference.Known(k.value, k.category, k.placeholder, reference.KnownKind(k.kind.value))
            for k in known
        ]
    )
    fast = Detector(known)
    texts = [
        "142.69.2.81.in-addr.arpa 081.002.069.142 01.2.3.004.x 004.003.002.001 1.2.3.4.lan",
        "10.2.3.0.in-addr.arpa 000.003.002.010 10.2.3.000.x 0.3.2.10 00.3.2.10",
        "home/jdoe/x ../Users/jdoe 'jdoe'@'h' USER jdoe account=jdoe username\x00jdoe",
        '{"hostname": "buildbox"} Host: buildbox\r\n node_name=buildbox machine: buildbox',
        "x" * 40 + " 004.3.2.01 ," * 300,  # more places than tried one by one
    ]
    for text in texts:
        found = fast.scan_text(text)
        assert found, text  # each text holds the new forms
        assert repr(found) == repr(plain.scan_text(text)), text


def test_a_hidden_span_is_read_as_a_boundary_and_what_follows_it_is_found() -> None:
    detector = Detector([Known("buildbox", "host-name", "<host>", KnownKind.HOST)])
    document = {"a": ["/home/user/x?owner=jdoe@buildbox", "/home/bob/y"], "b": "/home/eve/z"}
    (first, *_) = detector.scan_document(document)
    assert (first.path, first.end) == (("a", 0), len(document["a"][0]))  # one hit, swallowing
    hidden = {(("a", 0), False): [(0, len("/home/user/x"))]}
    found = detector.scan_document_hiding(document, hidden)
    text = document["a"][0]
    assert [text[h.start : h.end] for h in found if h.path == ("a", 0)] == ["jdoe@buildbox"]
    assert [h.path for h in found] == [("a", 0), ("a", 1), ("b",)]
    only = detector.scan_document_hiding(document, hidden, {(("a", 0), False)})
    assert [h.path for h in only] == [("a", 0)]


@pytest.mark.parametrize(
    ("user", "text", "found"),
    [
        # a service account's name is the name of the system's own folder for it
        ("cache", "apt keeps its lists in /var/cache/apt/lists", []),
        ("www", "serve it from /var/www/html", []),
        ("postgres", "data in /var/lib/postgres/data and /usr/lib/postgres/16", []),
        ("bin", "installed to /usr/local/bin and /usr/bin", []),
        # ... but a user's own folder anywhere else is found (HPC, mounted data)
        ("cache", "ran from /scratch/cache/run and /mnt/data/cache/x", ["cache", "cache"]),
        ("jdoe", "/var/jdoe/x", []),  # (under /var: not an account's folder)
        # ... only the system's own folders, from the root (helper-51)
        ("jdoe", "/mnt/share/jdoe/x /scratch/local/jdoe /local/jdoe/run", ["jdoe"] * 3),
        ("jdoe", "%2Fshare%2Fjdoe%2Fx /data/lib/jdoe/x", ["jdoe", "jdoe"]),
    ],
)
def test_a_user_named_as_a_system_folder_is_not_found_in_it(
    user: str, text: str, found: list[str]
) -> None:
    """helper-50: export refused honest replies naming /var/cache for a user `cache`."""
    detector = Detector([Known(user, "user-name", "<user>", KnownKind.USER)])
    assert [text[h.start : h.end] for h in detector.scan_text(text)] == found


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ('{"token": "Tr0ub4dor3xK9mQ2ab"}', ["Tr0ub4dor3xK9mQ2ab"]),
        ("token: Tr0ub4dor3xK9mQ2ab", ["Tr0ub4dor3xK9mQ2ab"]),
        ("GET /v1/x?token=Tr0ub4dor3xK9mQ2ab HTTP/1.1", ["Tr0ub4dor3xK9mQ2ab"]),
        # a model's token in logprobs is not a secret, nor a word or number of 16 or more
        ('{"token": "Paris", "logprob": -0.1}', []),
        ('{"token": "ValueErrorException"}', []),
        ('{"token": "1234567890123456"}', []),
    ],
)
def test_a_member_named_token_holds_a_secret_when_its_value_is_random(
    text: str, found: list[str]
) -> None:
    """helper-50: `token: X` with a random X was published (the name alone is a model's
    token in logprobs)."""
    assert [text[h.start : h.end] for h in scan_text(text)] == found


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("machine api.x.io login bob password Tr0ub4dor3xK9mQ2", ["Tr0ub4dor3xK9mQ2"]),
        ("passwd Hunter22Abc", ["Hunter22Abc"]),
        ("the password reset link; password hunter22; mypassword Tr0ub4dor3x", []),
    ],
)
def test_a_password_after_its_word_and_a_space(text: str, found: list[str]) -> None:
    """helper-50: `.netrc`'s `password X` was published; a password's shape only (eight or
    more, both cases and a digit), as after `PASS=`."""
    assert [text[h.start : h.end] for h in scan_text(text)] == found


def test_a_named_string_of_words_is_found_whatever_stands_between_them() -> None:
    detector = Detector([Known("Project Zeta", "private-path", "<private-1>", KnownKind.STRING)])
    text = "Project+Zeta, project_zeta, PROJECT&nbsp;ZETA, Project\u00a0Zeta, ProjectZeta"
    assert [text[h.start : h.end] for h in detector.scan_text(text)] == [
        "Project+Zeta",
        "project_zeta",
        "PROJECT&nbsp;ZETA",
        "Project\u00a0Zeta",
    ]


def test_webhooks_are_found_in_a_text_of_many_token_prefixes() -> None:
    # Past the number of places the prefilter lists (_Places.limit), the prefixed tokens are
    # tried wherever a token prefix is (_TOKEN_PREFIX): Slack's and Discord's webhooks (a
    # host in any case) are among them
    slack = "hooks.slack.com/services/T0123/B0456/abcdefghijklmnopqrstuvwx"
    discord = "DISCORD.com/api/webhooks/1122334455/abcdefghijklmnopqrstuvwx"
    many = " ".join(f"hf_{'A' * 20}{i}" for i in range(3000))
    text = f"{many} https://{slack} and https://{discord} ok"
    found = {text[h.start : h.end] for h in leaks.scan_text(text)}
    assert {slack, discord} <= found


def _trie_plain(words: list[str], depth: int = 0) -> str:
    """`leaks._trie_pattern` as it was written first: the common literal taken a character
    at a time (quadratic in a long value's length, and plainly right)."""
    if depth >= leaks._TRIE_DEPTH:
        return "(?:" + "|".join(map(re.escape, sorted(words, key=len, reverse=True))) + ")"
    prefix = ""
    while all(words) and len({w[0] for w in words}) == 1:
        prefix += words[0][0]
        words = [w[1:] for w in words]
    ends = "" in words
    branches: dict[str, list[str]] = {}
    for word in words:
        if word:
            branches.setdefault(word[0], []).append(word[1:])
    if not branches:
        return re.escape(prefix)
    inner = "|".join(
        re.escape(first) + _trie_plain(rest, depth + 1) if any(rest) else re.escape(first)
        for first, rest in sorted(branches.items())
    )
    return re.escape(prefix) + "(?:" + inner + (")?" if ends else ")")


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.text(alphabet="abé.x", max_size=8).map(lambda w: "ab" + w),
        min_size=1,
        max_size=6,
    )
)
def test_the_known_values_trie_is_the_plain_one(words: list[str]) -> None:
    """The literal all the words start with is found at once (a 100 KB known value took
    export a minute when each character copied every word): the same pattern."""
    assert leaks._trie_pattern(words) == _trie_plain(words)


def test_a_long_known_value_is_found_whole() -> None:
    value = "".join(f"k{i:05d}," for i in range(20_000))  # 140,000 characters
    detector = Detector([Known(value, "token", "<token>", KnownKind.SECRET)])
    text = f"head {value} tail"
    assert [(h.start, h.end) for h in detector.scan_text(text)] == [(5, 5 + len(value))]


@pytest.mark.parametrize(
    "text",
    [
        "vllm serve m --long-prefill-token-threshold 2048 --port 8000",
        "\x00--long-prefill-token-threshold\x022048\x02--thinking-token-budget\x021024",
        "--reasoning-token-budget=512 --token -1 --token-healing=0",
    ],
)
def test_a_number_after_a_flag_of_a_count_of_tokens_is_a_setting(text: str) -> None:
    """helper-106 saw vLLM's `--long-prefill-token-threshold 2048` published as
    `--long-prefill-token-threshold <token>` by export, and an honest bundle that kept it
    was a leak to verify."""
    assert [h for h in leaks.scan_text(text) if h.category == "token"] == []


def test_a_key_or_a_number_after_a_secret_flag_is_still_a_token() -> None:
    """A number after a key's, a password's or a secret's flag is one (helper-107: a PIN, a
    database's password)."""
    text = (
        "\x00--api-key\x02Zq8Wm3Xr5Tb7Nc9Vd1\x02--hf-token=abc123def456\x02--password=12345678"
        "\x02--admin-password\x02123456\x02--api-key\x029876543210987654"
    )
    found = [text[h.start : h.end] for h in leaks.scan_text(text) if h.category == "token"]
    assert found == ["Zq8Wm3Xr5Tb7Nc9Vd1", "abc123def456", "12345678", "123456", "9876543210987654"]


@pytest.mark.parametrize(
    ("text", "keys"),
    [
        # in quotes, where it has a key's random shape (`_quoted_key`)
        ('llama-server --api-key "Zq8Wm3Xr5Tb7" --port 8080', ["Zq8Wm3Xr5Tb7"]),
        ("vllm serve m --api-key 'Zq8Wm3Xr5Tb7'", ["Zq8Wm3Xr5Tb7"]),
        ('--api-key "9b2f6c1e-4a7d-4e3b-8f5a-2c6d1e9b7a40"',
         ["9b2f6c1e-4a7d-4e3b-8f5a-2c6d1e9b7a40"]),
        ('--api-key "7f3k9x2m4q8w1z5t6y0u3p7r9s2v4n8b"', ["7f3k9x2m4q8w1z5t6y0u3p7r9s2v4n8b"]),
        ('--api-key "prod:7f3k9x2m4q8w1z5t8k2m"', ["prod:7f3k9x2m4q8w1z5t8k2m"]),  # (helper-129)
        # (helper-128) a password that a shell makes one quote; after a password's flag, its
        # shape (both cases and a digit)
        ('--password "Xk9#mP2$vL7!qR4" --db-password "S3cr3t_P4ssw0rd_2024"',
         ["Xk9#mP2$vL7!qR4", "S3cr3t_P4ssw0rd_2024"]),
        ('["--password",\n  "Pa55word"]', ["Pa55word"]),
        # ... not a placeholder (helper-126, helper-127, helper-129): a word, a count, a UUID
        # of documentation, an identifier with a date, a path, a URL, a model's id
        ('vllm serve m --api-key "your-api-key" --api-key "YOUR_API_KEY"', []),
        ('--api-key "abc123" --api-key "12345678" --password "my-secret-password-2024"', []),
        ('--password "Hello, World!" --api-key "$(cat key.txt)" --password "a1!a1!a1!a1!"', []),
        ('--secret "MySecret123!" --password "Password123" --password "ChangeMe123"', []),
        ('--api-key "00000000-0000-0000-0000-000000000000"', []),
        ('--api-key "12345678-1234-1234-1234-123456789012"', []),
        ('--api-key "550e8400-e29b-41d4-a716-446655440000"', []),  # (RFC 4122's example)
        ('--bypass-token "HelloWorld1" --api-key "3fa85f64-5717-4562-b3fc-2c963f66afa6"', []),
        ("['--api-key', '1234567890abcdef', '--cache-key', 'llama3-8b-2024-06-01-v2']", []),
        ("['--key', 'model-7b-v2-20240501-q4', '--auth-header', 'X-Api-Key-2024-v1']", []),
        ('--key "/etc/ssl/MyCert2024.pem" --secret "Qwen/Qwen2.5-7B-Instruct"', []),
        ('--api-key "https://API.example.com/v1/Keys/42" --api-key "OpenAI:GPT-4o-2024"', []),
        # after a line's continuation; not the next flag (helper-126)
        ("llama-server --api-key \\\n  Zq8Wm3Xr5Tb7 --port 1", ["Zq8Wm3Xr5Tb7"]),
        ('llama-server --hf-token \\\r\n    "hf2Q8wZ3xR5tB7nC9vD1" -m x', ["hf2Q8wZ3xR5tB7nC9vD1"]),
        ("vllm serve m --api-key `\r\n  Zq8Wm3Xr5Tb7", ["Zq8Wm3Xr5Tb7"]),  # PowerShell
        ("llama-server.exe --api-key ^\r\n  Zq8Wm3Xr5Tb7", ["Zq8Wm3Xr5Tb7"]),  # cmd
        ("python run.py \\\n --use_auth_token \\\n --output_dir out", []),
        ("gh auth login \\\n --with-token \\\n --hostname h", []),
        ("llama-server --api-key --port 8080", []),
        # ... not Markdown's inline code that ends a line (helper-128)
        ("Use `--api-key`\nhttps://platform.openai.com/api-keys, or `--api-key`\ngpt-4o-mini", []),
        # the next item of a list a program printed its arguments as, a key's shape
        ("argv: ['--api-key', 'Zq8Wm3Xr5Tb7', '--port', '8080']", ["Zq8Wm3Xr5Tb7"]),
        ('argv: ["--api-key", "Zq8Wm3Xr5Tb7Nc9V"]', ["Zq8Wm3Xr5Tb7Nc9V"]),
        ('[\n  "--api-key",\n  "Ab12Cd34Ef56Gh78Ij90"\n]', ["Ab12Cd34Ef56Gh78Ij90"]),  # indented
        ("subprocess.run(['vllm', 'serve', m, '--api-key', 'your-api-key'])", []),
        ("['--api-key', 'YOUR_API_KEY', '--api-key', 'token-abc123', '--api-key', 'sk-xxxx']", []),
        ("argv: ['--api-key', 'secret', '--max-tokens', '2048', '--api-key', '--port']", []),
        # (session 27) a YAML block list, as a container's args; cmd's `^` with no space
        ("args:\n  - --api-key\n  - Zq8Wm3Xr5Tb7Nc9V\n  - --port", ["Zq8Wm3Xr5Tb7Nc9V"]),
        ('command:\n- "--hf-token"\n- "hf2Q8wZ3xR5tB7nC9vD1"', ["hf2Q8wZ3xR5tB7nC9vD1"]),
        ("- --api-key\n- your-api-key\n- --api-key\n- --port\n- --token\n- Set it here", []),
        ("llama-server.exe --api-key^\r\n  Zq8Wm3Xr5Tb7", ["Zq8Wm3Xr5Tb7"]),
        # (helper-130) past a comment, a blank line, a line of comment; a block scalar's
        # line; a flow list's next item
        ("args:\n  - --api-key  # the key\n\n  # here\n  - Zq8Wm3Xr5Tb7Nc9V", ["Zq8Wm3Xr5Tb7Nc9V"]),
        ("args:\n  - --api-key\r\n  - >-\r\n    Zq8Wm3Xr5Tb7Nc9V\r\n", ["Zq8Wm3Xr5Tb7Nc9V"]),
        ('args: [--api-key, Zq8Wm3Xr5Tb7Nc9V], ["--token", Ab12Cd34Ef56Gh78Ij90]',
         ["Zq8Wm3Xr5Tb7Nc9V", "Ab12Cd34Ef56Gh78Ij90"]),
        ("use --api-key, then restart; --api-key  # set it\n- your-key", []),
        # (helper-131) a comment glued to its `#`; a flow list's quoted value, over lines;
        # a block scalar's indentation; a shell's comment is no value
        ("  - --api-key  #nosec\n  - Zx9Kq2Lm8Np4Rt6Vw1Yb3\n", ["Zx9Kq2Lm8Np4Rt6Vw1Yb3"]),
        ("  - --api-key #from-vault-secret\n  - Zx9Kq2Lm8Np4Rt6Vw1Yb3", ["Zx9Kq2Lm8Np4Rt6Vw1Yb3"]),
        ('args: [--api-key, "Zx9Kq2Lm8Np4Rt6Vw1Yb3"]', ["Zx9Kq2Lm8Np4Rt6Vw1Yb3"]),
        ("args: [\n  --api-key,\n  Zx9Kq2Lm8Np4Rt6Vw1Yb3\n]", ["Zx9Kq2Lm8Np4Rt6Vw1Yb3"]),
        ("args:\n  - --api-key\n  - |2-\n    Zx9Kq2Lm8Np4Rt6Vw1Yb3\n", ["Zx9Kq2Lm8Np4Rt6Vw1Yb3"]),
        ("mysql --password #Zx9Kq2Lm8Np4Rt6Vw1Yb3", []),
    ],
)  # fmt: skip
def test_a_secret_flags_value_in_quotes_across_lines_or_in_a_printed_list(
    text: str, keys: list[str]
) -> None:
    """(session 24's list) `--api-key "KEY"`, `--api-key \\` and the key on the next line,
    and `['--api-key', 'KEY']` published the key."""
    import leaks_reference as reference

    for scan in (leaks.scan_text, reference.scan_text):
        assert [text[h.start : h.end] for h in scan(text) if h.category == "token"] == keys


KEY = "Qm7Zx2Lk9Pw4Rt8Vn3Bc"


@pytest.mark.parametrize(
    "text",
    [
        # vLLM's start-up line (its `--api-key` is a list)
        f"INFO [utils.py:253] non-default args: {{'model_tag': 'org/m', 'api_key': ['{KEY}']}}",
        f'{{"api_keys": ["{KEY}", "x"]}}',
        f"token: [ '{KEY}' ]",
        f'"password" : ["{KEY}"]',
    ],
)
def test_the_first_key_of_a_list_written_in_a_text_is_a_secret(text: str) -> None:
    """(helper-112) A list's first item after a secret's name, as a log or a reply writes it
    with its brackets; found alike by the fast scan and the plain one."""
    import leaks_reference as reference

    for scan in (leaks.scan_text, reference.scan_text):
        assert [text[h.start : h.end] for h in scan(text) if h.category == "token"] == [KEY]


@pytest.mark.parametrize(
    "text", ['"tokens": ["hello", "world"]', '{"token_ids": [1, 2, 3]}', '"stop": ["</s>"]']
)
def test_a_list_after_a_name_that_names_no_secret_is_no_hit(text: str) -> None:
    assert leaks.scan_text(text) == []


@pytest.mark.parametrize(
    ("text", "found"),
    [
        # git's quoted path (core.quotePath) and `ls -b`: a byte an octal escape
        ('modified:   "/home/j\\303\\266rg/arbeit/out.txt"', "/home/j\\303\\266rg/arbeit/out.txt"),
        (
            "?? /home/\\320\\270\\320\\262\\320\\260\\320\\275/x",
            "/home/\\320\\270\\320\\262\\320\\260\\320\\275/x",
        ),  # иван
    ],
)
def test_a_path_in_octal_escapes_of_utf8_is_found(text: str, found: str) -> None:
    """(helper-112) A run of octal escapes that spells one UTF-8 character is that character,
    as a run of `%HH` or `\\xHH` is, not a Latin-1 character a byte (`jÃ¶rg`)."""
    import leaks_reference as reference

    for scan in (leaks.scan_text, reference.scan_text):
        assert [text[h.start : h.end] for h in scan(text)] == [found]


def test_a_known_name_in_octal_escapes_of_utf8_is_found() -> None:
    detector = Detector([Known("jörg", "user-name", "<user>", KnownKind.USER)])
    text = 'git: "srv/users/j\\303\\266rg/notes.txt"'
    assert [text[h.start : h.end] for h in detector.scan_text(text)] == ["j\\303\\266rg"]


# A secret-named member whose value is a list: every item (helper-112's F2), in a text as
# vLLM, json.dumps(indent=2), YAML and Python write it, and in a document.
_K1, _K2 = "Qm7Zx2Lk9Pw4Rt8Vn3Bc", "Zz9Yy8Xx7Ww6Vv5Uu4Tt"


@pytest.mark.parametrize(
    ("text", "keys"),
    [
        (f"non-default args: {{'model': 'm', 'api_key': ['{_K1}', '{_K2}'], 'port': 8000}}", 2),
        (json.dumps({"api_key": [_K1, _K2]}, indent=2), 2),
        (f"api_keys:\n- {_K1}\n- {_K2}\nport: 8000", 2),
        (f"api_keys: [{_K1}, abcdefgh, {_K2}]", 2),  # an item of a word's shape is no key
    ],
)
def test_every_item_of_a_secret_members_list(text: str, keys: int) -> None:
    hits = scan_text(text)
    found = [text[h.start : h.end] for h in hits]
    assert found == [_K1, _K2][:keys]
    assert all(_K1 not in h.excerpt and _K2 not in h.excerpt for h in hits)


def test_a_list_ends_where_its_items_do() -> None:
    text = f"'api_key': ['{_K1}'], 'model_tag': 'Zz9Yy8Xx7Ww6Vv5Uu4Tt'"
    assert [text[h.start : h.end] for h in scan_text(text)] == [_K1]
    # a plain member is no list: what follows its value after a comma is not its item
    text = f"api_key={_K1}, model={_K2}"
    assert [text[h.start : h.end] for h in scan_text(text)] == [_K1]


@pytest.mark.parametrize(
    ("text", "keys"),
    [
        # (helper-119's F4) llama-server's comma-separated keys, vLLM's keys one argument each
        (f"llama-server -m m.gguf --api-key {_K1},{_K2}", [_K1, _K2]),
        (f"vllm serve Qwen/Qwen3-8B --api-key {_K1} {_K2} --port 8000", [_K1, _K2]),
        (f"--api-key\x02{_K1}\x02{_K2}\x02--port\x028000", [_K1, _K2]),
        (f"LLAMA_API_KEY={_K1},{_K2} llama-server", [_K1, _K2]),
        (f"--api-key {_K1}, {_K2}.", [_K1, _K2]),
        # what ends the list: a flag, a word, a path, a member of its own, a short item
        (f"--api-key {_K1} --port 8000 {_K2}", [_K1]),
        (f"--api-key {_K1} and then {_K2}", [_K1]),
        (f"--api-key {_K1} Qwen/Qwen3-8B", [_K1]),
        (f"--api-key {_K1} Qwen3-8B-Instruct-AWQ", [_K1]),
        (f"api_key={_K1}, model={_K2}", [_K1]),
        (f"--api-key {_K1},Ab1Cd2", [_K1]),
        (f"api_key: {_K1}, 1700000000000", [_K1]),  # a number (helper-121)
    ],
)
def test_every_key_after_a_secret_flag_or_name(text: str, keys: list[str]) -> None:
    import leaks_reference as reference

    for scan in (scan_text, reference.scan_text):
        hits = scan(text)
        assert [text[h.start : h.end] for h in hits] == keys
        assert all(_K1 not in h.excerpt and _K2 not in h.excerpt for h in hits)


def test_every_string_of_a_secret_members_list_in_a_document() -> None:
    hits = leaks.scan_document({"api_keys": [_K1, _K2], "stop": ["Qm7Zx2Lk9Pw4Rt8Vn3Bd"]})
    assert [h.pointer for h in hits] == ["/api_keys/0", "/api_keys/1"]
    assert leaks.scan_document({"api_key": [[_K1]]}) == []  # (a list of lists: not read)


@pytest.mark.parametrize(
    "document",
    [
        {"secrets": ["OPENAI_API_KEY", "HF_TOKEN"]},
        {"credentials": ["aws_access_key_id", "aws_secret_access_key"]},
        {"auth": ["Authorization", "Bearer"]},
        {"password_rules": ["Minimum 12 characters"]},
    ],
)
def test_a_documents_list_of_names_after_a_secrets_name_is_no_secret(document: object) -> None:
    assert leaks.scan_document(document) == []


@pytest.mark.parametrize(
    "text",
    [
        "Requirements for the password:\n- Minimum 12 characters\n- One digit",
        "To get an API key:\n- Register at the site\n- Open Settings",
        "secrets:\n  - db_password\n  - api_token_file",
        "auth=(username, password)",
        "password = (getpass.getpass())",
        "sort_key: ['createdAt', 'updatedAt']",
        "api_keys = [\n    os.environ['OPENAI_API_KEY'],\n]",
        "API_KEYS = [\n    key.strip()\n    for key in raw.split(',')\n]",
        "api_key: [REDACTED]",
        "password: ********, token: xxxxxxxxxxxx",
    ],
)
def test_prose_and_code_after_a_secrets_name_are_no_secret(text: str) -> None:
    assert scan_text(text) == []


def test_a_list_inside_a_list_is_read_once() -> None:
    """An item that is itself a member with a list (`- a_key:\n- K`) opens no list of its
    own where its items were read already; one that opens past them reads its own."""
    text = f"api_keys:\n- {_K1}\n- abcdefgh\n- a_key:\n- {_K2}\n- {_K1}\n- tail"
    spans = [(s, e) for s, e, _ in leaks.secret_lists(text, None)]
    assert [text[s:e] for s, e in spans] == [_K1, _K2, _K1]  # not K2 and K1 twice
    text = f"api_keys:\n- {_K1}\n- api_key: [{_K2}, {_K1}]"
    assert [text[h.start : h.end] for h in scan_text(text)] == [_K1, _K2, _K1]
    assert [text[s:e] for s, e, _ in leaks.secret_lists(text, None)] == [_K1, _K2, _K1]


def test_a_random_key_after_a_placeholder_or_a_name_in_a_list() -> None:
    key = "a8F3kd9Lq2Zx7WmP"
    for text in (f"api_keys: [REDACTED, {key}]", f"api_keys:\n- primary\n- {key}",
                 f"api_keys: ['', '{key}']"):  # fmt: skip
        assert [text[h.start : h.end] for h in scan_text(text)] == [key], text
    for document in ({"api_keys": ["primary", key]}, {"api_keys": ["", key]}):
        assert [h.pointer for h in leaks.scan_document(document)] == ["/api_keys/1"]
    # a string of a list is no member's name: the next string is no secret of it
    assert leaks.scan_document({"stop": ["token", "3f2a9b8c7d6e5f40"]}) == []


@pytest.mark.parametrize(
    "text",
    [
        "sorted(items, key=lambda v: v[1])",
        "max(scores, key=scores.get)",
        '{"key": "temperature", "value": 0.7}',
        "ORDER BY sort_key=created_at",
        "primaryKey=user_id",
        "cache.key=prefix_hash",
    ],
)
def test_a_key_of_code_is_no_secret(text: str) -> None:
    assert scan_text(text) == []


@pytest.mark.parametrize(
    "text",
    [
        f"key={_K1}",
        "ENCRYPTION_KEY=abcdefghij",
        "api_key=lambda_value",
        "secret_key=abcdefghij",
        "license_key=abcdefghij",
        "access_key=abcdefghij",
    ],
)
def test_a_key_that_is_not_codes_is_still_a_secret(text: str) -> None:
    assert len(scan_text(text)) == 1


@pytest.mark.parametrize(
    "text",
    [
        f"api_keys: [{_K1}, '', {_K2}]",
        f"api_keys: [abc, def, {_K2}]",
        f"api_keys:\n- my old key\n- {_K2}",
        f"api_keys:\n- {_K1}\n- old key (revoked)\n- {_K2}",
        f"api_keys:\n- {_K1}  # primary\n- {_K2}",
        f"api_keys = [os.environ['A'], '{_K2}']",
        f'api_keys: ["see docs", "{_K2}"]',
    ],
)
def test_items_of_other_kinds_are_read_past(text: str) -> None:
    assert _K2 in [text[h.start : h.end] for h in scan_text(text)]


@pytest.mark.parametrize(
    "document",
    [
        {"api_keys": ["a", "b", _K2]},
        {"api_keys": ["", "", _K2]},
        {"api_keys": ["my key", _K2]},
        # a number, a boolean or null, as a text's `[null, K]`
        {"api_keys": [None, _K2]},
        {"api_keys": [0, False, _K2]},
        {"api_keys": ["", 1.5, None, _K2]},
    ],
)
def test_strings_of_other_kinds_in_a_documents_list_are_read_past(document: object) -> None:
    assert isinstance(document, dict)
    where = f"/api_keys/{len(document['api_keys']) - 1}"
    assert [h.pointer for h in leaks.scan_document(document)] == [where]


@pytest.mark.parametrize(
    "text",
    [
        "validate an id_token:\n- http://openid.net/specs/openid-connect-core-1_0.html#IDTokenValidation"
        "\n- http://openid.net/specs/openid-connect-core-1_0.html#HybridIDTValidation2",
        'secret=os.environ.get("X")',
        "api_keys = [os.environ['A']]",
    ],
)
def test_links_and_code_after_a_secrets_name_are_no_secret(text: str) -> None:
    assert scan_text(text) == []


def test_a_string_that_ends_in_a_space_in_a_list_names_no_member() -> None:
    assert leaks.scan_document({"stop": ["password ", "Tr0ub4dor3xY"]}) == []
