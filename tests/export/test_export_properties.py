"""Properties of export (hypothesis): plant private values, in every form, into every raw field.

1. The published bytes (the directory and the decompressed archive) hold none of them in an
   identifying form, and every evidence field is byte-identical to its raw value; or the
   export stopped, naming each evidence field that held one, and wrote nothing.
2. Verify's leak scan (the generic detectors, which know no names) finds every planted form
   that export removes.
"""

from __future__ import annotations

import gzip
import json
import string
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from rawfactory import CONDITION, Host, RawFactory

from verifier import layout
from verifier.errors import ExportError
from verifier.export import ExportOptions, export_bundle
from verifier.export.redact import Redactor, collect_private_values
from verifier.leaks import scan_text
from verifier.raw import load_raw
from verifier.verify import VerifyOptions, verify_path

ORDINARY = ["write", "cache", "model", "prompt", "metrics", "gather"]
lower = string.ascii_lowercase
alnum = string.ascii_letters + string.digits


@dataclass(frozen=True)
class Private:
    user: str
    host: str
    other: str  # another user, whose home may appear too
    ipv4: str
    ipv6: str
    token: str
    aws: str

    def forms(self) -> list[tuple[str, str]]:
        """(form, the part that must not survive) for every form of every value."""
        found: list[tuple[str, str]] = []
        for name in (self.user, self.other):
            home = f"/home/{name}"
            found += [
                (f"{home}/x", home),
                (f"\\/home\\/{name}\\/x", f"\\/home\\/{name}"),
                (f"\\u002fhome\\u002f{name}\\u002fx", f"\\u002fhome\\u002f{name}"),
                (f"%2Fhome%2F{name}%2Fx", f"%2Fhome%2F{name}"),
                (f"%2fhome%2f{name}%2fx", f"%2fhome%2f{name}"),
                (f"file:///home/{name}/x", home),
                (f"~{name}/x", f"~{name}"),
                (f"/home//{name}/x", f"/home//{name}"),
                (f"/var/home/{name}/x", f"/var/home/{name}"),
                (f"/Users/{name}/x", f"/Users/{name}"),
                (f"C:\\Users\\{name}\\x", f"Users\\{name}"),
            ]
        found += [
            (f"{self.user}@{self.host}", f"{self.user}@{self.host}"),
            (f"ssh://{self.user}@{self.host}/x", f"{self.user}@{self.host}"),
            (f"http://{self.host}:8080/v1", f"://{self.host}"),
            (self.ipv4, self.ipv4),
            (f"http://{self.ipv4}:8080/", self.ipv4),
            (self.ipv6, self.ipv6),
            (f"http://[{self.ipv6}]:8080/", self.ipv6),
            (f"hf_{self.token}", self.token),
            (f"session eyJ{self.token}.eyJ{self.token[:6]}.{self.token}", self.token),
            (f"Authorization: Bearer {self.token}", self.token),
            (f"API_KEY={self.token}", self.token),
            (f"--hf_token={self.token}", self.token),
            (f"aws_secret_access_key = {self.aws}", self.aws),
            (self.aws, self.aws),
        ]
        return found


def _mixed(draw: st.DrawFn, size: int) -> str:
    """Letters and digits with both cases and a digit, as tokens are."""
    return "Ab7" + draw(st.text(alnum, min_size=size - 3, max_size=size - 3))


@st.composite
def privates(draw: st.DrawFn) -> Private:
    word = st.sampled_from(ORDINARY)
    user = draw(st.one_of(word, st.just("al"), st.text(lower, min_size=2, max_size=6)))
    host = draw(st.one_of(word, st.text(lower, min_size=3, max_size=6).map("zh{}-lab-07".format)))
    other = draw(st.one_of(word, st.text(lower, min_size=2, max_size=6).map("zo{}".format)))
    octets = draw(st.lists(st.integers(1, 254), min_size=3, max_size=3))
    letters = st.text("abcdef", min_size=4, max_size=4)
    ipv6 = f"fd{draw(letters)[:2]}:{draw(letters)}::{draw(letters)}"
    return Private(
        user=user,
        host=host if host != user else host + "-2",
        other=other if other != user else other + "x",
        ipv4="10.{}.{}.{}".format(*octets),
        ipv6=ipv6,
        token=_mixed(draw, draw(st.integers(24, 32))),
        aws=_mixed(draw, 39) + "Q",
    )


@dataclass(frozen=True)
class Site:
    plant: Callable[[RawFactory, str], None]
    evidence: str | None = None
    """Where export must stop (file and pointer) when the site holds a private value."""
    unread: bool = False
    """A part of a reply the output hash does not read: whatever it holds, the bundle would
    not verify, so export stops at its own check (after a stop for private evidence)."""


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
    f.server["libraries"].append({"path": f"/opt/{text}/libz.so.1", "version": "1", "sha256": None})


def _failed(f: RawFactory, text: str) -> None:
    _exchange(f, 3)["response"].update(status=500, body=None, text=text, error=None)


def _content(f: RawFactory, text: str) -> None:
    _exchange(f, 0)["response"]["body"]["choices"][0]["message"]["content"] = text


SITES: dict[str, Site] = {
    # free text: redacted
    "title": Site(lambda f, t: f.run.__setitem__("title", f"run {t}")),
    "notes": Site(lambda f, t: f.run.__setitem__("notes", ["first", f"seen {t}"])),
    "condition-label": Site(lambda f, t: f.run["conditions"][0].__setitem__("label", t)),
    "server-argv": Site(lambda f, t: f.server["argv"].extend(["--extra", t])),
    "cache-stats": Site(
        lambda f, t: _exchange(f)["telemetry"]["before"]["cache_stats"].__setitem__(
            "snapshot", {"dir": t, "history": [1, {"path": t}]}
        )
    ),
    "cache-stats-key": Site(
        lambda f, t: _exchange(f)["telemetry"]["after"]["cache_stats"].__setitem__(t, 1)
    ),
    "response-field": Site(
        lambda f, t: _exchange(f, 2)["response"]["body"].__setitem__("service_tier", t)
    ),
    # (SGLang writes the stop string that ended a reply beside the message)
    "choice-extra": Site(
        lambda f, t: _exchange(f, 0)["response"]["body"]["choices"][0].__setitem__(
            "matched_stop", t
        )
    ),
    "error-text": Site(_failed),
    # where capture writes one: a request that got no HTTP answer
    "response-error": Site(
        lambda f, t: _exchange(f, 4)["response"].update(status=None, body=None, text=None, error=t)
    ),
    # dropped
    "host-extra": Site(lambda f, t: f.run["host"].__setitem__("site", t)),
    "harness-argv": Site(lambda f, t: f.run["argv"].extend(["--note", t])),
    "server-env": Site(lambda f, t: f.server["env"].__setitem__("ZZ_EXTRA", t)),
    "server-log": Site(
        lambda f, t: f.texts.__setitem__(f"conditions/{CONDITION}/servers/1.log", t)
    ),
    "harness-log": Site(lambda f, t: f.texts.__setitem__("harness.log", t)),
    "headers": Site(lambda f, t: _exchange(f)["response"]["headers"].__setitem__("x-served-by", t)),
    "reset-answer": Site(
        lambda f, t: _exchange(f, 0).__setitem__(
            "reset", {"status": 200, "answer": {"by": t}, "proven": True, "stats_after": None}
        )
    ),
    "library-directory": Site(_library),
    "server-cwd": Site(lambda f, t: f.server.__setitem__("cwd", t)),
    "log-path": Site(lambda f, t: f.server.__setitem__("log_path", t)),
    "request-url": Site(
        lambda f, t: _exchange(f)["request"].__setitem__("url", f"http://127.0.0.1:1/{t}")
    ),
    "snapshot-text": Site(
        lambda f, t: _exchange(f)["telemetry"]["before"].__setitem__("metrics_text", t)
    ),
    # evidence: export stops
    # (a part of the reply the output hash does not read: the bundle would not verify, whatever
    # the part holds, and the value is not shown)
    "message-extra": Site(
        lambda f, t: _exchange(f, 0)["response"]["body"]["choices"][0]["message"].__setitem__(
            "refusal_note", t
        ),
        unread=True,
    ),
    "request-body": Site(_set_request_field, "experiment.json/request_body/metadata"),
    "metric-key": Site(_add_metric, "records/c1/002.json/telemetry/before/metrics"),
    "toggle-env": Site(
        lambda f, t: f.server["env"].__setitem__("MLXCEL_NOTE", t),
        "experiment.json/conditions/0/servers/0/environment/MLXCEL_NOTE",
    ),
    "hardware-extra": Site(
        lambda f, t: f.run.__setitem__("hardware_extra", {"rack": t}),
        "experiment.json/hardware/rack",
    ),
    "driver-version": Site(
        lambda f, t: f.run["host"]["driver_versions"].__setitem__("gpu", t),
        "experiment.json/hardware/gpu",
    ),
    "manifest-file": Site(
        lambda f, t: f.documents["model-manifest.json"]["files"].append(
            {"path": f"extra/{t}.bin", "size": 1, "sha256": "0" * 64}
        ),
        "model-manifest.json/files/2/path",
    ),
    "model-output": Site(_content, "records/c1/001.json/response/choices/0/message/content"),
    "started-at": Site(
        lambda f, t: _exchange(f)["timing"].__setitem__("started_at", t),
        "records/c1/002.json/started_at",
    ),
    # free text: a build that loads its backends names their folder there on every run
    "server-version": Site(lambda f, t: f.run["server"].__setitem__("version", t)),
    "repo-id": Site(
        lambda f, t: [
            d.__setitem__("repo_id", t)
            for d in (f.run["model"], f.documents["model-manifest.json"])
        ],
        "model-manifest.json/repo_id",
    ),
}


def _phrase(form: str) -> str:
    """The form as text around it would carry it: in brackets, then as a path prefix."""
    return f"x [{form}] {form}/sub y"


PLANTED = st.lists(
    st.tuples(st.sampled_from(sorted(SITES)), st.integers(0, 200)),
    min_size=1,
    max_size=6,
    unique_by=lambda item: item[0],
)
"""Where to plant a private value: distinct sites, each with a number that picks a form."""


def planted_capture(
    private: Private, planted: list[tuple[str, int]]
) -> tuple[RawFactory, list[tuple[str, tuple[str, str]]]]:
    """A capture with `private` planted at each site in its chosen form; (site, (form,
    core)) for each."""
    forms = private.forms()
    chosen = [(site, forms[which % len(forms)]) for site, which in planted]
    f = _factory(private)
    for site, (form, _core) in chosen:
        SITES[site].plant(f, _phrase(form))
    return f, chosen


def _factory(p: Private) -> RawFactory:
    home = f"/home/{p.user}"
    return RawFactory(
        host=Host(
            user=p.user,
            hostname=p.host,
            home=home,
            cwd=f"{home}/work",
            binary=f"{home}/bin/mlxcel-server",
            model=f"{home}/models/m",
        )
    )


def _published_texts(out: Path, archive: Path) -> list[tuple[str, str]]:
    found = [(str(p.relative_to(out)), p.read_bytes()) for p in out.rglob("*") if p.is_file()]
    found.append(("archive", gzip.decompress(archive.read_bytes())))
    return [(name, data.decode("utf-8", errors="replace")) for name, data in found]


def _evidence_is_unchanged(f: RawFactory, out: Path) -> None:
    experiment = json.loads((out / layout.EXPERIMENT).read_text())
    assert experiment["request_body"] == f.run["request_body"]
    assert experiment["conditions"][0]["settings"] == f.run["conditions"][0]["settings"]
    versions = {lib["version"] for lib in experiment["runtime_libraries"]}
    assert versions == {lib["version"] for lib in f.server["libraries"]}
    for name in ("os", "machine", "cpu", "kernel"):
        assert experiment["hardware"][name] == f.run["host"][name]
    manifest = json.loads((out / layout.MODEL_MANIFEST).read_text())
    assert manifest["files"] == f.documents["model-manifest.json"]["files"]
    for exchange in f.exchanges():
        record = json.loads((out / layout.record_path(CONDITION, exchange["sequence"])).read_text())
        assert record["request_body"] == exchange["request"]["body"]
        for moment in ("before", "after"):
            raw = exchange["telemetry"][moment]["metrics"]
            assert record["telemetry"][moment]["metrics"] == raw
        body = exchange["response"]["body"]
        if body is not None:
            assert record["response"]["choices"] == body["choices"] or (
                record["response"]["choices"][0]["message"]["content"]
                == body["choices"][0]["message"]["content"]
            )
            assert record["response"]["usage"] == body["usage"]


@settings(max_examples=60, deadline=None)
@given(
    private=privates(),
    planted=PLANTED,
)
def test_no_planted_form_survives_and_evidence_is_never_changed(
    private: Private, planted: list[tuple[str, int]]
) -> None:
    f, chosen = planted_capture(private, planted)
    expected_stops = {SITES[site].evidence for site, _ in chosen} - {None}
    unread = any(SITES[site].unread for site, _ in chosen)
    with tempfile.TemporaryDirectory() as tmp:
        raw = f.write(Path(tmp) / "raw")
        out, archive = Path(tmp) / "public", Path(tmp) / "public.tar.gz"
        try:
            export_bundle(ExportOptions(raw, out, archive=archive))
        except ExportError as exc:
            event("stopped: evidence held a private value")
            assert expected_stops or unread, exc.message  # only evidence stops an export
            if not expected_stops:
                assert "does not verify" in exc.message, exc.message
                assert "message/refusal_note" in exc.message, exc.message
            for where in expected_stops:
                assert str(where) in exc.message, (where, exc.message)
            for _form, core in (form for _, form in chosen):
                assert core not in exc.message
            assert sorted(p.name for p in Path(tmp).iterdir()) == ["raw"]
            return
        event("published")
        assert not expected_stops, "an evidence field held a private value and was published"
        assert not unread, "a reply with a part the output hash does not read was published"
        _evidence_is_unchanged(f, out)
        for name, text in _published_texts(out, archive):
            lowered = text.lower()
            for _site, (form, core) in chosen:
                for piece in (form, core, json.dumps(core)[1:-1]):
                    assert piece.lower() not in lowered, (name, piece)


@settings(max_examples=60, deadline=None)
@given(private=privates(), which=st.integers(0, 200))
def test_verify_finds_every_form_that_export_removes(private: Private, which: int) -> None:
    forms = private.forms()
    form, core = forms[which % len(forms)]
    phrase = _phrase(form)
    with tempfile.TemporaryDirectory() as tmp:
        raw = load_raw(_factory(private).write(Path(tmp) / "raw"))
        redactor = Redactor(collect_private_values(raw))
        removed = redactor.detector.scan_text(phrase)
    start = phrase.index(core)
    end = start + len(core)

    def covers(hits: list[Any]) -> bool:
        return any(h.start < end and start < h.end for h in hits)

    assert covers(removed), form  # export removes it ...
    assert covers(scan_text(phrase)), form  # ... and verify, which knows no names, finds it


@pytest.mark.parametrize(
    "form",
    [
        "/home/write/x",
        "%2Fhome%2Fal%2Fx",
        "\\u002fhome\\u002fcache",
        "~gather/x",
        "write@gather",
        "http://gather:8080/",
        "fdab:cdef::abcd",
        "Bearer AbcdEfghIjklMnop",
        "API_KEY=zzzzzzzzzz",
        "--hf_token=abc",
    ],
)
def test_a_published_form_fails_verification(seed_raw: Path, tmp_path: Path, form: str) -> None:
    out = tmp_path / "public"
    export_bundle(ExportOptions(seed_raw, out))
    experiment = json.loads((out / layout.EXPERIMENT).read_text())
    experiment["notes"].append(f"see {form} there")
    (out / layout.EXPERIMENT).write_text(json.dumps(experiment, indent=2))
    result = verify_path(out, VerifyOptions())
    leaks = [f for f in result.findings if f.check == "leaks" and f.is_error]
    assert leaks and leaks[0].file == layout.EXPERIMENT and leaks[0].pointer == "/notes/2"


# A model and a binary outside any home: only what the capture knows finds them.
_MODEL = "/srv/lab-models/Qwen3-1.7B-4bit"
_BINARY = "/opt/build-7/bin/mlxcel-server"


def _spellings(path: str) -> list[str]:
    """The spellings of one private path that the system reads as the same path."""
    doubled = path.replace("/", "//")
    dotted = path.replace("/", "/./", 2)
    return [
        path,
        doubled,
        dotted,
        "/" + path,
        path.replace("/", "\\/"),
        path.replace("/", "\\u002f"),
        path.replace("/", "%2F"),
        doubled.replace("/", "%2f"),
        f"file://{path}",
        f"file://{dotted}",
        f"file://localhost{path}",
    ]


@pytest.mark.parametrize("spelling", [*_spellings(_MODEL), *_spellings(_BINARY)])
def test_a_known_path_in_any_spelling_is_removed_from_free_text_and_stops_evidence(
    tmp_path: Path, spelling: str
) -> None:
    host = Host(model=_MODEL, binary=_BINARY)
    free = RawFactory(host=host)
    SITES["notes"].plant(free, _phrase(spelling))
    SITES["server-log"].plant(free, f"loading {spelling}\n")
    raw = free.write(tmp_path / "raw")
    out, archive = tmp_path / "public", tmp_path / "public.tar.gz"
    export_bundle(ExportOptions(raw, out, archive=archive))
    for name, text in _published_texts(out, archive):
        assert spelling not in text, name
        for private in ("lab-models", "Qwen3-1.7B", "build-7"):
            assert private not in text, (name, private)

    evidence = RawFactory(host=host)
    SITES["request-body"].plant(evidence, _phrase(spelling))
    raw = evidence.write(tmp_path / "raw-evidence")
    with pytest.raises(ExportError, match=r"experiment\.json/request_body/metadata"):
        export_bundle(ExportOptions(raw, tmp_path / "stopped"))
    assert not (tmp_path / "stopped").exists()


@pytest.mark.parametrize("spelling", ["//home", "/./home", "//tmp/", "/usr//lib/x86_64-linux-gnu"])
def test_a_common_directory_in_another_spelling_is_not_a_private_path(
    tmp_path: Path, spelling: str
) -> None:
    # As a private path, `//home` would match `/home` itself, ahead of the home detector,
    # and publish the user name after it (`/path/to/private-1/bob/x`).
    f = RawFactory()
    f.server["argv"] += ["--data-dir", spelling]
    f.run["notes"] = ["owner /home/bob/.cache/x, libs in /usr/lib/x86_64-linux-gnu"]
    raw = f.write(tmp_path / "raw")
    known = {k.value for k in collect_private_values(load_raw(raw))}
    assert not known & {"/home", "/tmp", "/usr/lib/x86_64-linux-gnu", spelling}
    out = tmp_path / "public"
    export_bundle(ExportOptions(raw, out))
    notes = json.loads((out / layout.EXPERIMENT).read_text())["notes"]
    assert "bob" not in notes[0] and "/usr/lib/x86_64-linux-gnu" in notes[0]
