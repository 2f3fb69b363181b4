"""The bundle reader against hostile archives and directories, built here (no committed blobs)."""

from __future__ import annotations

import gzip
import io
import lzma
import os
import random
import shutil
import socket
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from verifier.bundle.reader import DEFAULT_LIMITS, Limits, LoadedBundle, read_bundle
from verifier.errors import UnreadableInput, UnsafeInput
from verifier.model import Severity

Member = tuple[tarfile.TarInfo, bytes | None]


# --- helpers -------------------------------------------------------------------------


def regular(name: str, data: bytes = b"{}\n") -> Member:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def special(name: str, kind: bytes, linkname: str = "") -> Member:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    return info, None


def directory(name: str) -> Member:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    return info, None


def tar_bytes(members: list[Member], **open_args: object) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", **open_args) as archive:  # type: ignore[call-overload]
        for info, data in members:
            archive.addfile(info, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty working directory; after the test, nothing but the archive may be in tmp_path."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    before = os.getcwd()
    yield tmp_path
    assert os.getcwd() == before
    assert list(cwd.iterdir()) == []
    assert not (tmp_path.parent / "escape-probe").exists()
    assert not Path("/tmp/escape-probe").exists()


def write_archive(folder: Path, members: list[Member], *, gz: bool = True) -> Path:
    data = tar_bytes(members)
    path = folder / ("bundle.tar.gz" if gz else "bundle.tar")
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def read_members(
    folder: Path, members: list[Member], limits: Limits = DEFAULT_LIMITS
) -> LoadedBundle:
    archive = write_archive(folder, members)
    bundle = read_bundle(archive, limits)
    assert sorted(folder.rglob("*")) == sorted([archive, folder / "cwd"])
    return bundle


def only_finding(bundle: LoadedBundle) -> str:
    assert len(bundle.findings) == 1, bundle.findings
    finding = bundle.findings[0]
    assert finding.check == "safety"
    assert finding.severity is Severity.ERROR
    return finding.message


# --- well-formed input ---------------------------------------------------------------


def test_gzip_tar_is_read_into_memory(workdir: Path) -> None:
    bundle = read_members(
        workdir,
        [regular("experiment.json", b'{"a": 1}\n'), regular("records/c/001.json", b"[]\n")],
    )
    assert dict(bundle.files) == {"experiment.json": b'{"a": 1}\n', "records/c/001.json": b"[]\n"}
    assert bundle.findings == ()
    assert bundle.source.endswith("bundle.tar.gz")


def test_plain_tar_is_accepted(workdir: Path) -> None:
    archive = write_archive(workdir, [regular("experiment.json")], gz=False)
    assert dict(read_bundle(archive).files) == {"experiment.json": b"{}\n"}


def test_gzip_is_detected_by_magic_bytes_not_suffix(workdir: Path) -> None:
    archive = workdir / "bundle.bin"
    archive.write_bytes(gzip.compress(tar_bytes([regular("experiment.json")])))
    assert list(read_bundle(archive).files) == ["experiment.json"]


def test_single_top_level_directory_is_stripped(workdir: Path) -> None:
    bundle = read_members(
        workdir,
        [
            directory("bundle"),
            regular("bundle/experiment.json"),
            directory("bundle/records"),
            regular("bundle/records/c/001.json"),
        ],
    )
    assert list(bundle.files) == ["experiment.json", "records/c/001.json"]


def test_top_level_directory_is_kept_next_to_a_root_file(workdir: Path) -> None:
    bundle = read_members(workdir, [regular("experiment.json"), regular("records/001.json")])
    assert list(bundle.files) == ["experiment.json", "records/001.json"]


def test_two_top_level_directories_are_kept(workdir: Path) -> None:
    bundle = read_members(workdir, [regular("a/x.json"), regular("b/y.json")])
    assert list(bundle.files) == ["a/x.json", "b/y.json"]


def test_dot_slash_prefix_is_ignored(workdir: Path) -> None:
    bundle = read_members(workdir, [directory("."), regular("./experiment.json")])
    assert list(bundle.files) == ["experiment.json"]
    assert bundle.findings == ()


def test_directory_and_archive_of_it_read_the_same(tmp_path: Path) -> None:
    root = tmp_path / "bundle"
    (root / "records" / "c").mkdir(parents=True)
    (root / "experiment.json").write_bytes(b'{"x": 1}\n')
    (root / "records" / "c" / "001.json").write_bytes(b"[1]\n")
    archive = tmp_path / "bundle.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(root, arcname="bundle")
    from_dir = read_bundle(root)
    from_tar = read_bundle(archive)
    assert dict(from_dir.files) == dict(from_tar.files)
    assert from_dir.findings == from_tar.findings == ()


def test_git_archive_style_global_pax_comment_is_fine(workdir: Path) -> None:
    data = tar_bytes(
        [regular("experiment.json")], format=tarfile.PAX_FORMAT, pax_headers={"comment": "abc"}
    )
    archive = workdir / "b.tar.gz"
    archive.write_bytes(gzip.compress(data))
    assert read_bundle(archive).findings == ()


# --- members refused, reading continues ----------------------------------------------


@pytest.mark.parametrize(
    ("member", "expected"),
    [
        (
            special("passwd", tarfile.SYMTYPE, "/etc/passwd"),
            "member 'passwd' is a symbolic link to '/etc/passwd'; links are refused",
        ),
        (
            special("escape-probe", tarfile.SYMTYPE, "../escape-probe"),
            "member 'escape-probe' is a symbolic link to '../escape-probe'; links are refused",
        ),
        (
            special("copy.json", tarfile.LNKTYPE, "experiment.json"),
            "member 'copy.json' is a hard link to 'experiment.json'; links are refused",
        ),
        (
            special("tty", tarfile.CHRTYPE),
            "member 'tty' is a character device; only regular files and directories are accepted",
        ),
        (
            special("disk", tarfile.BLKTYPE),
            "member 'disk' is a block device; only regular files and directories are accepted",
        ),
        (
            special("pipe", tarfile.FIFOTYPE),
            "member 'pipe' is a FIFO; only regular files and directories are accepted",
        ),
        (
            regular("/tmp/escape-probe"),
            "member '/tmp/escape-probe' has an absolute name; names must be relative to the bundle",
        ),
        (
            regular("C:/escape-probe"),
            "member 'C:/escape-probe' has an absolute name; names must be relative to the bundle",
        ),
        (
            regular("../escape-probe"),
            "member '../escape-probe' has a '..' component in its name; "
            "names must stay inside the bundle",
        ),
        (
            regular("a/../../escape-probe"),
            "member 'a/../../escape-probe' has a '..' component in its name; "
            "names must stay inside the bundle",
        ),
        (
            regular("a\\..\\escape-probe"),
            "member 'a\\..\\escape-probe' has a backslash in its name; "
            "only '/' separates path components",
        ),
        (
            regular("bad\x1b[31mname.json"),
            "member 'bad\\x1b[31mname.json' has a control or non-printable character in its name",
        ),
        (
            regular("new\nline.json"),
            "member 'new\\x0aline.json' has a control or non-printable character in its name",
        ),
        (
            special("odd", b"Z"),
            "member 'odd' has tar type 'Z'; only regular files and directories are accepted",
        ),
    ],
)
def test_hostile_member_is_refused_and_reading_continues(
    workdir: Path, member: Member, expected: str
) -> None:
    bundle = read_members(workdir, [regular("experiment.json"), member, regular("z.json")])
    assert only_finding(bundle) == expected
    assert list(bundle.files) == ["experiment.json", "z.json"]


def test_finding_names_the_member_with_control_characters_escaped(workdir: Path) -> None:
    bundle = read_members(workdir, [regular("x\x07.json")])
    assert bundle.findings[0].file == "x\\x07.json"


def test_name_that_is_not_utf8_is_refused(workdir: Path) -> None:
    data = tar_bytes([regular("\udcff.json")], format=tarfile.GNU_FORMAT, errors="surrogateescape")
    archive = workdir / "b.tar.gz"
    archive.write_bytes(gzip.compress(data))
    bundle = read_bundle(archive)
    assert only_finding(bundle) == "member '\\xff.json' has a name that is not valid UTF-8"
    assert dict(bundle.files) == {}


def test_duplicate_name_keeps_the_first_copy(workdir: Path) -> None:
    bundle = read_members(
        workdir, [regular("experiment.json", b"first"), regular("experiment.json", b"second")]
    )
    assert only_finding(bundle) == (
        "member 'experiment.json' appears more than once, with different contents; "
        "only the first copy is read"
    )
    assert dict(bundle.files) == {"experiment.json": b"first"}


def test_duplicate_after_normalisation_is_refused(workdir: Path) -> None:
    bundle = read_members(workdir, [regular("a/x.json"), regular("a//./x.json")])
    assert "appears more than once" in only_finding(bundle)


def test_case_collision_is_refused(workdir: Path) -> None:
    bundle = read_members(workdir, [regular("A.json", b"upper"), regular("a.json", b"lower")])
    assert only_finding(bundle) == (
        "member 'a.json' collides case-insensitively with 'A.json'; "
        "names must differ in more than case"
    )
    assert dict(bundle.files) == {"A.json": b"upper"}


def test_case_collision_of_directories_is_refused(workdir: Path) -> None:
    bundle = read_members(workdir, [regular("Records/1.json"), regular("records/2.json")])
    assert "collides case-insensitively with 'Records'" in only_finding(bundle)


def test_unicode_normalisation_collision_is_refused(workdir: Path) -> None:
    bundle = read_members(workdir, [regular("caf\u00e9.json"), regular("cafe\u0301.json")])
    assert only_finding(bundle) == (
        "member 'cafe\u0301.json' is the same name as 'caf\u00e9.json' in another Unicode "
        "normalization form (NFC/NFD); names must differ in more than their Unicode form"
    )


def test_file_used_as_a_directory_is_refused(workdir: Path) -> None:
    bundle = read_members(workdir, [regular("records"), regular("records/1.json")])
    assert only_finding(bundle) == "member 'records/1.json' is inside 'records', which is a file"


def test_sparse_member_is_refused(workdir: Path) -> None:
    info, data = regular("sparse.json", b"")
    info.type = tarfile.GNUTYPE_SPARSE
    bundle = read_members(workdir, [(info, data), regular("experiment.json")])
    assert "is a sparse file" in only_finding(bundle)


def test_global_pax_path_override_is_refused(workdir: Path) -> None:
    data = tar_bytes(
        [regular("a.json"), regular("b.json")],
        format=tarfile.PAX_FORMAT,
        pax_headers={"path": "same.json"},
    )
    archive = workdir / "b.tar.gz"
    archive.write_bytes(gzip.compress(data))
    messages = [f.message for f in read_bundle(archive).findings]
    assert any("global PAX header that sets path" in m for m in messages)


# --- limits: reading stops -----------------------------------------------------------


def test_too_many_members(workdir: Path) -> None:
    members = [regular(f"{i}.json") for i in range(6)]
    with pytest.raises(UnsafeInput, match=r"more than 5 members.*--max-members"):
        read_members(workdir, members, Limits(max_members=5))


def test_too_large_member(workdir: Path) -> None:
    with pytest.raises(
        UnsafeInput, match=r"member 'big.json' is 11 bytes, over the limit of 10 bytes per member"
    ) as caught:
        read_members(workdir, [regular("big.json", b"x" * 11)], Limits(max_member_bytes=10))
    assert "--max-member-bytes" in caught.value.message


def test_too_large_total(workdir: Path) -> None:
    members = [regular(f"{i}.bin", random.Random(i).randbytes(4000)) for i in range(4)]
    with pytest.raises(UnsafeInput, match=r"more than 10000 bytes.*--max-total-bytes"):
        read_members(workdir, members, Limits(max_total_bytes=10_000))


def test_gzip_bomb_stops_on_ratio(workdir: Path) -> None:
    archive = workdir / "bomb.tar.gz"
    archive.write_bytes(gzip.compress(tar_bytes([regular("zeros.bin", bytes(8 * 1024 * 1024))])))
    assert archive.stat().st_size < 64 * 1024
    with pytest.raises(UnsafeInput, match=r"compression bomb.*--max-ratio"):
        read_bundle(archive)


def test_bomb_hidden_after_the_end_of_the_archive_is_caught(workdir: Path) -> None:
    archive = workdir / "bomb.tar.gz"
    archive.write_bytes(gzip.compress(tar_bytes([regular("a.json")]) + bytes(8 * 1024 * 1024)))
    with pytest.raises(UnsafeInput, match="--max-ratio"):
        read_bundle(archive)


def test_bomb_inside_a_refused_member_is_caught(workdir: Path) -> None:
    archive = workdir / "bomb.tar.gz"
    members = [regular("../zeros.bin", bytes(8 * 1024 * 1024))]
    archive.write_bytes(gzip.compress(tar_bytes(members)))
    with pytest.raises(UnsafeInput, match="--max-ratio"):
        read_bundle(archive)


def test_raised_ratio_limit_lets_a_compressible_archive_through(workdir: Path) -> None:
    archive = workdir / "zeros.tar.gz"
    archive.write_bytes(gzip.compress(tar_bytes([regular("zeros.bin", bytes(2 * 1024 * 1024))])))
    assert len(read_bundle(archive, Limits(max_ratio=2000)).files["zeros.bin"]) == 2 * 1024 * 1024


# --- input that cannot be read -------------------------------------------------------


def test_missing_path(tmp_path: Path) -> None:
    with pytest.raises(UnreadableInput, match="no such file or directory") as caught:
        read_bundle(tmp_path / "absent.tar.gz")
    assert caught.value.exit_code == 2


def test_empty_file(tmp_path: Path) -> None:
    empty = tmp_path / "empty.tar.gz"
    empty.touch()
    with pytest.raises(UnreadableInput, match="an empty file, not a bundle"):
        read_bundle(empty)


def test_not_a_tar(tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    with pytest.raises(UnreadableInput, match="neither a directory nor a tar archive"):
        read_bundle(text)


def test_tgz_suffix_without_gzip(tmp_path: Path) -> None:
    fake = tmp_path / "bundle.tgz"
    fake.write_text("hello\n")
    with pytest.raises(UnreadableInput, match=r"named like a \.tar\.gz but not gzip-compressed"):
        read_bundle(fake)


def test_other_compression_is_named(tmp_path: Path) -> None:
    archive = tmp_path / "bundle.tar.xz"
    archive.write_bytes(lzma.compress(tar_bytes([regular("a.json")])))
    with pytest.raises(UnreadableInput, match="xz data; only directories and tar archives"):
        read_bundle(archive)


def test_fifo_given_as_the_bundle_is_not_opened(tmp_path: Path) -> None:
    fifo = tmp_path / "bundle.tar.gz"
    os.mkfifo(fifo)
    with pytest.raises(UnreadableInput, match="neither a directory nor a tar archive"):
        read_bundle(fifo)


def test_corrupt_gzip(tmp_path: Path) -> None:
    archive = tmp_path / "bundle.tar.gz"
    archive.write_bytes(b"\x1f\x8b\x08\x00" + b"\xff" * 200)
    with pytest.raises(UnreadableInput, match="corrupt or truncated gzip stream"):
        read_bundle(archive)


def test_truncated_gzip(tmp_path: Path) -> None:
    data = gzip.compress(tar_bytes([regular("a.bin", random.Random(1).randbytes(50_000))]))
    archive = tmp_path / "bundle.tar.gz"
    archive.write_bytes(data[: len(data) // 2])
    with pytest.raises(UnreadableInput, match="corrupt or truncated"):
        read_bundle(archive)


def test_gzip_crc_mismatch_is_noticed(tmp_path: Path) -> None:
    data = bytearray(gzip.compress(tar_bytes([regular("a.json")])))
    data[-8] ^= 0xFF  # the CRC-32 in the gzip trailer
    archive = tmp_path / "bundle.tar.gz"
    archive.write_bytes(bytes(data))
    with pytest.raises(UnreadableInput, match="corrupt or truncated gzip stream"):
        read_bundle(archive)


def test_gzip_of_something_else(tmp_path: Path) -> None:
    archive = tmp_path / "bundle.tar.gz"
    archive.write_bytes(gzip.compress(b"just some text, not a tar archive\n" * 40))
    with pytest.raises(UnreadableInput, match="corrupt tar archive"):
        read_bundle(archive)


def test_garbage_header_after_the_first_member_is_not_a_quiet_end(tmp_path: Path) -> None:
    data = bytearray(tar_bytes([regular("a.json"), regular("b.json")]))
    data[1024:1536] = b"\xab" * 512  # the second member's header
    archive = tmp_path / "bundle.tar.gz"
    archive.write_bytes(gzip.compress(bytes(data)))
    with pytest.raises(UnreadableInput, match="corrupt tar archive: bad or missing tar header"):
        read_bundle(archive)


def test_tar_without_end_of_archive_marker_is_truncated(tmp_path: Path) -> None:
    data = tar_bytes([regular("a.json"), regular("b.json")])[:2048]
    archive = tmp_path / "bundle.tar.gz"
    archive.write_bytes(gzip.compress(data))
    with pytest.raises(UnreadableInput, match="truncated"):
        read_bundle(archive)


def test_member_cut_short(tmp_path: Path) -> None:
    data = tar_bytes([regular("a.bin", b"x" * 5000)])[:2048]
    archive = tmp_path / "bundle.tar.gz"
    archive.write_bytes(gzip.compress(data))
    with pytest.raises(UnreadableInput, match="corrupt tar archive"):
        read_bundle(archive)


_VALID = gzip.compress(
    tar_bytes([directory("b"), regular("b/experiment.json"), regular("b/r/1.json", b"[1, 2]")])
)


def _mutate(data: bytes, flips: list[tuple[int, int]]) -> bytes:
    mutable = bytearray(data)
    for position, value in flips:
        mutable[position % len(mutable)] = value
    return bytes(mutable)


_ARCHIVE_BYTES = st.one_of(
    st.binary(max_size=4096),
    st.binary(max_size=4096).map(lambda b: b"\x1f\x8b" + b),
    st.binary(max_size=4096).map(gzip.compress),
    st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=8).map(
        lambda flips: _mutate(_VALID, flips)
    ),
    st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=8).map(
        lambda flips: gzip.compress(_mutate(gzip.decompress(_VALID), flips))
    ),
    st.integers(0, len(_VALID)).map(lambda n: _VALID[:n]),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=_ARCHIVE_BYTES)
def test_no_bytes_crash_the_reader(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        archive = Path(folder) / "bundle.tar.gz"
        archive.write_bytes(data)
        try:
            bundle = read_bundle(archive, Limits(max_total_bytes=1024 * 1024))
        except (UnreadableInput, UnsafeInput):
            return
        assert all(isinstance(v, bytes) for v in bundle.files.values())
        assert sorted(Path(folder).iterdir()) == [archive]


# --- directories ---------------------------------------------------------------------


@pytest.fixture
def bundle_dir(tmp_path: Path) -> Path:
    root = tmp_path / "bundle"
    (root / "records").mkdir(parents=True)
    (root / "experiment.json").write_bytes(b"{}\n")
    (root / "records" / "001.json").write_bytes(b"[]\n")
    return root


def test_directory_is_read(bundle_dir: Path) -> None:
    bundle = read_bundle(bundle_dir)
    assert dict(bundle.files) == {"experiment.json": b"{}\n", "records/001.json": b"[]\n"}
    assert bundle.findings == ()


def test_directory_symlink_to_a_file_outside_is_not_followed(
    bundle_dir: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("do not read\n")
    (bundle_dir / "records" / "leak.json").symlink_to(secret)
    bundle = read_bundle(bundle_dir)
    assert only_finding(bundle) == (
        f"entry 'records/leak.json' is a symbolic link to '{secret}'; "
        "links are refused, not followed"
    )
    assert "records/leak.json" not in bundle.files
    assert all(b"do not read" not in data for data in bundle.files.values())


def test_directory_symlink_to_a_directory_outside_is_not_followed(
    bundle_dir: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.json").write_text("{}")
    (bundle_dir / "more").symlink_to(outside, target_is_directory=True)
    bundle = read_bundle(bundle_dir)
    assert "entry 'more' is a symbolic link" in only_finding(bundle)
    assert list(bundle.files) == ["experiment.json", "records/001.json"]


def test_directory_fifo_and_socket_are_refused_without_blocking(bundle_dir: Path) -> None:
    os.mkfifo(bundle_dir / "pipe")
    with socket.socket(socket.AF_UNIX) as server:
        try:
            server.bind(str(bundle_dir / "sock"))
        except OSError:  # path too long for AF_UNIX on some systems
            pytest.skip("cannot bind a unix socket here")
        messages = [f.message for f in read_bundle(bundle_dir).findings]
    assert messages == [
        "entry 'pipe' is a FIFO; only regular files and directories are accepted",
        "entry 'sock' is a socket; only regular files and directories are accepted",
    ]


def test_directory_unreadable_file_is_a_finding(
    bundle_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_open = os.open

    def deny_secret(path: str, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        if path == "experiment.json":
            raise PermissionError(13, "Permission denied")
        return real_open(path, flags, mode, dir_fd=dir_fd)

    monkeypatch.setattr(os, "open", deny_secret)
    bundle = read_bundle(bundle_dir)
    assert only_finding(bundle) == "entry 'experiment.json' cannot be read: Permission denied"
    assert list(bundle.files) == ["records/001.json"]


def test_directory_case_collision(bundle_dir: Path) -> None:
    (bundle_dir / "Experiment.json").write_bytes(b"{}")
    message = only_finding(read_bundle(bundle_dir))
    assert message == (
        "entry 'experiment.json' collides case-insensitively with 'Experiment.json'; "
        "names must differ in more than case"
    )


def test_directory_name_with_control_character(bundle_dir: Path) -> None:
    (bundle_dir / "bad\x1bname").write_bytes(b"{}")
    message = only_finding(read_bundle(bundle_dir))
    assert message == "entry 'bad\\x1bname' has a control or non-printable character in its name"


def test_directory_limits(bundle_dir: Path) -> None:
    with pytest.raises(UnsafeInput, match="--max-members"):
        read_bundle(bundle_dir, Limits(max_members=2))
    with pytest.raises(UnsafeInput, match=r"'experiment.json' is 3 bytes.*--max-member-bytes"):
        read_bundle(bundle_dir, Limits(max_member_bytes=2))
    with pytest.raises(UnsafeInput, match="--max-total-bytes"):
        read_bundle(bundle_dir, Limits(max_total_bytes=5))


def test_empty_directory_is_an_empty_bundle(tmp_path: Path) -> None:
    bundle = read_bundle(tmp_path)
    assert dict(bundle.files) == {}
    assert bundle.findings == ()


def test_unlistable_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def deny(*args: object, **kwargs: object) -> int:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "open", deny)
    with pytest.raises(UnreadableInput, match="cannot be read: Permission denied"):
        read_bundle(tmp_path)


def test_directory_nested_too_deep_is_refused(tmp_path: Path) -> None:
    deep = tmp_path.joinpath(*["d"] * 34)
    deep.mkdir(parents=True)
    (deep / "x.json").write_bytes(b"{}")
    message = only_finding(read_bundle(tmp_path))
    assert message == f"entry '{'/'.join(['d'] * 32)}' is nested deeper than 32 directories"


# --- archives made by other tools are read; what follows their end is not -----------


@pytest.mark.skipif(shutil.which("tar") is None, reason="no tar here")
@pytest.mark.parametrize(
    "options", [["-czf"], ["--format=posix", "-czf"], ["--format=gnu", "-czf"]]
)
def test_system_tar_archives_are_read(tmp_path: Path, options: list[str]) -> None:
    root = tmp_path / "bundle"
    (root / "records").mkdir(parents=True)
    (root / "experiment.json").write_bytes(b'{"x": 1}\n')
    (root / "records" / "001.json").write_bytes(b"[1]\n")
    archive = tmp_path / "bundle.tar.gz"
    subprocess.run(["tar", *options, str(archive), "-C", str(tmp_path), "bundle"], check=True)
    bundle = read_bundle(archive)
    assert dict(bundle.files) == dict(read_bundle(root).files)
    assert bundle.findings == ()


@pytest.mark.skipif(shutil.which("gzip") is None, reason="no gzip here")
def test_gzip_with_a_file_name_in_its_header_is_read(tmp_path: Path) -> None:
    plain = tmp_path / "bundle.tar"
    plain.write_bytes(tar_bytes([regular("experiment.json")]))
    subprocess.run(["gzip", "-9", str(plain)], check=True)  # sets FNAME, the name, in the header
    bundle = read_bundle(tmp_path / "bundle.tar.gz")
    assert list(bundle.files) == ["experiment.json"] and bundle.findings == ()


def test_gzip_header_fields_zlib_checks(tmp_path: Path) -> None:
    data = bytearray(gzip.compress(tar_bytes([regular("a.json")])))
    data[3] |= 0xE0  # reserved flag bits
    archive = tmp_path / "bundle.tar.gz"
    archive.write_bytes(bytes(data))
    with pytest.raises(UnreadableInput, match="corrupt or truncated gzip stream"):
        read_bundle(archive)


def test_trailing_checks_see_bytes_that_tarfile_buffered(tmp_path: Path) -> None:
    """tarfile reads ahead in records of 10 KiB: what follows the end must still be seen."""
    tar = tar_bytes([regular("a.json")])
    archive = tmp_path / "bundle.tar"
    archive.write_bytes(tar + b"x")  # plain tar: no gzip layer to catch it
    messages = [f.message for f in read_bundle(archive).findings]
    assert messages == [
        f"data follows the end-of-archive marker (from byte {len(tar)} of the tar stream, "
        "1 byte); `tar --ignore-zeros` would read it, this reader would not: refused"
    ]


def test_a_bomb_in_a_second_gzip_member_is_caught(tmp_path: Path) -> None:
    archive = tmp_path / "bundle.tar.gz"
    first = gzip.compress(tar_bytes([regular("a.json")]))
    archive.write_bytes(first + gzip.compress(bytes(8 * 1024 * 1024)))
    with pytest.raises(UnsafeInput, match="--max-ratio"):
        read_bundle(archive)
