"""The named corpus of hostile bundles: each built here, from bytes and hand-made TarInfo.

Every case starts from the committed seed sample (signed with the test key) and breaks one
thing, so that the outcome it must get is exactly one refusal. SECURITY.md lists every case
by its name; `test_corpus.py` runs each through the real command line.
"""

from __future__ import annotations

import functools
import gzip
import io
import json
import random
import re
import tarfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from verifier import layout, signing
from verifier.checksums import format_sums

REPO = Path(__file__).resolve().parents[2]
SEED = REPO / "sample_bundles" / "seed-mlxcel"
KEYS = REPO / "sample_bundles" / "keys"
PUBLIC_KEY = KEYS / signing.PUBLIC_KEY_FILE
PRIVATE_KEY = KEYS / signing.PRIVATE_KEY_FILE

Files = dict[str, bytes]
Member = tuple[tarfile.TarInfo, bytes | None]


# --- the seed bundle and its archive ---------------------------------------------------


@functools.cache
def _seed() -> tuple[tuple[str, bytes], ...]:
    return tuple(
        (p.relative_to(SEED).as_posix(), p.read_bytes())
        for p in sorted(SEED.rglob("*"))
        if p.is_file()
    )


def seed_files() -> Files:
    return dict(_seed())


def resign(files: Files, sums: bytes | None = None) -> Files:
    """New SHA256SUMS (or the one given) and a valid signature over it, with the test key."""
    files = {k: v for k, v in files.items() if k not in layout.UNSUMMED}
    files[layout.SHA256SUMS] = format_sums(files) if sums is None else sums
    key = signing.load_private_key(PRIVATE_KEY)
    files[layout.SIGNATURE] = signing.sign(files[layout.SHA256SUMS], key)
    return files


def regular(name: str, data: bytes = b"{}\n") -> Member:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def special(name: str, kind: bytes, linkname: str = "") -> Member:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    return info, None


def with_pax(member: Member, headers: dict[str, str]) -> Member:
    info, data = member
    info.pax_headers = headers
    return info, data


def tar_bytes(members: list[Member], **open_args: object) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", **open_args) as archive:  # type: ignore[call-overload]
        for info, data in members:
            archive.addfile(info, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


def members_of(files: Files) -> list[Member]:
    return [regular(name, data) for name, data in sorted(files.items())]


def seed_tar(extra: list[Member] | None = None, **open_args: object) -> bytes:
    """The seed bundle as a tar stream, with extra members after its own."""
    return tar_bytes(members_of(seed_files()) + (extra or []), **open_args)


def gz(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=6, mtime=0)


def _tar_end(tar: bytes) -> int:
    """Where the end-of-archive zero blocks begin in a tar stream written by tarfile."""
    end = len(tar.rstrip(b"\0"))
    return end + (-end) % 512


# --- the case record -------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One hostile input and exactly what verify must make of it."""

    name: str
    group: str
    build: Callable[[Path], Path]  # writes the input under the folder, returns its path
    exit_code: int
    findings: tuple[tuple[str, str], ...] = ()  # (check, exact message) of error findings
    error: str | None = None  # or: part of the error that stops reading the bundle
    args: tuple[str, ...] = ()  # more arguments to `evidence verify`
    usage: bool = False  # a usage error: no report, the message on stderr
    other_checks: frozenset[str] = frozenset()  # checks that also fail, as a consequence
    outcome: str = ""  # one line for SECURITY.md, when the findings alone do not say it

    @property
    def summary(self) -> str:
        """What the case gets, in a few words, for SECURITY.md's table."""
        if self.usage:
            kind = "usage error"
        elif self.error is not None:
            kind = "unsafe: reading stops" if self.exit_code == 1 else "unreadable"
        elif not self.findings:
            kind = "verified" if self.exit_code == 0 else "not verified"
        else:
            checks = sorted({check for check, _ in self.findings} | self.other_checks)
            kind = f"finding ({', '.join(checks)})"
        note = self.outcome or _stable(self.findings[0][1] if self.findings else self.error or "")
        if len(note) > 110:
            note = note[:107].rstrip() + "..."
        note = note.replace("|", "\\|").replace("`", "'") if not self.outcome else note
        return f"{kind}, exit {self.exit_code}" + (f": {note}" if note else "")


CASES: list[Case] = []


def _stable(message: str) -> str:
    """The message without what changes whenever the samples are made again."""
    message = re.sub(r"\b[0-9a-f]{64}\b", "<sha256>", message)
    message = re.sub(r"^line \d+: ", "line N: ", message)
    message = re.sub(r"\(at byte \d+\)", "(at byte N)", message)
    return re.sub(r"from byte \d+ of the tar stream, \d+ bytes", "from byte N, M bytes", message)


def _lazy_file(name: str, make: Callable[[], bytes]) -> Callable[[Path], Path]:
    def build(folder: Path) -> Path:
        path = folder / name
        path.write_bytes(make())
        return path

    return build


def case(
    name: str,
    group: str,
    make: Callable[[], bytes],
    exit_code: int,
    *,
    finding: str | None = None,
    check: str = "safety",
    findings: tuple[tuple[str, str], ...] = (),
    **kw: Any,
) -> None:
    """Add a case whose input is one archive file; `finding` is a shorthand for one finding."""
    if finding is not None:
        findings = ((check, finding), *findings)
    CASES.append(Case(name, group, _lazy_file(name + ".tar.gz", make), exit_code, findings, **kw))


def member_case(name: str, member: Member, finding: str, **kw: Any) -> None:
    """A seed archive with one more member, refused as the finding says; reading goes on."""
    case(name, "archive", lambda: gz(seed_tar([member])), 1, finding=finding, **kw)


# --- archive: members ------------------------------------------------------------------

ONLY = "only regular files and directories are accepted"

member_case(
    "symlink",
    special("notes.json", tarfile.SYMTYPE, "/etc/passwd"),
    "member 'notes.json' is a symbolic link to '/etc/passwd'; links are refused",
)
member_case(
    "hard-link",
    special("copy.json", tarfile.LNKTYPE, "experiment.json"),
    "member 'copy.json' is a hard link to 'experiment.json'; links are refused",
)
member_case(
    "character-device",
    special("tty", tarfile.CHRTYPE),
    f"member 'tty' is a character device; {ONLY}",
)
member_case(
    "block-device", special("disk", tarfile.BLKTYPE), f"member 'disk' is a block device; {ONLY}"
)
member_case("fifo", special("pipe", tarfile.FIFOTYPE), f"member 'pipe' is a FIFO; {ONLY}")
member_case("unknown-tar-type", special("odd", b"Z"), f"member 'odd' has tar type 'Z'; {ONLY}")
member_case(
    "absolute-name",
    regular("/tmp/escape-probe.json"),
    "member '/tmp/escape-probe.json' has an absolute name; names must be relative to the bundle",
)
member_case(
    "windows-drive-name",
    regular("C:/escape-probe.json"),
    "member 'C:/escape-probe.json' has an absolute name; names must be relative to the bundle",
)
member_case(
    "dotdot-name",
    regular("../escape-probe.json"),
    "member '../escape-probe.json' has a '..' component in its name; "
    "names must stay inside the bundle",
)
member_case(
    "dotdot-after-normalization",
    regular("records/./sdpa-det-0//../../../escape-probe.json"),
    "member 'records/./sdpa-det-0//../../../escape-probe.json' has a '..' component in its "
    "name; names must stay inside the bundle",
)
member_case(
    "backslash-name",
    regular("records\\..\\escape-probe.json"),
    "member 'records\\..\\escape-probe.json' has a backslash in its name; "
    "only '/' separates path components",
)
member_case(
    "nul-in-name",
    with_pax(regular("a.json"), {"path": "notes\x00.json"}),
    "member 'notes\\x00.json' has a control or non-printable character in its name",
)
member_case(
    "escape-sequence-in-name",
    regular("notes\x1b[2J.json"),
    "member 'notes\\x1b[2J.json' has a control or non-printable character in its name",
)
member_case(
    "line-separator-in-name",
    regular("notes\u2028verdict.json"),
    "member 'notes\\u2028verdict.json' has a control or non-printable character in its name",
)
member_case(
    "name-not-utf8",
    with_pax(regular("a.json"), {"path": "notes\udcff.json", "hdrcharset": "BINARY"}),
    "member 'notes\\xff.json' has a name that is not valid UTF-8",
)
_LONG_NAME = "records/" + "n" * 200 + "/" + "m" * 200 + "/" + "o" * 700 + ".json"
member_case(
    "very-long-name",
    regular(_LONG_NAME),
    f"member '{_LONG_NAME[:200]}... ({len(_LONG_NAME)} characters)' has a name of "
    f"{len(_LONG_NAME)} bytes; at most 1024 are accepted",
)
member_case(
    "long-component",
    regular("records/" + "c" * 300 + ".json"),
    "member 'records/" + "c" * 192 + "... (313 characters)' has a path component of 305 bytes; "
    "at most 255 are accepted",
)
member_case(
    "deep-nesting",
    regular("/".join(["d"] * 40) + "/x.json"),
    "member '" + "/".join(["d"] * 40) + "/x.json' is nested deeper than 32 directories",
)
member_case(
    "file-name-with-trailing-slash",
    regular("notes.json/"),
    "member 'notes.json/' is a regular file whose name ends with '/', as only a directory's may",
)
member_case(
    "file-used-as-directory",
    regular("experiment.json/x.json"),
    "member 'experiment.json/x.json' is inside 'experiment.json', which is a file",
)
member_case(
    "empty-name-after-pax",
    with_pax(regular("a.json"), {"path": ""}),
    "member '' has an empty name",
)


def _seed_json(name: str) -> bytes:
    return seed_files()[name]


def _tampered_experiment() -> bytes:
    document = json.loads(_seed_json(layout.EXPERIMENT))
    document["title"] = "a different experiment"
    return (json.dumps(document, indent=2) + "\n").encode()


case(
    "duplicate-name-different-contents",
    "archive",
    lambda: gz(seed_tar([regular(layout.EXPERIMENT, _tampered_experiment())])),
    1,
    finding="member 'experiment.json' appears more than once, with different contents; "
    "only the first copy is read",
    outcome="tar would extract the last copy, the reader kept the first",
)
case(
    "duplicate-name-same-contents",
    "archive",
    lambda: gz(seed_tar([regular(layout.EXPERIMENT, _seed_json(layout.EXPERIMENT))])),
    1,
    finding="member 'experiment.json' appears more than once, with the same contents; "
    "only the first copy is read",
)
case(
    "duplicate-after-normalization",
    "archive",
    lambda: gz(seed_tar([regular("./records//sdpa-det-0/001.json", b"{}\n")])),
    1,
    finding="member './records//sdpa-det-0/001.json' appears more than once, with different "
    "contents; only the first copy is read",
)
case(
    "case-collision",
    "archive",
    lambda: gz(seed_tar([regular("Experiment.json", b"{}\n")])),
    1,
    finding="member 'Experiment.json' collides case-insensitively with 'experiment.json'; "
    "names must differ in more than case",
)
case(
    "unicode-normalization-collision",
    "archive",
    lambda: gz(seed_tar([regular("caf\u00e9.json"), regular("cafe\u0301.json")])),
    1,
    finding="member 'cafe\u0301.json' is the same name as 'caf\u00e9.json' in another Unicode "
    "normalization form (NFC/NFD); names must differ in more than their Unicode form",
    other_checks=frozenset({"checksums", "schema"}),
)


def _sparse_member() -> Member:
    info, data = regular("sparse.json", b"{}")
    info.type = tarfile.GNUTYPE_SPARSE
    return info, data


member_case("gnu-sparse-member", _sparse_member(), f"member 'sparse.json' is a sparse file; {ONLY}")
member_case(
    "pax-sparse-member",
    with_pax(
        regular("a.json", b"{}"),
        {
            "GNU.sparse.major": "0",
            "GNU.sparse.minor": "1",
            "GNU.sparse.name": "sparse.json",
            "GNU.sparse.size": "2",
            "GNU.sparse.map": "0,2",
        },
    ),
    f"member 'sparse.json' is a sparse file; {ONLY}",
)
case(
    "pax-global-path-override",
    "archive",
    lambda: gz(seed_tar(format=tarfile.PAX_FORMAT, pax_headers={"path": "experiment.json"})),
    1,
    finding="the archive has a global PAX header that sets path for every later member; refused",
    other_checks=frozenset({"checksums", "schema"}),
    outcome="with every member named alike, the other checks fail too",
)
case(
    "pax-negative-size",
    "archive",
    lambda: gz(seed_tar([with_pax(regular("a.json"), {"size": "-1"})])),
    2,
    error="corrupt tar archive: member 'a.json' has a negative size",
)
case(
    "pax-size-not-a-number",
    "archive",
    lambda: gz(seed_tar([with_pax(regular("a.json", b"{}"), {"size": "abc"})])),
    2,
    error="corrupt tar archive: bad or missing tar header (bad checksum)",
    outcome="tarfile reads the size as 0, so the data is taken for a header",
)
case(
    "pax-huge-size",
    "archive",
    lambda: gz(seed_tar([with_pax(regular("a.json"), {"size": str(10**15)})])),
    1,
    error="member 'a.json' is 1000000000000000 bytes, over the limit of 16777216 bytes per "
    "member (raise it with --max-member-bytes",
)
case(
    "pax-oversized-header",
    "archive",
    lambda: gz(seed_tar([with_pax(regular("a.json"), {"comment": "x" * 100_000})])),
    2,
    error="an extended (PAX or GNU long name) header of 100016 bytes; at most 65536 are read",
)


def _misframed_pax_record() -> bytes:
    """A PAX record whose length stops one byte short of its newline."""
    tar = seed_tar([with_pax(regular("a.json"), {"comment": "x"})])
    assert tar.count(b"13 comment=x\n") == 1
    return gz(tar.replace(b"13 comment=x\n", b"12 comment=x\n"))


case(
    "pax-malformed-record",
    "archive",
    _misframed_pax_record,
    2,
    error="corrupt tar archive: a malformed PAX header: the record at byte 0 does not end "
    "with a newline where its length says",
)
case(
    "pax-global-keyword",
    "archive",
    lambda: gz(seed_tar(format=tarfile.PAX_FORMAT, pax_headers={"uname": "root"})),
    1,
    error="the archive has a global PAX header that sets 'uname' for every later member; of "
    "a global header only a comment (as git archive writes) is accepted",
    outcome="the archive has a global PAX header that sets 'uname' for every later member; "
    "only a comment is accepted",
)
member_case(
    "pax-malformed-sparse-map",
    with_pax(regular("a.json"), {"GNU.sparse.map": "1", "GNU.sparse.size": "2"}),
    f"member 'a.json' is a sparse file; {ONLY}",
)
case(
    "pax-odd-metadata-is-harmless",
    "archive",
    lambda: gz(
        tar_bytes(
            [
                with_pax(m, {"mtime": "nan", "uid": "x", "uname": "\x1b[31m", "linkpath": "/"})
                for m in members_of(seed_files())
            ],
            format=tarfile.PAX_FORMAT,
        )
    ),
    0,
    outcome="mtime, uid, uname and a link path on a regular file mean nothing",
)


# --- archive: the stream ---------------------------------------------------------------


def _second_tar_after_end() -> bytes:
    """The issue's smuggling case: `tar -xzif` extracts another experiment.json."""
    return gz(seed_tar() + tar_bytes([regular(layout.EXPERIMENT, _tampered_experiment())]))


def _junk_after_end() -> bytes:
    tar = seed_tar()
    return gz(tar + random.Random(1).randbytes(3000))


def _junk_in_zero_padding() -> bytes:
    tar = bytearray(seed_tar())
    tar[_tar_end(bytes(tar)) + 2048] = 0x41
    return gz(bytes(tar))


def _lone_zero_block() -> bytes:
    tar = seed_tar()
    return gz(tar[: _tar_end(tar) + 512])


def _two_gzip_members() -> bytes:
    tar = seed_tar()
    return gz(tar[:5000]) + gz(tar[5000:])


def _junk_gzip_member() -> bytes:
    return gz(seed_tar()) + gz(b"junk that no tar reader should see\n" * 10)


def _bytes_after_gzip() -> bytes:
    return gz(seed_tar()) + random.Random(2).randbytes(100)


def _zeros_after_gzip() -> bytes:
    return gz(seed_tar()) + bytes(1024)


def _trailer(offset: int) -> Callable[[], bytes]:
    def make() -> bytes:
        data = bytearray(gz(seed_tar()))
        data[offset] ^= 0xFF
        return bytes(data)

    return make


def _truncated_gzip() -> bytes:
    data = gz(seed_tar())
    return data[: len(data) // 2]


def _truncated_tar() -> bytes:
    tar = seed_tar()
    return gz(tar[: _tar_end(tar) - 700])


def _no_end_of_archive() -> bytes:
    tar = seed_tar()
    return gz(tar[: _tar_end(tar)])


def _bad_header_checksum() -> bytes:
    tar = bytearray(seed_tar())
    tar[0] ^= 0x01  # a letter of the first member's name: its checksum no longer adds up
    return gz(bytes(tar))


def _gzip_bomb() -> bytes:
    return gz(seed_tar([regular("zeros.bin", bytes(12 * 1024 * 1024))]))


def _member_count_bomb() -> bytes:
    return gz(seed_tar([regular(f"r/{i}.json", b"{}") for i in range(10_001)]))


def _deep_directory_bomb() -> bytes:
    members = []
    for depth in range(1, 41):
        info = tarfile.TarInfo("/".join(["d"] * depth))
        info.type = tarfile.DIRTYPE
        members.append((info, None))
    return gz(seed_tar(members))


def _zero_block_first() -> bytes:
    """An archive that ends before it begins: a zero block, then the real members."""
    return gz(bytes(1024) + seed_tar())


def _raw_deflate() -> bytes:
    compressor = zlib.compressobj(wbits=-15)
    return b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff" + compressor.compress(b"x" * 100)


def _after_end(what: str, start: int, size: int) -> str:
    return (
        f"{what} follows the end-of-archive marker (from byte {start} of the tar stream, "
        f"{size} bytes); `tar --ignore-zeros` would read it, this reader would not: refused"
    )


_SEED_TAR_SIZE = len(seed_tar())
_SECOND_TAR_SIZE = len(tar_bytes([regular(layout.EXPERIMENT, _tampered_experiment())]))
case(
    "second-tar-after-end-of-archive",
    "archive",
    _second_tar_after_end,
    1,
    finding=_after_end("another tar archive", _SEED_TAR_SIZE, _SECOND_TAR_SIZE),
    outcome="`tar -xzif` would extract another experiment.json",
)
case(
    "junk-after-end-of-archive",
    "archive",
    _junk_after_end,
    1,
    finding=_after_end("data", _SEED_TAR_SIZE, 3000),
)
_PADDING_BYTE = _tar_end(seed_tar()) + 2048
case(
    "byte-in-end-of-archive-padding",
    "archive",
    _junk_in_zero_padding,
    1,
    finding=_after_end("data", _PADDING_BYTE, _SEED_TAR_SIZE - _PADDING_BYTE),
)
case(
    "zero-block-before-the-members",
    "archive",
    _zero_block_first,
    1,
    finding=_after_end("another tar archive", 1024, _SEED_TAR_SIZE),
    other_checks=frozenset({"checksums", "schema"}),
    outcome="an empty archive with another after it",
)
case(
    "lone-zero-block",
    "archive",
    _lone_zero_block,
    1,
    finding="the archive ends after a single zero block, not the two of an end-of-archive "
    "marker: it is truncated",
)
case(
    "concatenated-gzip-streams",
    "archive",
    _two_gzip_members,
    1,
    finding="the gzip file holds 2 concatenated gzip streams; a bundle is one, and tools "
    "disagree on whether they read past the first",
)
case(
    "extra-gzip-member-of-junk",
    "archive",
    _junk_gzip_member,
    1,
    finding="the gzip file holds 2 concatenated gzip streams; a bundle is one, and tools "
    "disagree on whether they read past the first",
    findings=(("safety", _after_end("data", _SEED_TAR_SIZE, 350)),),
)
case(
    "random-bytes-after-gzip",
    "archive",
    _bytes_after_gzip,
    1,
    finding="100 bytes that are not gzip data follow the end of the gzip stream; they are "
    "hidden from some tools and not from others",
)
case(
    "zero-padding-after-gzip",
    "archive",
    _zeros_after_gzip,
    1,
    finding="1024 bytes that are not gzip data follow the end of the gzip stream; they are "
    "hidden from some tools and not from others",
)
case(
    "corrupted-gzip-crc",
    "archive",
    _trailer(-8),
    2,
    error="corrupt or truncated gzip stream: the CRC-32 in the gzip trailer does not match",
)
case(
    "corrupted-gzip-length",
    "archive",
    _trailer(-4),
    2,
    error="corrupt or truncated gzip stream: the length in the gzip trailer does not match",
)
case("truncated-gzip", "archive", _truncated_gzip, 2, error="corrupt or truncated gzip stream")
case("truncated-tar-member", "archive", _truncated_tar, 2, error="corrupt tar archive")
case(
    "no-end-of-archive-marker",
    "archive",
    _no_end_of_archive,
    2,
    error="corrupt tar archive: bad or missing tar header",
)
case(
    "bad-tar-header-checksum",
    "archive",
    _bad_header_checksum,
    2,
    error="corrupt tar archive: bad or missing tar header (bad checksum)",
)
case(
    "not-gzip",
    "archive",
    lambda: b"hello, this is not an archive\n",
    2,
    error="named like a .tar.gz but not gzip-compressed",
)
case("empty-file", "archive", lambda: b"", 2, error="an empty file, not a bundle")
case(
    "xz-data",
    "archive",
    lambda: b"\xfd7zXZ\x00" + bytes(100),
    2,
    error="xz data; only directories and tar archives",
)
case(
    "zip-data",
    "archive",
    lambda: b"PK\x03\x04" + bytes(100),
    2,
    error="zip data; only directories and tar archives",
)
case(
    "gzip-of-non-tar",
    "archive",
    lambda: gz(b"just some text, not a tar archive\n" * 40),
    2,
    error="corrupt tar archive",
)
case(
    "gzip-header-only",
    "archive",
    lambda: gz(b"")[:10],
    2,
    error="corrupt or truncated gzip stream",
)
case(
    "gzip-raw-deflate-without-trailer",
    "archive",
    _raw_deflate,
    2,
    error="corrupt or truncated gzip stream",
)
case(
    "gzip-bomb",
    "archive",
    _gzip_bomb,
    1,
    error="it may be a compression bomb, reading stopped (raise the limit with --max-ratio",
)
case(
    "member-count-bomb",
    "archive",
    _member_count_bomb,
    1,
    error="more than 10000 members; reading stopped (raise the limit with --max-members",
)
case(
    "deep-directory-nesting",
    "archive",
    _deep_directory_bomb,
    1,
    findings=tuple(
        ("safety", f"member '{'/'.join(['d'] * depth)}' is nested deeper than 32 directories")
        for depth in range(33, 41)
    ),
)
case(
    "member-over-size-limit",
    "archive",
    lambda: gz(seed_tar([regular("big.bin", random.Random(3).randbytes(17 * 1024 * 1024))])),
    1,
    error="member 'big.bin' is 17825792 bytes, over the limit of 16777216 bytes per member",
)


# --- JSON ------------------------------------------------------------------------------


def json_case(
    name: str,
    payload: Callable[[], bytes],
    finding: str | None,
    exit_code: int = 1,
    *,
    document: str = "notes.json",
    extra_args: tuple[str, ...] = (),
    **kw: Any,
) -> None:
    """The seed bundle with one JSON document added (or replaced), listed and signed again."""

    def make() -> bytes:
        files = seed_files()
        files[document] = payload()
        return gz(tar_bytes(members_of(resign(files))))

    args = ("--key", str(PUBLIC_KEY), *extra_args)
    case(name, "json", make, exit_code, finding=finding, args=args, **kw)


def _refused(message: str) -> str:
    return f"refused JSON: {message}"


json_case("duplicate-key", lambda: b'{"kind": 1, "kind": 2}', _refused("duplicate key 'kind'"))
json_case(
    "duplicate-key-in-experiment",
    lambda: _seed_json(layout.EXPERIMENT).replace(b"{", b'{"title": "x", ', 1),
    _refused("duplicate key 'title'"),
    document=layout.EXPERIMENT,
)
json_case("nan", lambda: b'{"a": NaN}', _refused("NaN is not valid JSON"))
json_case("infinity", lambda: b'{"a": Infinity}', _refused("Infinity is not valid JSON"))
json_case("minus-infinity", lambda: b'{"a": -Infinity}', _refused("-Infinity is not valid JSON"))
json_case(
    "number-overflows-to-infinity",
    lambda: b'{"a": 1e400}',
    _refused("the number 1e400 is out of range (it would be Infinity)"),
)
json_case(
    "oversized-integer",
    lambda: b'{"a": ' + b"9" * 5000 + b"}",
    _refused("a number of 5000 characters (at most 4300 are read): 99999999999999999999..."),
)
json_case(
    "recursion-limit-nesting",
    lambda: b"[" * 100_000 + b"]" * 100_000,
    _refused("nesting deeper than 64 levels"),
)
json_case(
    "nesting-past-the-limit-inside-strings-is-text",
    lambda: b'{"kind": "evidence.note", "s": "' + b"[" * 10_000 + b'"}',
    None,
    outcome="brackets in a string are text (an unknown kind, though)",
    check="schema",
    other_checks=frozenset({"schema"}),
)
json_case("invalid-utf8", lambda: b'{"a": "\xff\xfe"}', _refused("invalid UTF-8 at byte 7"))
json_case("overlong-utf8", lambda: b'{"a": "\xc0\xaf"}', _refused("invalid UTF-8 at byte 7"))
json_case(
    "lone-surrogate-in-string",
    lambda: b'{"a": "\\ud800"}',
    _refused("a string holds a lone surrogate (not valid Unicode)"),
)
json_case(
    "lone-surrogate-in-key",
    lambda: b'{"\\udc80": 1}',
    _refused("a key holds a lone surrogate (not valid Unicode)"),
)
json_case(
    "byte-order-mark", lambda: b"\xef\xbb\xbf{}", _refused("a byte-order mark is not allowed")
)
json_case(
    "non-object-top-level",
    lambda: b"[]",
    "the document at this path must be 'evidence.model-manifest', not None",
    document=layout.MODEL_MANIFEST,
    check="schema",
    outcome="a document that is not an object has no kind",
)
json_case(
    "experiment-not-an-object",
    lambda: b'"experiment"',
    "the document at this path must be 'evidence.experiment', not None",
    check="schema",
    document=layout.EXPERIMENT,
)
json_case("trailing-data", lambda: b"{} {}", _refused("not JSON: Extra data at line 1 column 4"))
json_case(
    "raw-control-character",
    lambda: b'{"a": "x\ny"}',
    _refused("not JSON: Invalid control character at line 1 column 9"),
)
json_case(
    "truncated-document",
    lambda: b'{"a": [1, 2',
    _refused("not JSON: Expecting ',' delimiter at line 1 column 12"),
)
json_case(
    "one-enormous-string",
    lambda: b'{"kind": "evidence.note", "s": "' + b"a" * (15 * 1024 * 1024) + b'"}',
    "no document belongs at this path in a bundle",
    check="schema",
    extra_args=("--max-ratio", "100000"),
    outcome="a 15 MiB string is read in well under a second",
)
_OVER_BUDGET = _refused(
    "the JSON documents hold more than 1000000 values in all; reading stopped (raise the "
    "limit with --max-json-values if you trust this input)"
)
_NOT_READ = _refused("not read: the limit of 1000000 JSON values was reached before it")
json_case(
    "millions-of-tiny-strings",
    lambda: b"[" + b'"a",' * (3 * 1024 * 1024) + b'"a"]',
    _OVER_BUDGET,
    extra_args=("--max-ratio", "100000"),
    findings=(("safety", _NOT_READ),),
    outcome="parsing stops at the value limit; the documents after it are not read",
)


def _many_documents() -> bytes:
    files = seed_files()
    for i in range(3):
        files[f"notes/{i}.json"] = b"[" + b"0," * 400_000 + b"0]"
    return gz(tar_bytes(members_of(resign(files))))


case(
    "values-spread-over-many-documents",
    "json",
    _many_documents,
    1,
    finding=_OVER_BUDGET,
    findings=(("safety", _NOT_READ),),
    args=("--key", str(PUBLIC_KEY)),
    other_checks=frozenset({"schema"}),  # notes/*.json: no such document belongs in a bundle
    outcome="the value limit is for the whole bundle, not for each document",
)


# --- SHA256SUMS ------------------------------------------------------------------------


def sums_case(
    name: str, change: Callable[[bytes], bytes], finding: str | None, **kw: object
) -> None:
    """The seed bundle with its SHA256SUMS changed, and signed again: only the sums are wrong."""

    def make() -> bytes:
        files = seed_files()
        sums = change(files[layout.SHA256SUMS])
        return gz(tar_bytes(members_of(resign(files, sums))))

    kw.setdefault("exit_code", 1)
    case(
        name,
        "sha256sums",
        make,
        check="checksums",
        finding=finding,
        args=("--key", str(PUBLIC_KEY)),
        **kw,  # type: ignore[arg-type]
    )


def _line(sums: bytes, path: str) -> bytes:
    return next(line for line in sums.split(b"\n") if line.endswith(b"  " + path.encode()))


def _join_lines(separator: bytes) -> Callable[[bytes], bytes]:
    """Replace the line feed after the first line with another separator."""
    return lambda sums: sums.replace(b"\n", separator, 1)


def _sums_line(number: int) -> str:
    return f"line {number}: "


_SEPARATED = (
    "the path holds a control or line-separator character ({}); only a line feed ends a "
    "line, and no bundle path holds one"
)
_EXPERIMENT_LINE = 1
for _name, _separator, _shown in [
    ("sums-nel-separator", "\u0085".encode(), "U+0085"),
    ("sums-u2028-separator", "\u2028".encode(), "U+2028"),
    ("sums-u2029-separator", "\u2029".encode(), "U+2029"),
    ("sums-vertical-tab-separator", b"\x0b", "U+000B"),
    ("sums-form-feed-separator", b"\x0c", "U+000C"),
    ("sums-file-separator", b"\x1c", "U+001C"),
    ("sums-lone-carriage-return", b"\r", "U+000D"),
]:
    sums_case(
        _name,
        _join_lines(_separator),
        _sums_line(1) + _SEPARATED.format(_shown),
        other_checks=frozenset({"checksums"}),
        outcome="one line, with a control character in its path",
    )

sums_case(
    "sums-crlf",
    lambda sums: sums.replace(b"\n", b"\r\n"),
    _sums_line(1) + "the line ends with a carriage return (CRLF); lines end with a line feed",
)
sums_case(
    "sums-upper-case-hex",
    lambda sums: sums[:64].upper() + sums[64:],
    _sums_line(1) + "the digest is not lower-case hex",
)
_SEED_SUMS = seed_files()[layout.SHA256SUMS]
_SUMS_LINES = _SEED_SUMS.count(b"\n")
_FIRST_SUMS_LINE = _SEED_SUMS.decode().split("\n")[0]
sums_case(
    "sums-duplicate-line",
    lambda sums: sums.split(b"\n")[0] + b"\n" + sums,
    _sums_line(2) + "experiment.json is listed twice (first on line 1)",
)
sums_case(
    "sums-backslash-escaped-name",
    lambda sums: b"\\" + sums,
    _sums_line(1) + "a backslash-escaped name (as sha256sum writes for a name with a backslash "
    "or a newline); no bundle path needs one",
)
sums_case(
    "sums-lists-itself",
    lambda sums: sums + b"0" * 64 + b"  SHA256SUMS\n",
    _sums_line(_SUMS_LINES + 1) + "SHA256SUMS lists itself; it cannot hold its own digest",
)
sums_case(
    "sums-lists-its-signature",
    lambda sums: sums + b"0" * 64 + b"  SHA256SUMS.sig\n",
    _sums_line(_SUMS_LINES + 1)
    + "SHA256SUMS lists SHA256SUMS.sig, which is made over it and so is not in it",
)
sums_case(
    "sums-absolute-path",
    lambda sums: b"0" * 64 + b"  /etc/passwd\n" + sums,
    _sums_line(1) + "the path is absolute; paths are relative to the bundle",
)
sums_case(
    "sums-dotdot-path",
    lambda sums: b"0" * 64 + b"  ../escape.json\n" + sums,
    _sums_line(1) + "the path has a '..' component; paths must stay inside the bundle",
)
sums_case(
    "sums-dot-path",
    lambda sums: sums.replace(b"  experiment.json", b"  ./experiment.json"),
    _sums_line(1) + "the path is not in normal form (an empty or '.' component)",
    findings=(("checksums", "the file is not listed in SHA256SUMS"),),
)
sums_case(
    "sums-no-final-newline",
    lambda sums: sums[:-1],
    _sums_line(_SUMS_LINES) + "the last line has no newline",
)
sums_case(
    "sums-not-utf8",
    lambda sums: sums.replace(b"  experiment.json", b"  experiment\xff.json"),
    f"SHA256SUMS is not valid UTF-8 (at byte {_SEED_SUMS.index(b'  experiment.json') + 12})",
    findings=(("checksums", "the file is not listed in SHA256SUMS"),),
    outcome="nothing in it is read, so every file is unlisted",
)
sums_case(
    "sums-bsd-tag-line",
    lambda sums: b"SHA256 (x.json) = " + b"0" * 64 + b"\n" + sums,
    _sums_line(1) + "a BSD-style (--tag) line; expected '<64 hex digits>  <path>'",
)
sums_case(
    "sums-empty-line",
    lambda sums: b"\n" + sums,
    _sums_line(1) + "an empty line",
)
sums_case(
    "sums-one-space",
    lambda sums: sums.replace(b"  ", b" ", 1),
    _sums_line(1)
    + f"malformed line {_FIRST_SUMS_LINE.replace('  ', ' ')!r}; "
    + "expected '<64 hex digits>  <path>'",
    findings=(("checksums", "the file is not listed in SHA256SUMS"),),
)
sums_case(
    "sums-unsorted",
    lambda sums: b"\n".join(reversed(sums.rstrip(b"\n").split(b"\n"))) + b"\n",
    "lines are not sorted by path",
)
sums_case(
    "sums-empty",
    lambda sums: b"",
    "SHA256SUMS lists no file",
    findings=(("checksums", "the file is not listed in SHA256SUMS"),),
)
sums_case(
    "sums-many-malformed-lines",
    lambda sums: sums + b"x\n" * 200_000,
    "and 199980 more problems",
    outcome="twenty problems, then a count of the rest",
)
sums_case(
    "sums-binary-mode-is-accepted",
    lambda sums: sums.replace(b"  ", b" *"),
    None,
    exit_code=0,
    outcome="' *' (binary mode) is part of the coreutils format",
)


# --- signature -------------------------------------------------------------------------


def signature_case(
    name: str, signature: Callable[[bytes], bytes], finding: str, *, key: bool = True
) -> None:
    def make() -> bytes:
        files = resign(seed_files())
        files[layout.SIGNATURE] = signature(files[layout.SHA256SUMS])
        return gz(tar_bytes(members_of(files)))

    case(
        name,
        "signature",
        make,
        1,
        finding=finding,
        check="signature",
        args=("--key", str(PUBLIC_KEY)) if key else (),
    )


def _wrong_size(size: int) -> str:
    unit = "byte" if size == 1 else "bytes"
    return (
        f"SHA256SUMS.sig is {size} {unit}, not a 64-byte Ed25519 signature: "
        "the bundle is not signed"
    )


signature_case("signature-of-one-byte", lambda sums: b"x", _wrong_size(1))
signature_case("signature-of-one-byte-no-key", lambda sums: b"x", _wrong_size(1), key=False)
signature_case("signature-empty", lambda sums: b"", _wrong_size(0))
signature_case(
    "signature-one-byte-too-long",
    lambda sums: signing.sign(sums, signing.load_private_key(PRIVATE_KEY)) + b"\n",
    _wrong_size(65),
)
signature_case(
    "signature-hex-encoded",
    lambda sums: signing.sign(sums, signing.load_private_key(PRIVATE_KEY)).hex().encode(),
    _wrong_size(128),
)
_DOES_NOT_VERIFY = "the signature does not verify against SHA256SUMS with the given key"
signature_case(
    "signature-by-another-key",
    lambda sums: Ed25519PrivateKey.generate().sign(sums),
    _DOES_NOT_VERIFY,
)
signature_case(
    "signature-over-other-bytes",
    lambda sums: signing.sign(sums + b"\n", signing.load_private_key(PRIVATE_KEY)),
    _DOES_NOT_VERIFY,
)


def _key_case(name: str, key_bytes: Callable[[], bytes], error: str) -> None:
    def build(folder: Path) -> Path:
        key = folder / "reviewer.pub.pem"
        key.write_bytes(key_bytes())
        return SEED

    CASES.append(
        Case(
            name,
            "signature",
            build,
            2,
            error=error,
            args=("--key", "{folder}/reviewer.pub.pem"),
            usage=True,
        )
    )


_key_case("key-not-pem", lambda: b"not a key\n", "is not a PEM public key")
_key_case(
    "key-is-the-private-key",
    lambda: PRIVATE_KEY.read_bytes(),
    "is a private key: give the signer's public key (evidence-signing-key.pub.pem), "
    "and never share the private one",
)
_key_case(
    "key-in-openssh-format",
    lambda: b"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGx0 reviewer@example\n",
    "is not a PEM public key: expected a file that starts with -----BEGIN PUBLIC KEY-----",
)
_key_case(
    "key-not-ed25519",
    lambda: (
        ec.generate_private_key(ec.SECP256R1())
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    ),
    "is not an Ed25519 public key",
)
_key_case("key-empty-file", lambda: b"", "is not a PEM public key")
case(
    "key-given-bundle-unsigned",
    "signature",
    lambda: gz(
        tar_bytes(members_of({k: v for k, v in seed_files().items() if k != layout.SIGNATURE}))
    ),
    1,
    finding="a public key was given but the bundle is not signed",
    check="signature",
    args=("--key", str(PUBLIC_KEY)),
)


def by_name(name: str) -> Case:
    return next(c for c in CASES if c.name == name)


def table() -> str:
    """The corpus as SECURITY.md shows it: `python tests/hostile/corpus.py`."""
    rows = ["| case | input | what verify makes of it |", "|---|---|---|"]
    rows += [f"| `{c.name}` | {c.group} | {c.summary} |" for c in CASES]
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(table(), end="")
