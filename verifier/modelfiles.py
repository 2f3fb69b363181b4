"""A model's files on disk (a folder, one file, or a Hugging Face snapshot) and their digests.

Shared by capture (which writes the raw manifest), `evidence manifest` (which writes the
public one) and verify (which rehashes against it): one walker, one parallel hasher.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verifier.errors import EvidenceError
from verifier.schemas import SCHEMA_VERSION

_HF_REPO_DIR = re.compile(r"^models--(.+)$")
# Reads this size go straight from the page cache into one reused buffer, and hashlib
# releases the GIL on updates this large, so threads hash on every core. Larger buffers
# measured slower here (they fall out of the CPU caches before they are hashed).
CHUNK = 1 << 20
_PROGRESS_EVERY_S = 0.1

WEIGHT_SUFFIXES = (".safetensors", ".gguf", ".bin", ".npz", ".pt", ".pth")
CONFIG_NAMES = ("config.json", "params.json")

ByteProgress = Callable[[int, int], None]
"""(bytes hashed so far, bytes to hash in all), always called from the calling thread."""


class ModelFilesError(EvidenceError):
    """The model's files cannot be listed or read safely."""


@dataclass(frozen=True)
class HfSnapshot:
    """A Hugging Face cache snapshot: its repository, revision and the repository's dir."""

    repo_id: str
    revision: str
    repo_dir: Path  # .../models--ORG--NAME: links may point anywhere inside it, nowhere else


def detect_hf_snapshot(path: Path) -> HfSnapshot | None:
    """`.../models--ORG--NAME/snapshots/REV[/...]` gives repo ORG/NAME at revision REV.

    Read from the folder the path leads to (`REV/../OTHER` is OTHER's, and `REV/..` is no
    revision's), and only where both names are text: a folder name that is not UTF-8 names
    no repository or revision (None: a plain folder).
    """
    absolute = path.absolute()
    if ".." in absolute.parts:
        absolute = Path(os.path.realpath(absolute))
    parts = absolute.parts
    for i in range(len(parts) - 2):
        match = _HF_REPO_DIR.match(parts[i])
        if match and parts[i + 1] == "snapshots":
            repo_id = match.group(1).replace("--", "/", 1)
            if not (_is_text(repo_id) and _is_text(parts[i + 2])):
                return None
            return HfSnapshot(repo_id, parts[i + 2], Path(*parts[: i + 1]))
    return None


def _is_text(name: str) -> bool:
    """Whether a file name was UTF-8 (Python keeps the bytes of one that is not as lone
    surrogates, which no JSON document can hold)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _resolve(path: Path, snapshot: HfSnapshot | None) -> Path:
    """A regular file as is; a link only when it stays inside the snapshot's own repo dir."""
    if path.is_symlink():
        try:
            target = path.resolve(strict=True)
        except (OSError, RuntimeError) as exc:  # a loop (RuntimeError in 3.11), or dangling
            raise ModelFilesError(
                f"{path} is a link that leads nowhere ({getattr(exc, 'strerror', None) or exc}); "
                "give a directory of regular files"
            ) from None
        if snapshot is None or not target.is_relative_to(snapshot.repo_dir.resolve()):
            raise ModelFilesError(
                f"{path} is a link to {target}, outside the model's own Hugging Face cache "
                "folder; give a directory of regular files"
            )
        path = target
    if not path.is_file():
        raise ModelFilesError(f"{path} is not a regular file")
    return path


def model_files(path: Path) -> dict[str, Path]:
    """Every file of the model by its relative name (hidden folders skipped), links resolved."""
    snapshot = detect_hf_snapshot(path)
    if not path.exists():
        raise ModelFilesError(f"the model {path} does not exist")
    if not path.is_dir():
        return {path.name: _resolve(path, snapshot)}
    found: dict[str, Path] = {}
    for dirpath, dirnames, filenames in os.walk(path, onerror=_unlistable):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in dirnames:
            if (Path(dirpath) / name).is_symlink():
                raise ModelFilesError(f"{Path(dirpath) / name} is a linked folder; refusing it")
        for name in sorted(filenames):
            full = Path(dirpath) / name
            relative = full.relative_to(path).as_posix()
            if not _is_utf8(relative):
                shown = relative.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
                raise ModelFilesError(
                    f"{shown!r} (in {path}) has a name that is not UTF-8: a manifest names "
                    "every file in UTF-8; rename it or move it out of the model's folder"
                )
            found[relative] = _resolve(full, snapshot)
    return dict(sorted(found.items()))


def _unlistable(error: OSError) -> None:
    """A folder of the model that cannot be listed is an error: os.walk left it out, with
    every file in it, and a manifest that leaves out files the model holds is wrong."""
    where = error.filename if error.filename is not None else "a folder of the model"
    raise ModelFilesError(
        f"cannot list {where}: {error.strerror or error}; every file of the model is hashed, "
        "so each of its folders must be readable"
    )


def _is_utf8(name: str) -> bool:
    """Whether a name the OS gave (undecodable bytes as lone surrogates) is UTF-8 text."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _hash_into(
    path: Path, buffer: bytearray, on_bytes: Callable[[int], None] | None = None
) -> tuple[int, str]:
    """(bytes read, hex SHA-256) of one file, read through `buffer` without copies."""
    digest = hashlib.sha256()
    view = memoryview(buffer)
    size = 0
    with path.open("rb", buffering=0) as handle:
        while count := handle.readinto(view):
            digest.update(view[:count])
            size += count
            if on_bytes is not None:
                on_bytes(count)
    return size, digest.hexdigest()


def sha256_file(path: Path, on_bytes: Callable[[int], None] | None = None) -> str:
    """Lowercase hex SHA-256 of one file; `on_bytes` hears of each chunk read."""
    return _hash_into(path, bytearray(CHUNK), on_bytes)[1]


@dataclass(frozen=True)
class HashedFile:
    """One file as read: its size and digest, or why it could not be read."""

    size: int
    sha256: str | None
    error: str | None = None


def worker_count() -> int:
    """The cores this process may run on (its affinity mask, not the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def hash_files(
    files: Mapping[str, Path], progress: ByteProgress | None = None, *, workers: int | None = None
) -> dict[str, HashedFile]:
    """Hash every file (name -> real path) once, in parallel across cores.

    Largest files first, one thread per core, each with one reused buffer; a file that
    several names resolve to (an HF blob linked twice) is read once. A file that cannot be
    read gets its error, not an exception. Ctrl-C stops every thread within one chunk.
    """
    names_of: dict[Path, list[str]] = {}
    for name, real in files.items():
        names_of.setdefault(real, []).append(name)
    sizes: dict[Path, int] = {}
    for real in names_of:
        try:
            sizes[real] = real.stat().st_size
        except OSError:
            sizes[real] = 0  # the read below reports why
    order = sorted(names_of, key=lambda real: (-sizes[real], str(real)))
    total = sum(sizes.values())
    done = [0] * len(order)  # bytes read per file; each slot has one writer
    results: dict[Path, HashedFile] = {}
    stop = threading.Event()
    claim = threading.Lock()
    pending = iter(enumerate(order))

    def work() -> None:
        buffer = bytearray(CHUNK)
        while not stop.is_set():
            with claim:
                index, real = next(pending, (-1, None))
            if real is None:
                return

            def advance(count: int, slot: int = index) -> None:
                if stop.is_set():
                    raise _Stopped
                done[slot] += count

            try:
                size, digest = _hash_into(real, buffer, advance)
                results[real] = HashedFile(size, digest)
            except _Stopped:
                return
            except OSError as exc:
                results[real] = HashedFile(done[index], None, exc.strerror or str(exc))

    count = min(workers or worker_count(), len(order))
    if count <= 1 and progress is None:
        work()
    else:
        threads = [threading.Thread(target=work, daemon=True) for _ in range(max(count, 1))]
        for thread in threads:
            thread.start()
        try:
            for thread in threads:
                while thread.is_alive():
                    thread.join(_PROGRESS_EVERY_S)
                    if progress is not None:
                        progress(sum(done), total)
        finally:
            stop.set()
            for thread in threads:
                thread.join()
    if progress is not None:
        read = sum(result.size for result in results.values())
        progress(read, max(total, read))
    unread = HashedFile(0, None, "not read")
    return {name: results.get(real, unread) for real, names in names_of.items() for name in names}


class _Stopped(Exception):
    """Raised inside a hashing thread when the run was interrupted."""


@dataclass(frozen=True)
class ManifestFile:
    """One file of a model manifest: its path, size and SHA-256."""

    path: str
    size: int
    sha256: str


@dataclass(frozen=True)
class ModelManifest:
    """A model's files with their sizes and digests, as hashed here."""

    root: Path
    repo_id: str | None
    revision: str | None
    files: tuple[ManifestFile, ...]

    def _files_json(self) -> list[dict[str, Any]]:
        return [{"path": f.path, "size": f.size, "sha256": f.sha256} for f in self.files]

    def to_json(self) -> dict[str, Any]:
        """The raw (private) form capture writes: it names the model's folder on this host."""
        return {
            "schema_version": SCHEMA_VERSION,
            "kind": "evidence.raw-model-manifest",
            "root": str(self.root),
            "repo_id": self.repo_id,
            "revision": self.revision,
            "files": self._files_json(),
        }

    def to_public_json(self) -> dict[str, Any]:
        """The public form a bundle carries and verify reads: no host path."""
        return {
            "schema_version": SCHEMA_VERSION,
            "kind": "evidence.model-manifest",
            "repo_id": self.repo_id,
            "revision": self.revision,
            "files": self._files_json(),
        }

    @property
    def model_file(self) -> str | None:
        """The main weights file: `model.safetensors`-like, else the largest weights file."""
        weights = [f for f in self.files if f.path.endswith(WEIGHT_SUFFIXES)]
        named = [f for f in weights if Path(f.path).stem == "model"]
        pool = named or weights
        return max(pool, key=lambda f: f.size).path if pool else None

    @property
    def config_file(self) -> str | None:
        names = {f.path for f in self.files}
        return next((n for n in CONFIG_NAMES if n in names), None)


def hash_model(
    path: Path,
    repo_id: str | None = None,
    revision: str | None = None,
    progress: ByteProgress | None = None,
) -> ModelManifest:
    """Hash every file of the model (hidden folders skipped); never downloads anything.

    The repository and revision default to those of a Hugging Face snapshot folder.
    Raises ModelFilesError when the model cannot be listed or a file cannot be read.
    """
    snapshot = detect_hf_snapshot(path)
    found = model_files(path)
    if not found:
        raise ModelFilesError(f"the model directory {path} holds no files")
    hashed = hash_files(found, progress)
    files = []
    for name, result in hashed.items():
        if result.sha256 is None:
            raise ModelFilesError(f"cannot read {found[name]}: {result.error}")
        files.append(ManifestFile(name, result.size, result.sha256))
    return ModelManifest(
        path,
        repo_id or (snapshot.repo_id if snapshot else None),
        revision or (snapshot.revision if snapshot else None),
        tuple(files),
    )
