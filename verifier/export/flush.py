"""Flushing a written bundle to disk with one `syncfs` rather than a `fsync` per file.

Export flushes every file and folder it wrote before it publishes any (a crash must not
leave a published bundle with empty files). One `fsync` per file costs: on this project's
bench machine, the 10,746 files and folders of a 10,024-record bundle took 2.7-3.8 s and
some 1.5 s of CPU (ext4; measured with each flush alone), CPU taken from the verification
that runs beside them. One `syncfs` of the file system they are on flushes the same data
and metadata in 0.13-0.25 s, with some 0.15 s of CPU in all.

It is used only where it promises what the fsyncs did (`whole_file_system`, else None and
the files are flushed one by one):

- Linux 5.17 or later: from 5.8 `syncfs` reports every write-back error of the file
  system since the descriptor it is given was opened (before it, none), and from 5.17 the
  errors of the file system's own flush too (a journal commit, a log force: before it,
  `->sync_fs`'s result was dropped; fixed in some stable series, which a version number
  cannot tell). The descriptor is opened on the bundle's folder before any file is
  written in it, so an error in writing back any of them is reported (an error elsewhere
  on that file system is too: the export then fails, closed).
- A file system on a local block device whose `syncfs` writes back everything it holds
  (`_LOCAL`), read from the descriptor itself (`fstatfs`: the very file system syncfs
  flushes, whatever the mount table says); on a network or FUSE file system it may flush
  less than `fsync` would. A type it cannot read, or reads as another, means fsync. (One
  case is not told apart: a file with its data on an xfs real-time device, made only
  below a folder marked so, whose device cache an xfs syncfs may leave unflushed.)
- `syncfs` in the C library, called through ctypes.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

# File systems whose syncfs writes back every dirty page, inode and folder, by their magic
# numbers (linux/magic.h; tmpfs: nothing to write back).
_LOCAL = {
    0xEF53: "ext2/3/4",
    0x58465342: "xfs",
    0x9123683E: "btrfs",
    0xF2F52010: "f2fs",
    0x01021994: "tmpfs",
}
_FIRST_KERNEL = (5, 17)


def whole_file_system(root: Path) -> int | None:
    """A descriptor of the folder `root` (open it before writing anything in it) for
    `syncfs`, or None where each file must be flushed on its own."""
    if sys.platform != "linux" or kernel_version(os.uname().release) < _FIRST_KERNEL:
        return None
    if _libc_syncfs() is None:
        return None
    try:
        descriptor = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        local = file_system_type(descriptor) in _LOCAL
    except BaseException:
        os.close(descriptor)
        raise
    if not local:
        os.close(descriptor)
        return None
    return descriptor


def syncfs(descriptor: int, root: Path) -> None:
    """Flush the file system of `descriptor` (from `whole_file_system`); OSError naming
    `root` with the error it reports."""
    call = _libc_syncfs()
    if call is None:  # (whole_file_system gave a descriptor only where it is there)
        raise OSError(0, "syncfs is not available", str(root))
    import ctypes

    if call(descriptor) != 0:
        number = ctypes.get_errno()
        raise OSError(number, os.strerror(number), str(root))


def kernel_version(release: str) -> tuple[int, int]:
    """(major, minor) of a Linux release string (`6.18.44-fc`); (0, 0) if it has none."""
    numbers = re.match(r"(\d+)\.(\d+)", release)
    return (int(numbers[1]), int(numbers[2])) if numbers else (0, 0)


def file_system_type(descriptor: int) -> int | None:
    """The magic number of the file system `descriptor` is on (`fstatfs`'s `f_type`, its
    first field, a C long on Linux but for s390x, where a misread names no file system of
    `_LOCAL`), or None where it cannot be read."""
    call = _libc_fstatfs()
    if call is None:
        return None
    import ctypes

    buffer = ctypes.create_string_buffer(256)  # struct statfs: 120 bytes on 64-bit Linux
    if call(descriptor, buffer) != 0:
        return None
    return ctypes.c_ulong.from_buffer(buffer).value


# The C library's functions, or None, once looked up.
_CALLS: dict[str, Callable[..., int] | None] = {}


def _libc(name: str, *arguments: Any) -> Callable[..., int] | None:
    if name not in _CALLS:
        try:
            import ctypes

            call = getattr(ctypes.CDLL(None, use_errno=True), name)
            call.argtypes = list(arguments)
            call.restype = ctypes.c_int
            _CALLS[name] = call
        except (OSError, AttributeError, ImportError):
            _CALLS[name] = None
    return _CALLS[name]


def _libc_syncfs() -> Callable[..., int] | None:
    import ctypes

    return _libc("syncfs", ctypes.c_int)


def _libc_fstatfs() -> Callable[..., int] | None:
    import ctypes

    return _libc("fstatfs", ctypes.c_int, ctypes.c_char_p)
