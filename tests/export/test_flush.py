"""Where export flushes a written bundle with one syncfs, and where file by file
(`verifier.export.flush`; the export's own use of both: test_export_forked.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from verifier.export import flush

FUSE, NFS, OVERLAY, EXT4 = 0x65735546, 0x6969, 0x794C7630, 0xEF53


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(sys.platform != "linux", reason="fstatfs is read as Linux lays it out")
def test_the_file_system_type_is_read_from_the_descriptor(tmp_path: Path) -> None:
    descriptor = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        kind = flush.file_system_type(descriptor)
    finally:
        os.close(descriptor)
    stat = shutil.which("stat")
    if stat is None:
        pytest.skip("no stat(1) to compare with")
    said = subprocess.run(
        [stat, "--file-system", "--format=%t", str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert kind == int(said.stdout, 16)  # what coreutils reads from statfs
    assert flush.file_system_type(-1) is None  # no such descriptor


PROC = 0x9FA0


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="no procfs here")
def test_a_file_system_not_on_the_list_means_each_file() -> None:
    descriptor = os.open("/proc", os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert flush.file_system_type(descriptor) == PROC
    finally:
        os.close(descriptor)
    before = _open_descriptors()
    assert flush.whole_file_system(Path("/proc")) is None  # read, not told
    assert _open_descriptors() == before


@pytest.mark.skipif(sys.platform != "linux", reason="syncfs is Linux's")
def test_a_link_to_the_folder_is_not_followed(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert flush.whole_file_system(tmp_path / "link") is None


@pytest.mark.parametrize(
    ("release", "version"),
    [
        ("6.18.44-fc-v1252", (6, 18)),
        ("5.8.0", (5, 8)),
        ("5.7.19-arch1", (5, 7)),
        ("4.19.0-27-amd64", (4, 19)),
        ("5.10-rc3", (5, 10)),
        ("4.9a7", (4, 9)),  # the digits after the minor number are not the minor's
        ("4.19_59", (4, 19)),
        ("4.4.0-19041-Microsoft", (4, 4)),
        ("weird", (0, 0)),
        ("", (0, 0)),
    ],
)
def test_the_kernel_version_is_read_from_its_release(
    release: str, version: tuple[int, int]
) -> None:
    assert flush.kernel_version(release) == version


def _uname(release: str) -> SimpleNamespace:
    return SimpleNamespace(release=release)


@pytest.mark.skipif(sys.platform != "linux", reason="syncfs is Linux's")
@pytest.mark.parametrize(
    ("release", "kind", "whole"),
    [
        ("6.1.0", EXT4, True),
        ("5.17.0", 0x58465342, True),  # xfs
        ("5.16.20", EXT4, False),  # syncfs dropped the file system's own flush errors
        ("5.8.0", EXT4, False),
        ("5.7.0", EXT4, False),  # syncfs reported no write-back error before 5.8
        ("6.1.0", FUSE, False),
        ("6.1.0", NFS, False),
        ("6.1.0", OVERLAY, False),
        ("6.1.0", None, False),  # not read
    ],
)
def test_syncfs_is_used_only_where_it_promises_what_fsync_does(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    release: str,
    kind: int | None,
    whole: bool,
) -> None:
    monkeypatch.setattr(flush.os, "uname", lambda: _uname(release))
    monkeypatch.setattr(flush, "file_system_type", lambda descriptor: kind)
    before = _open_descriptors()
    descriptor = flush.whole_file_system(tmp_path)
    try:
        assert (descriptor is not None) is whole
        if descriptor is not None:
            assert os.path.samefile(f"/proc/self/fd/{descriptor}", tmp_path)
        else:
            assert _open_descriptors() == before  # none left open
    finally:
        if descriptor is not None:
            os.close(descriptor)


def test_not_linux_means_each_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(flush.sys, "platform", "darwin")
    assert flush.whole_file_system(tmp_path) is None


@pytest.mark.skipif(sys.platform != "linux", reason="syncfs is Linux's")
def test_syncfs_flushes_and_says_what_it_refuses(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"x" * 4096)
    descriptor = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        flush.syncfs(descriptor, tmp_path)
    finally:
        os.close(descriptor)
    with pytest.raises(OSError, match="Bad file descriptor") as refused:
        flush.syncfs(descriptor, tmp_path)  # closed now
    assert refused.value.filename == str(tmp_path)
