"""A reproducible .tar.gz of a bundle: the same files give the same bytes wherever the same
zlib compresses them (another zlib may choose other bytes for the same members: a bundle's
identity is its SHA256SUMS, not its archive's hash).

Members sit at the root of the archive (no top-level folder), so the bytes depend on the
bundle alone, not on the name of the directory it was written to.
"""

from __future__ import annotations

import gzip
import io
import tarfile
from collections.abc import Mapping

# zlib's own default. On a 10,000-record bundle (45 MB of JSON) here: level 1 3.07 MB in
# 0.37 s, 6 1.59 MB in 0.46 s, 9 1.46 MB in 0.78 s. 9 saves 8% of the size for 3-4x the
# compression time; 6 is the knee (README, "Reproducible output").
COMPRESS_LEVEL = 6


def _info(name: str, *, directory: bool, size: int = 0) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE if directory else tarfile.REGTYPE
    info.mode = 0o755 if directory else 0o644
    info.size = size
    info.mtime = 0
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def build_archive(files: Mapping[str, bytes]) -> bytes:
    """USTAR members sorted by name, directories first-class, no time, owner or mode noise."""
    directories = {
        "/".join(parts[:i]) for parts in (p.split("/") for p in files) for i in range(1, len(parts))
    }
    entries = sorted([(d, True) for d in directories] + [(f, False) for f in files])
    tar = _simple_tar(entries, files)
    if tar is None:
        tar = _tarfile_tar(entries, files)
    out = io.BytesIO()
    with gzip.GzipFile(
        fileobj=out, mode="wb", filename="", mtime=0, compresslevel=COMPRESS_LEVEL
    ) as gz:
        gz.write(tar)
    return out.getvalue()


def _tarfile_tar(entries: list[tuple[str, bool]], files: Mapping[str, bytes]) -> bytes:
    """The tar the standard library writes: the reference (`_simple_tar` writes its bytes)."""
    tar_bytes = io.BytesIO()
    with tarfile.open(fileobj=tar_bytes, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, directory in entries:
            if directory:
                tar.addfile(_info(name, directory=True))
            else:
                data = files[name]
                tar.addfile(_info(name, directory=False, size=len(data)), io.BytesIO(data))
    return tar_bytes.getvalue()


# The parts of a USTAR header that are the same for every member `_info` describes.
_OWNERS = b"0000000\x00" * 2  # uid, gid
_MTIME = b"00000000000\x00"
_REST = b"\x00" * 100 + tarfile.POSIX_MAGIC + b"\x00" * (32 + 32 + 8 + 8 + 155 + 12)
_SPACES = sum(b" " * 8)  # the checksum is summed with its own field as spaces


def _simple_tar(entries: list[tuple[str, bool]], files: Mapping[str, bytes]) -> bytes | None:
    """`_tarfile_tar`'s bytes, the headers written here (some 10x faster on a bundle's
    10,000 members), for names of ASCII only that fit the header's 100 bytes (a
    directory's with its "/"), as every bundle's are; None for any other, which tarfile
    then writes (it splits a long name into a prefix)."""
    out: list[bytes] = []
    for name, directory in entries:
        spelled = name + "/" if directory and not name.endswith("/") else name  # as tarfile
        size = 0 if directory else len(files[name])
        if not spelled.isascii() or len(spelled) > 100 or size >= 8**11:
            return None
        head = (
            spelled.encode("ascii").ljust(100, b"\x00")
            + (b"0000755\x00" if directory else b"0000644\x00")
            + _OWNERS
            + b"%011o\x00" % size
            + _MTIME
        )
        rest = (b"5" if directory else b"0") + _REST
        checksum = sum(head) + _SPACES + sum(rest)
        out.append(head + b"%06o\x00 " % checksum + rest)
        if not directory:
            data = files[name]
            out.append(data)
            out.append(b"\x00" * (-len(data) % tarfile.BLOCKSIZE))
    out.append(b"\x00" * (2 * tarfile.BLOCKSIZE))  # the end of the archive
    written = sum(map(len, out))
    out.append(b"\x00" * (-written % tarfile.RECORDSIZE))
    return b"".join(out)
