"""SHA256SUMS: strict parsing, stable writing."""

from __future__ import annotations

from verifier.checksums import format_sums, parse_sums, sha256_hex


def test_round_trip_and_binary_marker() -> None:
    files = {"b.json": b"2", "a.json": b"1"}
    data = format_sums(files)
    assert data.decode().splitlines()[0].endswith("  a.json")
    entries, problems = parse_sums(data)
    assert not problems
    assert {e.path: e.digest for e in entries} == {k: sha256_hex(v) for k, v in files.items()}
    binary = data.replace(b"  ", b" *")
    assert parse_sums(binary)[1] == []


def test_strictness() -> None:
    digest = sha256_hex(b"x")
    cases = {
        f"{digest} a.json\n": "malformed",
        f"{digest.upper()}  a.json\n": "lower-case hex",
        f"{digest}  a.json": "no newline",
        f"{digest}  b.json\n{digest}  a.json\n": "sorted",
        f"{digest}  a.json\n{digest}  a.json\n": "twice",
        "": "no file",
        f"{digest}  a.json\n\n": "an empty line",
    }
    for text, message in cases.items():
        problems = parse_sums(text.encode())[1]
        assert any(message in p.message for p in problems), (text, problems)
