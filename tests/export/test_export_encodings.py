"""The capture's own private values in the encodings the export audit of 2026-12-07
(helper-112) published them in: a password HTML-escaped or shell-escaped (`&amp;`,
`printf %q`), a name in letters past the Basic Multilingual Plane as JSON's ASCII escaping
writes them (surrogate pairs), a secret or an address cut by quoted-printable's soft line
breaks, and a path past ASCII escaped by `json.dumps` and then base64- or hex-encoded."""

from __future__ import annotations

import base64
import html
import json
import shlex
from pathlib import Path

import pytest
from rawfactory import Host, RawFactory
from test_export_audit109 import _strings

from verifier.export import ExportOptions, export_bundle
from verifier.verify import verify_path


def _notes_exported(f: RawFactory, tmp_path: Path, *notes: str) -> str:
    f.server["argv"].append("--metrics")
    f.run["notes"] = list(notes)
    f.exchanges()[0]["telemetry"]["before"]["cache_stats"]["extra"] = notes[0]
    out = tmp_path / "public"
    export_bundle(ExportOptions(f.write(tmp_path / "raw"), out))
    assert verify_path(out).verified
    return _strings(out) + "\n".join(
        p.read_text("utf-8", "replace") for p in sorted(out.rglob("*")) if p.is_file()
    )


PASSWORD = "Xk9#mP2&qL7!vR4@"


def _printf_q(value: str) -> str:
    """What bash's `printf %q` writes for a word of these characters: a backslash before
    each of the shell's special characters."""
    return "".join("\\" + c if c in "&!#$'\"() ;|<>*?[]{}^`,~" else c for c in value)


@pytest.mark.parametrize(
    "spelled",
    [
        html.escape(PASSWORD),  # Xk9#mP2&amp;qL7!vR4@
        html.escape('Xk9"mP2<qL7>vR4'),
        _printf_q(PASSWORD),  # Xk9\#mP2\&qL7\!vR4@
    ],
)
def test_a_password_escaped_for_html_or_the_shell(tmp_path: Path, spelled: str) -> None:
    value = html.unescape(spelled) if "&" in spelled and ";" in spelled else PASSWORD
    f = RawFactory()
    f.server["env"]["DB_PASSWORD"] = value
    published = _notes_exported(f, tmp_path, f"<p>login with {spelled} failed</p>")
    assert spelled not in published
    assert value not in published


def test_a_name_in_letters_past_the_bmp_as_json_escapes_them(tmp_path: Path) -> None:
    bold = "".join(chr(0x1D41A + ord(c) - 97) for c in "alice")  # mathematical bold
    escaped = json.dumps(f"/home/{bold}/work")  # "\ud835\udc1a..." surrogate pairs
    assert "\\ud835" in escaped
    published = _notes_exported(RawFactory(), tmp_path, escaped)
    assert escaped[1:-1] not in published
    assert "\\ud835\\udc1a" not in published


@pytest.mark.parametrize("soft_break", ["=\n", "=\r\n"])
def test_a_secret_and_an_address_cut_by_quoted_printable_soft_breaks(
    tmp_path: Path, soft_break: str
) -> None:
    token, address = "hf_Zq8Wm3Xr5Tb7Nc9Vd1Kp4Lm6Nb8", "10.20.30.41"
    f = RawFactory()
    f.server["env"].update({"HF_TOKEN": token, "SSH_CONNECTION": f"{address} 51234 10.0.0.1 22"})
    cut_token = token[:9] + soft_break + token[9:]
    cut_address = address[:5] + soft_break + address[5:]
    published = _notes_exported(
        f, tmp_path, f"Content-Transfer-Encoding: quoted-printable\n\n{cut_token} {cut_address}"
    )
    assert cut_token not in published
    assert cut_address not in published


def test_a_secret_with_its_own_equals_sign_cut_after_it(tmp_path: Path) -> None:
    """A value's own `=` at a line's end is no soft break: the value is found with it."""
    secret = "Qm7Zx2Lk9P=Rt8Vn3Bc"
    f = RawFactory()
    f.server["env"]["SIGNING_SECRET"] = secret
    for cut in ("=\n", "=\r\n", "=\n  "):
        wrapped = secret.replace("=", cut)
        published = _notes_exported(f, tmp_path / repr(cut), f"signing with\n{wrapped}\n")
        assert wrapped not in published


def test_a_path_past_ascii_escaped_by_json_then_base64_or_hex(tmp_path: Path) -> None:
    host = Host(
        user="jörg", hostname="werkbank-3", home="/home/jörg", cwd="/home/jörg/arbeit",
        binary="/home/jörg/src/mlxcel/target/release/mlxcel-server",
        model="/srv/modelle/jörg-finetune-v2",
    )  # fmt: skip
    payload = json.dumps({"cwd": host.cwd}).encode()  # ensure_ascii: "/home/j\u00f6rg/arbeit"
    assert b"\\u00f6" in payload
    upper = payload.replace(b"\\u00f6", b"\\u00F6")  # as .NET and Jackson write it
    forms = [base64.b64encode(payload).decode(), payload.hex(), base64.b64encode(upper).decode()]
    published = _notes_exported(
        RawFactory(host=host), tmp_path, *(f"X-Trace-Context: {form}" for form in forms)
    )
    for form in forms:
        assert form not in published


def test_shell_escapes_need_a_shell_special_character(tmp_path: Path) -> None:
    """A regular expression's `\\.` is no escape of the shell's: a text with only such
    escapes has no view of its own."""
    from verifier import leaks

    assert leaks._Decoded.of(r"10\.0\.0\.1 and user\@example") is None
    # nor LaTeX's and a regular expression's brackets
    assert leaks._Decoded.of(r"Let \(x_i\) and \[ \sum_i x_i \] hold; \{a\}") is None
    view = leaks._Decoded.of(shlex.quote("x") + r" My\ Models\ \&\ more\!")
    assert isinstance(view, leaks._Decoded)
    assert view.text == "x My Models & more!"


def test_values_as_tools_mangle_them_and_keys_listed_after_a_flag(tmp_path: Path) -> None:
    """(helper-119's F2, F4, F5, F6) Through a real export: a password with `'` shell-quoted
    as `shlex.quote` writes it, a token in capitals, the host and the home path as mojibake
    and as Latin-1 bytes in base64 and hex, and a second key after a flag or a name."""
    host = Host(
        user="jörg", hostname="büro-gpu-07", home="/home/jörg", cwd="/home/jörg/arbeit",
        binary="/home/jörg/src/mlxcel/target/release/mlxcel-server",
        model="/srv/modelle/jörg-finetune-v2",
    )  # fmt: skip
    password, token = "Tr0ub'4dor&3Horse", "hf_Zq8Wm3Xr5Tb7Nc9Vd1Kp4Lm6Nb8"
    second = "Zq3nB6cV1xM5kJ0hW2"
    f = RawFactory(host=host)
    f.server["env"].update({"DB_PASSWORD": password, "HF_TOKEN": token})
    latin1 = "/home/jörg/arbeit".encode("latin-1")
    forms = [
        shlex.quote(password),
        "'" + password.replace("'", "'\\''") + "'",
        token.upper(),
        "büro-gpu-07".encode().decode("latin-1"),
        "/home/jörg".encode().decode("cp1252"),
        base64.b64encode(latin1).decode(),
        latin1.hex(),
    ]
    published = _notes_exported(
        f,
        tmp_path,
        *(f"seen: {form}" for form in forms),
        f"llama-server --api-key k9Z8y7X6w5V4u3T2s1R0,{second}",
        f"vllm serve m --api-key k9Z8y7X6w5V4u3T2s1R0 {second} --port 8000",
    )
    for form in [*forms, second]:
        assert form not in published
    assert "4dor&3Horse" not in published
