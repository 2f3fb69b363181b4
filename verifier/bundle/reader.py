"""Read a bundle (a directory or a .tar.gz stream) into memory without trusting it."""

from __future__ import annotations

import errno
import functools
import os
import re
import stat
import unicodedata
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import NamedTuple

from verifier.errors import UnreadableInput, UnsafeInput
from verifier.jsonio import MAX_DEPTH as MAX_JSON_DEPTH
from verifier.jsonio import MAX_VALUES as MAX_JSON_VALUES
from verifier.model import Finding, Severity

CHECK = "safety"

_CHUNK = 1024 * 1024
# Open directories are held as file descriptors, one per level; no bundle needs more.
_MAX_DEPTH = 32
# PATH_MAX and NAME_MAX of common file systems; a bundle's names are far shorter.
_MAX_NAME_BYTES = 1024
_MAX_COMPONENT_BYTES = 255
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


class LoadedBundle(NamedTuple):
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
        from verifier.bundle.archive import read_archive  # tarfile: for archives only

        return read_archive(path, source, limits)
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


def printable_name(text: str) -> str:
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


@functools.lru_cache(maxsize=4096)  # components repeat across names: records/<condition>
def _fold(component: str) -> str:
    return unicodedata.normalize("NFC", component).casefold()


@functools.lru_cache(maxsize=4096)
def _shared(component: str) -> str:
    """The first of the equal strings seen lately, so a repeated component is held once."""
    return component


class _Namespace:
    """The names accepted so far, to refuse duplicates, case collisions and file/dir clashes.

    Names are kept as a tree: a node is found by its parent node and its folded component,
    and a component repeated across names is held once, so memory follows the total length
    of the names.
    (Every parent of every name kept as a string took 380 MB for 9,600 names of 32 levels.)
    Folding a path folds each component on its own: NFC does not compose across '/', and
    neither it nor casefold makes a '/'.
    """

    _ROOT = 0

    def __init__(self) -> None:
        self._children: dict[tuple[int, str], int] = {}  # (parent, folded component) -> node
        self._spelled: list[str] = [""]  # node -> its component as first spelled; 0 is the root
        self._is_file = bytearray(1)  # node -> 1 for a file (always a leaf), 0 for a directory

    def footprint(self) -> tuple[int, int]:
        """The nodes and the characters of the strings held, for the test of its memory."""
        held = {id(text): text for text in self._spelled}
        held.update((id(folded), folded) for _, folded in self._children)
        return len(self._spelled), sum(map(len, held.values()))

    def add_file(self, parts: tuple[str, ...]) -> str | None:
        chain = self._walk(parts)
        path = "/".join(parts)
        if len(chain) > len(parts):  # the name itself is taken
            other = self._spell(chain, len(parts))
            if not self._is_file[chain[-1]]:
                return f"is a file, but '{printable_name(other)}' is a directory"
            if other == path:
                return "appears more than once; only the first copy is read"
            return _collision(other, path)
        problem = self._parent_problem(parts, chain)
        if problem is None:
            self._add(parts, chain, file=True)
        return problem

    def add_dir(self, parts: tuple[str, ...]) -> str | None:
        chain = self._walk(parts)
        if len(chain) > len(parts):  # the name itself is taken
            other = self._spell(chain, len(parts))
            if self._is_file[chain[-1]]:
                return f"is a directory, but '{printable_name(other)}' is a file"
            path = "/".join(parts)
            if other != path:
                return _collision(other, path)
        problem = self._parent_problem(parts, chain)
        if problem is None:
            self._add(parts, chain, file=False)
        return problem

    def _walk(self, parts: tuple[str, ...]) -> list[int]:
        """The nodes of the longest accepted prefix of the name, the root first."""
        chain = [self._ROOT]
        for part in parts:
            node = self._children.get((chain[-1], _fold(part)))
            if node is None:
                break
            chain.append(node)
        return chain

    def _spell(self, chain: list[int], depth: int) -> str:
        """The path of chain[depth] as it was first spelled."""
        return "/".join(self._spelled[node] for node in chain[1 : depth + 1])

    def _parent_problem(self, parts: tuple[str, ...], chain: list[int]) -> str | None:
        for depth in range(1, min(len(chain), len(parts))):
            node = chain[depth]
            if self._is_file[node]:
                return f"is inside '{printable_name(self._spell(chain, depth))}', which is a file"
            # The levels above matched as spelled, so the paths differ here or not at all.
            if self._spelled[node] != parts[depth - 1]:
                return _collision(self._spell(chain, depth), "/".join(parts[:depth]))
        return None

    def _add(self, parts: tuple[str, ...], chain: list[int], *, file: bool) -> None:
        """Add the components of the name past the accepted prefix `chain`."""
        node = chain[-1]
        for depth in range(len(chain) - 1, len(parts)):
            part = parts[depth]
            folded = _fold(part)
            child = len(self._spelled)
            self._children[(node, folded)] = child
            self._spelled.append(folded if part == folded else _shared(part))
            self._is_file.append(file and depth == len(parts) - 1)
            node = child


def _collision(other: str, path: str) -> str:
    """Say what kind of collision it is: Unicode normalization, letter case, or both."""
    shown = printable_name(other)
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
                f"{self.source}: {self.noun} '{printable_name(name)}' is {size} bytes, over the "
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
        shown = printable_name(name)
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


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


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
                f"is a symbolic link to '{printable_name(target)}'; "
                "links are refused, not followed",
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
