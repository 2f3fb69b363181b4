"""The fast path for simple tar archives (verifier/bundle/simpletar.py) against tarfile's.

Every input gets the same outcome from read_archive as from the plain path alone
(read_archive(fast=False)): the same files and findings, or the same error and message.
Where the fast path does not give up, its own outcome is compared too, and so is how far
into the file each path read before it stopped: a limit must stop both at the same byte.
"""

from __future__ import annotations

import gzip
import io
import random
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from verifier.bundle import archive, simpletar
from verifier.bundle.reader import DEFAULT_LIMITS, Limits, _name_problem
from verifier.errors import UnreadableInput, UnsafeInput

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "hostile"))
from corpus import CASES  # noqa: E402

Member = tuple[tarfile.TarInfo, bytes | None]
Outcome = tuple[Any, ...]

_LIMITS = (
    DEFAULT_LIMITS,
    Limits(max_members=3),
    Limits(max_member_bytes=100),
    Limits(max_total_bytes=3000),
    Limits(max_ratio=1.5),
    Limits(max_members=10**6, max_total_bytes=1 << 40, max_ratio=10**9),
)


# --- helpers -------------------------------------------------------------------------


def _outcome(read: Any) -> Outcome:
    try:
        bundle = read()
    except (UnreadableInput, UnsafeInput) as exc:
        return ("error", type(exc).__name__, exc.message)
    if bundle is None:
        return ("gave up",)
    return ("read", bundle.source, list(bundle.files.items()), bundle.findings)


def _kind(data: bytes, path: Path) -> str:
    return archive._archive_kind(data[:512], path, str(path))


def _once(data: bytes, path: Path, limits: Limits, *, fast: bool) -> tuple[Outcome, int]:
    """One path's outcome on the bytes, and how many bytes of the file it had read."""
    raw = io.BytesIO(data)
    kind = _kind(data, path)
    result = _outcome(lambda: archive._read_once(raw, kind, str(path), limits, fast=fast))
    return result, raw.tell()


def fast_ran(data: bytes, limits: Limits = DEFAULT_LIMITS) -> bool:
    outcome, _ = _once(data, Path("bundle.tar.gz"), limits, fast=True)
    return outcome != ("gave up",)


def assert_same(path: Path, limits: Limits = DEFAULT_LIMITS) -> Outcome:
    """The fast reader's outcome is the plain reader's; returns it."""
    fast = _outcome(lambda: archive.read_archive(path, str(path), limits))
    plain = _outcome(lambda: archive.read_archive(path, str(path), limits, fast=False))
    assert fast == plain
    data = path.read_bytes()
    try:
        _kind(data, path)
    except UnreadableInput:
        return plain  # not an archive: neither path begins
    alone, fast_at = _once(data, path, limits, fast=True)
    if alone != ("gave up",):
        reference, plain_at = _once(data, path, limits, fast=False)
        assert alone == reference
        assert fast_at == plain_at  # stopped, or finished, at the same byte of the file
    return plain


def assert_same_bytes(folder: Path, data: bytes, limits: Limits = DEFAULT_LIMITS) -> Outcome:
    path = folder / "bundle.tar.gz"
    path.write_bytes(data)
    return assert_same(path, limits)


def tar_bytes(members: list[Member], **open_args: Any) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", **open_args) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


def regular(name: str, data: bytes = b"{}\n") -> Member:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def special(name: str, kind: bytes, linkname: str = "", size: int = 0) -> Member:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    info.size = size
    return info, (b"x" * size if size else None)


def directory(name: str) -> Member:
    return special(name, tarfile.DIRTYPE)


_ORDINARY = [directory("b"), regular("b/experiment.json"), regular("b/r/1.json", b"[1, 2]")]


# --- every archive of the repository and of the hostile corpus -----------------------


_ARCHIVES = sorted(
    p
    for pattern in ("*.tar.gz", "*.tgz", "*.tar")
    for p in [*REPO.glob(f"sample_bundles/**/{pattern}"), *REPO.glob(f"tests/**/{pattern}")]
)


def test_there_are_archives_to_compare() -> None:
    assert len(_ARCHIVES) >= 5


@pytest.mark.parametrize("path", _ARCHIVES, ids=[str(p.relative_to(REPO)) for p in _ARCHIVES])
@pytest.mark.parametrize("limits", _LIMITS)
def test_repository_archives(path: Path, limits: Limits) -> None:
    assert_same(path, limits)


_ORDINARY_SAMPLES = [p for p in _ARCHIVES if "negative" not in p.parts]


@pytest.mark.parametrize("path", _ORDINARY_SAMPLES, ids=[p.name for p in _ORDINARY_SAMPLES])
def test_the_fast_path_reads_the_samples(path: Path) -> None:
    assert fast_ran(path.read_bytes())


@pytest.mark.parametrize("item", CASES, ids=[c.name for c in CASES])
def test_hostile_corpus(item: Any, tmp_path: Path) -> None:
    path = item.build(tmp_path)
    if not path.is_file():
        return  # a directory case: no archive is read
    for limits in _LIMITS:
        assert_same(path, limits)


def test_the_fast_path_reads_most_of_the_corpus(tmp_path: Path) -> None:
    ran = 0
    for index, item in enumerate(CASES):
        folder = tmp_path / str(index)
        folder.mkdir()
        path = item.build(folder)
        if path.is_file() and path.read_bytes()[:2] == b"\x1f\x8b":
            ran += fast_ran(path.read_bytes())
    assert ran >= len(CASES) // 2


# --- the fast path runs on ordinary archives, and gives up on anything else ----------


def test_fast_path_reads_tarfile_archives_of_each_format(tmp_path: Path) -> None:
    for form in (tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT, tarfile.PAX_FORMAT):
        data = gzip.compress(tar_bytes(_ORDINARY, format=form))
        assert fast_ran(data)
        outcome = assert_same_bytes(tmp_path, data)
        assert outcome[0] == "read" and [n for n, _ in outcome[2]] == [
            "experiment.json",
            "r/1.json",
        ]


def test_fast_path_reads_a_long_ustar_name_through_its_prefix(tmp_path: Path) -> None:
    name = "/".join(["d" * 60] * 3) + "/x.json"  # over 100 bytes: split into prefix and name
    data = gzip.compress(tar_bytes([regular(name)], format=tarfile.USTAR_FORMAT))
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(data))) as tar:
        assert tar.getnames() == [name]
        assert tar.getmembers()[0].tobuf(tarfile.USTAR_FORMAT)[345] != 0  # a prefix
    assert fast_ran(data)
    outcome = assert_same_bytes(tmp_path, data)
    assert [n for n, _ in outcome[2]] == [name.split("/", 1)[1]]  # the one root is dropped


def test_fast_path_reads_the_findings_it_can(tmp_path: Path) -> None:
    """Refused names, duplicates and collisions are the fast path's to read, not to give up."""
    members = [
        regular("../escape"),
        regular("/abs"),
        regular("C:/x"),
        regular("a\\b"),
        regular("e\x1b"),
        regular("experiment.json", b"1"),
        regular("./experiment.json", b"2"),
        regular("Experiment.json"),
        regular("caf\u00e9"),
        regular("cafe\u0301"),
        regular("f/"),
        regular(""),
        regular("."),
        directory("."),
        directory("d/"),
        regular("d"),
        regular("experiment.json/x"),
    ]
    data = gzip.compress(tar_bytes(members, format=tarfile.GNU_FORMAT))
    assert fast_ran(data)
    outcome = assert_same_bytes(tmp_path, data)
    assert len(outcome[3]) >= 10


@pytest.mark.skipif(shutil.which("tar") is None, reason="no tar here")
@pytest.mark.parametrize("form", ["gnu", "ustar", "v7"])
def test_fast_path_reads_system_tar_archives(tmp_path: Path, form: str) -> None:
    root = tmp_path / "bundle"
    (root / "records").mkdir(parents=True)
    (root / "experiment.json").write_bytes(b'{"x": 1}\n')
    (root / "records" / "001.json").write_bytes(b"[1]\n" * 1000)
    path = tmp_path / "system.tar.gz"
    command = ["tar", f"--format={form}", "-czf", str(path), "-C", str(tmp_path), "bundle"]
    subprocess.run(command, check=True)
    assert fast_ran(path.read_bytes())
    assert assert_same(path)[0] == "read"


def _gnu_long_link() -> Member:
    return special("link", tarfile.SYMTYPE, "t" * 200)


def _base256_uid() -> Member:
    info, data = regular("a.json")
    info.uid = 8**8  # past 7 octal digits: GNU format writes it in base-256
    return info, data


_GIVE_UP = {
    "symlink": ([special("l", tarfile.SYMTYPE, "/etc/passwd")], {}),
    "hard link": ([special("l", tarfile.LNKTYPE, "b/experiment.json")], {}),
    "character device": ([special("c", tarfile.CHRTYPE)], {}),
    "block device": ([special("b", tarfile.BLKTYPE)], {}),
    "fifo": ([special("f", tarfile.FIFOTYPE)], {}),
    "contiguous file": ([special("c", tarfile.CONTTYPE, size=3)], {}),
    "sparse": ([special("s", tarfile.GNUTYPE_SPARSE)], {"format": tarfile.GNU_FORMAT}),
    "unknown type": ([special("z", b"Z", size=5)], {}),
    "gnu long name": ([regular("n" * 150)], {"format": tarfile.GNU_FORMAT}),
    "gnu long link": ([_gnu_long_link()], {"format": tarfile.GNU_FORMAT}),
    "pax header": ([regular("caf\u00e9")], {"format": tarfile.PAX_FORMAT}),
    "pax long name": ([regular("a" * 120)], {"format": tarfile.PAX_FORMAT}),
    "global pax header": ([], {"format": tarfile.PAX_FORMAT, "pax_headers": {"comment": "x"}}),
    "base-256 uid": ([_base256_uid()], {"format": tarfile.GNU_FORMAT}),
    "directory with a size": ([special("d", tarfile.DIRTYPE, size=512)], {}),
}


@pytest.mark.parametrize("case", list(_GIVE_UP), ids=list(_GIVE_UP))
@pytest.mark.parametrize("where", ["first", "after"])
def test_fast_path_gives_up_on_unusual_headers(tmp_path: Path, case: str, where: str) -> None:
    extra, open_args = _GIVE_UP[case]
    members = [*extra, *_ORDINARY] if where == "first" else [*_ORDINARY, *extra]
    data = gzip.compress(tar_bytes(members, **open_args))
    assert not fast_ran(data)
    for limits in _LIMITS:
        assert_same_bytes(tmp_path, data, limits)


def _patched(change: dict[int, bytes], *, resum: bool) -> bytes:
    """The ordinary tar with bytes replaced in its second header, the checksum made anew."""
    tar = bytearray(tar_bytes(_ORDINARY, format=tarfile.USTAR_FORMAT))
    start = 512  # the directory has no data: the second header follows the first
    for offset, value in change.items():
        tar[start + offset : start + offset + len(value)] = value
    if resum:
        header = bytes(tar[start : start + 512])
        total = 256 + sum(header[:148]) + sum(header[156:])
        tar[start + 148 : start + 156] = b"%06o\0 " % total
    return bytes(tar)


_ODD_HEADERS = {
    "bad checksum": ({148: b"000001\0 "}, False),
    "checksum of spaces": ({148: b"        "}, False),
    "base-256 size": ({124: b"\x80" + bytes(10) + b"\x03"}, True),
    "size with a sign": ({124: b"+0000000003\0"}, True),
    "size with 0o": ({124: b"0o000000003\0"}, True),
    "size with an underscore": ({124: b"0_000000003\0"}, True),
    "size with a tab": ({124: b"\t0000000003\0"}, True),
    "size with 8": ({124: b"00000000008\0"}, True),
    "mode not octal": ({100: b"0000x44\0"}, True),
    "devmajor not octal": ({329: b"000000x\0"}, True),
}


@pytest.mark.parametrize("case", list(_ODD_HEADERS), ids=list(_ODD_HEADERS))
def test_fast_path_gives_up_on_numbers_it_does_not_read(tmp_path: Path, case: str) -> None:
    change, resum = _ODD_HEADERS[case]
    data = gzip.compress(_patched(change, resum=resum))
    assert not fast_ran(data)
    assert_same_bytes(tmp_path, data)


_PLAIN_FORMS = {
    "spaces around digits": {124: b"  0000003 \0 ", 100: b" 644    "},
    "no terminator": {124: b"000000000003", 136: b"000000000000"},
    "all NUL": {100: bytes(8), 108: bytes(8), 136: bytes(12), 329: bytes(16)},
    "digits then a space": {100: b"0000644 ", 108: b"000000 \0"},
    "bytes after the NUL": {100: b"644\0abcd", 329: b"0\0\xff\xfe\x00\x01\x02\x03"},
    "gnu magic with a prefix": {257: b"ustar  \0", 345: b"pre"},
    "ustar prefix": {345: b"b/deeper"},
}


@pytest.mark.parametrize("case", list(_PLAIN_FORMS), ids=list(_PLAIN_FORMS))
def test_fast_path_reads_other_forms_of_numbers_as_tarfile_does(tmp_path: Path, case: str) -> None:
    data = gzip.compress(_patched(_PLAIN_FORMS[case], resum=True))
    assert fast_ran(data)
    assert_same_bytes(tmp_path, data)


def test_signed_checksum_is_left_to_tarfile(tmp_path: Path) -> None:
    tar = bytearray(_patched({0: "\u00e9.json".encode()}, resum=False))
    header = bytes(tar[512:1024])
    signed = 256 + sum(b - 256 if b > 127 else b for b in header[:148] + header[156:])
    tar[512 + 148 : 512 + 156] = b"%06o\0 " % signed
    data = gzip.compress(bytes(tar))
    assert not fast_ran(data)
    assert assert_same_bytes(tmp_path, data)[0] == "read"  # tarfile takes it


def test_a_name_that_is_not_utf8_is_read_alike(tmp_path: Path) -> None:
    data = _patched({0: b"\xff\xfe.json\0"}, resum=True)
    assert fast_ran(gzip.compress(data))
    assert assert_same_bytes(tmp_path, gzip.compress(data))[0] == "read"


def test_an_archive_of_zero_blocks_is_left_to_tarfile(tmp_path: Path) -> None:
    data = gzip.compress(bytes(10240))
    assert not fast_ran(data)
    assert_same_bytes(tmp_path, data)


# --- limits stop both paths alike, while streaming -----------------------------------


def test_a_bomb_stops_the_fast_path_itself_early(tmp_path: Path) -> None:
    noise = regular("noise.bin", random.Random(7).randbytes(1024 * 1024))
    zeros = regular("zeros.bin", bytes(15 * 1024 * 1024))
    data = gzip.compress(tar_bytes([*_ORDINARY, zeros, noise]))
    fast, fast_at = _once(data, tmp_path / "b.tar.gz", DEFAULT_LIMITS, fast=True)
    plain, plain_at = _once(data, tmp_path / "b.tar.gz", DEFAULT_LIMITS, fast=False)
    assert fast == plain and fast[0] == "error" and "compression bomb" in fast[2]
    assert fast_at == plain_at < len(data) // 4


def test_too_many_members_stop_the_fast_path_itself(tmp_path: Path) -> None:
    data = gzip.compress(tar_bytes([regular(f"r/{i}.json") for i in range(50)]))
    fast, fast_at = _once(data, tmp_path / "b.tar.gz", Limits(max_members=20), fast=True)
    plain, plain_at = _once(data, tmp_path / "b.tar.gz", Limits(max_members=20), fast=False)
    assert fast == plain and "more than 20 members" in fast[2]
    assert fast_at == plain_at


def test_a_huge_refused_member_is_skipped_without_keeping_it(tmp_path: Path) -> None:
    payload = random.Random(5).randbytes(3 * 1024 * 1024)
    data = gzip.compress(tar_bytes([regular("../x.bin", payload), *_ORDINARY]))
    limits = Limits(max_total_bytes=64 * 1024 * 1024)
    assert fast_ran(data, limits)
    assert assert_same_bytes(tmp_path, data, limits)[0] == "read"


# --- generated archives --------------------------------------------------------------

_NAMES = st.one_of(
    st.sampled_from(
        [
            "experiment.json",
            "Experiment.json",
            "records/a.json",
            "./records/a.json",
            "records//a.json",
            "records/",
            "records",
            "../escape",
            "a/../../escape",
            "/etc/passwd",
            "C:/x",
            "a\\b",
            ".",
            "./",
            "",
            "caf\u00e9",
            "cafe\u0301",
            "x\x07",
            "d" * 101,
            "/".join(["p" * 50] * 4),
            "/".join(["q"] * 40),
            "c" * 300,
            "\udcff.json",
        ]
    ),
    st.text(alphabet="ab./\\-_:\u00e9\x00\n", max_size=12),
)
_TYPES = st.sampled_from(
    [
        tarfile.REGTYPE,
        tarfile.REGTYPE,
        tarfile.AREGTYPE,
        tarfile.DIRTYPE,
        tarfile.DIRTYPE,
        tarfile.SYMTYPE,
        tarfile.LNKTYPE,
        tarfile.CHRTYPE,
        tarfile.BLKTYPE,
        tarfile.FIFOTYPE,
        tarfile.CONTTYPE,
        tarfile.GNUTYPE_SPARSE,
        b"Z",
    ]
)
_SIMPLE_TYPES = st.sampled_from([tarfile.REGTYPE, tarfile.AREGTYPE, tarfile.DIRTYPE])
_PAX = st.one_of(
    st.just({}),
    st.dictionaries(
        st.sampled_from(["path", "size", "comment", "linkpath", "mtime", "uname"]),
        st.sampled_from(["a.json", "../x", "5", "-1", "abc", "", "d/", "7" * 3]),
        max_size=2,
    ),
)


@st.composite
def _members(draw: st.DrawFn) -> list[Member]:
    members: list[Member] = []
    simple = draw(st.booleans())  # only what the fast path reads, so that it runs often
    for _ in range(draw(st.integers(0, 6))):
        name = draw(_NAMES)
        kind = draw(_SIMPLE_TYPES if simple else _TYPES)
        data = draw(st.sampled_from([b"", b"{}", b"x" * 700, b"y" * 3000]))
        info = tarfile.TarInfo(name)
        info.type = kind
        if kind in (tarfile.SYMTYPE, tarfile.LNKTYPE):
            info.linkname = draw(st.sampled_from(["a", "/etc/passwd", "l" * 150]))
        has_data = kind in (tarfile.REGTYPE, tarfile.AREGTYPE, tarfile.CONTTYPE, b"Z")
        info.size = len(data) if has_data else 0
        info.pax_headers = {} if simple else draw(_PAX)
        info.uid = draw(st.sampled_from([0, 1000] if simple else [0, 1000, 8**8]))
        members.append((info, data if has_data else None))
    return members


def _build(members: list[Member], form: int, global_pax: dict[str, str]) -> bytes:
    try:
        return tar_bytes(members, format=form, pax_headers=global_pax, errors="surrogateescape")
    except (ValueError, UnicodeError, tarfile.TarError):
        assume(False)  # a member this format cannot hold
        raise


def _mutate(data: bytes, flips: list[tuple[int, int]]) -> bytes:
    mutable = bytearray(data)
    for position, value in flips:
        if mutable:
            mutable[position % len(mutable)] = value
    return bytes(mutable)


_TAILS = st.sampled_from(
    [b"", bytes(512), bytes(20000), b"garbage", b"\0" * 600 + b"x", b"ustar" * 200]
)


@st.composite
def _archives(draw: st.DrawFn) -> bytes:
    members = draw(_members())
    form = draw(st.sampled_from([tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT, tarfile.PAX_FORMAT]))
    global_pax = draw(st.sampled_from([{}, {}, {"comment": "c"}, {"path": "p"}]))
    if form != tarfile.PAX_FORMAT:
        global_pax = {}
    tar = _build(members, form, global_pax)
    how = draw(st.sampled_from(["as is", "flips", "cut", "tail", "strip end"]))
    if how == "flips":
        flips = draw(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=4))
        tar = _mutate(tar, flips)
    elif how == "cut":
        tar = tar[: draw(st.integers(0, len(tar)))]
    elif how == "tail":
        tar += draw(_TAILS)
    elif how == "strip end":
        end = len(tar.rstrip(b"\0"))
        tar = tar[: end + (-end) % 512 + draw(st.sampled_from([0, 512]))]
    wrap = draw(st.sampled_from(["gz", "gz", "gz", "plain", "two gz", "gz+junk", "cut gz"]))
    if wrap == "plain":
        return tar
    packed = gzip.compress(tar, mtime=0)
    if wrap == "two gz":
        cut = draw(st.integers(0, len(tar)))
        return gzip.compress(tar[:cut], mtime=0) + gzip.compress(tar[cut:], mtime=0)
    if wrap == "gz+junk":
        return packed + draw(st.sampled_from([b"x", bytes(100), b"\x1f\x8bjunk"]))
    if wrap == "cut gz":
        return packed[: draw(st.integers(0, len(packed)))]
    return packed


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=_archives(), limits=st.sampled_from(_LIMITS))
def test_generated_archives_read_alike(
    tmp_path_factory: pytest.TempPathFactory, data: bytes, limits: Limits
) -> None:
    folder = tmp_path_factory.mktemp("generated")
    assert_same_bytes(folder, data, limits)


def _ordinary_tar(count: int, seed: int) -> bytes:
    rng = random.Random(seed)
    members = [directory("b")]
    for i in range(count):
        size = rng.choice([0, 1, 511, 512, 513, 10239, 10240, 10241, 30000])
        members.append(regular(f"b/r/{i}.json", rng.randbytes(size)))
    return tar_bytes(members, format=tarfile.USTAR_FORMAT)


@settings(max_examples=60, deadline=None)
@given(
    count=st.integers(0, 40),
    seed=st.integers(0, 1000),
    limits=st.sampled_from(_LIMITS),
    level=st.sampled_from([0, 1, 9]),
)
def test_ordinary_archives_on_record_boundaries_read_alike(
    tmp_path_factory: pytest.TempPathFactory, count: int, seed: int, limits: Limits, level: int
) -> None:
    """Members of sizes about the 512-byte block and the 10 KiB record, for the buffering."""
    data = gzip.compress(_ordinary_tar(count, seed), compresslevel=level, mtime=0)
    assert fast_ran(data, Limits(max_members=10**6, max_total_bytes=1 << 40, max_ratio=10**9))
    assert_same_bytes(tmp_path_factory.mktemp("ordinary"), data, limits)


# --- the shortcut past _name_problem -------------------------------------------------


def _plain_name_ok(name: str) -> bool:
    return (
        archive._PLAIN_NAME.fullmatch(name) is not None
        and ".." not in name
        and len(name) <= archive._MAX_PLAIN_NAME
    )


@settings(max_examples=500, deadline=None)
@given(name=st.from_regex(archive._PLAIN_NAME, fullmatch=True))
def test_names_the_fast_path_accepts_at_a_glance_are_accepted(name: str) -> None:
    if _plain_name_ok(name):
        assert _name_problem(name) is None


@pytest.mark.parametrize(
    "name",
    [
        ".",
        "./a",
        "a/.",
        "-a",
        "+",
        "a" * 255,
        "/".join(["a"] * 32),
        "/".join(["b" * 255] * 4)[:1024].rstrip("/"),
        "a.b..c",
        "a/b/c.json",
    ],
)
def test_edge_names_of_the_shortcut(name: str) -> None:
    if _plain_name_ok(name):
        assert _name_problem(name) is None


@pytest.mark.parametrize(
    "name", ["a" * 256, "/".join(["a"] * 33), "../a", "a/..", "/a", "a/", "a//b", "C:x", "a b"]
)
def test_names_outside_the_shortcut_go_to_name_problem(name: str) -> None:
    assert not _plain_name_ok(name)


# --- the parts of simpletar ----------------------------------------------------------


def _number(width: int) -> st.SearchStrategy[bytes]:
    """A numeric header field in one of the forms tar writers use, or a wrong one."""
    digits = st.integers(0, 8 ** (width - 1) - 1)
    return st.one_of(
        digits.map(lambda n: b"%0*o\0" % (width - 1, n)),
        digits.map(lambda n: b"%*o \0" % (width - 2, n % 8 ** (width - 2))),
        st.integers(0, 8**width - 1).map(lambda n: b"%0*o" % (width, n)),
        st.just(bytes(width)),
        st.just(b" " * width),
        st.binary(min_size=width, max_size=width),
        st.sampled_from([b"+", b"-", b"0o", b"8", b"\t", b"_", b"\x80", b"\xff"]).map(
            lambda odd: (odd + b"1" * width)[: width - 1] + b"\0"
        ),
    )


_NAME_FIELD = st.one_of(
    st.binary(max_size=100),
    st.text("ab/.\u00e9", max_size=30).map(lambda t: t.encode()),
).map(lambda b: b.ljust(100, b"\0")[:100])


@st.composite
def _headers(draw: st.DrawFn) -> bytes:
    header = bytearray(512)
    header[0:100] = draw(_NAME_FIELD)
    for start, width in ((100, 8), (108, 8), (116, 8), (124, 12), (136, 12), (329, 8), (337, 8)):
        header[start : start + width] = draw(_number(width))
    header[156] = draw(st.sampled_from(b"05\x00" * 3 + b"12x7"))
    header[257:265] = draw(st.sampled_from([b"ustar\x0000", b"ustar  \0", bytes(8)]))
    header[345:500] = draw(_NAME_FIELD.map(lambda b: b + bytes(55)))
    total = 256 + sum(header[:148]) + sum(header[156:])
    signed = 256 + sum(b - 256 if b > 127 else b for b in header[:148] + header[156:])
    header[148:156] = draw(
        st.one_of(
            st.just(b"%06o\0 " % total),
            st.just(b"%06o\0 " % (signed % 8**6)),
            _number(8),
        )
    )
    return bytes(header)


@settings(max_examples=1000, deadline=None)
@given(header=_headers())
def test_parse_header_is_tarfile_or_gives_up(header: bytes) -> None:
    try:
        info: tarfile.TarInfo | None = tarfile.TarInfo.frombuf(header, "utf-8", "surrogateescape")
    except tarfile.HeaderError:
        info = None
    try:
        name, is_dir, size = simpletar.parse_header(header)
    except simpletar.NotSimple:
        return
    assert info is not None
    if info.isdir():
        info.name = info.name.rstrip("/")  # as _proc_builtin does after frombuf
    assert (name, is_dir, size) == (info.name, info.isdir(), info.size)


def test_parse_header_reads_most_generated_headers() -> None:
    """The property above is not empty: ordinary headers are parsed, not given up on."""
    header = tar_bytes([regular("a/b.json", b"123")], format=tarfile.USTAR_FORMAT)[:512]
    assert simpletar.parse_header(header) == ("a/b.json", False, 3)
    header = tar_bytes([directory("a/b")], format=tarfile.GNU_FORMAT)[:512]
    assert simpletar.parse_header(header) == ("a/b", True, 0)


def test_blocks() -> None:
    assert [simpletar.blocks(n) for n in (0, 1, 511, 512, 513, 1024)] == [
        0,
        512,
        512,
        512,
        1024,
        1024,
    ]
