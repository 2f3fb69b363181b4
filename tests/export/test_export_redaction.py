"""No planted private value survives export, wherever it hides in the raw capture."""

from __future__ import annotations

import gzip
import json
import string
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from rawfactory import CONDITION, Host, RawFactory

from verifier.export import ExportOptions, export_bundle


@dataclass(frozen=True)
class Secrets:
    user: str
    host: str
    home: str
    tmpdir: str
    private_path: str
    env_value: str
    env_path: str
    token: str

    def all(self) -> list[str]:
        return [
            self.user,
            self.host,
            self.home,
            self.tmpdir,
            self.private_path,
            self.env_value,
            self.env_path,
            self.token,
        ]


lower = st.text(string.ascii_lowercase, min_size=4, max_size=8)
alnum = string.ascii_letters + string.digits


@st.composite
def secrets(draw: st.DrawFn) -> Secrets:
    user = "zu" + draw(lower)
    home = draw(st.sampled_from(["/home/{}", "/Users/{}", "/data/people/{}"])).format(user)
    return Secrets(
        user=user,
        host="zh" + draw(lower) + draw(st.sampled_from(["-lab-07", ".corp.internal", "gpu"])),
        home=home,
        tmpdir="/ztmp" + draw(lower),
        private_path="/zp" + draw(lower) + "/secret-" + draw(lower),
        env_value="ze" + draw(st.text(alnum, min_size=8, max_size=16)),
        env_path="/zq" + draw(lower) + "/cache",
        token="hf_" + draw(st.text(alnum, min_size=24, max_size=32)),
    )


Site = Callable[[RawFactory, str], None]


def _exchange(f: RawFactory, index: int = 1) -> dict[str, Any]:
    return f.exchanges()[index]


def _set_request_field(f: RawFactory, text: str) -> None:
    f.run["request_body"]["metadata"] = text
    for exchange in f.exchanges():
        exchange["request"]["body"]["metadata"] = text


def _add_metric(f: RawFactory, text: str) -> None:
    telemetry = _exchange(f)["telemetry"]
    for snapshot in (telemetry["before"], telemetry["after"]):
        snapshot["metrics"][f'mlxcel_extra_total{{note="{text}"}}'] = 1.0


def _library(f: RawFactory, text: str) -> None:
    directory = text if text.startswith("/") else f"/opt/{text}"
    f.server["libraries"].append({"path": f"{directory}/libz.so.1", "version": "1", "sha256": None})


SITES: dict[str, Site] = {
    "title": lambda f, t: f.run.__setitem__("title", f"run {t}"),
    "notes": lambda f, t: f.run.__setitem__("notes", ["first", f"seen {t}"]),
    "host-extra": lambda f, t: f.run["host"].__setitem__("site", t),
    "hardware-extra": lambda f, t: f.run.__setitem__("hardware_extra", {"rack": t}),
    "driver-version": lambda f, t: f.run["host"]["driver_versions"].__setitem__("gpu", t),
    "condition-label": lambda f, t: f.run["conditions"][0].__setitem__("label", t),
    "request-body": _set_request_field,
    "harness-argv": lambda f, t: f.run["argv"].extend(["--note", t]),
    "server-argv": lambda f, t: f.server["argv"].extend(["--extra", t]),
    "server-env": lambda f, t: f.server["env"].__setitem__("ZZ_EXTRA", t),
    "toggle-env": lambda f, t: f.server["env"].__setitem__("MLXCEL_NOTE", t),
    "server-log": lambda f, t: f.texts.__setitem__(f"conditions/{CONDITION}/servers/1.log", t),
    "harness-log": lambda f, t: f.texts.__setitem__("harness.log", t),
    "cache-stats": lambda f, t: _exchange(f)["telemetry"]["before"]["cache_stats"].__setitem__(
        "snapshot", {"dir": t, "history": [1, {"path": t}]}
    ),
    "cache-stats-key": lambda f, t: _exchange(f)["telemetry"]["after"]["cache_stats"].__setitem__(
        t, 1
    ),
    "metric-key": _add_metric,
    "headers": lambda f, t: _exchange(f)["response"]["headers"].__setitem__("x-served-by", t),
    "response-field": lambda f, t: _exchange(f, 2)["response"]["body"].__setitem__(
        "system_fingerprint", t
    ),
    "message-extra": lambda f, t: _exchange(f, 0)["response"]["body"]["choices"][0][
        "message"
    ].__setitem__("refusal_note", t),
    "reset-answer": lambda f, t: _exchange(f, 0).__setitem__(
        "reset", {"status": 200, "answer": {"by": t}, "proven": True, "stats_after": None}
    ),
    "library": _library,
    "manifest-file": lambda f, t: f.documents["model-manifest.json"]["files"].append(
        {"path": f"extra/{t}.bin", "size": 1, "sha256": "0" * 64}
    ),
}


def _phrase(secret: str) -> str:
    """The secret as text around it would carry it: in brackets, then as a path prefix."""
    return f"x [{secret}] {secret}/sub y"


def _factory(s: Secrets) -> RawFactory:
    f = RawFactory(
        host=Host(
            user=s.user,
            hostname=s.host,
            home=s.home,
            cwd=f"{s.home}/work",
            tmpdir=s.tmpdir,
            binary=f"{s.home}/bin/mlxcel-server",
            model=f"{s.home}/models/m",
        )
    )
    f.server["env"]["ZZ_SECRET"] = s.env_value
    f.server["env"]["MLXCEL_CACHE_DIR"] = s.env_path
    return f


def published_bytes(out: Path, archive: Path | None) -> list[tuple[str, bytes]]:
    found = [(str(p.relative_to(out)), p.read_bytes()) for p in out.rglob("*") if p.is_file()]
    if archive is not None:
        found.append(("archive", gzip.decompress(archive.read_bytes())))
    return found


@settings(max_examples=40, deadline=None)
@given(
    s=secrets(),
    planted=st.lists(
        st.tuples(st.sampled_from(sorted(SITES)), st.integers(0, 7)), min_size=1, max_size=8
    ),
)
def test_planted_secrets_never_reach_the_public_bundle(
    s: Secrets, planted: list[tuple[str, int]]
) -> None:
    f = _factory(s)
    for site, which in planted:
        SITES[site](f, _phrase(s.all()[which]))
    with tempfile.TemporaryDirectory() as tmp:
        raw = f.write(Path(tmp) / "raw")
        out, archive = Path(tmp) / "public", Path(tmp) / "public.tar.gz"
        summary = export_bundle(
            ExportOptions(raw, out, archive=archive, private_paths=(s.private_path,))
        )
        assert summary.verdict  # it verified
        for name, data in published_bytes(out, archive):
            lowered = data.lower()
            for secret in s.all():
                assert secret.lower().encode() not in lowered, (name, secret)


def test_seed_sample_export_removes_every_private_value(seed_raw: Path, tmp_path: Path) -> None:
    out, archive = tmp_path / "public", tmp_path / "public.tar.gz"
    summary = export_bundle(ExportOptions(seed_raw, out, archive=archive))
    assert summary.verdict == "cache-state-dependent"
    private = ["alice", "gb10-lab-07", "/home/", "/tmp/", "hf_", "192.168.", "41017"]
    for name, data in published_bytes(out, archive):
        for value in private:
            assert value.encode() not in data, (name, value)
    experiment = json.loads((out / "experiment.json").read_text())
    server = experiment["conditions"][0]["servers"][0]
    assert server["argv"][:3] == ["/path/to/mlxcel-server", "-m", "/path/to/model"]
    assert set(server["environment"]) == {
        "MLXCEL_APC_TRACE",
        "MLXCEL_CACHE_DIR",
        "MLXCEL_DEVICE",
        "MLXCEL_SDPA_DETERMINISTIC",
    }
    assert server["environment"]["MLXCEL_CACHE_DIR"] == "/path/to/mlxcel-cache-dir"
    assert all(set(lib) == {"name", "version", "sha256"} for lib in experiment["runtime_libraries"])
    assert "/" not in "".join(lib["name"] for lib in experiment["runtime_libraries"])
    assert "user" not in experiment["hardware"] and "hostname" not in experiment["hardware"]
    ledger = json.loads((out / "redaction-ledger.json").read_text())
    categories = {entry["category"] for entry in ledger["entries"]}
    assert {"private-path", "environment-value", "process-map"} <= categories
    assert summary.redactions["process-map"] == 42


def test_ledger_never_holds_a_removed_value(seed_raw: Path, tmp_path: Path) -> None:
    export_bundle(ExportOptions(seed_raw, tmp_path / "public"))
    ledger = (tmp_path / "public" / "redaction-ledger.json").read_text()
    for value in ("alice", "gb10", "mlxcel-isolated-cache", "hf_", "192.168"):
        assert value not in ledger


def test_short_user_name_is_replaced_in_account_contexts_only(tmp_path: Path) -> None:
    f = RawFactory(host=Host(user="al", home="/home/al", cwd="/srv/work", binary="/opt/bin/srv"))
    f.run["notes"] = ["al dente, see /srv/shared/al/file and al@remote", "~al/x"]
    out = tmp_path / "public"
    export_bundle(ExportOptions(f.write(tmp_path / "raw"), out))
    notes = json.loads((out / "experiment.json").read_text())["notes"]
    assert notes == [
        "al dente, see /srv/shared/<user>/file and <user>@remote",
        "/path/to/home",
    ]


def test_generic_account_names_are_not_redacted(tmp_path: Path) -> None:
    f = RawFactory(host=Host(user="root", home="/root", cwd="/root/w", binary="/root/srv"))
    f.run["notes"] = ["the root of the problem"]
    out = tmp_path / "public"
    export_bundle(ExportOptions(f.write(tmp_path / "raw"), out))
    notes = json.loads((out / "experiment.json").read_text())["notes"]
    assert notes == ["the root of the problem"]


def test_secret_flag_values_are_removed_from_argv(tmp_path: Path) -> None:
    f = RawFactory()
    f.server["argv"] += ["--api-key", "abc", "--token=xyz12"]
    out = tmp_path / "public"
    export_bundle(ExportOptions(f.write(tmp_path / "raw"), out))
    experiment = json.loads((out / "experiment.json").read_text())
    argv = experiment["conditions"][0]["servers"][0]["argv"]
    assert argv[-3:] == ["--api-key", "<token>", "--token=<token>"]


def test_keep_env_publishes_a_named_variable(tmp_path: Path) -> None:
    f = RawFactory()
    f.server["env"]["CUDA_VISIBLE_DEVICES"] = "0"
    out = tmp_path / "public"
    export_bundle(ExportOptions(f.write(tmp_path / "raw"), out, keep_env=("CUDA_*",)))
    experiment = json.loads((out / "experiment.json").read_text())
    env = experiment["conditions"][0]["servers"][0]["environment"]
    assert env == {
        "CUDA_VISIBLE_DEVICES": "0",
        "MLXCEL_DEVICE": "cpu",
        "MLXCEL_SDPA_DETERMINISTIC": "1",
    }


def test_private_path_option_takes_paths_and_plain_strings(tmp_path: Path) -> None:
    f = RawFactory()
    f.run["notes"] = ["data in /mnt/team-share/run7 for ProjectX (not projectx)"]
    out = tmp_path / "public"
    summary = export_bundle(
        ExportOptions(f.write(tmp_path / "raw"), out, private_paths=("/mnt/team-share", "ProjectX"))
    )
    notes = json.loads((out / "experiment.json").read_text())["notes"]
    assert notes == ["data in /path/to/private-1/run7 for <private-2> (not projectx)"]
    assert summary.redactions["private-path"] >= 2
