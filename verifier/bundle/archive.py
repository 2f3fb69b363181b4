"""Read a bundle's tar archive (gzip-compressed or plain) as a stream, without trusting it.

The half of `reader.read_bundle` for a file: imported only when a bundle is one, so
that verifying a directory does not load tarfile.
"""

from __future__ import annotations

import contextlib
import functools
import io
import re
import tarfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, Self

from verifier.bundle import simpletar
from verifier.bundle.reader import (
    _CHUNK,
    Limits,
    LoadedBundle,
    _Collector,
    _name_problem,
    _parts,
    _reason,
    printable_name,
)
from verifier.errors import UnreadableInput, UnsafeInput

_GZIP_MAGIC = b"\x1f\x8b"
_OTHER_FORMATS = {
    b"BZh": "bzip2",
    b"\xfd7zXZ\x00": "xz",
    b"\x28\xb5\x2f\xfd": "zstd",
    b"PK\x03\x04": "zip",
}
_USTAR_MAGIC = slice(257, 262)
# tar pads with zero blocks that compress far beyond any sane ratio, so a small archive
# is never judged by its ratio; a bomb has to expand past this before it can hurt.
_RATIO_GRACE_BYTES = 1024 * 1024
_RAW_CHUNK = 64 * 1024
# A PAX or GNU long-name header is read whole into memory before anything is checked.
_MAX_HEADER_BYTES = 64 * 1024
_BLOCK = 512


class _Readable(Protocol):
    def read(self, size: int, /) -> bytes: ...


class _CountingReader:
    """A forward-only reader that reports how many bytes pass through it."""

    def __init__(self, inner: _Readable, count: Callable[[int], None], source: str) -> None:
        self._inner = inner
        self._count = count
        self._source = source
        self._position = 0

    def read(self, size: int = -1, /) -> bytes:
        try:
            data = self._inner.read(size)
        except _STREAM_ERRORS as exc:
            # Said here, where it is known to be the gzip layer or the disk, not tar.
            raise _corrupt(self._source, exc) from None
        self._position += len(data)
        self._count(len(data))
        return data

    def write(self, data: bytes, /) -> int:
        raise io.UnsupportedOperation("read-only stream")

    def tell(self) -> int:
        return self._position

    def seek(self, position: int, /) -> int:
        raise io.UnsupportedOperation("the archive is read as a stream")

    def close(self) -> None:
        """The underlying file belongs to the caller."""


class _Meter:
    """Counts compressed and expanded bytes; stops a stream that expands too far."""

    def __init__(self, source: str, limits: Limits, *, compressed: bool) -> None:
        self.source = source
        self.limits = limits
        self.compressed = compressed
        self.compressed_bytes = 0
        self.expanded_bytes = 0

    def count_compressed(self, size: int) -> None:
        self.compressed_bytes += size

    def count_expanded(self, size: int) -> None:
        self.expanded_bytes += size
        limits = self.limits
        if self.expanded_bytes > limits.max_total_bytes:
            raise UnsafeInput(
                f"{self.source}: the archive expands to more than {limits.max_total_bytes} "
                "bytes; reading stopped (raise the limit with --max-total-bytes "
                "if you trust this bundle)"
            )
        if (
            self.compressed
            and self.expanded_bytes > _RATIO_GRACE_BYTES
            and self.expanded_bytes > limits.max_ratio * max(1, self.compressed_bytes)
        ):
            raise UnsafeInput(
                f"{self.source}: the archive expanded {self.expanded_bytes} bytes from "
                f"{self.compressed_bytes} compressed bytes, over the ratio limit of "
                f"{limits.max_ratio:g}; it may be a compression bomb, reading stopped "
                "(raise the limit with --max-ratio if you trust this bundle)"
            )


_ZLIB_REASONS = {
    "incorrect data check": "the CRC-32 in the gzip trailer does not match the data",
    "incorrect length check": "the length in the gzip trailer does not match the data",
}


# The most gzip members read: a bundle has one, and a second is refused (_judge_gzip_end),
# but members that expand to nothing would be read one by one, with no limit on bytes met
# (a 128 MB file of 20-byte members took 12-16 s).
MAX_GZIP_MEMBERS = 1000


class _GzipStream:
    """Expands a gzip file as gzip(1) does, and notes what tools disagree on.

    zlib checks each member's header, CRC-32 and length. A second member (concatenated
    gzip streams) is expanded too, so that what is read is what `tar -xzf` sees; it and
    any bytes after the last member are remembered and reported, never skipped quietly.
    """

    def __init__(self, raw: _Readable, meter: _Meter, source: str) -> None:
        self._raw = raw
        self._meter = meter
        self._source = source
        self._inflate = zlib.decompressobj(wbits=31)  # 31: the gzip wrapper, not zlib's
        self._input = b""
        self._done = False
        self.members = 1
        self.trailing_bytes = 0

    def _fill(self) -> bool:
        # Small reads: compressed bytes are counted as read, so the ratio stays honest.
        data = self._raw.read(_RAW_CHUNK)
        self._meter.count_compressed(len(data))
        self._input += data
        return bool(data)

    def _after_member(self) -> None:
        """One member ended: start the next one, or note what follows and stop."""
        self._input = self._inflate.unused_data + self._input
        while len(self._input) < len(_GZIP_MAGIC) and self._fill():
            pass
        if not self._input:
            self._done = True
        elif self._input.startswith(_GZIP_MAGIC):
            self.members += 1
            if self.members > MAX_GZIP_MEMBERS:  # each may expand to nothing: no limit meets it
                raise UnsafeInput(
                    f"{self._source}: the gzip file holds more than {MAX_GZIP_MEMBERS} "
                    "concatenated gzip streams (a bundle is one); reading stopped"
                )
            self._inflate = zlib.decompressobj(wbits=31)
        else:
            # Counted, not kept, and only so far: a huge tail is refused all the same.
            cap = self._meter.limits.max_total_bytes
            self.trailing_bytes = len(self._input)
            while self.trailing_bytes <= cap and (data := self._raw.read(_CHUNK)):
                self.trailing_bytes += len(data)
            self._input = b""
            self._done = True

    def read(self, size: int = -1, /) -> bytes:
        size = _CHUNK if size < 0 else size
        while not self._done:
            if self._inflate.eof:
                self._after_member()
                continue
            if not self._input and not self._fill():
                raise UnreadableInput(
                    f"{self._source}: corrupt or truncated gzip stream: it ends before "
                    "the end of its compressed data"
                )
            try:
                data = self._inflate.decompress(self._input, size)
            except zlib.error as exc:
                reason = str(exc).rsplit(": ", 1)[-1]
                reason = _ZLIB_REASONS.get(reason, reason)
                raise UnreadableInput(
                    f"{self._source}: corrupt or truncated gzip stream: {reason}"
                ) from None
            # At the end of a member zlib leaves what follows in unused_data, and (when
            # output was capped) a copy of it in unconsumed_tail: take it from one place only.
            self._input = b"" if self._inflate.eof else self._inflate.unconsumed_tail
            if data:
                return data
        return b""


_EOF_HEADER: type[tarfile.HeaderError] = vars(tarfile)["EOFHeaderError"]
_HEADER_TYPES = (
    tarfile.XHDTYPE,
    tarfile.XGLTYPE,
    tarfile.SOLARIS_XHDTYPE,
    tarfile.GNUTYPE_LONGNAME,
    tarfile.GNUTYPE_LONGLINK,
)


class _StrictTarInfo(tarfile.TarInfo):
    """A header that never lets a bad or missing block pass for the end of the archive.

    tarfile stops quietly at a broken header after the first member, which would
    turn a corrupt or truncated archive into a shorter one.
    """

    @classmethod
    def fromtarfile(cls, tarfile_: tarfile.TarFile) -> Self:
        try:
            return super().fromtarfile(tarfile_)
        except tarfile.HeaderError as exc:
            if isinstance(exc, _EOF_HEADER):  # a zero block: the proper end of the archive
                raise
            # ReadError passes through TarFile.next() unchanged, ending the read loudly.
            raise tarfile.ReadError(
                f"bad or missing tar header ({exc}); the archive is corrupt or truncated"
            ) from None

    def _proc_member(self, tarfile_: tarfile.TarFile) -> Self:
        # The hook tarfile documents for subclasses: an extended header is read whole into
        # memory before it can be judged, so its size is checked first.
        if self.type in _HEADER_TYPES and not 0 <= self.size <= _MAX_HEADER_BYTES:
            raise tarfile.ReadError(
                f"an extended (PAX or GNU long name) header of {self.size} bytes; "
                f"at most {_MAX_HEADER_BYTES} are read"
            )
        member: Self = vars(tarfile.TarInfo)["_proc_member"](self, tarfile_)
        return member

    def _proc_pax(self, tarfile_: tarfile.TarFile) -> Self:
        """tarfile's own, less what made it slow: the records are read one by one, by length.

        Python 3.11.7's parser takes any run of "digits space keyword=" for a record and
        searches each header with a regular expression that is quadratic on digits
        (CVE-2024-6232): 64 KiB of header cost it a gigabyte or seconds of CPU. What is
        kept of each record, and what is done with it after, is tarfile's, but for two
        things a bundle never holds: a global header setting more than a comment (or the
        path, linkpath and size that `_read_tar_stream` reports), refused here, and the
        map of a GNU sparse member, left unread.
        """
        assert tarfile_.fileobj is not None
        data = tarfile_.fileobj.read(_padded(self.size))[: self.size]
        if len(data) < self.size:
            raise tarfile.ReadError(
                f"an extended (PAX) header of {self.size} bytes is cut short at {len(data)}"
            )
        errors = tarfile_.errors
        records = _pax_records(data, errors)
        if self.type == tarfile.XGLTYPE:
            refused = next((key for key in records if key not in _GLOBAL_KEYWORDS), None)
            if refused is not None:
                raise _RefusedHeader(
                    f"the archive has a global PAX header that sets '{printable_name(refused)}' "
                    "for every later member; of a global header only a comment (as git "
                    "archive writes) is accepted"
                )
        pax_headers = dict(tarfile_.pax_headers)
        pax_headers.update({key: value.decode("utf-8", errors) for key, value in records.items()})
        # tarfile decodes path, linkpath, uname and gname by the archive's own encoding
        # where the header says hdrcharset=BINARY, and falls back to it where not UTF-8.
        binary = pax_headers.get("hdrcharset") == "BINARY"
        for keyword in _PAX_NAME_FIELDS & records.keys():
            encoding = tarfile_.encoding if binary else "utf-8"
            pax_headers[keyword] = _decode_pax(
                records[keyword], encoding, tarfile_.encoding, errors
            )
        if self.type == tarfile.XGLTYPE:
            # Set before the next header is read: tarfile applies it to every later member.
            tarfile_.pax_headers = pax_headers

        try:
            member = self.fromtarfile(tarfile_)
        except tarfile.HeaderError as exc:
            raise _SUBSEQUENT_HEADER(str(exc)) from None

        if b"GNU.sparse." in data and any(key.startswith("GNU.sparse.") for key in records):
            # Sparse members are refused by type ("is a sparse file"), so their maps are
            # left unread: two of tarfile's three readers of them are quadratic as well.
            _mark_sparse(member)

        if self.type in (tarfile.XHDTYPE, tarfile.SOLARIS_XHDTYPE):
            vars(tarfile.TarInfo)["_apply_pax_info"](
                member, pax_headers, tarfile_.encoding, tarfile_.errors
            )
            member.offset = self.offset
            if "size" in pax_headers:
                # The PAX size replaces the header's, and with it where the next header is.
                offset = member.offset_data
                if member.isreg() or member.type not in tarfile.SUPPORTED_TYPES:
                    offset += _padded(member.size)
                tarfile_.offset = offset
        return member


class _RefusedHeader(tarfile.ReadError):
    """A header read whole and judged unsafe, not corrupt: UnsafeInput, not UnreadableInput."""


_SUBSEQUENT_HEADER: type[tarfile.HeaderError] = vars(tarfile)["SubsequentHeaderError"]
_PAX_NAME_FIELDS: frozenset[str] = frozenset(vars(tarfile)["PAX_NAME_FIELDS"])
# A global header applies to every later member, and tarfile copies all its keywords into
# each: K keywords by M members. git archive writes a comment; path, linkpath and size
# are let through only so that `_read_tar_stream` can say why it refuses them.
_GLOBAL_KEYWORDS = frozenset({"comment", "path", "linkpath", "size"})
# Anchored at a record's start, and only to find where its keyword ends: the length then
# says where the record does. The length's digits are bounded, so a run of digits costs
# no more than one record's worth of backtracking.
_PAX_RECORD = re.compile(rb"([0-9]{1,20}) ([^=\n]+)=")


def _pax_records(data: bytes, errors: str) -> dict[str, bytes]:
    """The keywords of a PAX header and their values, of records that fill it exactly.

    Each is "LENGTH SP KEYWORD=VALUE LF", LENGTH the decimal length of the whole record;
    the value may hold anything, newlines and '=' included, so only the length says where
    it ends. Each record is looked at once, apart from the rest: linear in the header's
    size. A keyword given twice keeps its last value, as in tarfile.
    """
    records: dict[str, bytes] = {}
    position = 0
    while position < len(data):
        match = _PAX_RECORD.match(data, position)
        end = position + int(match[1]) if match else 0
        if not match or end > len(data) or match.end() >= end or data[end - 1] != ord("\n"):
            why = _misframed(data, position)
            raise tarfile.ReadError(f"a malformed PAX header: the record at byte {position} {why}")
        records[match[2].decode("utf-8", errors)] = data[match.end() : end - 1]
        position = end
    return records


def _misframed(data: bytes, position: int) -> str:
    """What is wrong with the record at position, which `_PAX_RECORD` did not frame."""
    space = data.find(b" ", position, position + 21)  # the 20 digits allowed, and a space
    digits = data[position:space] if space > position else b""
    if not digits.isdigit():  # bytes: ASCII digits only, and never empty
        return "does not start with a decimal length and a space"
    end = position + int(digits)
    if end > len(data):
        return f"has a length of {int(digits)}, past the end of the header"
    if end <= space or data[end - 1] != ord("\n"):
        return "does not end with a newline where its length says"
    return "has no keyword before an '='"


def _padded(size: int) -> int:
    """The size rounded up to whole blocks, as tar stores it."""
    return -(-size // _BLOCK) * _BLOCK


def _decode_pax(value: bytes, encoding: str, fallback: str, errors: str) -> str:
    """tarfile's decoding of a value: strictly first, then with the archive's error handler."""
    try:
        return value.decode(encoding, "strict")
    except UnicodeDecodeError:
        return value.decode(fallback, errors)


def _mark_sparse(member: tarfile.TarInfo) -> None:
    # A list of (offset, size) pairs in tarfile; an empty one still makes issparse() true.
    member.sparse = []  # type: ignore[assignment]  # typeshed has it as bytes


# (RecursionError: tarfile reads each PAX or GNU long-name header by calling itself for the
# header after it, so a chain of a few hundred of them exhausts the stack.)
_STREAM_ERRORS = (
    tarfile.TarError, EOFError, OSError, zlib.error, ValueError, OverflowError, RecursionError,
)  # fmt: skip


def _corrupt(source: str, exc: BaseException) -> UnreadableInput | UnsafeInput:
    if isinstance(exc, _RefusedHeader):
        return UnsafeInput(f"{source}: {exc}; refused")
    if isinstance(exc, EOFError | zlib.error):
        return UnreadableInput(f"{source}: corrupt or truncated gzip stream: {_reason(exc)}")
    if isinstance(exc, RecursionError):
        return UnreadableInput(
            f"{source}: corrupt tar archive: a chain of extended headers (PAX or GNU long "
            "names) too long to read"
        )
    if isinstance(exc, tarfile.TarError | ValueError | OverflowError):
        return UnreadableInput(f"{source}: corrupt tar archive: {_reason(exc)}")
    return UnreadableInput(f"{source}: cannot be read: {_reason(exc)}")


def _archive_kind(head: bytes, path: Path, source: str) -> str:
    if head.startswith(_GZIP_MAGIC):
        return "gz"
    for magic, name in _OTHER_FORMATS.items():
        if head.startswith(magic):
            raise UnreadableInput(
                f"{source}: {name} data; only directories and tar archives "
                "(.tar.gz, .tgz, .tar) are read"
            )
    if head[_USTAR_MAGIC] == b"ustar":
        return "tar"
    if not head:
        raise UnreadableInput(f"{source}: an empty file, not a bundle")
    if path.name.lower().endswith((".tar.gz", ".tgz")):
        raise UnreadableInput(f"{source}: named like a .tar.gz but not gzip-compressed")
    raise UnreadableInput(f"{source}: neither a directory nor a tar archive (.tar.gz, .tgz, .tar)")


def read_archive(path: Path, source: str, limits: Limits, *, fast: bool = True) -> LoadedBundle:
    """A tar archive (gzip-compressed or plain): `reader.read_bundle` for a file.

    The archive is read first by the fast path (simpletar), which gives up at the first
    header outside its subset; then it is read again, from the start and with fresh
    counts, through tarfile, which decides. fast=False (tests only) goes to tarfile at once.
    """
    try:
        raw = path.open("rb")
    except OSError as exc:
        raise UnreadableInput(f"{source}: cannot be read: {_reason(exc)}") from None
    with contextlib.ExitStack() as closing:
        closing.enter_context(raw)
        try:
            head = raw.read(512)
            raw.seek(0)
        except OSError as exc:
            raise UnreadableInput(f"{source}: cannot be read: {_reason(exc)}") from None
        kind = _archive_kind(head, path, source)
        if fast:
            bundle = _read_once(raw, kind, source, limits, fast=True)
            if bundle is not None:
                return bundle
            try:
                raw.seek(0)
            except OSError as exc:
                raise UnreadableInput(f"{source}: cannot be read: {_reason(exc)}") from None
        bundle = _read_once(raw, kind, source, limits, fast=False)
        assert bundle is not None
        return bundle


def _read_once(
    raw: _Readable, kind: str, source: str, limits: Limits, *, fast: bool
) -> LoadedBundle | None:
    """The bundle in raw, read from its start; None where the fast path gave up."""
    meter = _Meter(source, limits, compressed=kind == "gz")
    tar_stream: _Readable = raw
    gzip_stream = None
    if kind == "gz":
        tar_stream = gzip_stream = _GzipStream(raw, meter, source)
    stream = _CountingReader(tar_stream, meter.count_expanded, source)
    collector = _Collector(source, limits, noun="member")
    if fast:
        try:
            _read_simple_tar(stream, collector)
        except simpletar.NotSimple:
            return None
    else:
        _read_tar_stream(stream, collector)
    if gzip_stream is not None:
        _judge_gzip_end(gzip_stream, collector)
    return collector.result(strip_root=True)


def _count_bytes(count: int) -> str:
    return "1 byte" if count == 1 else f"{count} bytes"


def _judge_gzip_end(gzip_stream: _GzipStream, collector: _Collector) -> None:
    if gzip_stream.members > 1:
        collector.refuse_archive(
            f"the gzip file holds {gzip_stream.members} concatenated gzip streams; a bundle "
            "is one, and tools disagree on whether they read past the first"
        )
    if gzip_stream.trailing_bytes:
        cap = collector.limits.max_total_bytes
        count = gzip_stream.trailing_bytes
        shown = f"more than {cap} bytes" if count > cap else _count_bytes(count)
        collector.refuse_archive(
            f"{shown} that are not gzip data follow the "
            "end of the gzip stream; they are hidden from some tools and not from others"
        )


def _next_member(archive: tarfile.TarFile, source: str) -> tarfile.TarInfo | None:
    try:
        return archive.next()
    except _STREAM_ERRORS as exc:
        raise _corrupt(source, exc) from None


_SLASHED = "is a regular file whose name ends with '/', as only a directory's may"


def _type_problem(member: tarfile.TarInfo) -> str | None:
    """Why a member's type is refused, or None for a plain regular file or directory."""
    only = "only regular files and directories are accepted"
    if member.issym():
        return f"is a symbolic link to '{printable_name(member.linkname)}'; links are refused"
    if member.islnk():
        return f"is a hard link to '{printable_name(member.linkname)}'; links are refused"
    if member.ischr():
        return f"is a character device; {only}"
    if member.isblk():
        return f"is a block device; {only}"
    if member.isfifo():
        return f"is a FIFO; {only}"
    if member.type == tarfile.GNUTYPE_SPARSE or member.issparse():
        return f"is a sparse file; {only}"
    if member.isdir():
        return None
    if member.type in (tarfile.REGTYPE, tarfile.AREGTYPE):
        return _SLASHED if member.name.endswith("/") else None
    kind = member.type.decode("latin-1")
    return f"has tar type '{printable_name(kind)}'; {only}"


def _read_content(archive: tarfile.TarFile, member: tarfile.TarInfo, source: str) -> bytes:
    try:
        content = archive.extractfile(member)
        data = content.read(member.size) if content is not None else b""
    except _STREAM_ERRORS as exc:
        raise _corrupt(source, exc) from None
    if len(data) != member.size:
        raise UnreadableInput(
            f"{source}: corrupt tar archive: member '{printable_name(member.name)}' is truncated"
        )
    return data


def _read_tar_stream(stream: _CountingReader, collector: _Collector) -> None:
    source = collector.source
    try:
        # Closed by the `with` below; opening errors must first become UnreadableInput.
        archive = tarfile.open(  # noqa: SIM115
            fileobj=stream,
            mode="r|",
            tarinfo=_StrictTarInfo,
            encoding="utf-8",
            errors="surrogateescape",
        )
    except _STREAM_ERRORS as exc:
        raise _corrupt(source, exc) from None
    with archive:
        while (member := _next_member(archive, source)) is not None:
            collector.count()
            name = member.name
            if member.size < 0:  # a PAX size of -1: where the next header is, is unknown
                raise UnreadableInput(
                    f"{source}: corrupt tar archive: member '{printable_name(name)}' "
                    "has a negative size"
                )
            problem = _type_problem(member) or _name_problem(name)
            content = functools.partial(_read_content, archive, member, source)
            _take(collector, name, member.size, member.isdir(), problem, content)
            # tarfile keeps every member read, and each member its PAX keywords (up to 64
            # KiB of them); none is needed once taken, and extractfile does not look there.
            vars(archive)["members"].clear()
        overrides = sorted({"path", "linkpath", "size"} & set(archive.pax_headers))
        if overrides:
            collector.refuse_archive(
                "the archive has a global PAX header that sets "
                f"{', '.join(overrides)} for every later member; refused"
            )
        # tarfile has consumed the first zero block; what it buffered is read through it.
        assert archive.fileobj is not None
        _judge_end_of_archive(archive.fileobj, archive.offset + _BLOCK, collector)


def _take(
    collector: _Collector,
    name: str,
    size: int,
    directory: bool,
    problem: str | None,
    content: Callable[[], bytes],
) -> None:
    """One member, on either path: refused, a directory noted, or a file read and kept."""
    if problem is not None:
        collector.refuse(name, problem)
        return
    parts = _parts(name)
    if directory:
        if parts:
            collector.add_dir(name, parts)
        return
    if not parts:
        collector.refuse(name, "has an empty name")
        return
    collector.check_size(name, size)
    collector.add_file(name, parts, content())


# A name that _name_problem accepts, for a reason seen at a glance: printable ASCII
# letters, digits and `._+-` only (no backslash, colon or control character), in at most
# 32 non-empty components of at most 255 bytes each, not absolute; with no '..' anywhere
# and 1024 bytes at most (checked beside it). test_archive_fast holds it to that.
_PLAIN_NAME = re.compile(r"(?:[A-Za-z0-9_.+-]{1,255}/){0,31}[A-Za-z0-9_.+-]{1,255}")
_MAX_PLAIN_NAME = 1024


def _read_simple_tar(stream: _CountingReader, collector: _Collector) -> None:
    """The fast path: `_read_tar_stream` for an archive of simple headers only.

    Raises simpletar.NotSimple at the first header (or short read) that it leaves to
    tarfile; until then it asks the same bytes of the stream at the same steps as
    tarfile, and calls the collector the same way, so that a limit stops both alike.
    """
    tar = simpletar.TarStream(stream)
    offset = 0  # where the next header begins: TarFile.offset
    while True:
        header = tar.header_at(offset)
        if header == simpletar.ZERO_BLOCK:
            if offset == 0:  # tarfile has a way of its own with an archive that starts so
                raise simpletar.NotSimple
            break
        name, directory, size = simpletar.parse_header(header)
        collector.count()
        if _PLAIN_NAME.fullmatch(name) and ".." not in name and len(name) <= _MAX_PLAIN_NAME:
            problem = None  # what _name_problem says of such a name, said faster
        else:
            problem = _name_problem(name)
        if directory:
            offset += _BLOCK
        else:
            problem = (_SLASHED if name.endswith("/") else None) or problem
            offset += _BLOCK + simpletar.blocks(size)
        _take(collector, name, size, directory, problem, functools.partial(tar.read_exactly, size))
    _judge_end_of_archive(tar, offset + _BLOCK, collector)


def _judge_end_of_archive(rest: _Readable, start: int, collector: _Collector) -> None:
    """After the first zero block: one more, then nothing but zeros, as tar writes it.

    `tar --ignore-zeros` (and -i) reads on past zero blocks; a second archive or other
    data there would be extracted by it and never seen here, so it is refused.
    """
    position = start
    first_data: int | None = None
    header_after = False
    while chunk := _read_rest(rest, collector.source):
        if first_data is None and chunk.count(0) != len(chunk):
            first_data = position + len(chunk) - len(chunk.lstrip(b"\0"))
            block_start = first_data - first_data % _BLOCK - position
            header_after = chunk[max(0, block_start) :][_USTAR_MAGIC] == b"ustar"
        position += len(chunk)
    if first_data is not None:
        what = "another tar archive" if header_after else "data"
        collector.refuse_archive(
            f"{what} follows the end-of-archive marker (from byte {first_data} of the tar "
            f"stream, {_count_bytes(position - first_data)}); `tar --ignore-zeros` would read it, "
            "this reader would not: refused"
        )
    elif position - start < _BLOCK:
        collector.refuse_archive(
            "the archive ends after a single zero block, not the two of an end-of-archive "
            "marker: it is truncated"
        )


def _read_rest(stream: _Readable, source: str) -> bytes:
    try:
        return stream.read(_CHUNK)
    except _STREAM_ERRORS as exc:
        raise _corrupt(source, exc) from None
