"""Half of a large export's records loaded and built in a forked child give the plain
path's bundle, and the archive built and read back in a forked child the plain archive.

`exporter._build_in_two` (from `PARALLEL_MIN_RECORDS` records on) against
`exporter._build_in_one`, the plain path in one process: the same files byte for byte, the
same ledger counts, or the same error message, on the committed raw sample, the seed and
factory captures and hypothesis-planted private values (the generator of
test_export_properties). A child that fails, crashes or is interrupted only sends the work
back to the plain path; a parent that fails or is interrupted stops and reaps its child.
`raw.load_raw` with exchanges skipped plus `raw.load_exchanges` of those is `load_raw`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from children import no_children_left
from hypothesis import given, settings
from hypothesis import strategies as st
from rawfactory import RawFactory
from test_export_properties import PLANTED, planted_capture, privates

from verifier import forked
from verifier.errors import ExportError
from verifier.export import ExportOptions, export_bundle, exporter
from verifier.forked import ChildFailed, Forked
from verifier.raw import list_exchanges, load_exchanges, load_raw

REPO = Path(__file__).resolve().parents[2]
SAMPLE_RAW = REPO / "sample_bundles" / "raw" / "seed-mlxcel"

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")


@pytest.fixture
def forking(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every export of the test takes the two-process path (the calls are recorded)."""
    calls: list[str] = []
    original = exporter._build_in_two

    def recorded(*args: Any) -> Any:
        result = original(*args)
        calls.append("two" if result is not None else "fell back")
        return result

    monkeypatch.setattr(exporter, "PARALLEL_MIN_RECORDS", 1)
    monkeypatch.setattr(exporter, "can_fork", lambda: True)
    monkeypatch.setattr(exporter, "_build_in_two", recorded)
    yield calls
    assert no_children_left()


def _built(raw: Path, *, two: bool, allowed: tuple[str, ...] = ()) -> tuple[str, Any]:
    """("ok", files, counts, kept, records, conditions, progress) or ("error", message)."""
    options = ExportOptions(raw, raw.parent / "out", allowed=allowed)
    said: list[str] = []
    saved = exporter.PARALLEL_MIN_RECORDS, exporter.can_fork
    exporter.PARALLEL_MIN_RECORDS = 1 if two else 10**9
    exporter.can_fork = lambda: two
    try:
        return ("ok", (*exporter._build_files(options, None, said.append), said))
    except ExportError as exc:
        return ("error", exc.message)
    finally:
        exporter.PARALLEL_MIN_RECORDS, exporter.can_fork = saved


def _same_both_ways(raw: Path, calls: list[str], allowed: tuple[str, ...] = ()) -> tuple[str, Any]:
    plain = _built(raw, two=False, allowed=allowed)
    assert not calls
    assert _built(raw, two=True, allowed=allowed) == plain
    assert calls == (["two"] if plain[0] == "ok" else ["fell back"])
    calls.clear()
    return plain


def test_two_processes_give_the_plain_bundle_on_the_samples(
    forking: list[str], seed_raw: Path, factory_raw: Path, tmp_path: Path
) -> None:
    sample = tmp_path / "sample" / "raw"
    shutil.copytree(SAMPLE_RAW, sample)
    for raw in (sample, seed_raw, factory_raw):
        outcome, (files, counts, _kept, records, _conditions, said) = _same_both_ways(raw, forking)
        assert outcome == "ok" and counts and records >= 2 and len(files) > 4
        assert len(said) == len(set(said)) == 3  # reading, assembling, redacting: once each


def test_two_processes_give_the_plain_refusal(forking: list[str], tmp_path: Path) -> None:
    # a private value in evidence in the child's half, then in the parent's: the plain
    # path's message, naming the field, either way
    for index in (-1, 0):
        f = RawFactory()
        message = f.exchanges()[index]["response"]["body"]["choices"][0]["message"]
        message["content"] = "see /home/alice/notes"
        outcome, text = _same_both_ways(f.write(tmp_path / f"raw{index}" / "raw"), forking)
        assert outcome == "error" and "/response/choices/0/message/content" in text


@settings(max_examples=30, deadline=None)
@given(
    private=privates(),
    planted=PLANTED,
    allow=st.booleans(),
)
def test_two_processes_give_the_plain_bundle_on_planted_values(
    private: Any, planted: list[tuple[str, int]], allow: bool
) -> None:
    f, chosen = planted_capture(private, planted)
    allowed = (chosen[0][1][1],) if allow else ()
    with tempfile.TemporaryDirectory() as tmp:
        raw = f.write(Path(tmp) / "raw")
        plain = _built(raw, two=False, allowed=allowed)
        calls: list[bool] = []
        in_two = exporter._build_in_two

        def recorded(*args: Any) -> Any:
            result = in_two(*args)
            calls.append(result is not None)
            return result

        exporter._build_in_two = recorded
        try:
            assert _built(raw, two=True, allowed=allowed) == plain
        finally:
            exporter._build_in_two = in_two
    assert calls == [plain[0] == "ok"]  # two processes, or back to the plain path on an error
    assert no_children_left()


def test_a_failing_child_sends_the_work_back_to_the_plain_path(
    forking: list[str], factory_raw: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = _built(factory_raw, two=False)
    for failure in ("raise", "exit", "kill"):

        def broken(*_args: Any, failure: str = failure) -> Any:
            if failure == "raise":
                raise ExportError("the child's own error, never shown")
            if failure == "exit":
                os._exit(0)  # no value sent
            os.kill(os.getpid(), signal.SIGKILL)
            raise AssertionError("unreachable")

        monkeypatch.setattr(exporter, "_child_part", broken)
        assert _built(factory_raw, two=True) == plain
        assert forking == ["fell back"]
        forking.clear()


def test_an_interrupted_parent_stops_and_reaps_its_child(
    forking: list[str], factory_raw: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def slow(*args: Any) -> Any:
        args[-1].send([])  # the channel: the parent goes on to its own redaction
        time.sleep(60)

    def interrupted(*_args: Any, **_kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(exporter, "_child_part", slow)
    monkeypatch.setattr(exporter.Redactor, "redact_and_check", interrupted)
    started = time.monotonic()
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        export_bundle(ExportOptions(factory_raw, out, tmp_path / "out.tar.gz"))
    assert time.monotonic() - started < 30
    assert not out.exists() and not (tmp_path / "out.tar.gz").exists()
    assert forking == []  # interrupted, not fallen back


def test_the_two_process_export_publishes_the_plain_bytes(
    forking: list[str], factory_raw: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outputs = []
    for name, threshold in (("two", 1), ("one", 10**9)):
        monkeypatch.setattr(exporter, "PARALLEL_MIN_RECORDS", threshold)
        out = tmp_path / name
        export_bundle(ExportOptions(factory_raw, out, tmp_path / f"{name}.tar.gz"))
        found = [p for p in out.rglob("*") if p.is_file()]
        files = {p.relative_to(out).as_posix(): p.read_bytes() for p in found}
        assert "SHA256SUMS" in files
        outputs.append((files, (tmp_path / f"{name}.tar.gz").read_bytes()))
    assert forking == ["two", "fell back"]  # the second below the threshold: the plain path
    assert outputs[0] == outputs[1]


# ---- the archive, built, written and read back in a forked child during the verification


def _export_and_read(
    raw: Path, tmp_path: Path, name: str, archive_dir: Path | None = None
) -> tuple[dict[str, bytes], bytes]:
    out = tmp_path / name
    archive = (archive_dir or tmp_path) / f"{name}.tar.gz"
    export_bundle(ExportOptions(raw, out, archive))
    found = [p for p in out.rglob("*") if p.is_file()]
    assert oct(archive.stat().st_mode & 0o777) == "0o644"
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in found}, archive.read_bytes()


def test_the_archive_job_publishes_the_plain_archive(
    forking: list[str], factory_raw: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    jobs: list[str] = []
    original = exporter._archive_job
    monkeypatch.setattr(exporter, "_archive_job", lambda *a: jobs.append("child") or original(*a))
    forked_way = _export_and_read(factory_raw, tmp_path, "forked")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    other_folder = _export_and_read(factory_raw, tmp_path, "other", elsewhere)
    monkeypatch.setattr(exporter, "can_fork", lambda: False)
    plain_way = _export_and_read(factory_raw, tmp_path, "plain")
    assert forked_way == plain_way == other_folder
    assert jobs == []  # appended in the child, never seen here
    left = sorted(p.name for p in tmp_path.iterdir())
    expected = ["raw", "forked", "forked.tar.gz", "plain", "plain.tar.gz", "other", "elsewhere"]
    assert left == sorted(expected)
    assert [p.name for p in elsewhere.iterdir()] == ["other.tar.gz"]


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder another group needs root")
def test_the_archive_takes_the_group_of_its_folder(
    forking: list[str], factory_raw: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    jobs: list[bool] = []
    original = exporter._start_archive_job

    def recorded(*args: Any) -> Any:
        early, job = original(*args)
        jobs.append(job is not None)
        return early, job

    monkeypatch.setattr(exporter, "_start_archive_job", recorded)
    shared = tmp_path / "shared"
    shared.mkdir()
    group = os.getegid() + 1
    os.chown(shared, -1, group)
    shared.chmod(0o2775)  # setgid: what is made in it belongs to its group
    _export_and_read(factory_raw, tmp_path, "grouped", shared)
    assert (shared / "grouped.tar.gz").stat().st_gid == group
    assert jobs == [True]  # the archive was the forked job's


def test_a_failing_archive_job_sends_the_archive_back_to_the_plain_way(
    forking: list[str], factory_raw: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = _export_and_read(factory_raw, tmp_path, "first")
    for failure in ("raise", "exit"):

        def broken(*_args: Any, failure: str = failure) -> Any:
            if failure == "raise":
                raise OSError("the child's own error, never shown")
            os._exit(0)

        monkeypatch.setattr(exporter, "_archive_job", broken)
        assert _export_and_read(factory_raw, tmp_path, failure) == expected
    assert not [p for p in tmp_path.iterdir() if ".partial-" in p.name]


@pytest.mark.parametrize("tamper", ["changed", "missing", "extra", "not-gzip"])
def test_an_archive_the_job_reads_back_wrong_is_never_published(
    forking: list[str],
    factory_raw: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    tamper: str,
) -> None:
    from verifier.export.archive import build_archive

    def tampered(files: dict[str, bytes]) -> bytes:
        if tamper == "not-gzip":
            return b"not an archive"
        changed = dict(files)
        if tamper == "changed":
            changed["experiment.json"] = changed["experiment.json"][:-1] + b" "
        elif tamper == "missing":
            del changed["model-manifest.json"]
        else:
            changed["notes.txt"] = b"hello\n"
        return build_archive(changed)

    monkeypatch.setattr(exporter, "build_archive", tampered)
    with pytest.raises(ExportError, match="archive") as raised:
        export_bundle(ExportOptions(factory_raw, tmp_path / "out", tmp_path / "out.tar.gz"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["raw"]
    # the plain way's message, word for word but for the temporary file's random name
    monkeypatch.setattr(exporter, "can_fork", lambda: False)
    with pytest.raises(ExportError) as plain:
        export_bundle(ExportOptions(factory_raw, tmp_path / "out", tmp_path / "out.tar.gz"))
    named = re.compile(r"\S*\.tar\.gz")
    assert named.sub("ARCHIVE", raised.value.message) == named.sub("ARCHIVE", plain.value.message)


@pytest.mark.parametrize("step", ["_write_tree", "_verify", "_check_directory_sums"])
def test_an_interrupt_beside_the_archive_job_stops_it_and_leaves_nothing(
    forking: list[str],
    factory_raw: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    step: str,
) -> None:
    def interrupted(*_args: Any, **_kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(exporter, step, interrupted)
    with pytest.raises(KeyboardInterrupt):
        export_bundle(ExportOptions(factory_raw, tmp_path / "out", tmp_path / "out.tar.gz"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["raw"]


# ---- the flushes to disk, in a forked child during the verification


def _tree(root: Path) -> set[str]:
    """Every file and directory under `root`, root included ("."), relative to it."""
    return {".", *(p.relative_to(root).as_posix() for p in root.rglob("*"))}


@pytest.fixture
def each_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each file flushed on its own, as where no syncfs flushes the file system whole
    (`verifier.export.flush`)."""
    monkeypatch.setattr(exporter, "whole_file_system", lambda root: None)


def _no_flushing_child(monkeypatch: pytest.MonkeyPatch) -> None:
    """No child to be had for the flushes (the others fork)."""
    real = exporter.Forked

    def no_fork(work: Any) -> Any:
        if getattr(work, "func", None) is exporter._fsync_child:
            raise ChildFailed
        return real(work)

    monkeypatch.setattr(exporter, "Forked", no_fork)


def _nothing_published(raw: Path, tmp_path: Path, failure: str) -> None:
    """The export fails with the flush's error, or the silent child's, and leaves nothing."""
    expected = "Input/output error" if failure == "refused" else "ended without saying it had"
    with pytest.raises(ExportError, match=expected) as raised:
        export_bundle(ExportOptions(raw, tmp_path / "out", tmp_path / "out.tar.gz"))
    assert raised.value.message.endswith("nothing was published")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["raw"]


def _syncfs_here(tmp_path: Path) -> None:
    with tempfile.TemporaryDirectory(dir=tmp_path) as folder:
        descriptor = exporter.whole_file_system(Path(folder))
        if descriptor is None:
            pytest.skip("no syncfs for this file system here (Linux 5.17+, a local one)")
        os.close(descriptor)


def test_the_flushes_run_in_a_child_and_leave_verify_free_to_fork(
    each_file: None,
    forking: list[str],
    factory_raw: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every file and directory written is flushed, by a child: no thread runs in this
    process while the bundle is verified, so verify may fork a child of its own."""
    flushed = tmp_path / "flushed"  # written by the child: its calls are not seen here
    original = exporter._fsync_all

    def recorded(paths: list[Path], stop: Any) -> None:
        with flushed.open("a") as listing:
            listing.writelines(f"{os.getpid()} {path}\n" for path in paths)
        original(paths, stop)

    threads_when_verified: list[int] = []
    verify = exporter.verify_path

    def counted(*args: Any) -> Any:
        threads_when_verified.append(threading.active_count())
        return verify(*args)

    monkeypatch.setattr(exporter, "_fsync_all", recorded)
    monkeypatch.setattr(exporter, "verify_path", counted)
    out = tmp_path / "out"
    export_bundle(ExportOptions(factory_raw, out, tmp_path / "out.tar.gz"))
    assert threads_when_verified == [1]
    lines = [line.split(" ", 1) for line in flushed.read_text().splitlines()]
    here = str(os.getpid())
    assert [path for pid, path in lines if pid == here] == [str(tmp_path)]  # once published
    assert len({pid for pid, _ in lines if pid != here}) == 1
    written = [Path(path) for pid, path in lines if pid != here]
    staging = min(written, key=lambda path: len(path.parts))  # the bundle's own folder
    assert len(written) == len(set(written))
    assert {"." if p == staging else p.relative_to(staging).as_posix() for p in written} == _tree(
        out
    )


def test_one_syncfs_in_a_child_flushes_the_bundle_where_it_can(
    forking: list[str], factory_raw: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the file system can be flushed whole (here: Linux 5.17+, a local file system),
    one syncfs does it, in a child, on a descriptor of the bundle's folder opened before
    anything was written in it; no file is flushed on its own but the folders the bundle
    and the archive are published in."""
    _syncfs_here(tmp_path)
    calls = tmp_path / "calls"  # written by the child: its calls are not seen here
    opened: list[tuple[Path, list[str]]] = []
    whole, syncfs, each = exporter.whole_file_system, exporter.syncfs, exporter._fsync_all

    def opening(root: Path) -> int | None:
        opened.append((root, os.listdir(root)))
        return whole(root)

    def recorded_syncfs(descriptor: int, root: Path) -> None:
        same = os.path.samefile(f"/proc/self/fd/{descriptor}", root)
        with calls.open("a") as listing:
            listing.write(f"{os.getpid()} syncfs {root} {same}\n")
        syncfs(descriptor, root)

    def recorded_each(paths: list[Path], stop: Any) -> None:
        with calls.open("a") as listing:
            listing.writelines(f"{os.getpid()} fsync {path} True\n" for path in paths)
        each(paths, stop)

    monkeypatch.setattr(exporter, "whole_file_system", opening)
    monkeypatch.setattr(exporter, "syncfs", recorded_syncfs)
    monkeypatch.setattr(exporter, "_fsync_all", recorded_each)
    out = tmp_path / "out"
    export_bundle(ExportOptions(factory_raw, out, tmp_path / "out.tar.gz"))
    ((staging, listed),) = opened
    assert listed == []  # nothing written in it yet
    lines = [line.split(" ") for line in calls.read_text().splitlines()]
    here = str(os.getpid())
    assert [(pid == here, kind, path, same) for pid, kind, path, same in lines] == [
        (False, "syncfs", str(staging), "True"),
        (True, "fsync", str(tmp_path), "True"),  # the folder it is published in
    ]
    assert (out / "SHA256SUMS").is_file()


def test_a_syncfs_refused_here_where_no_child_can_be_had_publishes_nothing(
    forking: list[str], factory_raw: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _syncfs_here(tmp_path)
    _no_flushing_child(monkeypatch)

    def fails(descriptor: int, root: Path) -> None:
        raise OSError(5, "Input/output error", str(root))

    monkeypatch.setattr(exporter, "syncfs", fails)
    _nothing_published(factory_raw, tmp_path, "refused")


@pytest.mark.parametrize("failure", [None, "refused"])
def test_the_folder_opened_for_syncfs_is_closed_after_the_export(
    forking: list[str],
    factory_raw: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    failure: str | None,
) -> None:
    _syncfs_here(tmp_path)
    opened: list[int] = []
    whole = exporter.whole_file_system

    def opening(root: Path) -> int | None:
        descriptor = whole(root)
        assert descriptor is not None
        opened.append(descriptor)
        return descriptor

    def fails(descriptor: int, root: Path) -> None:
        raise OSError(5, "Input/output error", str(root))

    monkeypatch.setattr(exporter, "whole_file_system", opening)
    if failure is not None:
        monkeypatch.setattr(exporter, "syncfs", fails)
    before = set(os.listdir("/proc/self/fd"))
    options = ExportOptions(factory_raw, tmp_path / "out", tmp_path / "out.tar.gz")
    if failure is None:
        export_bundle(options)
    else:
        with pytest.raises(ExportError, match="Input/output error"):
            export_bundle(options)
    assert len(opened) == 1
    assert set(os.listdir("/proc/self/fd")) == before
    with pytest.raises(OSError, match="Bad file descriptor"):
        os.fstat(opened[0])


def test_one_syncfs_here_where_no_child_can_be_had(
    forking: list[str], factory_raw: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _syncfs_here(tmp_path)
    here: list[tuple[int, Path]] = []
    syncfs = exporter.syncfs

    def recorded(descriptor: int, root: Path) -> None:
        here.append((os.getpid(), root))
        syncfs(descriptor, root)

    _no_flushing_child(monkeypatch)
    monkeypatch.setattr(exporter, "syncfs", recorded)
    export_bundle(ExportOptions(factory_raw, tmp_path / "out", tmp_path / "out.tar.gz"))
    assert [(pid, root.parent) for pid, root in here] == [(os.getpid(), tmp_path)]


def test_flushes_are_made_here_where_no_child_can_be_had(
    each_file: None,
    forking: list[str],
    factory_raw: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No child to be had: every file is flushed on threads here, and the bundle
    published is the plain one."""
    here: list[Path] = []
    original = exporter._fsync_all

    def recorded(paths: list[Path], stop: Any) -> None:
        here.extend(paths)
        original(paths, stop)

    _no_flushing_child(monkeypatch)
    monkeypatch.setattr(exporter, "_fsync_all", recorded)
    without = _export_and_read(factory_raw, tmp_path, "without")
    flushed = set(here) - {tmp_path}  # (then the folder the bundle was published in)
    assert len(flushed) == len(_tree(tmp_path / "without"))
    monkeypatch.setattr(exporter, "can_fork", lambda: False)
    assert without == _export_and_read(factory_raw, tmp_path, "plain")


@pytest.mark.parametrize("failure", ["refused", "no answer"])
@pytest.mark.parametrize("flush", ["whole", "each"])
def test_a_child_that_did_not_flush_everything_means_nothing_is_published(
    forking: list[str],
    factory_raw: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    flush: str,
    failure: str,
) -> None:
    """Linux reports a write-back error to one flush only: flushing again after the
    child's error could succeed over lost data, so its error is the export's, and a child
    that ends without an answer publishes nothing either; with one syncfs of the file
    system, or a fsync of each file."""
    parent = os.getpid()
    original = exporter._fsync_all

    def fails_in_the_child(paths: list[Path], stop: Any) -> None:
        if os.getpid() != parent:
            original(paths[:3], stop)
            if failure == "no answer":
                os._exit(0)
            raise OSError(5, "Input/output error", str(paths[3]))
        original(paths, stop)  # here it would succeed

    def syncfs_fails(descriptor: int, root: Path) -> None:
        assert os.getpid() != parent
        if failure == "no answer":
            os._exit(0)
        raise OSError(5, "Input/output error", str(root))

    if flush == "whole":
        _syncfs_here(tmp_path)
        monkeypatch.setattr(exporter, "syncfs", syncfs_fails)
    else:
        monkeypatch.setattr(exporter, "whole_file_system", lambda root: None)
        monkeypatch.setattr(exporter, "_fsync_all", fails_in_the_child)
    _nothing_published(factory_raw, tmp_path, failure)


def test_an_interrupt_while_the_flushes_are_awaited_stops_their_child(
    forking: list[str], factory_raw: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def slow(*_args: Any) -> None:
        time.sleep(60)

    def interrupt(*_args: Any) -> None:
        raise KeyboardInterrupt

    wait = exporter._Syncing.wait

    def interrupted_wait(self: Any) -> None:
        signal.setitimer(signal.ITIMER_REAL, 0.3)  # lands while the child is awaited
        wait(self)

    monkeypatch.setattr(exporter, "_fsync_child", slow)
    monkeypatch.setattr(exporter._Syncing, "wait", interrupted_wait)
    previous = signal.signal(signal.SIGALRM, interrupt)
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            export_bundle(ExportOptions(factory_raw, tmp_path / "out", tmp_path / "out.tar.gz"))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert time.monotonic() - started < 30
    assert sorted(p.name for p in tmp_path.iterdir()) == ["raw"]
    # (the fixture checks that no child is left, running or unreaped)


def test_the_published_names_are_flushed_to_disk(
    factory_raw: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out, archive = tmp_path / "out", elsewhere / "out.tar.gz"
    seen: list[tuple[Path, bool]] = []
    original = exporter._fsync_all

    def recorded(paths: list[Path], stop: Any) -> None:
        seen.extend((path, out.is_dir() and archive.is_file()) for path in paths)
        original(paths, stop)

    monkeypatch.setattr(exporter, "_fsync_all", recorded)
    export_bundle(ExportOptions(factory_raw, out, archive))
    assert (tmp_path, True) in seen and (elsewhere, True) in seen


def test_a_flush_the_disk_refuses_is_an_error_and_leaves_nothing(
    each_file: None,
    forking: list[str],
    factory_raw: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refused(paths: list[Path], stop: Any) -> None:
        raise OSError(28, "No space left on device", str(paths[0]))

    monkeypatch.setattr(exporter, "_fsync_all", refused)
    with pytest.raises(ExportError, match="No space left on device; nothing was published"):
        export_bundle(ExportOptions(factory_raw, tmp_path / "out", tmp_path / "out.tar.gz"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["raw"]


# ---- the raw capture loaded in two parts


def test_a_capture_loaded_in_two_parts_is_the_capture_loaded_whole(
    seed_raw: Path, factory_raw: Path, tmp_path: Path
) -> None:
    sample = tmp_path / "sample" / "raw"
    shutil.copytree(SAMPLE_RAW, sample)
    for raw in (sample, seed_raw, factory_raw):
        whole = load_raw(raw)
        listed = list_exchanges(raw)
        in_order = [e for c in whole.run.conditions for e in whole.exchanges[c.id]]
        assert [(f.condition, f.number) for f in listed] == [
            (e.condition, e.sequence) for e in in_order
        ]
        assert [f.relative for f in listed] == [e.file for e in in_order]
        for cut in range(len(listed) + 1):
            theirs = listed[cut:]
            part = load_raw(raw, frozenset(f.relative for f in theirs))
            assert load_exchanges(raw, theirs) == in_order[cut:]
            mine = [e for c in part.run.conditions for e in part.exchanges[c.id]]
            assert mine == in_order[:cut]
            assert (part.run, part.manifest, part.servers, part.logs) == (
                whole.run,
                whole.manifest,
                whole.servers,
                whole.logs,
            )


def test_an_exchange_the_child_loads_is_checked_as_load_raw_checks_it(
    factory_raw: Path,
) -> None:
    exchange = factory_raw / "conditions" / "c1" / "exchanges" / "002.json"
    document = json.loads(exchange.read_text())
    for field, value, message in [
        ("sequence", 7, "/sequence: is not 2"),
        ("condition", "c9", "/condition: is not 'c1'"),
        ("server_instance", 9, "/server_instance: names server 9"),
        ("phase", 3, "not a valid raw-exchange document"),
    ]:
        exchange.write_text(json.dumps({**document, field: value}))
        listed = [f for f in list_exchanges(factory_raw) if f.number == 2]
        with pytest.raises(ExportError) as whole:
            load_raw(factory_raw)
        with pytest.raises(ExportError) as part:
            load_exchanges(factory_raw, listed)
        assert part.value.message == whole.value.message
        assert message in whole.value.message


def test_no_process_to_be_had_is_the_plain_way(
    forking: list[str], factory_raw: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = _export_and_read(factory_raw, tmp_path, "first")
    opened = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None

    def no_fork() -> int:
        raise BlockingIOError("fork: Resource temporarily unavailable")

    monkeypatch.setattr(forked.os, "fork", no_fork)
    with pytest.raises(ChildFailed):
        Forked(lambda _c: None)
    forking.clear()
    assert _export_and_read(factory_raw, tmp_path, "again") == expected
    assert forking == ["fell back"]
    if opened is not None:
        assert len(os.listdir("/proc/self/fd")) == opened  # no pipe left open
    assert not [p for p in tmp_path.iterdir() if ".partial-" in p.name]
