"""Read a bundle (a directory or a .tar.gz stream) into memory without trusting it."""

from __future__ import annotations

import contextlib
import errno
import functools
import io
import os
import re
import stat
import tarfile
import unicodedata
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Protocol, Self

from verifier.errors import UnreadableInput, UnsafeInput
from verifier.jsonio import MAX_DEPTH as MAX_JSON_DEPTH
from verifier.jsonio import MAX_VALUES as MAX_JSON_VALUES
from verifier.model import Finding, Severity

CHECK = "safety"

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
_CHUNK = 1024 * 1024
_RAW_CHUNK = 64 * 1024
# Open directories are held as file descriptors, one per level; no bundle needs more.
_MAX_DEPTH = 32
# PATH_MAX and NAME_MAX of common file systems; a bundle's names are far shorter.
_MAX_NAME_BYTES = 1024
_MAX_COMPONENT_BYTES = 255
# A PAX or GNU long-name header is read whole into memory before anything is checked.
_MAX_HEADER_BYTES = 64 * 1024
_BLOCK = 512
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


@dataclass(frozen=True)
class Limits:
    """How much a bundle may hold before reading it stops as unsafe (each has a CLI flag).

    The defaults keep any bundle within them under 10 s and 256 MiB on a laptop (see
    SECURITY.md); a real bundle is a few hundred kilobytes.
    """

    max_members: int = 10_000
    max_member_bytes: int = 16 * 1024 * 1024
    max_total_bytes: int = 32 * 1024 * 1024
    max_ratio: float = 200.0  # expanded / compressed bytes, for the whole archive
    max_json_depth: int = MAX_JSON_DEPTH  # nesting of one JSON document
    max_json_values: int = MAX_JSON_VALUES  # values of all JSON documents of a bundle


DEFAULT_LIMITS = Limits()


@dataclass(frozen=True)
class LoadedBundle:
    """Every regular file of a bundle, in memory, and what was refused on the way."""

    source: str
    files: Mapping[str, bytes]  # bundle-relative posix path -> content
    findings: tuple[Finding, ...]  # check="safety"


def read_bundle(path: Path, limits: Limits = DEFAULT_LIMITS) -> LoadedBundle:
    """Read a bundle directory or tar archive (gzip-compressed or plain) into memory.

    Members that break a safety rule are skipped and reported as findings; input that
    cannot be read raises UnreadableInput, input past a limit raises UnsafeInput.
    """
    source = str(path)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise UnreadableInput(f"{source}: no such file or directory") from None
    except (OSError, ValueError) as exc:
        raise UnreadableInput(f"{source}: cannot be read: {_reason(exc)}") from None
    if stat.S_ISDIR(info.st_mode):
        return _read_directory(path, source, limits)
    if stat.S_ISREG(info.st_mode):
        return _read_archive(path, source, limits)
    raise UnreadableInput(f"{source}: neither a directory nor a tar archive (.tar.gz, .tgz, .tar)")


# --- names ---------------------------------------------------------------------------


def _escape(char: str) -> str:
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8, kept by surrogateescape
        return f"\\x{code - 0xDC00:02x}"
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


_SHOWN_CHARS = 200
_SURROGATE = re.compile("[\ud800-\udfff]")  # a name byte that was not UTF-8, or a lone one


def _printable(text: str) -> str:
    """The name as it may be shown on a terminal: control characters escaped, length cut."""
    cut = text[:_SHOWN_CHARS]
    shown = "".join(c if c.isprintable() else _escape(c) for c in cut)
    return shown if cut == text else f"{shown}... ({len(text)} characters)"


def _name_problem(name: str) -> str | None:
    """Why a member name (or a directory entry name) is refused, or None."""
    if name == "":
        return "has an empty name"
    size = len(name.encode("utf-8", "surrogatepass"))
    if size > _MAX_NAME_BYTES:
        return f"has a name of {size} bytes; at most {_MAX_NAME_BYTES} are accepted"
    if _SURROGATE.search(name):
        return "has a name that is not valid UTF-8"
    if not name.isprintable():
        return "has a control or non-printable character in its name"
    if "\\" in name:
        return "has a backslash in its name; only '/' separates path components"
    if name.startswith("/") or (
        len(name) >= 2 and name[1] == ":" and name[0].isascii() and name[0].isalpha()
    ):
        return "has an absolute name; names must be relative to the bundle"
    components = name.split("/")
    if ".." in components:
        return "has a '..' component in its name; names must stay inside the bundle"
    longest = max(len(c.encode("utf-8")) for c in components)
    if longest > _MAX_COMPONENT_BYTES:
        return (
            f"has a path component of {longest} bytes; at most {_MAX_COMPONENT_BYTES} are accepted"
        )
    if len(_parts(name)) > _MAX_DEPTH:
        return f"is nested deeper than {_MAX_DEPTH} directories"
    return None


def _parts(name: str) -> tuple[str, ...]:
    """Path components, without the empty and '.' ones ('./a//b' -> ('a', 'b'))."""
    return tuple(p for p in name.split("/") if p not in ("", "."))


@functools.lru_cache(maxsize=4096)  # each file folds its parents again: records/<condition>
def _fold(path: str) -> str:
    return unicodedata.normalize("NFC", path).casefold()


class _Namespace:
    """The names accepted so far, to refuse duplicates, case collisions and file/dir clashes."""

    def __init__(self) -> None:
        self._files: dict[str, str] = {}  # folded -> as spelled
        self._dirs: dict[str, str] = {}

    def add_file(self, parts: tuple[str, ...]) -> str | None:
        path = "/".join(parts)
        folded = _fold(path)
        other = self._files.get(folded)
        if other == path:
            return "appears more than once; only the first copy is read"
        if other is not None:
            return _collision(other, path)
        other = self._dirs.get(folded)
        if other is not None:
            return f"is a file, but '{_printable(other)}' is a directory"
        problem = self._parent_problem(parts)
        if problem is None:
            self._files[folded] = path
            self._add_parents(parts)
        return problem

    def add_dir(self, parts: tuple[str, ...]) -> str | None:
        path = "/".join(parts)
        folded = _fold(path)
        other = self._files.get(folded)
        if other is not None:
            return f"is a directory, but '{_printable(other)}' is a file"
        other = self._dirs.get(folded)
        if other is not None and other != path:
            return _collision(other, path)
        problem = self._parent_problem(parts)
        if problem is None:
            self._add_parents(parts)
            self._dirs.setdefault(folded, path)
        return problem

    def _parent_problem(self, parts: tuple[str, ...]) -> str | None:
        for end in range(1, len(parts)):
            prefix = "/".join(parts[:end])
            folded = _fold(prefix)
            if folded in self._files:
                return f"is inside '{_printable(self._files[folded])}', which is a file"
            other = self._dirs.get(folded)
            if other is not None and other != prefix:
                return _collision(other, prefix)
        return None

    def _add_parents(self, parts: tuple[str, ...]) -> None:
        for end in range(1, len(parts)):
            prefix = "/".join(parts[:end])
            self._dirs.setdefault(_fold(prefix), prefix)


def _collision(other: str, path: str) -> str:
    """Say what kind of collision it is: Unicode normalization, letter case, or both."""
    shown = _printable(other)
    if unicodedata.normalize("NFC", other) == unicodedata.normalize("NFC", path):
        return (
            f"is the same name as '{shown}' in another Unicode normalization form "
            "(NFC/NFD); names must differ in more than their Unicode form"
        )
    return f"collides case-insensitively with '{shown}'; names must differ in more than case"


# --- what is kept and what is refused ------------------------------------------------


class _Collector:
    """Accumulates accepted files and safety findings, and enforces the count and size limits."""

    def __init__(self, source: str, limits: Limits, noun: str) -> None:
        self.source = source
        self.limits = limits
        self.noun = noun
        self.files: dict[str, bytes] = {}
        self.dirs: list[str] = []
        self.findings: list[Finding] = []
        self.names = _Namespace()
        self._count = 0
        self._total = 0

    def count(self) -> None:
        self._count += 1
        if self._count > self.limits.max_members:
            raise UnsafeInput(
                f"{self.source}: more than {self.limits.max_members} members; reading stopped "
                "(raise the limit with --max-members if you trust this bundle)"
            )

    def check_size(self, name: str, size: int) -> None:
        if size > self.limits.max_member_bytes:
            raise UnsafeInput(
                f"{self.source}: {self.noun} '{_printable(name)}' is {size} bytes, over the "
                f"limit of {self.limits.max_member_bytes} bytes per member "
                "(raise it with --max-member-bytes if you trust this bundle)"
            )
        self._total += size
        if self._total > self.limits.max_total_bytes:
            raise UnsafeInput(
                f"{self.source}: its files hold more than {self.limits.max_total_bytes} bytes "
                "in total; reading stopped (raise the limit with --max-total-bytes "
                "if you trust this bundle)"
            )

    def refuse(self, name: str, reason: str) -> None:
        shown = _printable(name)
        self.findings.append(
            Finding(
                check=CHECK,
                severity=Severity.ERROR,
                message=f"{self.noun} '{shown}' {reason}",
                file=shown,
            )
        )

    def refuse_archive(self, message: str) -> None:
        """A finding about the archive as a whole, not about one member."""
        self.findings.append(Finding(check=CHECK, severity=Severity.ERROR, message=message))

    def add_file(self, name: str, parts: tuple[str, ...], data: bytes) -> bool:
        first = self.files.get("/".join(parts))
        if first is not None:
            # tar extracts the last copy; this reader keeps the first: neither is trusted.
            same = "the same" if first == data else "different"
            self.refuse(
                name,
                f"appears more than once, with {same} contents; only the first copy is read",
            )
            return False
        problem = self.names.add_file(parts)
        if problem is not None:
            self.refuse(name, problem)
            return False
        self.files["/".join(parts)] = data
        return True

    def add_dir(self, name: str, parts: tuple[str, ...]) -> bool:
        problem = self.names.add_dir(parts)
        if problem is not None:
            self.refuse(name, problem)
            return False
        self.dirs.append("/".join(parts))
        return True

    def result(self, *, strip_root: bool) -> LoadedBundle:
        files = _strip_common_root(self.files, self.dirs) if strip_root else self.files
        return LoadedBundle(
            source=self.source,
            files=MappingProxyType(dict(sorted(files.items()))),
            findings=tuple(self.findings),
        )


def _strip_common_root(files: dict[str, bytes], dirs: list[str]) -> dict[str, bytes]:
    """Drop the single top-level directory that holds everything (`tar czf b.tgz bundle/`)."""
    if not files or any("/" not in name for name in files):
        return files
    roots = {name.split("/", 1)[0] for name in [*files, *dirs]}
    if len(roots) != 1:
        return files
    cut = len(roots.pop()) + 1
    return {name[cut:]: data for name, data in files.items()}


# --- tar archives --------------------------------------------------------------------


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


_STREAM_ERRORS = (tarfile.TarError, EOFError, OSError, zlib.error, ValueError, OverflowError)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def _corrupt(source: str, exc: BaseException) -> UnreadableInput:
    if isinstance(exc, EOFError | zlib.error):
        return UnreadableInput(f"{source}: corrupt or truncated gzip stream: {_reason(exc)}")
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


def _read_archive(path: Path, source: str, limits: Limits) -> LoadedBundle:
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
        meter = _Meter(source, limits, compressed=kind == "gz")
        tar_stream: _Readable = raw
        gzip_stream = None
        if kind == "gz":
            tar_stream = gzip_stream = _GzipStream(raw, meter, source)
        stream = _CountingReader(tar_stream, meter.count_expanded, source)
        collector = _Collector(source, limits, noun="member")
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


def _type_problem(member: tarfile.TarInfo) -> str | None:
    """Why a member's type is refused, or None for a plain regular file or directory."""
    only = "only regular files and directories are accepted"
    if member.issym():
        return f"is a symbolic link to '{_printable(member.linkname)}'; links are refused"
    if member.islnk():
        return f"is a hard link to '{_printable(member.linkname)}'; links are refused"
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
        if member.name.endswith("/"):
            return "is a regular file whose name ends with '/', as only a directory's may"
        return None
    kind = member.type.decode("latin-1")
    return f"has tar type '{_printable(kind)}'; {only}"


def _read_content(archive: tarfile.TarFile, member: tarfile.TarInfo, source: str) -> bytes:
    try:
        content = archive.extractfile(member)
        data = content.read(member.size) if content is not None else b""
    except _STREAM_ERRORS as exc:
        raise _corrupt(source, exc) from None
    if len(data) != member.size:
        raise UnreadableInput(
            f"{source}: corrupt tar archive: member '{_printable(member.name)}' is truncated"
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
                    f"{source}: corrupt tar archive: member '{_printable(name)}' "
                    "has a negative size"
                )
            problem = _type_problem(member) or _name_problem(name)
            if problem is not None:
                collector.refuse(name, problem)
                continue
            parts = _parts(name)
            if member.isdir():
                if parts:
                    collector.add_dir(name, parts)
                continue
            if not parts:
                collector.refuse(name, "has an empty name")
                continue
            collector.check_size(name, member.size)
            collector.add_file(name, parts, _read_content(archive, member, source))
        overrides = sorted({"path", "linkpath", "size"} & set(archive.pax_headers))
        if overrides:
            collector.refuse_archive(
                "the archive has a global PAX header that sets "
                f"{', '.join(overrides)} for every later member; refused"
            )
        _judge_end_of_archive(archive, collector)


def _judge_end_of_archive(archive: tarfile.TarFile, collector: _Collector) -> None:
    """After the first zero block: one more, then nothing but zeros, as tar writes it.

    `tar --ignore-zeros` (and -i) reads on past zero blocks; a second archive or other
    data there would be extracted by it and never seen here, so it is refused.
    """
    # tarfile has consumed the first zero block; what it buffered is read through it.
    rest: _Readable | None = archive.fileobj
    assert rest is not None
    start = archive.offset + _BLOCK
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


# --- directories ---------------------------------------------------------------------


def _kind_of(mode: int) -> str:
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _list_directory(fd: int) -> list[str]:
    with os.scandir(fd) as entries:
        return sorted(entry.name for entry in entries)


def _read_file_at(dir_fd: int, name: str, limit: int) -> bytes:
    """Read a regular file by name, refusing to follow a link swapped in since it was listed."""
    fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "it changed while being read")
        chunks: list[bytes] = []
        size = 0
        while size <= limit and (chunk := os.read(fd, min(_CHUNK, limit + 1 - size))):
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _read_directory(path: Path, source: str, limits: Limits) -> LoadedBundle:
    collector = _Collector(source, limits, noun="entry")
    try:
        root = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            names = _list_directory(root)
        except OSError:
            os.close(root)
            raise
    except OSError as exc:
        raise UnreadableInput(f"{source}: cannot be read: {_reason(exc)}") from None
    # Each level is walked through the descriptor of its directory, so a name is
    # resolved exactly once and no symbolic link is ever followed.
    stack: list[tuple[int, str, Iterator[str]]] = [(root, "", iter(names))]
    try:
        while stack:
            dir_fd, prefix, pending = stack[-1]
            name = next(pending, None)
            if name is None:
                stack.pop()
                os.close(dir_fd)
                continue
            child = _visit(collector, dir_fd, prefix, name, depth=len(stack))
            if child is not None:
                stack.append(child)
    finally:
        for dir_fd, _, _ in stack:
            os.close(dir_fd)
    return collector.result(strip_root=False)


def _visit(
    collector: _Collector, dir_fd: int, prefix: str, name: str, depth: int
) -> tuple[int, str, Iterator[str]] | None:
    """Take one directory entry; return a subdirectory still to walk."""
    relative = prefix + name
    collector.count()
    problem = _name_problem(name)
    if problem is not None:
        collector.refuse(relative, problem)
        return None
    try:
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
        if stat.S_ISLNK(mode):
            target = os.readlink(name, dir_fd=dir_fd)
            collector.refuse(
                relative,
                f"is a symbolic link to '{_printable(target)}'; links are refused, not followed",
            )
            return None
        if stat.S_ISDIR(mode):
            if depth >= _MAX_DEPTH:
                collector.refuse(relative, f"is nested deeper than {_MAX_DEPTH} directories")
                return None
            if not collector.add_dir(relative, tuple(relative.split("/"))):
                return None
            fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
            try:
                names = _list_directory(fd)
            except OSError:
                os.close(fd)
                raise
            return fd, relative + "/", iter(names)
        if not stat.S_ISREG(mode):
            collector.refuse(
                relative, f"is {_kind_of(mode)}; only regular files and directories are accepted"
            )
            return None
        data = _read_file_at(dir_fd, name, collector.limits.max_member_bytes)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            collector.refuse(relative, "is a symbolic link; links are refused, not followed")
        else:
            collector.refuse(relative, f"cannot be read: {_reason(exc)}")
        return None
    collector.check_size(relative, len(data))
    collector.add_file(relative, tuple(relative.split("/")), data)
    return None
