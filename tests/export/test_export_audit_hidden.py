"""What the export audit of 2026-12-04 (helper-42) found published: private values behind a
terminal's escape sequences, invisible characters and compatibility forms; a Windows home
with a space; the user behind sudo; and the messages export gave where it could not go on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from rawfactory import Host, RawFactory

from verifier.errors import ExportError
from verifier.export import ExportOptions, export_bundle
from verifier.leaks import Detector, Known, KnownKind, scan_text
from verifier.verify import verify_path

TOKEN = "hf_QmVyeVNlY3JldFRva2VuRm9yVGVzdHMx"


def _with_extra(extra: Any, **host: Any) -> RawFactory:
    """A capture with `extra` planted in the first exchange's free text (the cache stats'
    `extra`), and its host as `host` says."""
    f = RawFactory(host=Host(**host)) if host else RawFactory()
    f.server["env"]["HF_TOKEN"] = TOKEN
    f.exchanges()[0]["telemetry"]["before"]["cache_stats"]["extra"] = extra
    return f


def _export(f: RawFactory, tmp_path: Path, **options: Any) -> tuple[Path, Any]:
    out = tmp_path / "public"
    summary = export_bundle(ExportOptions(f.write(tmp_path / "raw"), out, **options))
    return out, summary


def _published(out: Path) -> str:
    return "".join(p.read_text("utf-8") for p in sorted(out.rglob("*.json")))


def _unescaped(out: Path) -> str:
    """Every published string as it reads (JSON's escapes decoded)."""
    texts: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, str):
            texts.append(node)
        elif isinstance(node, dict):
            for key, value in node.items():
                texts.append(key)
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for path in sorted(out.rglob("*.json")):
        walk(json.loads(path.read_text("utf-8")))
    return "\n".join(texts)


@pytest.mark.parametrize(
    ("text", "found"),
    [
        # A terminal's colour before a value: its final `m` read as a letter glued to it.
        ("x \x1b[2m/home/bob/.venv/bin", "\x1b[2m/home/bob/.venv/bin"),
        ("peer \x1b[33m192.168.40.23", "\x1b[33m192.168.40.23"),
        ("link \x1b]8;;x\x07/home/bob/notes", "\x1b]8;;x\x07/home/bob/notes"),
        # Invisible characters past the zero-width ones: marks, variation selectors, tags.
        ("hf_QmVyeVN\u200elY3JldFRva2VuRm9yVGVzdHMx", "hf_QmVyeVN\u200elY3JldFRva2VuRm9yVGVzdHMx"),
        ("/home\u200f/bob/.ssh/id", "/home\u200f/bob/.ssh/id"),
        (
            "t sk-proj-\ufe0fAbc123defGHI456jklMNO789pqr",
            "sk-proj-\ufe0fAbc123defGHI456jklMNO789pqr",
        ),
        ("ip 10.20\U000e0041.30.40", "10.20\U000e0041.30.40"),
        # Compatibility forms: fullwidth, mathematical letters.
        ("\uff0f\uff48\uff4f\uff4d\uff45\uff0f\uff42\uff4f\uff42\uff0f.ssh", None),
        ("/home/\U0001d41a\U0001d425\U0001d422\U0001d41c\U0001d41e/models", None),
        ("\uff11\uff10\uff0e\uff12\uff10\uff0e\uff13\uff10\uff0e\uff14\uff10", None),
    ],
)
def test_a_value_behind_what_shows_nothing_is_found(text: str, found: str | None) -> None:
    hits = scan_text(text)
    assert hits, text
    if found is not None:
        assert [text[h.start : h.end] for h in hits] == [found]


@pytest.mark.parametrize(
    "text",
    [
        "\x1b[1mbold\x1b[0m and \x1b[31mred\x1b[0m words",
        "\uff21\uff22\uff23 \U0001d400\U0001d401 \u2460 and \u00b2",
        "emoji \u2764\ufe0f and a \u200e mark",
    ],
)
def test_what_shows_nothing_alone_is_no_hit(text: str) -> None:
    assert scan_text(text) == []


@pytest.mark.parametrize(
    "planted",
    [
        "cannot open \x1b[35m/home/alice/src/serve.py\x1b[0m on \x1b[1mlab-host-07",
        f"token {TOKEN[:10]}\u200e{TOKEN[10:]}",
        "/home/\U0001d41a\U0001d425\U0001d422\U0001d41c\U0001d41e/models and \uff0f\uff48"
        "\uff4f\uff4d\uff45\uff0f\uff41\uff4c\uff49\uff43\uff45",
    ],
)
def test_export_removes_them_and_verifies(tmp_path: Path, planted: str) -> None:
    out, _ = _export(_with_extra(planted), tmp_path)
    published = _unescaped(out)
    assert "lab-host-07" not in published and "/home/alice" not in published
    assert TOKEN[10:] not in published and "\U0001d41a\U0001d425" not in published
    assert "\uff0f\uff48\uff4f\uff4d\uff45\uff0f\uff41" not in published
    assert not [f for f in verify_path(out).findings if f.check == "leaks"]


def test_a_windows_home_with_a_space_written_with_slashes(tmp_path: Path) -> None:
    home = "C:\\Users\\Bob Smith"
    f = _with_extra(
        "copied from C:/Users/Bob Smith/Downloads/qwen3 and C:\\Users\\Bob Smith\\Documents",
        home=home,
    )
    out, _ = _export(f, tmp_path)
    assert "Smith" not in _published(out)


@pytest.mark.parametrize("variable", ["SUDO_USER", "LOGNAME"])
def test_the_user_behind_sudo(tmp_path: Path, variable: str) -> None:
    f = _with_extra("uid=1000(mallory) gid=1000(mallory); Username: mallory", user="root")
    f.server["env"][variable] = "mallory"
    out, _ = _export(f, tmp_path)
    assert "mallory" not in _published(out)


def test_a_private_string_inside_a_placeholder_is_refused_with_the_reason(
    tmp_path: Path,
) -> None:
    f = _with_extra("nothing private here")
    with pytest.raises(ExportError, match="is part of the placeholder"):
        _export(f, tmp_path, private_paths=("ate",))
    assert not (tmp_path / "public").exists()


def test_values_allowed_are_counted_apart_from_those_removed(tmp_path: Path) -> None:
    f = _with_extra("contact alice@gb10-lab-07.local for access")
    _, summary = _export(f, tmp_path, allowed=("alice@gb10-lab-07.local",))
    assert summary.kept.get("email")
    assert "email" not in summary.redactions


def test_a_user_name_deep_in_a_long_word() -> None:
    # The walk back to a word's start stops 4,096 characters back: past it, fail closed.
    detector = Detector([Known("alice", "user-name", "<user>", KnownKind.USER)])
    text = "/opt/" + "a" * 5000 + ":/srv/shared/alice/lib"  # one word: an absolute path
    assert [text[h.start : h.end] for h in detector.scan_text(text)] == ["alice"]


def test_a_token_without_its_prefix(tmp_path: Path) -> None:
    body = TOKEN.removeprefix("hf_")
    out, _ = _export(_with_extra(f"the key body {body} alone"), tmp_path)
    assert body not in _published(out)
