"""The leak scanner: each category found, and the look-alikes of model output left alone."""

from __future__ import annotations

import hashlib
import itertools
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verifier.leaks import CATEGORIES, LeakHit, scan_bytes, scan_text

HF_TOKEN = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123456"
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
            "-----BEGIN PRIVATE KEY-----",
            "ssh zed@buildbox",
            "http://buildbox:8080/",
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
