"""The simple subset of tar, parsed here instead of by tarfile, which is slow at it.

tarfile parses each 512-byte header in pure Python (some 12 us a header); a bundle of
10,000 records has 10,000 headers. This module reads the headers nearly every bundle
holds, those of regular files and directories with plain octal numbers, and gives up
(raises NotSimple) at anything else, so that the caller reads the archive again through
tarfile, whose outcome decides. What it does parse, it parses exactly as
`tarfile.TarInfo.frombuf` and `_proc_builtin` of Python 3.11 do: the same name, size and
type for the same bytes, and the same bytes asked of the stream at each step (`TarStream`).
"""

from __future__ import annotations

import re
import tarfile
import zlib
from typing import Protocol

BLOCK = tarfile.BLOCKSIZE
ZERO_BLOCK = bytes(BLOCK)
# What tarfile's stream layer (_Stream) asks of its file at a time, whatever it needs.
_RECORD = tarfile.RECORDSIZE


class NotSimple(Exception):
    """The archive leaves the subset read here: read it again through tarfile."""


class _Readable(Protocol):
    def read(self, size: int, /) -> bytes: ...


class TarStream:
    """Reads a tar stream as tarfile's _Stream does, and only as far as it would.

    The file below counts the bytes it hands out against the limits, so each read here
    pulls from it exactly as _Stream would for the same request: blocks of RECORDSIZE,
    whenever fewer bytes than asked for are buffered. A limit then trips at the same
    place on either path, with the same counts in its message.
    """

    def __init__(self, inner: _Readable) -> None:
        self._inner = inner
        self._buffer = b""
        self._at = 0  # where in _buffer the stream is
        self.position = 0  # bytes of the tar stream consumed: _Stream.tell()

    def read(self, size: int, /) -> bytes:
        """Up to size bytes, fewer only at the end of the stream: _Stream.read."""
        buffer, at = self._buffer, self._at
        end = at + size
        if end <= len(buffer):
            self._at = end
            self.position += size
            return buffer[at:end]
        # Joined once, from views: the data is copied once, whatever its size.
        pieces = [memoryview(buffer)[at:]]
        have = len(buffer) - at
        self._buffer, self._at = b"", 0
        while have < size and (piece := self._inner.read(_RECORD)):
            if have + len(piece) > size:
                self._buffer, self._at = piece, size - have
                pieces.append(memoryview(piece)[: size - have])
                have = size
            else:
                pieces.append(memoryview(piece))
                have += len(piece)
        self.position += have
        return b"".join(pieces)

    def read_exactly(self, size: int) -> bytes:
        at = self._at
        end = at + size
        if end <= len(self._buffer):  # the usual case, in short
            self._at = end
            self.position += size
            return self._buffer[at:end]
        data = self.read(size)
        if len(data) != size:  # tarfile says the member is truncated: let it
            raise NotSimple
        return data

    def header_at(self, position: int) -> bytes:
        """The block at position: skip_to(position), then read(BLOCK), whole or NotSimple."""
        at = self._at + position - self.position
        end = at + BLOCK
        if self._at <= at and end <= len(self._buffer):  # the usual case, in short
            self._at = end
            self.position = position + BLOCK
            return self._buffer[at:end]
        self.skip_to(position)
        return self.read_exactly(BLOCK)

    def skip_to(self, position: int) -> None:
        """Go forward to position, as tarfile's seek does: pulled blocks are dropped."""
        left = position - self.position
        if left < 0:
            raise NotSimple
        buffered = len(self._buffer) - self._at
        if left <= buffered:
            self._at += left
            self.position = position
            return
        self.position += buffered
        left -= buffered
        self._buffer, self._at = b"", 0
        while left:
            piece = self._inner.read(_RECORD)
            if not piece:  # the stream ends before the next header: tarfile says how
                raise NotSimple
            if len(piece) > left:
                self._buffer, self._at = piece, left
                self.position += left
                return
            self.position += len(piece)
            left -= len(piece)


def blocks(size: int) -> int:
    """The bytes that size bytes of data take, in whole blocks: TarInfo._block."""
    return -(-size // BLOCK) * BLOCK


# tarfile reads eight fields as numbers (nti): mode, uid, gid, size, mtime, chksum,
# devmajor and devminor. Each is read here only in the form
# `int(field.split(NUL)[0].strip() or "0", 8)` reads it to the same value: spaces around
# octal digits, up to a NUL or the end of the field. Anything else (base-256 numbers, signs,
# "0o", underscores, other whitespace) is left to tarfile. A field's form is judged from its
# shape: each byte mapped to d (an octal digit), s (a space), z (NUL) or x (anything else).
_NUMBERS = ((100, 108), (108, 116), (116, 124), (124, 136), (136, 148), (148, 156))
_DEVICE_NUMBERS = ((329, 337), (337, 345))
_SIZE_FIELD = 3
_CHKSUM_FIELD = 5
_SHAPE = bytes(
    ord("d") if 0x30 <= i <= 0x37 else ord("s") if i == 0x20 else ord("z") if i == 0 else ord("x")
    for i in range(256)
)
# shape -> (size start, size end, chksum start, chksum end): where their digits are in a
# header of that shape, or () when a number there is not in the simple form.
_Spans = tuple[int, int, int, int] | tuple[()]
_SPANS: dict[bytes, _Spans] = {}
_MAX_SHAPES = 256  # a hostile archive could have many; real ones have one or two

_REGULAR = ord("0")
_OLD_REGULAR = 0  # AREGTYPE, NUL: a regular file, or a directory if its name ends in '/'
_DIRECTORY = ord("5")


def _spans(shape: bytes) -> _Spans:
    found: list[tuple[int, int]] = []
    at = 0
    for start, end in (*_NUMBERS, *_DEVICE_NUMBERS):
        text = shape[at : at + end - start].split(b"z", 1)[0]  # nts(): up to the first NUL
        at += end - start
        lead = len(text) - len(text.lstrip(b"s"))
        digits = text.strip(b"s")
        if digits.strip(b"d"):
            return ()
        found.append((start + lead, start + lead + len(digits)))
    (size_start, size_end), (sum_start, sum_end) = found[_SIZE_FIELD], found[_CHKSUM_FIELD]
    return size_start, size_end, sum_start, sum_end


def _nts(field: bytes) -> str:
    """tarfile.nts with the encoding read_archive opens tarfile with."""
    return field.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")


# The form tarfile, GNU tar and most others write: mode, uid and gid of 7 octal digits and
# a NUL, size and mtime of 11 and a NUL, chksum of 6, a NUL and a space; device numbers
# NUL or 7 zeros and a NUL. Matched at once; any other form goes through _spans.
_USUAL = re.compile(rb"(?:[0-7]{7}\0){3}([0-7]{11})\0[0-7]{11}\0([0-7]{6})\0 ")
_USUAL_DEVICES = (bytes(16), b"0000000\x000000000\x00")
_KINDS = bytes((_REGULAR, _OLD_REGULAR, _DIRECTORY))


def parse_header(header: bytes) -> tuple[str, bool, int]:
    """(name, is a directory, size) of a header that is neither short nor all zeros.

    As tarfile would make them of the same bytes; raises NotSimple where tarfile would
    make something else of them (another type, a PAX or GNU header) or refuse them.
    """
    kind = header[156]
    if kind not in _KINDS:
        raise NotSimple
    usual = _USUAL.match(header, 100)
    if usual is not None and header[329:345] in _USUAL_DEVICES:
        size, chksum = int(usual[1], 8), int(usual[2], 8)
    else:
        size, chksum = _numbers(header)
    # calc_chksums: 256 (the chksum field taken as 8 spaces) plus all the other bytes.
    # adler32's low half is 1 + the sum of the bytes, modulo 65521: exact for 512 ASCII
    # bytes (at most 512 * 127) and for 256 of any kind (at most 256 * 255).
    if header.isascii():
        unsigned = zlib.adler32(header) & 0xFFFF
    else:
        view = memoryview(header)
        unsigned = (zlib.adler32(view[:256]) & 0xFFFF) + (zlib.adler32(view[256:]) & 0xFFFF) - 1
    if chksum != unsigned + 255 - sum(header[148:156]):
        raise NotSimple  # a bad checksum, or only the signed sum (old tars) adds up: tarfile's
    name = _nts(header[:100])
    directory = kind == _DIRECTORY or (kind == _OLD_REGULAR and name.endswith("/"))
    if directory:
        if size:  # tarfile would read its data as the next header
            raise NotSimple
        name = name.rstrip("/")
    if header[345]:  # ustar's prefix, taken whatever the magic says, as tarfile does
        name = _nts(header[345:500]) + "/" + name
        if directory:  # again, as _proc_builtin does
            name = name.rstrip("/")
    return name, directory, size


def _numbers(header: bytes) -> tuple[int, int]:
    """Size and chksum of a header whose numbers are in another form than _USUAL's."""
    shape = header[100:156].translate(_SHAPE) + header[329:345].translate(_SHAPE)
    spans = _SPANS.get(shape)
    if spans is None:
        if len(_SPANS) >= _MAX_SHAPES:
            _SPANS.clear()
        spans = _SPANS[shape] = _spans(shape)
    if not spans:
        raise NotSimple
    size_start, size_end, sum_start, sum_end = spans
    size = int(header[size_start:size_end], 8) if size_start < size_end else 0
    chksum = int(header[sum_start:sum_end], 8) if sum_start < sum_end else 0
    return size, chksum
