"""What the export audit of 2026-12-04 (helper-42) found published: private values behind a
terminal's escape sequences, invisible characters and compatibility forms; a Windows home
with a space; the user behind sudo; and the messages export gave where it could not go on."""

from __future__ import annotations

import base64
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
        # A terminal's colour before a value: its final `m` read as a letter glued to it;
        # a run of sequences reads as a space (`see` is no part of the path after it).
        ("x \x1b[2m/home/bob/.venv/bin", "/home/bob/.venv/bin"),
        ("peer \x1b[33m192.168.40.23", "192.168.40.23"),
        ("link \x1b]8;;x\x07/home/bob/notes", "/home/bob/notes"),
        ("see\x1b[0m/home/bob/x", "/home/bob/x"),
        ("addr:\x1b(B\x1b[m10.0.0.7", "10.0.0.7"),  # `tput sgr0`
        ("a\x9b1m/home/bob/x", "/home/bob/x"),  # an 8-bit control sequence
        # Inside a value: `ls` colours each part of a path, `grep` its match (helper-45).
        ("ls: /home/\x1b[01;34mbob\x1b[0m/models", "bob\x1b[0m/models"),
        ("grep: /home/\x1b[01;31m\x1b[Kbob\x1b[m\x1b[K/notes.txt", "bob\x1b[m\x1b[K/notes"),
        ("peer 192.168.\x1b[1m4.20", "192.168.\x1b[1m4.20"),
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
    if found is not None:  # one hit, which covers the value (with what shows nothing, or not)
        assert len(hits) == 1 and found in text[hits[0].start : hits[0].end], hits


@pytest.mark.parametrize(
    "text",
    [
        "\x1b[1mbold\x1b[0m and \x1b[31mred\x1b[0m words",
        "\uff21\uff22\uff23 \U0001d400\U0001d401 \u2460 and \u00b2",
        "emoji \u2764\ufe0f and a \u200e mark",
        # Japanese writes a fullwidth tilde and `ｗ` (laughter) between words: no home `~www`.
        "\u4eca\u65e5\u306f\u697d\u3057\u304b\u3063\u305f\uff5e\uff57\uff57\uff57",
        "Thanks! \uff5e\uff2b\uff41\uff54\uff45",
        "\u2026\uff5e\uff57\uff57\uff57\uff0f\u307e\u305f\u660e\u65e5",
        # Fullwidth times and punctuation in Japanese and Chinese prose.
        "\u4f1a\u8b70\u306f\uff11\uff12\uff1a\uff13\uff10\uff1a\uff14\uff15\u306b\uff08"
        "\u6771\u4eac\uff09\u3001\u4e2d\u6587\uff0c\u6d4b\u8bd5\uff1a\u5f88\u597d\uff01",
    ],
)
def test_what_shows_nothing_alone_is_no_hit(text: str) -> None:
    assert scan_text(text) == []


def test_a_long_text_of_fullwidth_punctuation_is_scanned_to_its_end() -> None:
    # Compatibility forms are read one for one, not as escapes: verify stops a text at
    # 100,000 escapes, and a long Chinese prompt has that many commas and colons.
    text = "\u4e2d\u6587\uff0c\u6d4b\u8bd5\uff1a\u5f88\u597d\uff01" * 120_000
    assert scan_text(text, 1000) == []


@pytest.mark.parametrize(
    "planted",
    [
        "cannot open \x1b[35m/home/alice/src/serve.py\x1b[0m on \x1b[1mlab-host-07",
        "\x1b[32malice\x1b[39m@\x1b[34mlab-host-07\x1b[39m:~$ ls /home/\x1b[01;34malice\x1b[0m/x",
        f"token {TOKEN[:10]}\u200e{TOKEN[10:]}",
        "/home/\U0001d41a\U0001d425\U0001d422\U0001d41c\U0001d41e/models and \uff0f\uff48"
        "\uff4f\uff4d\uff45\uff0f\uff41\uff4c\uff49\uff43\uff45",
    ],
)
def test_export_removes_them_and_verifies(tmp_path: Path, planted: str) -> None:
    out, _ = _export(_with_extra(planted), tmp_path)
    published = _unescaped(out)
    assert "lab-host-07" not in published and "alice" not in published
    assert TOKEN[10:] not in published and "\U0001d41a\U0001d425" not in published
    assert "\uff0f\uff48\uff4f\uff4d\uff45\uff0f\uff41" not in published
    assert not [f for f in verify_path(out).findings if f.check == "leaks"]


def test_a_private_address_glued_after_a_word_is_removed_and_a_version_kept(
    tmp_path: Path,
) -> None:
    """helper-95: `worker_10.0.3.17`, an address other than the capture's own, was published."""
    text = "rank 1 on worker_10.0.3.17, rank 2 on pod-172.16.4.2 (TensorRT-10.0.1.6)"
    out, _ = _export(_with_extra(text), tmp_path)
    published = _unescaped(out)
    assert "10.0.3.17" not in published and "172.16.4.2" not in published
    assert "rank 1 on worker_" in published and "TensorRT-10.0.1.6" in published
    assert not [f for f in verify_path(out).findings if f.check == "leaks"]


@pytest.mark.parametrize("given", ["C:\\Users\\Bob Smith", "C:/Users/Bob Smith"])
def test_a_windows_path_named_private_in_either_spelling(tmp_path: Path, given: str) -> None:
    text = "copied from C:/Users/Bob Smith/models/qwen and C:\\Users\\Bob Smith\\AppData"
    if "/" not in given:  # a named string: in any case too (Windows paths are)
        text += " and c:\\users\\bob smith\\x"
    out, _ = _export(_with_extra(text), tmp_path, private_paths=(given,))
    assert "Smith" not in _published(out) and "smith" not in _published(out)


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


def test_a_user_name_deep_in_a_long_base64_word_is_no_account() -> None:
    # A vision request's image: base64 of some hundred kilobytes, in which `/al/` turns up
    # by chance. The walk back to the word's start stops 4,096 characters back; what it
    # does not know there is no account (a fail-closed rule tried here made export refuse
    # honest images: helper-44).
    detector = Detector([Known("al", "user-name", "<user>", KnownKind.USER)])
    image = "data:image/png;base64," + "QUJD" * 2000 + "x/al/y" + "QUJD" * 2000
    assert detector.scan_text(image) == []


def test_a_token_without_its_prefix(tmp_path: Path) -> None:
    body = TOKEN.removeprefix("hf_")
    out, _ = _export(_with_extra(f"the key body {body} alone"), tmp_path)
    assert body not in _published(out)


# --- helper-52 (2026-12-05): values the capture knows from less common places ----------


def test_the_machine_an_environment_variable_names_is_a_host(tmp_path: Path) -> None:
    f = _with_extra("worker GPU-NODE-17 died; scraped gpu-node-17:9100 at @gpu-node-17")
    f.server["env"]["HOSTNAME"] = "gpu-node-17"
    out, _ = _export(f, tmp_path)
    assert "node-17" not in _unescaped(out).lower()


def test_the_user_whose_home_the_server_had_is_a_user(tmp_path: Path) -> None:
    f = _with_extra("uid=1001(carol) gid=1001(carol); USER=carol; ssh carol@box")
    f.server["env"]["HOME"] = "/home/carol"
    out, _ = _export(f, tmp_path)
    assert "carol" not in _unescaped(out)


def test_a_request_urls_password_and_secret_parameters_are_secrets(tmp_path: Path) -> None:
    f = _with_extra("retrying as svc@box with Zx9pQ7wLm2Kd; key Qw8Er7Ty6Ui5Op4As3")
    for exchange in f.exchanges():
        exchange["request"]["url"] = (
            "http://svc:Zx9pQ7wLm2Kd@127.0.0.1:18128/v1/chat/completions?api_key=Qw8Er7Ty6Ui5Op4As3"
        )
    out, _ = _export(f, tmp_path)
    published = _unescaped(out)
    assert "Zx9pQ7wLm2Kd" not in published
    assert "Qw8Er7Ty6Ui5Op4As3" not in published
    assert "svc@" not in published


def test_a_token_under_a_name_no_secret_has_is_known_encoded_too(tmp_path: Path) -> None:
    token = "ghp_Zq8Wm3Xr5Tb7Nc9Vd1Fg2Hj4Kl6Mp8Qs0Ru"
    encoded = base64.b64encode(token.encode()).decode()
    f = _with_extra(f"b64 {encoded}; hex {token.encode().hex()}")
    f.server["env"]["GH_PAT"] = token
    out, _ = _export(f, tmp_path)
    published = _unescaped(out)
    assert encoded not in published
    assert token.encode().hex() not in published


# --- 2026-12-05 (session 11): an environment value encoded ------------------------------


def test_an_environment_value_encoded_is_removed_from_free_text(tmp_path: Path) -> None:
    """Every environment value but the toggles is private (EVIDENCE.md): it goes from free
    text in base64, hex, base32 or its UTF-16 base64 as it goes plain (before, only its
    plain and escaped forms were removed; each encoded one was published). Not in the rarer
    spellings the identifying values are looked for in: a capture holds scores of values."""
    value = "falcon-nightly-7"
    raw = value.encode()
    forms = [
        base64.b64encode(raw).decode(),
        base64.b64encode(b"project=" + raw).decode(),
        raw.hex(),
        raw.hex().upper(),
        base64.b32encode(raw).decode(),
        base64.b64encode(value.encode("utf-16-le")).decode(),
    ]
    f = _with_extra("; ".join(forms))
    f.server["env"]["WANDB_PROJECT"] = value
    out, _ = _export(f, tmp_path)
    published = _unescaped(out)
    assert [form for form in forms if form in published] == []
    assert "<env:WANDB_PROJECT>" in published
    assert verify_path(out).verified


def test_an_environment_value_encoded_in_evidence_is_kept_and_does_not_stop_export(
    tmp_path: Path,
) -> None:
    """An environment value identifies nobody: in a field of evidence (the model's reply),
    encoded or not, it is published as it is, as the plain value always was."""
    value = "falcon-nightly-7"
    reply = f"plain {value}, base64 {base64.b64encode(value.encode()).decode()}"
    f = RawFactory()
    f.server["env"]["WANDB_PROJECT"] = value
    f.exchanges()[0]["response"]["body"]["choices"][0]["message"]["content"] = reply
    out, _ = _export(f, tmp_path)
    assert reply in _unescaped(out)
    assert verify_path(out).verified


def test_a_plain_host_or_user_name_after_its_flag_or_as_a_share_is_removed(
    tmp_path: Path,
) -> None:
    """helper-58: a server bound to its machine's name (`--host falcon`, as two arguments of
    its command line), torchrun's `[falcon]:29500`, an NFS export's `falcon:/export` and a
    Windows share's `\\\\falcon\\models` were published."""
    f = _with_extra(
        "bind [falcon]:29500 failed; mounted falcon:/export/models; copied from \\\\falcon\\models",
        hostname="falcon",
    )
    f.server["argv"] += ["--host", "falcon", "--master-addr", "falcon"]
    out, _ = _export(f, tmp_path)
    assert "falcon" not in _unescaped(out)
    assert verify_path(out).verified


def test_a_path_after_a_dash_is_a_path(tmp_path: Path) -> None:
    """helper-58: a shell's default (`${BIN:-/home/alice/x}`, `${X-/home/bob/y}`) and a path
    glued to a word by a dash (`cache-/home/alice`): the dash had hidden the path, so the
    known home kept its layout, its user alone replaced, and another user's home went whole."""
    f = _with_extra('exec "${MLXCEL_BIN:-/home/alice/src/bin/x}" -m "${M-/home/bob/models}/q"')
    f.run["notes"] = ["started with ${CACHE:-/home/alice/.cache/mlxcel}; cache-/home/alice/y"]
    out, _ = _export(f, tmp_path)
    published = _unescaped(out)
    assert "alice" not in published and "/home/bob" not in published
    assert ":-/path/to/home/.cache/mlxcel}" in published
    assert verify_path(out).verified


def test_a_plain_name_in_what_system_logs_write_is_removed(tmp_path: Path) -> None:
    """helper-58: lines pasted from a system's logs name the account or the machine around a
    plain name that is also a word."""
    f = _with_extra(
        "pam_unix(sshd:session): session opened for user alice(uid=1000); "
        "Accepted publickey for alice from 10.0.0.9 port 5; sudo:    alice : TTY=pts/0 ; "
        "Invalid user alice from 10.0.0.9; Connection closed by authenticating user alice "
        "10.0.0.9; sudo: pam_unix(sudo:session): session opened for user root(uid=0) by "
        "alice(uid=1000); MASTER_ADDR=falcon; /etc/hosts: 127.0.1.1\tfalcon",
        hostname="falcon",
    )
    out, _ = _export(f, tmp_path)
    published = _unescaped(out)
    assert "alice" not in published and "falcon" not in published
    assert "session opened for user <user>(uid=1000)" in published
    assert verify_path(out).verified


@pytest.mark.parametrize(
    ("user", "host", "reply"),
    [
        ("alice", "server", "On Ubuntu, install the OpenSSH server with apt and enable it."),
        ("test", "falcon", "Check it with `curl -u test:test http://localhost:8080/health`."),
        ("vllm", "falcon", "Upgrade it first: `pip install -U vllm`."),
        ("demo", "falcon", "The default credentials are demo:demo."),
        # helper-62: words after `of user `, `from user ` in prose
        ("data", "falcon", "Mind the privacy of user data; never log raw input from user data."),
        ("input", "falcon", "Validate everything from user input, and invalid user input too."),
        # helper-63: a command's idioms, with a service account's ordinary name
        ("node", "falcon", "In the Dockerfile: `RUN chown -R node:node /app` before the copy."),
        ("postgres", "falcon", "Run `sudo -u postgres psql` and `sudo -H -u postgres bash`."),
    ],
)
def test_an_ordinary_word_in_a_reply_that_names_nobody_does_not_stop_export(
    tmp_path: Path, user: str, host: str, reply: str
) -> None:
    """helper-60: after `ssh`, `-u` and as `NAME:NAME` anywhere, a user or host name that is
    an ordinary word had stopped the export of an honest reply (`OpenSSH server`, pip's
    `-U`, example credentials)."""
    f = RawFactory(host=Host(user=user, hostname=host, home=f"/home/{user}"))
    f.exchanges()[0]["response"]["body"]["choices"][0]["message"]["content"] = reply
    out, _ = _export(f, tmp_path)
    assert reply in _unescaped(out)


# --- session 20: a list of keys (llama-server's `--api-key K1,K2`) ------------------------

_K1, _K2 = "Zq8Wm3Xr5Tb7Nc9Vd1", "Pk4Lm6Nb8Vc0Xz2As7"


@pytest.mark.parametrize(
    ("env", "argv"),
    [
        ({"LLAMA_API_KEY": f"{_K1},{_K2}"}, []),
        ({"API_KEYS": f'"{_K1}" "{_K2}"'}, []),
        ({}, ["--api-key", f"{_K1},{_K2}"]),
        ({}, [f"--api-key={_K1};{_K2}"]),
        # helper-104: a quoted list, a JSON array, other separators, keys after names
        ({"LLAMA_API_KEY": f'"{_K1},{_K2}"'}, []),
        ({"API_KEYS": f'["{_K1}", "{_K2}"]'}, []),
        ({"API_KEYS": f"{_K1}|{_K2}"}, []),
        ({"API_KEYS": f"alice={_K1},bob={_K2}"}, []),
        ({}, ["--api-key", f"['{_K1}','{_K2}']"]),
    ],
)
def test_each_key_of_a_list_of_keys_is_a_secret_alone(
    tmp_path: Path, env: dict[str, str], argv: list[str]
) -> None:
    """Before, only the whole list was known: a client's log of one key published both."""
    f = _with_extra(f"client 2 sent {_K2}; client 1 sent {_K1}")
    f.server["env"].update(env)
    f.server["argv"] += argv
    out, _ = _export(f, tmp_path)
    published = _unescaped(out)
    assert _K1 not in published
    assert _K2 not in published
    assert verify_path(out).verified


@pytest.mark.parametrize(
    ("variable", "value", "reply"),
    [
        ("DB_PASSWORD", "correct elephants battery staple", "Most elephants sleep standing up."),
        ("GPG_PASSPHRASE", "meet me at 10:30pm on 2024-05-01", "It shipped on 2024-05-01."),
        ("DB_PASSWORD", "my state-of-the-art vault", "A state-of-the-art model."),
        ("DB_PASSWORD", "horse battery 12345678", "Order 12345678 shipped."),
        ("API_KEYS", "sk-no-key-required, EMPTY", "Set the key to sk-no-key-required."),
    ],
)
def test_a_word_of_a_passphrase_is_no_secret_alone(
    tmp_path: Path, variable: str, value: str, reply: str
) -> None:
    """A list's part is a key of its own only where it reads as a random key (helper-104:
    a word, a date, a number of a passphrase made export refuse a reply that wrote it):
    the reply is evidence, and export publishes it."""
    f = RawFactory()
    f.server["env"][variable] = value
    f.exchanges()[0]["response"]["body"]["choices"][0]["message"]["content"] = reply
    out, _ = _export(f, tmp_path)
    published = _unescaped(out)
    assert reply in published
    assert value not in published


def test_each_uuid_of_a_list_of_keys_is_a_secret_alone(tmp_path: Path) -> None:
    """A UUID is random hex between its dashes (`uuidgen` makes many a server's key)."""
    first, second = "3f2b8c1e-9d4a-4e7b-a1c5-6f0e2d9b7a34", "c7a1e5d2-4b3f-4a9e-8d6c-1b2f3e4a5c6d"
    f = _with_extra(f"client 2 sent {second}; client 1 sent {first}")
    f.server["env"]["LLAMA_API_KEY"] = f"{first},{second}"
    out, _ = _export(f, tmp_path)
    published = _unescaped(out)
    assert first not in published
    assert second not in published


# --- helper-105: vLLM's list of keys, keys of one case, a model's name beside a key ------


def test_each_key_after_vllms_api_key_flag_is_a_secret(tmp_path: Path) -> None:
    """`--api-key K1 K2`: vLLM's keys are a list, every argument up to the next option."""
    f = _with_extra(f"client 2 sent {_K2}")
    f.server["argv"] += ["--api-key", _K1, _K2, "--port", "8001"]
    out, _ = _export(f, tmp_path)
    published = _unescaped(out)
    assert _K1 not in published
    assert _K2 not in published
    assert "8001" in published


def test_a_dashed_key_after_vllms_first_key_is_a_secret(tmp_path: Path) -> None:
    dashed = "abcd-efgh-1234-5678"
    f = _with_extra(f"client 2 sent {dashed}")
    f.server["argv"] += ["--api-key", _K1, dashed]
    out, _ = _export(f, tmp_path)
    assert dashed not in _unescaped(out)


def test_keys_of_one_case_in_a_list_are_secrets(tmp_path: Path) -> None:
    lower, upper = "k3j5h2g8f9d7s6a4q1w2", "X9Z8M7N6B5V4C3L2P1O0"
    f = _with_extra(f"client 2 sent {upper}; client 1 sent {lower}")
    f.server["env"]["LLAMA_API_KEY"] = f"{lower},{upper}"
    out, _ = _export(f, tmp_path)
    published = _unescaped(out)
    assert lower not in published
    assert upper not in published


@pytest.mark.parametrize(
    "env",
    [
        {"OPENAI_API_KEYS": json.dumps({"Qwen2.5-Coder-32B-Instruct": _K1})},
        {"LLAMA_API_KEY": f"Qwen2.5-Coder-32B-Instruct:{_K1}"},
    ],
)
def test_the_served_models_name_beside_a_key_is_no_secret(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """A model's name reads as random characters (`Qwen2.5-Coder-32B-Instruct`): where the
    bundle publishes it (the request body's model), a list's part that is it is no key, and
    export does not refuse the request body that names it."""
    model = "Qwen2.5-Coder-32B-Instruct"
    f = _with_extra(f"key {_K1}")
    f.server["env"].update(env)
    f.run["request_body"]["model"] = model
    for exchange in f.exchanges():
        exchange["request"]["body"]["model"] = model
    out, _ = _export(f, tmp_path)
    published = _unescaped(out)
    assert model in published
    assert _K1 not in published


# --- helper-106: a positional argument after a secret-named flag; a model named only by its
# repository ------------------------------------------------------------------------------


def test_a_positional_model_after_a_secret_named_flag_is_kept(tmp_path: Path) -> None:
    """Only an API key flag takes a list (vLLM's `--api-key K1 K2`); after another flag
    whose name reads as a secret's (`--long-prefill-token-threshold`), the next argument
    is the command's own, and a number after it is a setting: both published as they are."""
    model = "Qwen/Qwen2.5-7B-Instruct-1M"
    f = RawFactory()
    f.server["argv"] += ["--long-prefill-token-threshold", "2048", model]
    out, _ = _export(f, tmp_path)
    published = _unescaped(out)
    assert f"--long-prefill-token-threshold\n2048\n{model}" in published
    assert verify_path(out).verified


def test_a_model_named_by_its_repository_beside_a_key_is_no_secret(tmp_path: Path) -> None:
    model = "Qwen/Qwen2.5-7B-Instruct-1M"
    f = _with_extra(f"key {_K1}")
    f.server["env"]["OPENAI_API_KEYS"] = json.dumps({model: _K1})
    f.run["model"]["repo_id"] = model
    f.documents["model-manifest.json"]["repo_id"] = model
    out, _ = _export(f, tmp_path)
    published = _unescaped(out)
    assert model in published
    assert _K1 not in published
