"""What the export audit of 2026-12-06 (helper-75) found published: the capture's address as
one hex number without its leading zero (`0xa000005`), base64 and Ascii85 wrapped in lines
that are indented, a plain user's name in `ls -l`'s group column after another owner, a
plain host's name at the end of Debian's /etc/hosts line, and in macOS's `uname -a`."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest
from test_export_audit70 import ADDRESS, TOKEN, _export, _extra, _factory

# the server side of the factory's SSH_CONNECTION (`ADDRESS 51234 10.0.0.5 22`)
SERVER = "10.0.0.5"


@pytest.mark.parametrize("spelled", ["0xa000005", "0xA000005", "0XA000005", "0x0a000005"])
def test_an_address_as_one_hex_number_goes_padded_or_not(tmp_path: Path, spelled: str) -> None:
    """`hex()` and printf's `%#x` write an address whose first octet is under 16 without the
    zero the 8-digit form has."""
    out = _export(_factory(f"peer {spelled} closed"), tmp_path)
    published = _extra(out)
    assert spelled not in published, published
    assert published.startswith("peer <") and published.endswith("> closed"), published


def test_another_hex_number_is_kept(tmp_path: Path) -> None:
    planted = "flags 0xa000004 and 0xb000005 set"  # (no address of the capture's)
    assert _extra(_export(_factory(planted), tmp_path)) == planted


def _wrapped(text: str, indent: str, width: int = 76) -> str:
    return "\n".join(indent + text[at : at + width] for at in range(0, len(text), width))


_SECRETS = [TOKEN, "/home/alice/models/qwen", ADDRESS]


@pytest.mark.parametrize("value", _SECRETS)
@pytest.mark.parametrize("indent", ["    ", "\t", "  "])
@pytest.mark.parametrize(
    "encode",
    [
        lambda b: base64.b64encode(b).decode(),
        lambda b: base64.b64encode(b.decode().encode("utf-16-le")).decode(),
        lambda b: base64.a85encode(b).decode(),
    ],
    ids=["base64", "base64-utf16le", "ascii85"],
)
def test_an_encoding_wrapped_in_indented_lines_goes(
    tmp_path: Path, value: str, indent: str, encode: object
) -> None:
    """A YAML block's `data: |`, a log's continued lines: each line indented, the value
    across two of them, so that neither line holds it."""
    payload = ("x" * 50 + " path=" + value + " " + "y" * 60).encode()
    blob = encode(payload)  # type: ignore[operator]
    planted = "data: |\n" + _wrapped(blob, indent) + "\nend"
    published = _extra(_export(_factory(planted), tmp_path))
    assert published.startswith("data: "), published  # (Ascii85's run: from the `|` on)
    joined = re.sub(r"\s+", "", published)
    assert blob not in joined
    for line in _wrapped(blob, indent).split("\n")[1:-1]:
        assert line.strip() not in published, published


def test_indented_lines_of_nothing_private_are_kept(tmp_path: Path) -> None:
    blob = base64.b64encode(b"the cache warmed up after the second request, as planned " * 3)
    planted = "data: |\n" + _wrapped(blob.decode(), "    ")
    assert _extra(_export(_factory(planted), tmp_path)) == planted


@pytest.mark.parametrize(
    "planted",
    [
        "-rw-r----- 1 root quasar 1024 Jan  5 10:00 weights.bin",
        "drwxrwsr-x 2 www-data quasar 4096 2026-01-05 10:00 shared",
    ],
)
def test_a_plain_user_name_in_the_group_column_goes(tmp_path: Path, planted: str) -> None:
    out = _export(_factory(planted, user="quasar", home="/srv/q", cwd="/srv/q/w"), tmp_path)
    published = _extra(out)
    assert "quasar" not in published and "<user>" in published, published


@pytest.mark.parametrize(
    "planted",
    [
        "127.0.1.1\tkestrel.localdomain\tkestrel",
        "127.0.1.1 kestrel.lan kestrel\n::1 localhost",
        "Darwin kestrel 23.4.0 Darwin Kernel Version 23.4.0: root:xnu-10063.101.17~1 arm64",
    ],
)
def test_a_plain_host_name_in_hosts_and_macos_uname_goes(tmp_path: Path, planted: str) -> None:
    out = _export(_factory(planted, hostname="kestrel"), tmp_path)
    published = _extra(out)
    assert "kestrel" not in published and "<host>" in published, published


@pytest.mark.parametrize(
    "text",
    [
        "Darwin kestrel is no version: the kestrel flew",
        "the kestrel 3 of us saw on Jan 5",
        "127.0.1.1\tother.localdomain\tother",
    ],
)
def test_the_name_elsewhere_in_prose_is_kept(tmp_path: Path, text: str) -> None:
    out = _export(_factory(text, hostname="kestrel", user="kestrel2"), tmp_path)
    assert _extra(out) == text
