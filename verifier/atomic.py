"""Putting a finished file in place without ever replacing one that exists or appeared meanwhile."""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from verifier.errors import EvidenceError, UsageError


def link_into_place(temporary: Path, target: Path) -> None:
    """Move `temporary` to `target`; FileExistsError, with `temporary` left, if `target`
    exists. A hard link refuses an existing target atomically; where the file system has no
    hard links, the check and the rename are two steps."""
    try:
        os.link(temporary, target)
    except FileExistsError:
        raise
    except OSError:  # no hard links on this file system
        if os.path.lexists(target):
            raise FileExistsError(str(target)) from None
        os.rename(temporary, target)
    else:
        temporary.unlink()


def check_new_output(target: Path) -> None:
    """Refuse, before any work, an output that exists or whose folder does not."""
    if os.path.lexists(target):
        raise UsageError(f"{target} already exists; refusing to overwrite it")
    if not target.absolute().parent.is_dir():
        raise UsageError(f"{target.absolute().parent} is not a directory")


def write_new_file(target: Path, data: bytes) -> None:
    """Write beside `target`, then link it into place: never a partial file, never a clobber."""
    check_new_output(target)
    parent = target.absolute().parent
    # Named after the target where the name leaves room (a name is at most 255 bytes).
    name = target.name if len(os.fsencode(target.name)) <= 200 else "evidence"
    try:
        temporary, handle = _new_beside(parent, name)
    except OSError as exc:
        raise EvidenceError(f"cannot write {target}: {exc.strerror or exc}") from None
    try:
        with handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            link_into_place(temporary, target)
        except FileExistsError:
            raise EvidenceError(f"{target} appeared meanwhile; left it as it was") from None
    except OSError as exc:
        raise EvidenceError(f"cannot write {target}: {exc.strerror or exc}") from None
    finally:
        with contextlib.suppress(OSError):
            temporary.unlink(missing_ok=True)  # ours: this process created it


def _new_beside(parent: Path, name: str) -> tuple[Path, BinaryIO]:
    """A temporary file in `parent` that this process creates (O_EXCL), open for writing.
    A name some other file holds already is passed over, never opened or removed."""
    for _ in range(16):
        temporary = parent / f".{name}.{os.getpid()}.{secrets.token_hex(4)}.partial"
        try:
            return temporary, open(temporary, "xb")  # the caller closes it
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free name for a temporary file", str(parent))


@contextlib.contextmanager
def new_folders_removed_on_failure(folder: Path) -> Iterator[None]:
    """If the body fails, remove the folders up to `folder` that did not exist before it
    (what `mkdir(parents=True)` makes), deepest first, each only while it is empty."""
    missing: list[Path] = []
    for path in (folder, *folder.parents):
        if os.path.lexists(path):
            break
        missing.append(path)
    try:
        yield
    except BaseException:
        for path in missing:
            try:
                path.rmdir()
            except OSError:  # gone, or not empty: what is in it is not ours to remove
                break
        raise
