"""What the export audit of 2026-12-06 (helper-78) found published or lost: a plain host
name as the first label of its full name in a URL, JSON members spaced as formatters write
them, an environment value with its quotes or line end, a short password, a named string
split by a dot or a slash, an environment value under a system directory, one embedded in a
placeholder the ledger publishes, an SSH address written IPv4-mapped, a hex secret in the
other case; a Windows binary's path that made every export fail; and a hardware fact of
`hardware_extra` dropped in silence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rawfactory import Host, RawFactory
from test_export_audit70 import _export, _extra

from verifier.errors import ExportError
from verifier.export import ExportOptions, export_bundle


def _planted(text: str, **host: str) -> RawFactory:
    f = RawFactory(host=Host(**host)) if host else RawFactory()
    f.exchanges()[0]["telemetry"]["before"]["cache_stats"]["extra"] = text
    return f


def _published(out: Path) -> str:
    return "\n".join(p.read_text("utf-8") for p in sorted(out.rglob("*")) if p.is_file())


@pytest.mark.parametrize(
    "url",
    [
        "https://atlas.acme.com:8443/v1/models",
        "smb://atlas.acme.com/share",
        "HTTPS://ATLAS.ACME.COM/x",
        "//atlas.acme.com/share",
    ],
)
def test_a_plain_host_as_its_full_name_in_a_url_goes(tmp_path: Path, url: str) -> None:
    published = _extra(_export(_planted(f"fetch {url} failed", hostname="atlas"), tmp_path))
    assert "atlas" not in published.lower(), published
    assert "<host>" in published, published


def test_another_site_of_one_label_is_kept(tmp_path: Path) -> None:
    planted = "see https://atlas.io/docs and atlas.py"
    assert _extra(_export(_planted(planted, hostname="atlas"), tmp_path)) == planted


@pytest.mark.parametrize("host", ["atlas", "docs"])
def test_a_plain_host_in_a_url_of_evidence_is_kept(tmp_path: Path, host: str) -> None:
    """The URL's host may as well be another site (`https://docs.python.org/` where the
    machine is `docs`): kept in evidence, as any plain name shown so (helper-86)."""
    f = RawFactory(host=Host(hostname=host))
    extra = f" read https://{host}.python.org/3/ and http://{host}.acme.com/wiki"
    f.run["request_body"]["messages"][0]["content"] += extra
    for exchange in f.exchanges():
        exchange["request"]["body"]["messages"][0]["content"] += extra
    out = _export(f, tmp_path)
    record = json.loads(next((out / "records").rglob("*.json")).read_text("utf-8"))
    assert record["request_body"]["messages"][0]["content"].endswith(extra)


@pytest.mark.parametrize(
    "planted",
    [
        json.dumps({"users": ["quasar"]}, indent=2),
        '{\r\n    "hostname":  "atlas",\r\n    "user_name":  [\r\n        "quasar"\r\n    ]\r\n}',
        '{"hostname" : "atlas", "login" : "quasar"}',
        '{"hostname":\t"atlas", "owner":\t"quasar"}',
        'hostname = "atlas"\nUser = "quasar"\nacct = "quasar"',
    ],
    ids=["indent-2", "powershell", "space-before-colon", "tab", "toml"],
)
def test_members_spaced_as_formatters_write_them_go(tmp_path: Path, planted: str) -> None:
    out = _export(_planted(planted, user="quasar", hostname="atlas"), tmp_path)
    published = _extra(out)
    assert "quasar" not in published and "atlas" not in published, published


@pytest.mark.parametrize("written", ['"{}"', "'{}'", "{}\r", "{}\n", " {} "])
def test_an_environment_secret_kept_with_quotes_or_its_line_end_goes_bare(
    tmp_path: Path, written: str
) -> None:
    token = "Zq8mK2vL9xR4tY7w"
    f = _planted(f"retried with key {token}.")
    f.server["env"]["SERVICE_API_KEY"] = written.format(token)
    f.server["env"]["RUN_NOTE"] = written.format("zeta-ablation-7f3kq2")
    f.exchanges()[0]["telemetry"]["after"]["cache_stats"]["extra"] = "tag zeta-ablation-7f3kq2"
    out = _export(f, tmp_path)
    published = _published(out)
    assert token not in published and "zeta-ablation-7f3kq2" not in published


def test_a_short_password_goes_also_glued_to_its_option(tmp_path: Path) -> None:
    f = _planted("redis-cli -a Tr0ub4d ping; mysql -uroot -pTr0ub4d; AUTH Tr0ub4d")
    f.server["env"]["REDIS_PASSWORD"] = "Tr0ub4d"
    published = _extra(_export(f, tmp_path))
    assert "Tr0ub4d" not in published, published
    assert published == "redis-cli -a <token> ping; mysql -uroot -p<token>; AUTH <token>"


def test_a_short_password_with_a_word_s_shape_is_not_looked_for(tmp_path: Path) -> None:
    """`letmein` is found by chance in ordinary text: not looked for (docs/EVIDENCE.md)."""
    f = _planted("the reply said letmein")
    f.server["env"]["REDIS_PASSWORD"] = "letmein"
    assert _extra(_export(f, tmp_path)) == "the reply said letmein"


@pytest.mark.parametrize(
    "spelled",
    [
        "project.zeta.internal",
        "Project/Zeta",
        "Project:Zeta",
        "Project\u2013Zeta",
        "Project\u2010Zeta",
        "Project\u202fZeta",
        "Project\u2009Zeta",
        "Project\nZeta",
        "Project%20Zeta",
    ],
)
def test_a_named_string_goes_whatever_stands_between_its_words(
    tmp_path: Path, spelled: str
) -> None:
    out = tmp_path / "public"
    raw = _planted(f"deploy {spelled} now").write(tmp_path / "raw")
    export_bundle(ExportOptions(raw, out, private_paths=("Project Zeta",)))
    published = _extra(out)
    assert "zeta" not in published.lower(), published


def test_an_environment_value_under_a_system_directory_goes(tmp_path: Path) -> None:
    f = _planted("loading /etc/acme-zeta/registry.yaml failed")
    f.server["env"]["ZETA_CONF"] = "/etc/acme-zeta/registry.yaml"
    assert _extra(_export(f, tmp_path)) == "loading <env:ZETA_CONF> failed"


def test_no_placeholder_of_the_ledger_holds_an_environment_value(tmp_path: Path) -> None:
    f = RawFactory()
    f.server["env"]["RUN_TAG"] = "zeta-ablation-7f3kq2"
    f.run["server"]["binary_path"] = f.server["argv"][0] = "/opt/builds/mlxcel-zeta-ablation-7f3kq2"
    out = _export(f, tmp_path)
    assert "zeta-ablation-7f3kq2" not in _published(out)
    ledger = (out / "redaction-ledger.json").read_text("utf-8")
    assert "/path/to/mlxcel-<env:RUN_TAG>" in ledger, ledger


@pytest.mark.parametrize("variable", ["SSH_CONNECTION", "SSH_CLIENT"])
def test_an_ssh_address_written_ipv4_mapped_is_the_capture_s(tmp_path: Path, variable: str) -> None:
    f = _planted("34.12.5.6 - - [02/Nov/2026:10:00:00 +0000] GET /; login from 34.12.5.6")
    f.server["env"][variable] = "::ffff:34.12.5.6 51234 ::ffff:10.0.0.5 22"
    published = _extra(_export(f, tmp_path))
    assert "34.12.5.6" not in published, published


@pytest.mark.parametrize("case", [str.upper, str.lower])
def test_a_hex_secret_goes_in_either_case(tmp_path: Path, case: object) -> None:
    secret = "9f86d081884c7d659a2feaa0c55ad015"
    f = _planted(f"signing key {case(secret)} rejected")  # type: ignore[operator]
    f.server["env"]["SERVICE_API_KEY"] = secret
    assert _extra(_export(f, tmp_path)) == "signing key <token> rejected"


@pytest.mark.parametrize("path", ["C:\\tools\\mlxcel-server.exe", "D:\\builds\\mlxcel-server"])
def test_a_windows_binary_path_exports(tmp_path: Path, path: str) -> None:
    f = _planted(f"started {path} ok")
    f.run["server"]["binary_path"] = f.server["argv"][0] = path
    out = _export(f, tmp_path)
    assert path not in _published(out)
    assert _extra(out) == "started /path/to/" + path.rsplit("\\", 1)[1] + " ok"


def test_two_values_of_one_hardware_fact_are_refused(tmp_path: Path) -> None:
    f = RawFactory()
    f.run["hardware_extra"] = {"os": "Windows 11", "vram_gb": 80}
    with pytest.raises(ExportError, match="two values of the hardware fact 'os'"):
        _export(f, tmp_path)
    assert not (tmp_path / "public").exists()


def test_a_hardware_fact_of_its_own_is_published(tmp_path: Path) -> None:
    f = RawFactory()
    f.run["hardware_extra"] = {"vram_gb": 80, "rack": "r12"}
    experiment = json.loads((_export(f, tmp_path) / "experiment.json").read_text("utf-8"))
    assert experiment["hardware"]["vram_gb"] == 80
    assert experiment["hardware"]["rack"] == "r12"
