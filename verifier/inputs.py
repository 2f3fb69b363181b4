"""Small files given as options (a key, profile rules, a request body), read safely."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from verifier.errors import UsageError


def read_small_file(path: Path, what: str, most: int) -> bytes:
    """The bytes of `path`, given as `what` (`--key`): a regular file of at most `most`
    bytes. Anything else is a UsageError that says so, before anything is read: a device
    (`/dev/zero`) or a huge file would fill the memory, a FIFO would block for ever."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise UsageError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UsageError(f"{what} {path} is not a regular file")
        if info.st_size > most:
            raise UsageError(f"{what} {path} is {info.st_size:,} bytes: more than {most:,} read")
        with os.fdopen(fd, "rb", closefd=False) as stream:
            data = stream.read(most + 1)
    except OSError as exc:
        raise UsageError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(data) > most:  # (it grew while read)
        raise UsageError(f"{what} {path} is more than the {most:,} bytes read")
    return data
