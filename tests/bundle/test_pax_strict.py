"""PAX headers as `archive._StrictTarInfo` reads them: record by record, in linear time.

Python 3.11.7's tarfile took any "digits space keyword=" for a record (a 64 KiB header of
"2 2 2 ... =" held some 32,000 keywords of 32 KB each), searched each header with a regular
expression quadratic on digits (CVE-2024-6232), and copied every keyword of a global
header into every later member. Valid archives must read exactly as tarfile reads them.
"""

from __future__ import annotations

import gzip
import io
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from verifier.bundle.archive import _StrictTarInfo, read_archive
from verifier.bundle.reader import DEFAULT_LIMITS, LoadedBundle, read_bundle
from verifier.errors import UnreadableInput, UnsafeInput
from verifier.export.archive import build_archive
from verifier.verify import VerifyOptions, verify_path

SEED = Path(__file__).resolve().parents[2] / "sample_bundles" / "seed-mlxcel"
KEY = SEED.parent / "keys" / "evidence-signing-key.pub.pem"
# The most a PAX header may hold (archive._MAX_HEADER_BYTES), less a block.
_BIG = 64 * 1024 - 512

Member = tuple[tarfile.TarInfo, bytes | None]


# --- helpers -------------------------------------------------------------------------


def _block(name: str, kind: bytes, data: bytes) -> bytes:
    """A USTAR header and its data, written by hand so that the data may be anything."""
    info = tarfile.TarInfo(name)
    info.type, info.size = kind, len(data)
    return info.tobuf(format=tarfile.USTAR_FORMAT) + data + bytes(-len(data) % 512)


def _with_header(pax: bytes, kind: bytes = tarfile.XHDTYPE) -> bytes:
    """A plain tar: one extended header holding `pax`, then a small member, then the end."""
    member = _block("a.json", tarfile.REGTYPE, b"{}\n")
    return _block("PaxHeaders/a.json", kind, pax) + member + bytes(1024)


def _read(folder: Path, tar: bytes) -> LoadedBundle:
    path = folder / "b.tar.gz"
    path.write_bytes(gzip.compress(tar, mtime=0))
    return read_archive(path, "b.tar.gz", DEFAULT_LIMITS, fast=False)


def _record(keyword: str, value: str) -> bytes:
    body = f" {keyword}={value}\n".encode()
    length = len(body) + 1
    while len(str(length)) + len(body) != length:
        length += 1
    return str(length).encode() + body


def _tar(members: list[Member], **open_args: object) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", **open_args) as tar:  # type: ignore[call-overload]
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


def _file(name: str, data: bytes = b"{}\n", pax: dict[str, str] | None = None) -> Member:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.pax_headers = pax or {}
    return info, data


def _headers(tar: bytes, tarinfo: type[tarfile.TarInfo]) -> list[dict[str, object]]:
    """Every member as tarfile's TarInfo (or `tarinfo`) sees it, where it is, and its PAX."""
    seen = []
    with tarfile.open(fileobj=io.BytesIO(tar), mode="r|", tarinfo=tarinfo) as archive:
        for member in archive:
            fields = dict(member.get_info())
            fields.update(offset=member.offset, offset_data=member.offset_data)
            fields.update(sparse=member.sparse, pax=dict(member.pax_headers))
            seen.append(fields)
        fields = {"global": dict(archive.pax_headers), "offset": archive.offset}
        seen.append(fields)
    return seen


# --- malformed headers: refused at once ----------------------------------------------


def test_a_header_of_overlapping_records_is_refused(tmp_path: Path) -> None:
    # "2 2 2 ... =": tarfile read a record at every second byte, each keyword running to
    # the '=' at the end: about 1 GB of keywords from this one 65,000-byte header.
    pax = b"2 " * 32_499 + b"="
    with pytest.raises(UnreadableInput) as caught:
        _read(tmp_path, _with_header(pax))
    assert str(caught.value) == (
        "b.tar.gz: corrupt tar archive: a malformed PAX header: the record at byte 0 does "
        "not end with a newline where its length says"
    )


def test_four_such_headers_end_in_the_same_refusal_not_a_memory_error(tmp_path: Path) -> None:
    one = _block("PaxHeaders/a", tarfile.XHDTYPE, b"2 " * 32_499 + b"=")
    one += _block("a.json", tarfile.REGTYPE, b"{}\n")
    with pytest.raises(UnreadableInput, match="a malformed PAX header"):
        _read(tmp_path, one * 4 + bytes(1024))


def test_a_header_of_digits_is_refused(tmp_path: Path) -> None:
    # tarfile's search for "\d+ hdrcharset=" took some 4 s over 64 KiB of digits.
    with pytest.raises(UnreadableInput) as caught:
        _read(tmp_path, _with_header(b"1" * _BIG))
    assert str(caught.value).endswith(
        "a malformed PAX header: the record at byte 0 does not start with a decimal length "
        "and a space"
    )


def test_a_value_of_digits_is_read_as_a_value(tmp_path: Path) -> None:
    # Well framed, but 64 KiB of digits all the same: the old search was as slow on it.
    pax = _record("comment", "1" * (_BIG - 20))
    bundle = _read(tmp_path, _with_header(pax))
    assert dict(bundle.files) == {"a.json": b"{}\n"}
    assert bundle.findings == ()


MALFORMED = {
    "a length of zero": (b"0 path=x.json\n", "does not end with a newline where its length"),
    "no length": (b"path=x.json\n", "does not start with a decimal length and a space"),
    "a space before the length": (b" 14 path=x.json\n", "does not start with a decimal"),
    "a sign before the length": (b"+14 path=x.json\n", "does not start with a decimal"),
    "a length too long": (b"99 path=x.json\n", "has a length of 99, past the end"),
    "a length too short": (b"14 path=x.json\n", "does not end with a newline where"),
    "a length of more digits than any header needs": (b"0" * 30 + b"1 a=b\n", "decimal length"),
    "no '='": (b"11 pathxxx\n", "has no keyword before an '='"),
    "an empty keyword": (b"7 =abc\n", "has no keyword before an '='"),
    "a newline in the keyword": (b"12 a\nb=cdef\n", "has no keyword before an '='"),
    "bytes after the last record": (
        b"15 path=x.json\n\0\0",
        "the record at byte 15 does not start with a decimal length",
    ),
    "a record cut by the end of the header": (b"15 path=x.js", "has a length of 15, past"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_record_is_refused(tmp_path: Path, case: str) -> None:
    pax, words = MALFORMED[case]
    with pytest.raises(UnreadableInput, match="a malformed PAX header") as caught:
        _read(tmp_path, _with_header(pax))
    assert words in str(caught.value)


def test_a_header_cut_short_by_the_end_of_the_archive_is_refused(tmp_path: Path) -> None:
    tar = _block("PaxHeaders/a.json", tarfile.XHDTYPE, b"x" * 2000)[:1024]
    with pytest.raises(UnreadableInput, match=r"an extended \(PAX\) header of 2000 bytes is cut"):
        _read(tmp_path, tar)


def test_a_malformed_global_header_is_refused_too(tmp_path: Path) -> None:
    with pytest.raises(UnreadableInput, match="a malformed PAX header"):
        _read(tmp_path, _with_header(b"2 " * 100 + b"=", tarfile.XGLTYPE))


# --- global headers ------------------------------------------------------------------


def test_a_global_header_of_other_keywords_is_refused(tmp_path: Path) -> None:
    # tarfile copied every keyword of a global header into every later member: 100,000
    # keywords by 2,000 members took 3.9 GB.
    pax = b"".join(_record(f"k{index}", "") for index in range(5000))
    with pytest.raises(UnsafeInput) as caught:
        _read(tmp_path, _with_header(pax, tarfile.XGLTYPE))
    assert str(caught.value) == (
        "b.tar.gz: the archive has a global PAX header that sets 'k0' for every later "
        "member; of a global header only a comment (as git archive writes) is accepted; refused"
    )


@pytest.mark.parametrize("keyword", ["mtime", "uname", "hdrcharset", "GNU.sparse.map"])
def test_a_global_header_setting_anything_but_a_comment_is_refused(
    tmp_path: Path, keyword: str
) -> None:
    tar = _tar([_file("a.json")], format=tarfile.PAX_FORMAT, pax_headers={keyword: "1"})
    with pytest.raises(UnsafeInput, match=f"global PAX header that sets '{keyword}'"):
        _read(tmp_path, tar)


def test_global_comments_are_read_as_tarfile_reads_them(tmp_path: Path) -> None:
    # What git archive writes: a comment (the commit), once, before every member.
    pax = _record("comment", "0123abcd" * 5)
    tar = _block("pax_global_header", tarfile.XGLTYPE, pax) + _tar([_file("a.json")])
    assert _headers(tar, _StrictTarInfo) == _headers(tar, tarfile.TarInfo)
    bundle = _read(tmp_path, tar)
    assert dict(bundle.files) == {"a.json": b"{}\n"} and bundle.findings == ()


def test_a_global_path_is_still_reported_as_before(tmp_path: Path) -> None:
    tar = _tar([_file("a.json")], format=tarfile.PAX_FORMAT, pax_headers={"path": "b.json"})
    assert _headers(tar, _StrictTarInfo) == _headers(tar, tarfile.TarInfo)
    messages = [finding.message for finding in _read(tmp_path, tar).findings]
    refusal = "the archive has a global PAX header that sets path for every later member; refused"
    assert refusal in messages


# --- valid archives: read as tarfile reads them --------------------------------------

LONG = "records/" + "a-rather-long-directory-name/" * 5 + "x" * 120 + ".json"
NAMES = [
    "experiment.json",
    LONG,
    "caf\u00e9/na\u00efve-\u65e5\u672c.json",
    "d\u00e9j\u00e0/" + "\u00e9" * 90 + ".json",
]


def _pax_archive() -> bytes:
    members = [_file(name, f'{{"n": {index}}}\n'.encode()) for index, name in enumerate(NAMES)]
    folder = tarfile.TarInfo("records/" + "a-rather-long-directory-name/" * 5)
    folder.type = tarfile.DIRTYPE
    odd = _file("odd.json", pax={"comment": "a\nb=c\n17 path=evil.json\n", "mtime": "1.5"})
    return _tar([(folder, None), *members, odd], format=tarfile.PAX_FORMAT)


def test_long_and_non_ascii_names_read_as_tarfile_reads_them(tmp_path: Path) -> None:
    tar = _pax_archive()
    assert b"path=" + LONG.encode() in tar  # the long name is in a PAX record
    assert _headers(tar, _StrictTarInfo) == _headers(tar, tarfile.TarInfo)
    bundle = _read(tmp_path, tar)
    expected = {name: f'{{"n": {index}}}\n'.encode() for index, name in enumerate(NAMES)}
    assert dict(bundle.files) == {**expected, "odd.json": b"{}\n"}
    assert bundle.findings == ()


def test_a_name_not_in_utf_8_reads_as_tarfile_reads_it() -> None:
    # tarfile writes hdrcharset=BINARY for it, and the name's bytes as they are.
    info, data = _file("notes\udcff.json")
    tar = _tar([(info, data)], format=tarfile.PAX_FORMAT, errors="surrogateescape")
    assert b"hdrcharset=BINARY" in tar
    assert _headers(tar, _StrictTarInfo) == _headers(tar, tarfile.TarInfo)


def test_a_pax_size_moves_the_next_header_as_tarfile_moves_it() -> None:
    info, data = _file("a.json", b"x" * 700, pax={"size": "700"})
    tar = _tar([(info, data), _file("b.json")], format=tarfile.PAX_FORMAT)
    assert b"size=700" in tar
    assert _headers(tar, _StrictTarInfo) == _headers(tar, tarfile.TarInfo)


def test_a_pax_sparse_member_is_still_a_sparse_file(tmp_path: Path) -> None:
    # Sparse members are refused by type; their maps, quadratic to read in tarfile, are not read.
    pax = {"GNU.sparse.major": "1", "GNU.sparse.minor": "0", "GNU.sparse.name": "s.json"}
    pax["GNU.sparse.realsize"] = "3"
    tar = _tar(
        [_file("GNUSparseFile.0/s.json", b"1\n0\n3\n{}\n", pax=pax), _file("b.json")],
        format=tarfile.PAX_FORMAT,
    )
    bundle = _read(tmp_path, tar)
    assert [finding.message for finding in bundle.findings] == [
        "member 's.json' is a sparse file; only regular files and directories are accepted"
    ]
    assert dict(bundle.files) == {"b.json": b"{}\n"}


_KEYWORDS = st.sampled_from(["comment", "mtime", "uname", "gname", "linkpath", "x.y", "uid"])
_VALUES = st.text(st.characters(exclude_categories=["Cs"]), max_size=40)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    names=st.lists(st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=160)),
    extras=st.lists(st.dictionaries(_KEYWORDS, _VALUES, max_size=4)),
)
def test_any_archive_tarfile_writes_reads_as_tarfile_reads_it(
    names: list[str], extras: list[dict[str, str]]
) -> None:
    pax = [extras[index] if index < len(extras) else {} for index in range(len(names))]
    members = [_file(name, pax=dict(headers)) for name, headers in zip(names, pax, strict=True)]
    try:
        tar = _tar(members, format=tarfile.PAX_FORMAT)
    except ValueError:  # a value tarfile will not write (a NUL in a name field, a bad number)
        return
    assert _headers(tar, _StrictTarInfo) == _headers(tar, tarfile.TarInfo)


@pytest.mark.skipif(shutil.which("tar") is None, reason="no tar here")
def test_gnu_tar_pax_archives_read_as_tarfile_reads_them(tmp_path: Path) -> None:
    root = tmp_path / "bundle"
    for index, name in enumerate(NAMES):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(f'{{"n": {index}}}\n'.encode())
    archive = tmp_path / "b.tar"
    subprocess.run(["tar", "--format=posix", "-cf", str(archive), "-C", str(root), "."], check=True)
    tar = archive.read_bytes()
    assert _headers(tar, _StrictTarInfo) == _headers(tar, tarfile.TarInfo)
    assert dict(read_bundle(archive).files) == dict(read_bundle(root).files)


# --- what the tool writes ------------------------------------------------------------


def test_an_exported_archive_still_verifies(tmp_path: Path) -> None:
    files = dict(read_bundle(SEED).files)
    archive = tmp_path / "bundle.tar.gz"
    archive.write_bytes(build_archive(files))
    for fast in (True, False):
        assert (
            dict(read_archive(archive, "bundle.tar.gz", DEFAULT_LIMITS, fast=fast).files) == files
        )
    result = verify_path(archive, VerifyOptions(public_key=KEY))
    assert result.verified, result.findings
