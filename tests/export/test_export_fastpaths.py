"""Export's fast paths give what the plain paths give, and its output is reproducible.

- `Redactor.redact_and_check` (one scan of each document redaction leaves unchanged) against
  `redact_documents` then `final_check` (a scan per pass): the same documents, ledgers and
  errors, on the committed raw sample, the seed and factory captures, and hypothesis-planted
  private values (the generator of test_export_properties), with and without `--allow`.
- The cached field table lookup against the uncached one, over every field of every
  published document.
- The raw directory read through `openat` (`raw._Tree`) against `_inside` and a read by
  name: the same capture, the same bytes; links, FIFOs and `..` names never opened.
- The archive is read back, not verified twice: an archive that does not hold exactly the
  verified files (a byte changed, a member missing or added, a link) is never published.
- Exporting the same raw capture twice gives the same bytes: every file and the archive.
"""

from __future__ import annotations

import gc
import gzip
import io
import json
import os
import shutil
import tarfile
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rawfactory import RawFactory
from test_export_properties import PLANTED, planted_capture, privates

from verifier import collector, layout, signing
from verifier.bundle.reader import Limits
from verifier.errors import ExportError, UsageError
from verifier.export import ExportOptions, export_bundle, exporter
from verifier.export.archive import build_archive
from verifier.export.assemble import (
    Treatment,
    _lookup,
    _table,
    assemble,
    plain,
    public_kind,
    raw_treatment_of,
    treatment_of,
)
from verifier.export.redact import (
    Redactor,
    _all_treated,
    _check_treatments,
    collect_private_values,
)
from verifier.model import json_pointer
from verifier.raw import _inside, _load, _Tree, load_raw

REPO = Path(__file__).resolve().parents[2]
SAMPLE_RAW = REPO / "sample_bundles" / "raw" / "seed-mlxcel"

Outcome = tuple[str, Any]


def _redacted(raw: Path, allowed: Sequence[str], fast: bool) -> Outcome:
    """("ok", documents and ledgers) or ("error", message) of one way of redacting."""
    capture = load_raw(raw)
    assembled = assemble(capture)
    values = collect_private_values(capture, allowed=allowed)
    redactor = Redactor(values, allowed)
    try:
        if fast:
            documents, replaced, kept = redactor.redact_and_check(
                assembled.documents, assembled.sources
            )
        else:
            documents, replaced = redactor.redact_documents(assembled.documents, assembled.sources)
            kept = redactor.final_check(documents)
    except ExportError as exc:
        return ("error", exc.message)
    dumped = {name: json.dumps(doc, sort_keys=False) for name, doc in documents.items()}
    return ("ok", (dumped, replaced, kept))


def _same_both_ways(raw: Path, allowed: Sequence[str] = ()) -> Outcome:
    plain = _redacted(raw, allowed, fast=False)
    assert _redacted(raw, allowed, fast=True) == plain
    return plain


def _copy_sample(tmp_path: Path) -> Path:
    raw = tmp_path / "sample-raw"
    shutil.copytree(SAMPLE_RAW, raw)
    return raw


def plain_reference(value: Any) -> Any:
    """`assemble.plain` as it was first written: the reference of its fast path."""
    if type(value) in (str, int, float, bool, type(None)):
        return value
    if isinstance(value, Mapping):
        return {str(k): plain_reference(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain_reference(v) for v in value]
    return value


def test_one_scan_per_unchanged_document_on_the_samples(
    seed_raw: Path, factory_raw: Path, tmp_path: Path
) -> None:
    for raw in (_copy_sample(tmp_path), seed_raw, factory_raw):
        outcome, (documents, replaced, _kept) = _same_both_ways(raw)
        assert outcome == "ok" and replaced  # each has something to replace
        assert len(documents) > 3


def test_one_scan_per_unchanged_document_with_allowed_values(tmp_path: Path) -> None:
    # an address in the prompt, allowed: the final check finds it in records no edit
    # touched, and the ledger says so
    f = RawFactory()
    for body in [f.run["request_body"], *(e["request"]["body"] for e in f.exchanges())]:
        body["messages"][0]["content"] = "Explain what 10.20.30.40 is."
    raw = f.write(tmp_path / "raw")
    assert _same_both_ways(raw)[0] == "error"
    outcome, (_documents, _replaced, kept) = _same_both_ways(raw, ["10.20.30.40"])
    assert outcome == "ok"
    assert {e.file for e in kept} >= {"experiment.json", "records/c1/001.json"}


def test_one_scan_per_unchanged_document_when_evidence_stops_the_export(
    tmp_path: Path,
) -> None:
    f = RawFactory()
    f.exchanges()[0]["response"]["body"]["choices"][0]["message"]["content"] = (
        "see /home/alice/notes"
    )
    outcome, message = _same_both_ways(f.write(tmp_path / "raw"))
    assert outcome == "error" and "records/c1/001.json/response/choices/0" in message


@settings(max_examples=40, deadline=None)
@given(
    private=privates(),
    planted=PLANTED,
    allow=st.booleans(),
)
def test_one_scan_per_unchanged_document_on_planted_values(
    private: Any, planted: list[tuple[str, int]], allow: bool
) -> None:
    f, chosen = planted_capture(private, planted)
    allowed = [chosen[0][1][1]] if allow else []
    with tempfile.TemporaryDirectory() as tmp:
        _same_both_ways(f.write(Path(tmp) / "raw"), allowed)


def test_the_cached_field_lookup_is_the_uncached_one(seed_raw: Path) -> None:
    documents = assemble(load_raw(seed_raw)).documents

    def leaves(node: Any, path: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
        if isinstance(node, dict):
            return [leaf for k, v in node.items() for leaf in leaves(v, (*path, k))] + [path]
        if isinstance(node, list):
            return [leaf for i, v in enumerate(node) for leaf in leaves(v, (*path, i))] + [path]
        return [path]

    checked = 0
    for file, document in documents.items():
        kind = public_kind(file)
        for path in [*leaves(document), ("not", "a", "field"), ("response", 0, "x")]:
            assert treatment_of(kind, path) == _lookup.__wrapped__("public", kind, path)
            checked += 1
    assert checked > 200


def test_links_and_dot_dot_names_stay_refused(factory_raw: Path, tmp_path: Path) -> None:
    with pytest.raises(ExportError, match="outside the raw directory"):
        _inside(factory_raw, "../elsewhere.json")
    with pytest.raises(ExportError, match="outside the raw directory"):
        _inside(factory_raw, "conditions/../../elsewhere.json")
    with pytest.raises(ExportError, match="outside the raw directory"):
        _inside(factory_raw, str(tmp_path / "elsewhere.json"))
    assert _inside(factory_raw, "conditions/c1/../c1/servers/1.json").is_file()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (factory_raw / "conditions" / "link").symlink_to(outside, target_is_directory=True)
    with pytest.raises(ExportError, match="symbolic link"):
        _inside(factory_raw, "conditions/link/x.json")
    (factory_raw / "file-link.json").symlink_to(factory_raw / layout.RAW_RUN)
    with pytest.raises(ExportError, match="symbolic link"):
        _inside(factory_raw, "file-link.json")


def test_the_raw_directory_read_through_openat_is_the_one_read_by_path(
    factory_raw: Path, seed_raw: Path
) -> None:
    # `_Tree` (every component opened from the one above, no link followed) against the
    # plain path (`_inside`'s lstat of every component, then the read by name).
    for raw in (SAMPLE_RAW, seed_raw, factory_raw):
        assert repr(load_raw(raw)) == repr(_load(raw, None)), raw
        tree = _Tree(raw)
        try:
            for path in sorted(raw.rglob("*")):
                name = path.relative_to(raw).as_posix()
                if path.is_file():
                    assert tree.read(name) == path.read_bytes(), name
                    assert tree.size(name) == path.stat().st_size, name
                else:
                    assert tree.read(name) is None and tree.size(name) is None, name
        finally:
            tree.close()


def test_the_openat_path_never_opens_a_link_a_fifo_or_a_dot_dot_name(
    factory_raw: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "x.json").write_text("{}")
    (factory_raw / "conditions" / "link").symlink_to(outside, target_is_directory=True)
    (factory_raw / "file-link.json").symlink_to(factory_raw / layout.RAW_RUN)
    os.mkfifo(factory_raw / "fifo.json")
    tree = _Tree(factory_raw)
    try:
        for name in (
            "conditions/link/x.json",
            "file-link.json",
            "fifo.json",  # not waited on: O_NONBLOCK, then refused as not a regular file
            "conditions/../run.json",
            "./run.json",
            "conditions//x.json",
            str(factory_raw / layout.RAW_RUN),
            "missing.json",
        ):
            assert tree.read(name) is None, name
            assert tree.size(name) is None, name
        assert tree.read(layout.RAW_RUN) == (factory_raw / layout.RAW_RUN).read_bytes()
    finally:
        tree.close()


def test_a_fifo_in_the_raw_directory_is_refused_not_waited_on(factory_raw: Path) -> None:
    exchange = next(factory_raw.glob("conditions/*/exchanges/*.json"))
    exchange.unlink()
    os.mkfifo(exchange)
    with pytest.raises(ExportError, match="not a regular file"):
        load_raw(factory_raw)


# --- the archive: read back and compared ------------------------------------------------


def _tar_gz(members: Sequence[tarfile.TarInfo], data: Mapping[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for member in members:
            content = data.get(member.name)
            tar.addfile(member, io.BytesIO(content) if content is not None else None)
    return gzip.compress(buffer.getvalue(), mtime=0)


def _changed_byte(files: Mapping[str, bytes]) -> bytes:
    changed = dict(files)
    data = changed[layout.EXPERIMENT]
    changed[layout.EXPERIMENT] = data[:-2] + (b" " if data[-2:-1] != b" " else b"\t") + b"\n"
    return build_archive(changed)


def _missing(files: Mapping[str, bytes]) -> bytes:
    return build_archive({k: v for k, v in files.items() if k != layout.MODEL_MANIFEST})


def _extra(files: Mapping[str, bytes]) -> bytes:
    return build_archive({**files, "notes.txt": b"hello\n"})


def _with_link(files: Mapping[str, bytes]) -> bytes:
    members = []
    for name in sorted(files):
        info = tarfile.TarInfo(name)
        info.size = len(files[name])
        members.append(info)
    link = tarfile.TarInfo("link.json")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    return _tar_gz([*members, link], files)


def _not_gzip(files: Mapping[str, bytes]) -> bytes:
    return b"not an archive at all"


@pytest.mark.parametrize("tamper", [_changed_byte, _missing, _extra, _with_link, _not_gzip])
def test_an_archive_that_is_not_the_verified_bundle_is_never_published(
    factory_raw: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    tamper: Callable[[Mapping[str, bytes]], bytes],
) -> None:
    monkeypatch.setattr(exporter, "build_archive", tamper)
    out, archive = tmp_path / "public", tmp_path / "public.tar.gz"
    with pytest.raises(ExportError, match="archive"):
        export_bundle(ExportOptions(factory_raw, out, archive=archive))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["raw"]


def test_the_archive_holds_the_verified_directory_byte_for_byte(
    factory_raw: Path, tmp_path: Path
) -> None:
    out, archive = tmp_path / "public", tmp_path / "public.tar.gz"
    export_bundle(ExportOptions(factory_raw, out, archive=archive))
    on_disk = {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    with tarfile.open(archive, mode="r:gz") as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}  # type: ignore[union-attr]
    assert members == on_disk


def test_exports_own_output_is_read_past_every_default_limit() -> None:
    default, own = Limits(), exporter._OWN_OUTPUT
    for limit in fields(Limits):
        if limit.name == "max_json_depth":
            assert own.max_json_depth == default.max_json_depth  # the stack's own bound
        else:
            assert getattr(own, limit.name) >= 1000 * getattr(default, limit.name), limit.name


def test_a_bundle_past_the_default_member_limit_exports(
    factory_raw: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever the reader's defaults, export reads its own output without them."""
    import verifier.bundle.reader as reader

    small = Limits(max_members=3, max_total_bytes=1000)
    monkeypatch.setattr(reader, "DEFAULT_LIMITS", small)
    monkeypatch.setattr(reader.Limits, "__init__", _defaults_to(reader.Limits.__init__, small))
    summary = export_bundle(
        ExportOptions(factory_raw, tmp_path / "public", archive=tmp_path / "public.tar.gz")
    )
    assert len(summary.files) > 3


def _defaults_to(init: Callable[..., None], small: Limits) -> Callable[..., None]:
    def patched(self: Limits, **given: Any) -> None:
        init(self, **({f.name: getattr(small, f.name) for f in fields(Limits)} | given))

    return patched


# --- reproducibility ----------------------------------------------------------------------


def _tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.mark.parametrize("signed", [False, True])
def test_exporting_twice_gives_the_same_bytes_of_every_file_and_the_archive(
    seed_raw: Path, tmp_path: Path, signed: bool
) -> None:
    key = signing.generate_key_pair(tmp_path / "keys").private if signed else None
    trees, archives = [], []
    for name in ("first", "second-with-another-name"):
        (tmp_path / name).mkdir()
        out, archive = tmp_path / name / f"{name}-out", tmp_path / name / f"{name}.tar.gz"
        export_bundle(ExportOptions(seed_raw, out, archive=archive, sign_key=key))
        trees.append(_tree(out))
        archives.append(archive.read_bytes())
        assert oct(os.stat(out).st_mode & 0o777) == "0o755"
    assert trees[0] == trees[1]
    assert archives[0] == archives[1]
    assert (layout.SIGNATURE in trees[0]) is signed
    listed = {line.split("  ", 1)[1] for line in trees[0][layout.SHA256SUMS].decode().splitlines()}
    unlisted = {layout.SHA256SUMS, layout.SIGNATURE} if signed else {layout.SHA256SUMS}
    assert set(trees[0]) == listed | unlisted


def _reference_check_treatments(file: str, kind: str, document: Any) -> None:
    """The plain walk (a stack of pending children) that `_check_treatments` replaced."""
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), document)]
    while stack:
        path, node = stack.pop()
        children: list[tuple[tuple[str | int, ...], Any]] = []
        if isinstance(node, dict):
            children = [((*path, key), value) for key, value in node.items()]
        elif isinstance(node, list):
            children = [((*path, index), value) for index, value in enumerate(node)]
        if children:
            stack.extend(children)
            continue
        treatment = treatment_of(kind, path)
        if treatment is None or treatment is Treatment.DROPPED:
            raise ExportError(f"{file}{json_pointer(*path)}")


def _first_untreated(check: Callable[[str, str, Any], None], file: str, document: Any) -> str:
    try:
        check(file, public_kind(file), document)
    except ExportError as exc:
        return exc.message.split(":", 1)[0]
    return ""


@settings(max_examples=60, deadline=None)
@given(spots=st.lists(st.integers(0, 10**6), min_size=0, max_size=4), empty=st.booleans())
def test_the_treatment_walk_names_the_field_the_plain_walk_names(
    spots: list[int], empty: bool
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        documents = assemble(load_raw(RawFactory().write(Path(tmp) / "raw"))).documents
    for file, document in documents.items():
        containers: list[Any] = []
        pending: list[Any] = [document]
        while pending:
            node = pending.pop()
            if isinstance(node, dict | list):
                containers.append(node)
                pending.extend(node.values() if isinstance(node, dict) else node)
        for n, spot in enumerate(spots):
            target = containers[spot % len(containers)]
            planted: Any = {} if empty else f"value {n}"
            if isinstance(target, dict):
                target[f"not_in_the_table_{n}"] = planted
            else:
                target.append(planted)
        expected = _first_untreated(_reference_check_treatments, file, document)
        assert _first_untreated(_check_treatments, file, document) == expected


class _Dict(dict[str, Any]):
    """Not JSON's own dict: the fast walk leaves it to the plain one."""


_PLANTED: list[Any] = [None, 0, 1.5, True, "", [], {}, [1, "x"], {"a": {"b": [None]}}]


@settings(max_examples=80, deadline=None)
@given(
    spots=st.lists(
        st.tuples(st.integers(0, 10**6), st.integers(0, len(_PLANTED) - 1), st.booleans()),
        max_size=4,
    ),
    odd=st.booleans(),
)
def test_the_fast_treatment_walk_passes_exactly_where_the_plain_walk_does(
    spots: list[tuple[int, int, bool]], odd: bool
) -> None:
    # `_all_treated` lets `_check_treatments` skip the plain walk: it must never pass a
    # document the plain walk refuses (and, on JSON's own types, refuse none it passes).
    with tempfile.TemporaryDirectory() as tmp:
        documents = assemble(load_raw(RawFactory().write(Path(tmp) / "raw"))).documents
    for file, document in documents.items():
        containers: list[Any] = []
        pending: list[Any] = [document]
        while pending:
            node = pending.pop()
            if isinstance(node, dict | list):
                containers.append(node)
                pending.extend(node.values() if isinstance(node, dict) else node)
        for n, (spot, which, known_key) in enumerate(spots):
            target = containers[spot % len(containers)]
            planted = json.loads(json.dumps(_PLANTED[which]))
            if isinstance(target, dict):
                key = next(iter(target), "x") if known_key and target else f"not_in_table_{n}"
                target[key] = planted
            else:
                target.append(planted)
        if odd:
            document = _Dict(document)
        passes = _first_untreated(_reference_check_treatments, file, document) == ""
        fast = _all_treated(public_kind(file), document)
        assert not fast or passes, file
        if not odd:
            assert fast == passes, file
        assert _first_untreated(_check_treatments, file, document) == _first_untreated(
            _reference_check_treatments, file, document
        )


def test_plain_copies_as_the_reference_copies_every_raw_document(seed_raw: Path) -> None:
    checked = 0
    for raw in (SAMPLE_RAW, seed_raw):
        capture = load_raw(raw)
        values: list[Any] = [capture.run.document, capture.manifest.document]
        values += [e.document for ex in capture.exchanges.values() for e in ex]
        for value in values:
            copy = plain(value)
            assert repr(copy) == repr(plain_reference(value))  # repr: True is not 1
            assert copy is not value
            checked += 1
    assert checked > 10


class _Str(str):
    pass


_plain_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=4),
    st.builds(_Str, st.text(max_size=4)),
)
_plain_keys = st.one_of(st.text(max_size=4), st.integers(-3, 3), st.booleans(), st.none())
_plain_values = st.recursive(
    _plain_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=4).map(tuple),
        st.dictionaries(_plain_keys, inner, max_size=4),
        st.dictionaries(_plain_keys, inner, max_size=4).map(MappingProxyType),
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(value=_plain_values)
def test_plain_copies_any_value_as_the_reference_does(value: Any) -> None:
    assert repr(plain(value)) == repr(plain_reference(value))


def test_export_collects_less_often_and_restores_the_collector(
    factory_raw: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = gc.get_threshold()
    seen: list[tuple[int, int, int]] = []
    build = exporter._build_files

    def recording(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.get_threshold())
        return build(*args, **kwargs)

    monkeypatch.setattr(exporter, "_build_files", recording)
    export_bundle(ExportOptions(factory_raw, tmp_path / "public"))
    assert seen[0][0] >= collector._GC_YOUNG and seen[0][1:] == before[1:]
    assert gc.get_threshold() == before
    with pytest.raises(UsageError):  # the target exists now: refused, the collector restored
        export_bundle(ExportOptions(factory_raw, tmp_path / "public"))
    assert gc.get_threshold() == before


def test_a_path_asked_again_is_numbered_as_the_plain_collector_numbered_it() -> None:
    """path() passes over a value it passed over or added before without its tests; an
    --allow value is numbered again each time (it is never added), as it always was."""
    from verifier.export.redact import _Collector

    def numbers(allowed: Sequence[str], calls: Sequence[str]) -> dict[str, str]:
        c = _Collector(set(), allowed)
        for value in calls:
            c.path(value)
        return {k.value: k.placeholder for k in c.values.values()}

    assert numbers([], ["/data/a", "/data/a", "//data/a", "/data/b"]) == {
        "/data/a": "/path/to/private-1",
        "/data/b": "/path/to/private-2",
    }
    assert numbers(["/data/a"], ["/data/a", "/data/a", "/data/b"]) == {
        "/data/b": "/path/to/private-3"
    }
    covered = numbers(
        [], ["/data/a/x", "/data/a", "/data/a/x", "/data/a/y", "/usr/lib", "/usr/lib"]
    )
    assert covered == {"/data/a/x": "/path/to/private-1", "/data/a": "/path/to/private-2"}


_ROWS = [row for side in ("public", "raw") for rows in _table(side).values() for row in rows]
_ANY_PART = st.one_of(
    st.sampled_from(sorted({part for pattern, _ in _ROWS for part in pattern})),
    st.integers(0, 12),
    st.sampled_from(["", "x", "0", "True", "\x00", "*", "**", "MLXCEL_X"]),
    st.booleans(),
)


@st.composite
def _paths(draw: st.DrawFn) -> tuple[Any, ...]:
    """A pattern of the table made a path ("*" any part, "**" any parts), or any parts."""
    if draw(st.booleans()):
        return tuple(draw(st.lists(_ANY_PART, max_size=7)))
    pattern, _ = draw(st.sampled_from(_ROWS))
    path: list[Any] = []
    for part in pattern:
        if part == "*":
            path.append(draw(_ANY_PART))
        elif part == "**":
            path += draw(st.lists(_ANY_PART, max_size=3))
        else:
            path.append(part)
    return tuple(path)


_KINDS = ["record", "experiment", "manifest", "ledger", "run", "server", "exchange", "log", "no"]


@given(kind=st.sampled_from(_KINDS), path=_paths())
def test_a_path_s_unspelled_parts_change_no_treatment(kind: str, path: tuple[Any, ...]) -> None:
    """treatment_of and raw_treatment_of look up a path with every part no pattern spells
    as one such part: the uncached table lookup of the path itself must agree."""
    assert treatment_of(kind, path) == _lookup.__wrapped__("public", kind, path)
    assert raw_treatment_of(kind, path) == _lookup.__wrapped__("raw", kind, path)
