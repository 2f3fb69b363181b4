"""The archive is reproducible to the byte, and what it holds verifies (signed or not)."""

from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from verifier import signing
from verifier.export import ExportOptions, archive, export_bundle
from verifier.export.archive import build_archive
from verifier.verify import VerifyOptions, verify_path


def test_exporting_twice_gives_byte_identical_archives(seed_raw: Path, tmp_path: Path) -> None:
    keys = signing.generate_key_pair(tmp_path / "keys")
    archives = []
    for name in ("first", "second"):
        archive = tmp_path / name / "bundle.tar.gz"
        archive.parent.mkdir()
        export_bundle(
            ExportOptions(seed_raw, tmp_path / name / "out", archive=archive, sign_key=keys.private)
        )
        archives.append(archive.read_bytes())
    assert archives[0] == archives[1]


def test_archive_members_carry_no_machine_specific_metadata() -> None:
    data = build_archive({"b/x.json": b"{}\n", "a.json": b"[]\n", "SHA256SUMS": b""})
    assert data[4:8] == b"\0\0\0\0"  # gzip MTIME
    assert data[3] & 0x08 == 0  # no FNAME field
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        members = tar.getmembers()
    assert [m.name for m in members] == ["SHA256SUMS", "a.json", "b", "b/x.json"]
    for member in members:
        assert (member.mtime, member.uid, member.gid, member.uname, member.gname) == (
            0,
            0,
            0,
            "",
            "",
        )
        assert member.mode == (0o755 if member.isdir() else 0o644)
    assert gzip.decompress(data)[257:262] == b"ustar"


def test_signed_export_verifies_with_the_public_key(factory_raw: Path, tmp_path: Path) -> None:
    keys = signing.generate_key_pair(tmp_path / "keys")
    out, archive = tmp_path / "public", tmp_path / "public.tar.gz"
    summary = export_bundle(ExportOptions(factory_raw, out, archive=archive, sign_key=keys.private))
    assert summary.signed and "SHA256SUMS.sig" in summary.files
    for path in (out, archive):
        result = verify_path(path, VerifyOptions(public_key=keys.public))
        assert result.verified, [f for f in result.findings if f.is_error]
    other = signing.generate_key_pair(tmp_path / "other")
    assert not verify_path(out, VerifyOptions(public_key=other.public)).verified


def test_failed_request_keeps_its_error_and_has_no_hash(tmp_path: Path) -> None:
    import json

    from rawfactory import RawFactory

    f = RawFactory()
    response = f.exchanges()[2]["response"]
    response.update(status=500, body=None, text="backend crashed", error=None)
    out = tmp_path / "public"
    export_bundle(ExportOptions(f.write(tmp_path / "raw"), out))
    record = json.loads((out / "records/c1/003.json").read_text())
    assert record["output_hash"] is None and record["http_status"] == 500
    assert record["error"] == "HTTP 500: backend crashed"
    kept = json.loads((out / "records/c1/002.json").read_text())
    assert kept["usage"] == kept["response"]["usage"]
    assert set(kept["telemetry"]["before"]) == {"cache_stats", "metrics"}


_NAME_PART = st.text(st.sampled_from("abz09-_. ~é%"), max_size=40).filter(
    lambda part: part not in (".", "..")
)  # an empty part too: "a//b" holds a folder "a/", to which tarfile adds no second "/"


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.lists(_NAME_PART, min_size=1, max_size=4).map("/".join),
        st.binary(max_size=1500),
        max_size=12,
    )
)
def test_the_tar_written_here_is_tarfile_s_byte_for_byte(files: dict[str, bytes]) -> None:
    """Names of every length around the header's 100 bytes (a directory's with its "/"),
    sizes around the 512-byte blocks; a name that is not ASCII or too long is left to
    tarfile, so build_archive's bytes are tarfile's either way."""
    if any(other.startswith(name + "/") for name in files for other in files):
        return  # a file and a folder of one name: no bundle holds both
    directories = {"/".join(p.split("/")[:i]) for p in files for i in range(1, p.count("/") + 1)}
    entries = sorted([(d, True) for d in directories] + [(f, False) for f in files])
    simple = archive._simple_tar(entries, files)
    reference = archive._tarfile_tar(entries, files)
    if simple is None:
        assert any(not n.isascii() or len(n) + d > 100 for n, d in entries)
    else:
        assert simple == reference


def test_names_of_99_100_and_101_bytes_are_written_as_tarfile_writes_them() -> None:
    long_name = "r/" + "x" * 97  # 99 bytes
    for name, fits in ((long_name, True), (long_name + "y", True), (long_name + "yz", False)):
        files = {name: b"1" * 513, "a": b""}
        entries = sorted([("r", True), *((n, False) for n in files)])
        simple = archive._simple_tar(entries, files)
        assert (simple is not None) == fits  # past 100 bytes tarfile splits it: its own
        assert simple is None or simple == archive._tarfile_tar(entries, files)
