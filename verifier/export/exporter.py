"""Export orchestration: build the bundle beside the target, verify it, then move it in place.

Nothing appears at `--out` or `--archive` unless the whole bundle was written and verified;
a failure or an interrupt (Ctrl-C included) removes every partial file.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import tempfile
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from verifier import layout, schemas, signing
from verifier.atomic import link_into_place
from verifier.bundle.reader import Limits, read_bundle
from verifier.checksums import format_sums
from verifier.collector import fewer_collections
from verifier.errors import EvidenceError, ExportError, UsageError
from verifier.export.archive import build_archive
from verifier.export.assemble import Removal, assemble, assemble_records
from verifier.export.flush import syncfs, whole_file_system
from verifier.export.redact import LedgerEntry, Redactor, collect_private_values
from verifier.export.serialize import dumps_public, dumps_public_each
from verifier.forked import Channel, ChildFailed, Forked, can_fork, write_all
from verifier.leaks import ALLOWED_PLACEHOLDER, scan_bytes
from verifier.model import Finding
from verifier.raw import (
    ExchangeFile,
    RawCapture,
    list_exchanges,
    load_exchanges,
    load_raw,
)
from verifier.verify import VerifyOptions, verify_path

Progress = Callable[[str], None]


@dataclass(frozen=True)
class ExportOptions:
    """What export was asked: the raw dir, the outputs, a key and what is or is not private."""

    raw_dir: Path
    out_dir: Path
    archive: Path | None = None
    sign_key: Path | None = None
    private_paths: tuple[str, ...] = ()
    keep_env: tuple[str, ...] = ()
    allowed: tuple[str, ...] = ()
    """Values declared not private (`--allow`): kept where found, and said so in the ledger."""


@dataclass(frozen=True)
class ExportSummary:
    """What export wrote and what it removed (counts only, never the values)."""

    out_dir: Path
    archive: Path | None
    files: tuple[str, ...]
    conditions: tuple[str, ...]
    records: int
    redactions: Mapping[str, int] = field(default_factory=dict)
    """Ledger category -> number of replacements or removals."""
    kept: Mapping[str, int] = field(default_factory=dict)
    """Ledger category -> number of values kept where found, as `--allow` said."""
    signed: bool = False
    verdict: str = ""


def _refuse_existing(options: ExportOptions) -> None:
    if not options.raw_dir.is_dir():
        raise UsageError(f"{options.raw_dir} is not a raw capture directory")
    targets = [options.out_dir] + ([options.archive] if options.archive else [])
    for target in targets:
        if str(target) == "-":
            raise UsageError(
                f"{target}: export writes files, not to standard output; name a path "
                "(./- for a file of that name)"
            )
        if os.path.lexists(target):
            raise UsageError(f"{target} already exists; export never overwrites. Remove it first.")
        parent = target.parent
        if not parent.is_dir():
            if os.path.lexists(parent):
                raise UsageError(f"{parent} is not a directory")
            raise UsageError(f"{parent} does not exist; create it first")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise UsageError(f"{parent}: no permission to write there")
        if parent.resolve().is_relative_to(options.raw_dir.resolve()):
            # Public files among the private ones: a later export would read them as part
            # of the capture (a folder under conditions/ breaks it), and a copy of the
            # capture would carry the public bundle along.
            raise UsageError(
                f"{target} is inside the raw capture {options.raw_dir}: write the public "
                "bundle outside it"
            )
    if options.archive is not None and options.archive.absolute() == options.out_dir.absolute():
        raise UsageError("--out and --archive must be different paths")


def _ledger_document(entries: list[LedgerEntry]) -> dict[str, Any]:
    ordered = sorted(entries, key=lambda e: (e.file, e.pointer, e.category, e.placeholder))
    return {
        "schema_version": schemas.SCHEMA_VERSION,
        "kind": "evidence.redaction-ledger",
        "entries": [e.to_json() for e in ordered],
    }


def _check_files(files: Mapping[str, bytes]) -> None:
    """The leak patterns over the published files that are not JSON (scanned as documents)."""
    for name, data in sorted(files.items()):
        if name == layout.SIGNATURE or name.endswith(".json"):
            continue
        hits = scan_bytes(data)
        if hits:
            raise ExportError(
                f"{name}: possible {hits[0].category} ({hits[0].excerpt}) in the written bundle; "
                "nothing was published"
            )


_OWN_OUTPUT = Limits(
    max_members=10**7,
    max_member_bytes=2**40,
    max_total_bytes=2**40,
    max_ratio=float("inf"),
    max_json_values=10**10,
)


def _verify(path: Path, public_key: bytes | None) -> str:
    """Run the real verifier over what was written; refuse to publish on any error finding."""
    with tempfile.TemporaryDirectory(prefix="evidence-export-key-") as keys:
        key_path = None
        if public_key is not None:
            key_path = Path(keys) / "public.pem"
            key_path.write_bytes(public_key)
        try:
            # Export wrote these files itself: only the reading limits for strangers' bundles
            # are lifted, every check still runs.
            result = verify_path(path, VerifyOptions(public_key=key_path, limits=_OWN_OUTPUT))
        except EvidenceError as exc:
            raise ExportError(f"the exported bundle cannot be read back: {exc.message}") from None
    errors: list[Finding] = [f for f in result.findings if f.is_error]
    if errors or not result.verified:
        lines = [f"  {f.file or ''}{f.pointer or ''}: [{f.check}] {f.message}" for f in errors[:10]]
        more = f"\n  ... and {len(errors) - 10} more" if len(errors) > 10 else ""
        raise ExportError(
            "the exported bundle does not verify; nothing was published:\n"
            + ("\n".join(lines) or "  no classification")
            + more
        )
    return str(result.verdict)


def _check_directory_sums(root: Path, files: Mapping[str, bytes]) -> None:
    """The SHA256SUMS the verifier checked the directory against is the one export made.

    With it, a directory that verifies (every file listed, every hash matching, no file
    unlisted) holds exactly `files`.
    """
    try:
        on_disk = (root / layout.SHA256SUMS).read_bytes()
    except OSError as exc:
        raise ExportError(f"the exported {layout.SHA256SUMS} cannot be read back: {exc}") from None
    if on_disk != files[layout.SHA256SUMS]:
        raise ExportError(f"the exported {layout.SHA256SUMS} is not the one written")


def _check_archive(path: Path, files: Mapping[str, bytes]) -> None:
    """The archive, read back from disk by verify's own reader, holds the verified files.

    Verify judges what its reader returns, the files and the reader's safety findings,
    whatever their container (the path is only a label): an archive that reads back to
    exactly the files of the verified directory, byte for byte, with no finding, gets the
    directory's verdict. So the archive is read back in full (every gzip and tar rule the
    reader enforces) and compared, not verified a second time.
    """
    try:
        loaded = read_bundle(path, _OWN_OUTPUT)
    except EvidenceError as exc:
        raise ExportError(f"the exported archive cannot be read back: {exc.message}") from None
    if loaded.findings:
        first = loaded.findings[0]
        raise ExportError(
            f"the exported archive does not read back safely; nothing was published: "
            f"{first.file or ''}: {first.message}"
        )
    names = sorted(files)
    if sorted(loaded.files) != names:
        raise ExportError(
            "the exported archive does not hold the files of the bundle; nothing was published"
        )
    for name in names:
        if loaded.files[name] != files[name]:
            raise ExportError(
                f"the exported archive's {name} differs from the bundle's; nothing was published"
            )


_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_SYNC_THREADS = 16


def _flush_written(paths: list[Path], stop: threading.Event, whole: int | None, root: Path) -> None:
    """Every one of `paths` (written below `root`) on disk: the file system of `whole`
    flushed whole (one `syncfs`, `verifier.export.flush`), or where there is none, each
    path flushed (`_fsync_all`)."""
    if whole is None:
        _fsync_all(paths, stop)
    else:
        syncfs(whole, root)


def _fsync_all(paths: list[Path], stop: threading.Event) -> None:
    for path in paths:
        if stop.is_set():
            return
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _write_tree(root: Path, files: Mapping[str, bytes]) -> list[Path]:
    """Write every file (0644, directories 0755); the files and directories written, to be
    flushed to disk (`_Syncing`) before anything is published."""
    os.chmod(root, 0o755)  # noqa: S103 - a public bundle; mkdtemp creates 0700
    directories = {root}
    written: list[Path] = []
    for name, data in files.items():
        target = root.joinpath(*name.split("/"))
        if target.parent not in directories:
            target.parent.mkdir(parents=True, exist_ok=True)
            directories.update(p for p in target.parents if p.is_relative_to(root))
        fd = os.open(target, _FILE_FLAGS, 0o644)
        try:
            write_all(fd, data)
            os.fchmod(fd, 0o644)
        finally:
            os.close(fd)
        written.append(target)
    for directory in directories:
        os.chmod(directory, 0o755)  # noqa: S103 - a public bundle
    return [*written, *directories]


class _Syncing:
    """The flushes to disk of the written files and directories, started at once and
    awaited (`wait`) before anything is published.

    Where one `syncfs` flushes the file system the bundle is on (`whole`, a descriptor of
    its folder opened before anything was written in it: `flush.whole_file_system`), that
    is the flush; else each file and directory is flushed on its own.

    Each flush waits on the disk, so they run beside the verification: on a large bundle,
    in a forked child (any process's fsync flushes the file), so that this process keeps
    no thread (verify forks a child of its own only where no thread runs); else, or where
    no child can be forked, on threads of `pool`, together (the file system commits them
    at once). A child is not a shortcut that may fail here: Linux reports a write-back
    error to one fsync only, so flushing again after a child that failed could succeed
    over lost data. The child's error is raised here, and a child that ends without an
    answer means nothing is published.
    """

    def __init__(
        self,
        paths: list[Path],
        pool: ThreadPoolExecutor,
        stop: threading.Event,
        *,
        fork: bool,
        whole: int | None,
        root: Path,
    ) -> None:
        self._job: Forked[tuple[int, str, str] | None] | None = None
        self._threads: list[Future[None]] = []
        if fork and can_fork():
            with contextlib.suppress(ChildFailed):  # no child to be had: threads instead
                self._job = Forked(functools.partial(_fsync_child, paths, whole, root))
        if self._job is None and whole is not None:
            self._threads = [pool.submit(_flush_written, paths, stop, whole, root)]
        elif self._job is None:
            chunks = [paths[i::_SYNC_THREADS] for i in range(_SYNC_THREADS)]
            self._threads = [pool.submit(_fsync_all, chunk, stop) for chunk in chunks if chunk]

    def wait(self) -> None:
        """Once every file and directory is on disk; a flush's OSError is raised here."""
        if self._job is not None:
            try:
                failed = self._job.result()  # (an interrupt: `cancel` stops the child)
            except ChildFailed:
                self._job = None
                raise ExportError(
                    "the process flushing the bundle to disk ended without saying it had; "
                    "nothing was published"
                ) from None
            self._job = None
            if failed is not None:
                number, message, path = failed
                raise OSError(number, message, path or None)
        for sync in self._threads:
            sync.result()

    def cancel(self) -> None:
        if self._job is not None:
            self._job.cancel()
            self._job = None


def _fsync_child(
    paths: list[Path], whole: int | None, root: Path, _channel: Channel
) -> tuple[int, str, str] | None:
    """In the child: every flush; the first one refused, as (errno, message, path)."""
    try:
        _flush_written(paths, threading.Event(), whole, root)
    except OSError as exc:
        return exc.errno or 0, exc.strerror or str(exc), str(exc.filename or "")  # (picklable)
    return None


PARALLEL_MIN_RECORDS = 2_000
"""From this many records on, a forked child loads and builds a share of them (`_build_in_two`)."""

CHILD_SHARE = 0.62
"""The share of the exchange files the child loads and builds: more than half, as this
process also loads the rest of the capture (its servers), collects the private values,
builds and redacts the experiment document and writes the ledger. Balanced on the
10,024-record capture of `make bench` (three timed runs each, interleaved): at 0.62 both
ended their parts within 0.05-0.35 s of each other and the files were built 3.5-3.8 s in;
at 0.70 the child ended 0.5-0.9 s after this process, 4.0-5.0 s in. (Before the known
values' patterns were compiled only where needed, this process's part was 1 s longer and
0.70 balanced it.)"""

Built = tuple[dict[str, bytes], list[LedgerEntry]]


def _build_files(
    options: ExportOptions, key: Ed25519PrivateKey | None, progress: Progress
) -> tuple[dict[str, bytes], Counter[str], Counter[str], int, tuple[str, ...]]:
    """The bundle's bytes by path; the redaction counts and the counts of values kept
    (`--allow`), by category; the record count; the conditions."""
    said: list[str] = []

    def once(message: str) -> None:  # a fallback to the plain path does not say it again
        if message not in said:
            said.append(message)
            progress(message)

    once(f"reading the raw capture {options.raw_dir}")
    built = _build_in_two(options, once) if can_fork() else None
    if built is None:
        built = _build_in_one(options, once)
    files, ledger, records, conditions = built
    files[layout.SHA256SUMS] = format_sums(files)
    if key is not None:
        files[layout.SIGNATURE] = signing.sign(files[layout.SHA256SUMS], key)
    _check_files(files)
    counts: Counter[str] = Counter()
    kept: Counter[str] = Counter()
    for entry in ledger:  # a value allowed is in the ledger too, but was not removed
        (kept if entry.placeholder == ALLOWED_PLACEHOLDER else counts)[entry.category] += (
            entry.count
        )
    return files, counts, kept, records, conditions


def _check_outcome(options: ExportOptions, raw: RawCapture) -> None:
    outcome = raw.run.document.get("outcome", "completed")
    if outcome != "completed":
        # A broken-off capture is kept privately for diagnosis; it is not evidence.
        raise ExportError(
            f"{options.raw_dir} is a capture that did not complete (outcome: {outcome}); "
            "run the capture again and export the completed one"
        )


def _redactor(raw: RawCapture, options: ExportOptions, other_urls: Sequence[str] = ()) -> Redactor:
    values = collect_private_values(
        raw,
        private_paths=options.private_paths,
        public_env=options.keep_env,
        allowed=options.allowed,
        other_urls=other_urls,
    )
    return Redactor(values, options.allowed)


def _say_redacting(redactor: Redactor, progress: Progress) -> None:
    progress(f"redacting, field by field, with {len(redactor.known)} known private values")


def _with_ledger(
    documents: dict[str, bytes], removals: Iterable[Removal], ledger: Iterable[LedgerEntry]
) -> Built:
    """The files in name order, the ledger among them: what assembly removed, then `ledger`."""
    removed = [LedgerEntry(r.category, r.file, r.pointer, r.count, r.placeholder) for r in removals]
    entries = [*removed, *ledger]
    documents[layout.REDACTION_LEDGER] = dumps_public(_ledger_document(entries))
    return {name: documents[name] for name in sorted(documents)}, entries


def _build_in_one(
    options: ExportOptions, progress: Progress
) -> tuple[dict[str, bytes], list[LedgerEntry], int, tuple[str, ...]]:
    """The plain path: the whole capture loaded, assembled, redacted and serialized here."""
    raw = load_raw(options.raw_dir)
    _check_outcome(options, raw)
    progress("assembling the public documents")
    assembled = assemble(raw, options.keep_env)
    redactor = _redactor(raw, options)
    _say_redacting(redactor, progress)
    files, ledger = _redacted_files(redactor, assembled.documents, assembled.sources)
    records = sum(len(x) for x in raw.exchanges.values())
    conditions = tuple(c.id for c in raw.run.conditions)
    return (*_with_ledger(files, assembled.removals, ledger), records, conditions)


def _redacted_files(
    redactor: Redactor, documents: dict[str, dict[str, Any]], sources: dict[str, str]
) -> Built:
    """The documents redacted and serialized, with the ledger entries of their redaction."""
    redacted, replaced, allowed = redactor.redact_and_check(documents, sources)
    files = dict(zip(redacted, dumps_public_each(list(redacted.values())), strict=True))
    return files, [*replaced, *allowed]


def _child_part(
    root: Path, listed: list[ExchangeFile], allowed: Sequence[str], channel: Channel
) -> Built:
    """In the child: load the exchanges of `listed`; send their request URLs (the host names
    in them are private values); assemble their records; receive the private values;
    redact and serialize the records."""
    exchanges = load_exchanges(root, listed)
    channel.send(sorted({e.request_url for e in exchanges}))
    documents, sources = assemble_records(exchanges)
    known = channel.receive()
    return _redacted_files(Redactor(known, allowed), documents, sources)


def _build_in_two(
    options: ExportOptions, progress: Progress
) -> tuple[dict[str, bytes], list[LedgerEntry], int, tuple[str, ...]] | None:
    """`_build_in_one`'s files, ledger and counts, the last `CHILD_SHARE` of the exchange
    files loaded and built in a forked child; None below `PARALLEL_MIN_RECORDS` records and on any
    failure, and the plain path then runs (and reports the error).

    The child loads its exchanges as `load_raw` would (the same reads and checks) and sends
    their request URLs, which `collect_private_values` reads host names from; this process
    loads the rest of the capture, collects the private values and sends them back. Each
    record is then assembled, redacted and serialized from its own exchange with the same
    detectors, so the halves give the plain path's files. The ledger is sorted when
    written; entries sort by file first, and no file is in both halves, so the order of the
    halves' entries changes nothing. Refusals and every other error stop one half or the
    other: the plain path then runs from the start, so the error reported, and its
    message, are the plain path's own.
    """
    try:
        listed = list_exchanges(options.raw_dir)
    except Exception:  # the plain path reports it
        return None
    if len(listed) < PARALLEL_MIN_RECORDS:
        return None
    theirs = listed[round(len(listed) * (1 - CHILD_SHARE)) :]
    try:
        child = Forked(functools.partial(_child_part, options.raw_dir, theirs, options.allowed))
    except ChildFailed:
        return None
    try:
        raw = load_raw(options.raw_dir, frozenset(f.relative for f in theirs))
        _check_outcome(options, raw)
        progress("assembling the public documents")
        redactor = _redactor(raw, options, child.receive())
        child.send(redactor.known)
        assembled = assemble(raw, options.keep_env)
        _say_redacting(redactor, progress)
        files, ours = _redacted_files(redactor, assembled.documents, assembled.sources)
        their_files, their_ledger = child.result()
    except ChildFailed:
        return None
    except Exception:  # the plain path reports it
        child.cancel()
        return None
    except BaseException:
        child.cancel()
        raise
    if not files.keys().isdisjoint(their_files):
        return None  # two exchanges of one record name: the plain path decides
    files.update(their_files)
    records = sum(len(x) for x in raw.exchanges.values()) + len(theirs)
    conditions = tuple(c.id for c in raw.run.conditions)
    ledger = [*ours, *their_ledger]
    return (*_with_ledger(files, assembled.removals, ledger), records, conditions)


def _public_pem(key: Ed25519PrivateKey | None) -> bytes | None:
    if key is None:
        return None
    return key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _remove(path: Path | None) -> None:
    if path is None or not os.path.lexists(path):
        return
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _partial_prefix(target: Path) -> str:
    return f".{target.name}.partial-{os.getpid()}-"


def _remove_stale_partials(target: Path) -> None:
    """Remove what an export killed outright (SIGKILL, power loss) left beside `target`.

    Only our own naming pattern, for this target, and only when the process that wrote it
    is gone: a concurrent export's work is never touched.
    """
    prefix = f".{target.name}.partial-"
    for leftover in target.parent.iterdir():
        pid = leftover.name.removeprefix(prefix).split("-", 1)[0]
        if not leftover.name.startswith(prefix) or not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            _remove(leftover)
        except OSError:
            continue  # alive, or not ours to signal


def _publish_file(temporary: Path, target: Path) -> None:
    """Move into place without ever replacing a file that appeared meanwhile."""
    try:
        link_into_place(temporary, target)
    except FileExistsError:
        raise UsageError(f"{target} appeared during the export; nothing was published") from None


# Signals that end an export: each unwinds like Ctrl-C, so that its partial output is
# removed (SIGHUP: the terminal it ran in was closed).
_ENDING = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


@contextlib.contextmanager
def _terminate_cleans_up() -> Iterator[None]:
    """SIGTERM or SIGHUP during an export unwinds like Ctrl-C, so its partial output is
    removed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = {number: signal.signal(number, interrupt) for number in _ENDING}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


@contextlib.contextmanager
def _held() -> Iterator[None]:
    """The signals that unwind an export wait while a partial folder or file is made and
    named: the interrupt comes once its name is known, and the clean-up removes it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = {signal.SIGINT, *_ENDING}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def export_bundle(options: ExportOptions, progress: Progress | None = None) -> ExportSummary:
    """Export a raw capture to a public bundle directory (and optionally a .tar.gz)."""
    with _terminate_cleans_up():
        return _export_bundle(options, progress)


def _export_bundle(options: ExportOptions, progress: Progress | None) -> ExportSummary:
    with fewer_collections():
        return _export_bundle_work(options, progress)


_EARLY_ARCHIVE = "archive.tar.gz"


def _start_archive_job(
    archive: Path, files: Mapping[str, bytes]
) -> tuple[Path | None, Forked[str | None] | None]:
    """On a large bundle with a second core: the archive built, written, flushed and read
    back (`_archive_job`) in a forked child while this process writes and verifies the
    directory. Its file is created here, empty, in a partial directory beside `archive`
    (so it takes that directory's group and default ACLs, and links into place on any
    mount; the next export to `archive` clears it if this one is killed); the child only
    writes into it. (None, None) where no child can be forked: the archive is then made
    the plain way.
    """
    if not can_fork():
        return None, None
    early = Path(tempfile.mkdtemp(prefix=_partial_prefix(archive), dir=archive.parent))
    try:
        descriptor = os.open(early / _EARLY_ARCHIVE, _FILE_FLAGS, 0o644)
        try:
            job = Forked(functools.partial(_archive_job, descriptor, early / _EARLY_ARCHIVE, files))
        finally:
            os.close(descriptor)
    except ChildFailed:
        _remove(early)
        return None, None
    except BaseException:
        _remove(early)
        raise
    return early, job


def _archive_job(
    descriptor: int, path: Path, files: Mapping[str, bytes], _channel: Channel
) -> str | None:
    """In the child: what the plain way does after the verification, from `build_archive` to
    `_check_archive`; None, or the message of the archive's refusal."""
    data = build_archive(files)
    write_all(descriptor, data)
    os.fchmod(descriptor, 0o644)
    os.fsync(descriptor)
    try:
        _check_archive(path, files)
    except ExportError as exc:
        return exc.message
    return None


def _export_bundle_work(options: ExportOptions, progress: Progress | None) -> ExportSummary:
    report = progress or (lambda _message: None)
    _refuse_existing(options)
    for target in (options.out_dir, options.archive):
        if target is not None:
            _remove_stale_partials(target)
    key = signing.load_private_key(options.sign_key) if options.sign_key else None
    files, counts, kept, records, conditions = _build_files(options, key, report)
    public_key = _public_pem(key)

    out, archive = options.out_dir, options.archive
    staging: Path | None = None
    archive_tmp: Path | None = None
    early: Path | None = None  # the partial directory the forked archive job writes in
    job: Forked[str | None] | None = None
    syncing: _Syncing | None = None
    whole: int | None = None  # the staging folder's, for one syncfs of its file system
    published: list[Path] = []
    # Background work, while the bundle is verified: the fsyncs, and the archive (zlib
    # compresses without the GIL). Both are awaited before anything is published.
    pool = ThreadPoolExecutor(_SYNC_THREADS, thread_name_prefix="evidence-export")
    stop = threading.Event()
    try:
        with _held():
            staging = Path(tempfile.mkdtemp(prefix=_partial_prefix(out), dir=out.parent))
        if archive is not None and records >= PARALLEL_MIN_RECORDS:
            early, job = _start_archive_job(archive, files)  # before any thread starts
        whole = whole_file_system(staging)  # (opened before anything is written in it)
        report(f"writing {len(files)} files")
        syncing = _Syncing(
            _write_tree(staging, files),
            pool,
            stop,
            fork=records >= PARALLEL_MIN_RECORDS,
            whole=whole,
            root=staging,
        )
        packing = pool.submit(build_archive, files) if archive is not None and job is None else None
        report("verifying the written bundle")
        verdict = _verify(staging, public_key)
        _check_directory_sums(staging, files)
        if archive is not None:
            report("writing the archive")
            refused: str | None = None
            if job is not None and early is not None:
                with contextlib.suppress(ChildFailed):  # the plain way below instead
                    refused, archive_tmp = job.result(), early / _EARLY_ARCHIVE
                job = None
            if archive_tmp is None:
                data = packing.result() if packing is not None else build_archive(files)
                with _held():
                    handle, name = tempfile.mkstemp(
                        prefix=_partial_prefix(archive), suffix=".tar.gz", dir=archive.parent
                    )
                    archive_tmp = Path(name)
                with os.fdopen(handle, "wb") as stream:
                    stream.write(data)
                    stream.flush()
                    os.fsync(stream.fileno())
                os.chmod(archive_tmp, 0o644)
                report("reading the archive back")
                _check_archive(archive_tmp, files)
            else:
                report("reading the archive back")
                if refused is not None:
                    raise ExportError(refused)
        syncing.wait()
        _refuse_existing(options)
        os.rename(staging, out)
        staging = None
        published.append(out)
        if archive is not None and archive_tmp is not None:
            _publish_file(archive_tmp, archive)
            archive_tmp = None
            published.append(archive)
        # The new names themselves on disk: the folders that hold them flushed too.
        _fsync_all(list(dict.fromkeys(path.parent for path in published)), stop)
    except BaseException as exc:
        stop.set()
        if job is not None:
            job.cancel()
        if syncing is not None:
            syncing.cancel()
        pool.shutdown(wait=True, cancel_futures=True)
        for path in (staging, archive_tmp, *published):
            _remove(path)
        if isinstance(exc, OSError):  # the disk or the place refused: said, not a bug
            where = Path(exc.filename).parent if exc.filename is not None else out.parent
            raise ExportError(
                f"cannot write in {where}: {exc.strerror or exc}; nothing was published"
            ) from None
        raise
    finally:
        pool.shutdown(wait=True)
        _remove(early)
        if whole is not None:
            os.close(whole)
    return ExportSummary(
        out_dir=out,
        archive=archive,
        files=tuple(sorted(files)),
        conditions=conditions,
        records=records,
        redactions=dict(sorted(counts.items())),
        kept=dict(sorted(kept.items())),
        signed=public_key is not None,
        verdict=verdict,
    )
