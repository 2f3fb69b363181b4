"""Read and validate a private raw capture directory into frozen, typed records."""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from verifier import layout, schemas
from verifier.bundle.reader import printable_name
from verifier.errors import EvidenceError, ExportError
from verifier.jsonio import loads_strict

_NUMBERED_JSON = re.compile(r"(?P<n>[0-9]{1,9})\.json")


@dataclass(frozen=True)
class RawHost:
    """Host facts as the harness recorded them; everything but the hardware is private."""

    user: str
    hostname: str
    home: str
    cwd: str
    tmpdir: str
    os: str
    machine: str
    kernel: str | None
    cpu: str | None
    cpu_count: int | None
    accelerator: str | None
    driver_versions: Mapping[str, str]
    python: str | None
    extra: Mapping[str, Any]
    """Facts this tool does not know: private until proven otherwise, never published."""


@dataclass(frozen=True)
class RawCondition:
    """A condition as run.json declares it."""

    id: str
    label: str | None
    settings: Mapping[str, str]
    server_args: tuple[str, ...] = ()


@dataclass(frozen=True)
class RawRun:
    """run.json. `document` keeps the whole (schema-valid) JSON for the pass-through fields."""

    file: str
    document: Mapping[str, Any]
    host: RawHost
    binary_path: str | None
    server_url: str | None
    model_path: str
    model_file: str | None
    config_file: str | None
    experiment_env_prefixes: tuple[str, ...]
    conditions: tuple[RawCondition, ...]
    argv: tuple[str, ...]


@dataclass(frozen=True)
class ManifestEntry:
    """One file of the raw capture's model manifest."""

    path: str
    size: int
    sha256: str


@dataclass(frozen=True)
class RawManifest:
    """The raw capture's model manifest: its root, repository and files."""

    file: str
    document: Mapping[str, Any]
    root: str
    repo_id: str | None
    revision: str | None
    files: tuple[ManifestEntry, ...]

    def sha256_of(self, relative: str) -> str | None:
        return next((f.sha256 for f in self.files if f.path == relative), None)


@dataclass(frozen=True)
class RawLibrary:
    """A library a raw server document lists, with its version and digest."""

    path: str
    version: str | None
    sha256: str | None


@dataclass(frozen=True)
class RawServer:
    """One server of the raw capture: how it was started and what it ran with."""

    file: str
    condition: str
    instance: int
    cache_disabled: bool
    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: str
    started_at: str
    stopped_at: str | None
    log_path: str | None
    libraries: tuple[RawLibrary, ...]


@dataclass(frozen=True)
class RawSnapshot:
    """One telemetry reading of the raw capture."""

    cache_stats: Mapping[str, Any] | None
    metrics: Mapping[str, float] | None


@dataclass(frozen=True)
class RawExchange:
    """One request and its response, as the raw capture recorded them."""

    file: str
    document: Mapping[str, Any]
    """The whole (schema-valid) JSON, for the fields copied as they are."""
    condition: str
    sequence: int
    phase: str
    server_instance: int
    claimed_arm: str
    preceded_by: str
    request_url: str
    request_body: Mapping[str, Any]
    status: int | None
    body: Mapping[str, Any] | None
    text: str | None
    error: str | None
    started_at: str
    elapsed_s: float | None
    before: RawSnapshot
    after: RawSnapshot


@dataclass(frozen=True)
class RawLog:
    """A log of the capture: private, never published; only its size is known to export."""

    file: str
    size: int


@dataclass(frozen=True)
class RawCapture:
    """One raw capture directory, validated: the input of export."""

    root: Path
    run: RawRun
    manifest: RawManifest
    servers: Mapping[str, tuple[RawServer, ...]]
    exchanges: Mapping[str, tuple[RawExchange, ...]]
    """Per condition, sorted by sequence."""
    logs: tuple[RawLog, ...]


def _inside(root: Path, relative: str) -> Path:
    """The path of `relative` under the raw directory; a link anywhere on the way out of it
    is refused, so that export never reads (or publishes) a file from elsewhere."""
    path = root / relative
    parts = Path(relative).parts
    current = str(root)
    for part in parts:
        current = os.path.join(current, part)
        try:
            is_link = stat.S_ISLNK(os.lstat(current).st_mode)
        except (FileNotFoundError, NotADirectoryError):
            is_link = False
        if is_link:
            raise ExportError(f"{relative}: a symbolic link in the raw directory; refused")
    # With no link on the way, a relative name without `..` stays inside the directory;
    # any other name is resolved and compared.
    if (os.path.isabs(relative) or ".." in parts) and not path.resolve().is_relative_to(
        root.resolve()
    ):
        raise ExportError(f"{relative}: outside the raw directory; refused")
    return path


# Where the platform lacks `openat` or these flags, every read takes the plain path.
_OPENAT = (
    os.open in os.supports_dir_fd
    and os.stat in os.supports_dir_fd
    and all(hasattr(os, f) for f in ("O_DIRECTORY", "O_NOFOLLOW", "O_CLOEXEC", "O_NONBLOCK"))
)
_O = {f: getattr(os, f, 0) for f in ("O_DIRECTORY", "O_NOFOLLOW", "O_CLOEXEC", "O_NONBLOCK")}
_DIRECTORY_FLAGS = os.O_RDONLY | _O["O_DIRECTORY"] | _O["O_NOFOLLOW"] | _O["O_CLOEXEC"]
# O_NONBLOCK: a FIFO is not waited on (it is then refused, as not a regular file).
_FILE_FLAGS = os.O_RDONLY | _O["O_NOFOLLOW"] | _O["O_CLOEXEC"] | _O["O_NONBLOCK"]


class _Tree:
    """The raw directory's files, opened one component at a time from the directory above
    (`openat` with O_NOFOLLOW): a link anywhere on the way cannot be opened at all.

    A fast path for `_inside` and the reads after it, with no window between the check and
    the read. The open directories of the last name are kept (names come directory by
    directory). Only plain relative names (no `.`, `..` or empty component) take it, and
    only success counts: on any failure (a link, a missing file, a file that is not
    regular) the caller takes the plain path, `_inside`, whose check names what is wrong.
    """

    def __init__(self, root: Path) -> None:
        self._root: int | None = None
        if _OPENAT:
            with contextlib.suppress(OSError):
                self._root = os.open(root, os.O_RDONLY | _O["O_DIRECTORY"] | _O["O_CLOEXEC"])
        self._chain: list[tuple[str, int]] = []

    def close(self) -> None:
        self._truncate(0)
        if self._root is not None:
            os.close(self._root)
            self._root = None

    def _truncate(self, length: int) -> None:
        while len(self._chain) > length:
            os.close(self._chain.pop()[1])

    def _parent(self, relative: str) -> tuple[int, str] | None:
        """The open directory holding `relative`, and its last component."""
        parts = relative.split("/")
        if self._root is None or any(p in ("", ".", "..") for p in parts):
            return None
        *directories, name = parts
        kept = 0
        while (
            kept < len(self._chain)
            and kept < len(directories)
            and self._chain[kept][0] == directories[kept]
        ):
            kept += 1
        self._truncate(kept)
        try:
            for part in directories[kept:]:
                parent = self._chain[-1][1] if self._chain else self._root
                self._chain.append((part, os.open(part, _DIRECTORY_FLAGS, dir_fd=parent)))
        except OSError:
            return None
        return (self._chain[-1][1] if self._chain else self._root), name

    def read(self, relative: str) -> bytes | None:
        """The bytes of a regular file reached without a link; None: take the plain path."""
        found = self._parent(relative)
        if found is None:
            return None
        try:
            fd = os.open(found[1], _FILE_FLAGS, dir_fd=found[0])
        except OSError:
            return None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            with open(fd, "rb", closefd=False) as stream:
                return stream.read(MAX_DOCUMENT_BYTES + 1)  # past it: refused by the reader
        except OSError:
            return None
        finally:
            os.close(fd)

    def size(self, relative: str) -> int | None:
        """The size of a regular file reached without a link; None: take the plain path."""
        found = self._parent(relative)
        if found is None:
            return None
        try:
            status = os.stat(found[1], dir_fd=found[0], follow_symlinks=False)
        except OSError:
            return None
        return status.st_size if stat.S_ISREG(status.st_mode) else None


# The largest JSON document of a raw capture read (the harness writes kilobytes for one
# request, megabytes for a run's description): a larger one is refused, not read into memory.
MAX_DOCUMENT_BYTES = 1 << 28


def _read_document(
    root: Path, relative: str, schema: str, tree: _Tree | None = None
) -> dict[str, Any]:
    data = tree.read(relative) if tree is not None else None
    path = root / relative
    if data is None:
        path = _inside(root, relative)
        if not path.is_file():
            raise ExportError(f"{relative}: missing (or not a regular file) in the raw directory")
    size = len(data) if data is not None else path.stat().st_size
    if size > MAX_DOCUMENT_BYTES:
        raise ExportError(
            f"{relative}: more than {MAX_DOCUMENT_BYTES:,} bytes, far past what the harness "
            "writes for one document: not read"
        )
    try:
        document = loads_strict(path.read_bytes() if data is None else data)
    except OSError as exc:
        raise ExportError(f"{relative}: cannot read: {exc.strerror}") from None
    except EvidenceError as exc:
        raise ExportError(f"{relative}: {exc.message}") from None
    try:
        schemas.check_schema_version(document, where=relative)
    except EvidenceError as exc:
        raise ExportError(exc.message) from None
    violations = schemas.validate(document, schema)
    if violations:
        first = violations[0]
        more = f" (and {len(violations) - 1} more)" if len(violations) > 1 else ""
        raise ExportError(
            f"{relative}{first.pointer or ''}: not a valid {schema} document: {first.message}{more}"
        )
    assert isinstance(document, dict)  # the schema requires an object
    return document


def _frozen(mapping: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    return None if mapping is None else MappingProxyType(dict(mapping))


def _parse_run(doc: dict[str, Any]) -> RawRun:
    host = doc["host"]
    known = {
        "user",
        "hostname",
        "home",
        "cwd",
        "tmpdir",
        "os",
        "machine",
        "kernel",
        "cpu",
        "cpu_count",
        "accelerator",
        "driver_versions",
        "python",
    }
    raw_host = RawHost(
        user=host["user"],
        hostname=host["hostname"],
        home=host["home"],
        cwd=host["cwd"],
        tmpdir=host["tmpdir"],
        os=host["os"],
        machine=host["machine"],
        kernel=host.get("kernel"),
        cpu=host.get("cpu"),
        cpu_count=host.get("cpu_count"),
        accelerator=host.get("accelerator"),
        driver_versions=MappingProxyType(dict(host.get("driver_versions", {}))),
        python=host.get("python"),
        extra=MappingProxyType({k: v for k, v in host.items() if k not in known}),
    )
    conditions = tuple(
        RawCondition(
            c["id"],
            c.get("label"),
            MappingProxyType(dict(c["settings"])),
            tuple(c.get("server_args", ())),
        )
        for c in doc["conditions"]
    )
    server, model = doc["server"], doc["model"]
    return RawRun(
        file=layout.RAW_RUN,
        document=MappingProxyType(doc),
        host=raw_host,
        binary_path=server.get("binary_path"),
        server_url=server.get("url"),
        model_path=model["path"],
        model_file=model.get("model_file"),
        config_file=model.get("config_file"),
        experiment_env_prefixes=tuple(server.get("experiment_env_prefixes", ())),
        conditions=conditions,
        argv=tuple(doc["argv"]),
    )


def _parse_server(relative: str, doc: dict[str, Any]) -> RawServer:
    return RawServer(
        file=relative,
        condition=doc["condition"],
        instance=doc["instance"],
        cache_disabled=doc["cache_disabled"],
        argv=tuple(doc["argv"]),
        env=MappingProxyType(dict(doc["env"])),
        cwd=doc["cwd"],
        started_at=doc["started_at"],
        stopped_at=doc.get("stopped_at"),
        log_path=doc.get("log_path"),
        libraries=tuple(
            RawLibrary(lib["path"], lib.get("version"), lib["sha256"]) for lib in doc["libraries"]
        ),
    )


def _snapshot(doc: dict[str, Any]) -> RawSnapshot:
    return RawSnapshot(_frozen(doc["cache_stats"]), _frozen(doc["metrics"]))


def _parse_exchange(relative: str, doc: dict[str, Any]) -> RawExchange:
    response, timing = doc["response"], doc["timing"]
    return RawExchange(
        file=relative,
        document=MappingProxyType(doc),
        condition=doc["condition"],
        sequence=doc["sequence"],
        phase=doc["phase"],
        server_instance=doc["server_instance"],
        claimed_arm=doc["claimed_arm"],
        preceded_by=doc["preceded_by"],
        request_url=doc["request"]["url"],
        request_body=MappingProxyType(doc["request"]["body"]),
        status=response["status"],
        body=_frozen(response["body"]),
        text=response["text"],
        error=response.get("error"),
        started_at=timing["started_at"],
        elapsed_s=timing["elapsed_s"],
        before=_snapshot(doc["telemetry"]["before"]),
        after=_snapshot(doc["telemetry"]["after"]),
    )


def _listing(directory: Path, where: str) -> list[str]:
    """The sorted names in a folder of the raw directory (none where there is no such
    folder); one that cannot be listed is an error naming it, as a file that cannot be
    read is (`_read_document`), not an exception from the walk."""
    try:
        if not directory.is_dir():  # (a stat refused on the way raises, it is not False)
            return []
        return sorted(entry.name for entry in directory.iterdir())
    except OSError as exc:
        raise ExportError(f"{where}: cannot list: {exc.strerror or exc}") from None


def _numbered_files(directory: Path, where: str) -> list[tuple[int, str]]:
    """(number, file name) of every <n>.json in a directory; anything else but logs is refused."""
    found: dict[int, str] = {}
    for name in _listing(directory, where):
        match = _NUMBERED_JSON.fullmatch(name)
        if match:
            number = int(match["n"])
            if number in found:  # 1.json beside 001.json: one would silently replace the other
                raise ExportError(
                    f"{where}: {found[number]} and {name} are both number {number}; "
                    "keep the one the capture wrote"
                )
            found[number] = name
        elif not name.endswith(".log"):
            # (a name on disk may hold control characters: shown escaped, as verify does)
            raise ExportError(
                f"{where}/{printable_name(name)}: unexpected file in the raw directory"
            )
    return list(found.items())


def _read_log(root: Path, relative: str, tree: _Tree | None = None) -> RawLog | None:
    """A log is never published (see the field table): it is noted, not read, whatever
    its size or encoding."""
    size = tree.size(relative) if tree is not None else None
    if size is not None:
        return RawLog(relative, size)
    path = _inside(root, relative)
    if not path.is_file():
        return None
    return RawLog(relative, path.stat().st_size)


def _check(condition: bool, where: str, message: str) -> None:
    if not condition:
        raise ExportError(f"{where}: {message}")


def load_raw(root: Path, skip: frozenset[str] = frozenset()) -> RawCapture:
    """Load a raw capture directory; every problem is an ExportError naming file and pointer.

    `skip`: exchange files (relative names) listed but not read, left out of `exchanges`:
    another process loads them (`load_exchanges`).
    """
    if not root.is_dir():
        raise ExportError(f"{root} is not a raw capture directory")
    tree = _Tree(root)
    try:
        return _load(root, tree, skip)
    finally:
        tree.close()


@dataclass(frozen=True)
class ExchangeFile:
    """An exchange file of the capture, listed, not read."""

    condition: str
    number: int
    name: str
    instances: frozenset[int]
    """The numbers of the condition's server files (what its servers' instances must be)."""

    @property
    def relative(self) -> str:
        return f"{layout.RAW_CONDITIONS_DIR}/{self.condition}/exchanges/{self.name}"


def list_exchanges(root: Path) -> list[ExchangeFile]:
    """Every exchange file, condition by condition in run.json's order, by number; run.json
    read for its conditions, nothing else read. An error here is one `load_raw` reports too."""
    tree = _Tree(root)
    try:
        run = _read_document(root, layout.RAW_RUN, "raw-run", tree)
    finally:
        tree.close()
    found = []
    for condition in run["conditions"]:
        cond = condition["id"]
        base = f"{layout.RAW_CONDITIONS_DIR}/{cond}"
        servers = _numbered_files(root / base / "servers", f"{base}/servers")
        instances = frozenset(number for number, _ in servers)
        for number, name in sorted(_numbered_files(root / base / "exchanges", f"{base}/exchanges")):
            found.append(ExchangeFile(cond, number, name, instances))
    return found


def load_exchanges(root: Path, files: list[ExchangeFile]) -> list[RawExchange]:
    """The exchanges of `files`, read and checked as `load_raw` reads and checks them."""
    tree = _Tree(root)
    try:
        return [
            _load_exchange(root, tree, f.condition, f.number, f.name, f.instances) for f in files
        ]
    finally:
        tree.close()


def _load_exchange(
    root: Path, tree: _Tree | None, cond: str, number: int, name: str, instances: Collection[int]
) -> RawExchange:
    base = f"{layout.RAW_CONDITIONS_DIR}/{cond}"
    relative = f"{base}/exchanges/{name}"
    exchange = _parse_exchange(relative, _read_document(root, relative, "raw-exchange", tree))
    _check(exchange.condition == cond, relative + "/condition", f"is not {cond!r}")
    _check(exchange.sequence == number, relative + "/sequence", f"is not {number}")
    _check(
        not instances or exchange.server_instance in instances,
        relative + "/server_instance",
        f"names server {exchange.server_instance}, which {base}/servers does not hold",
    )
    return exchange


def _load(root: Path, tree: _Tree | None, skip: frozenset[str] = frozenset()) -> RawCapture:
    run = _parse_run(_read_document(root, layout.RAW_RUN, "raw-run", tree))
    manifest_doc = _read_document(root, layout.RAW_MODEL_MANIFEST, "raw-model-manifest", tree)
    manifest = RawManifest(
        file=layout.RAW_MODEL_MANIFEST,
        document=MappingProxyType(manifest_doc),
        root=manifest_doc["root"],
        repo_id=manifest_doc["repo_id"],
        revision=manifest_doc["revision"],
        files=tuple(
            ManifestEntry(f["path"], f["size"], f["sha256"]) for f in manifest_doc["files"]
        ),
    )
    ids = [c.id for c in run.conditions]
    _check(len(set(ids)) == len(ids), layout.RAW_RUN, "/conditions lists a condition twice")
    extra = _listing(root / layout.RAW_CONDITIONS_DIR, layout.RAW_CONDITIONS_DIR)
    for name in extra:
        _check(
            name in ids,
            f"{layout.RAW_CONDITIONS_DIR}/{printable_name(name)}",
            "not a condition of run.json",
        )

    servers: dict[str, tuple[RawServer, ...]] = {}
    exchanges: dict[str, tuple[RawExchange, ...]] = {}
    logs: list[RawLog] = []
    for index, cond in enumerate(ids):
        base = f"{layout.RAW_CONDITIONS_DIR}/{cond}"
        cond_servers = []
        for number, name in _numbered_files(root / base / "servers", f"{base}/servers"):
            relative = f"{base}/servers/{name}"
            server = _parse_server(relative, _read_document(root, relative, "raw-server", tree))
            _check(server.condition == cond, relative + "/condition", f"is not {cond!r}")
            _check(server.instance == number, relative + "/instance", f"is not {number}")
            cond_servers.append(server)
            log = _read_log(root, relative.removesuffix(".json") + ".log", tree)
            if log is not None:
                logs.append(log)
        instances = {s.instance for s in cond_servers}
        listed = _numbered_files(root / base / "exchanges", f"{base}/exchanges")
        cond_exchanges = [
            _load_exchange(root, tree, cond, number, name, instances)
            for number, name in listed
            if f"{base}/exchanges/{name}" not in skip
        ]
        _check(bool(listed), f"{layout.RAW_RUN}/conditions/{index}", "has no exchanges")
        servers[cond] = tuple(cond_servers)
        exchanges[cond] = tuple(sorted(cond_exchanges, key=lambda e: e.sequence))
    harness_log = _read_log(root, layout.RAW_HARNESS_LOG, tree)
    if harness_log is not None:
        logs.insert(0, harness_log)
    return RawCapture(
        root=root,
        run=run,
        manifest=manifest,
        servers=MappingProxyType(servers),
        exchanges=MappingProxyType(exchanges),
        logs=tuple(logs),
    )
