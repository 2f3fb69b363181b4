"""Where export flushes a written bundle with one syncfs, and where file by file
(`verifier.export.flush`; the export's own use of both: test_export_forked.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from verifier.export import flush

MOUNTS = """\
22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw,discard
23 22 0:21 / /proc rw,nosuid shared:2 - proc proc rw
30 22 0:27 / /tmp rw shared:5 - tmpfs tmpfs rw
31 30 0:40 / /tmp/fuse\\040mount rw shared:6 - fuse.sshfs host:/x rw
32 22 0:41 / /srv rw shared:7 - nfs4 host:/srv rw
33 32 254:16 / /srv rw shared:8 - xfs /dev/vdb rw
"""


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("/", "ext4"),
        ("/home/al/bundle", "ext4"),
        ("/proc", "proc"),
        ("/tmp", "tmpfs"),
        ("/tmp/x/y", "tmpfs"),
        ("/tmp/fuse mount/out", "fuse.sshfs"),  # its point written with an escape
        ("/tmp/fuse mountain", "tmpfs"),  # a longer name is not inside the point
        ("/srv/data", "xfs"),  # the later mount on the same point hides the earlier
        ("/procfs", "ext4"),
    ],
)
def test_the_file_system_of_a_path_is_its_longest_last_mount(path: str, kind: str) -> None:
    assert flush.file_system_of(path, MOUNTS) == kind


def test_no_mount_holds_a_relative_path() -> None:
    assert flush.file_system_of("relative/path", MOUNTS) is None


@pytest.mark.parametrize(
    ("release", "version"),
    [
        ("6.18.44-fc-v1252", (6, 18)),
        ("5.8.0", (5, 8)),
        ("5.7.19-arch1", (5, 7)),
        ("4.19.0-27-amd64", (4, 19)),
        ("5.10-rc3", (5, 10)),
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
        ("6.1.0", "ext4", True),
        ("5.8.0", "xfs", True),
        ("5.7.0", "ext4", False),  # syncfs reported no write-back error before 5.8
        ("6.1.0", "fuse.sshfs", False),
        ("6.1.0", "nfs4", False),
        ("6.1.0", "overlay", False),
        ("6.1.0", None, False),
    ],
)
def test_syncfs_is_used_only_where_it_promises_what_fsync_does(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    release: str,
    kind: str | None,
    whole: bool,
) -> None:
    monkeypatch.setattr(flush.os, "uname", lambda: _uname(release))
    monkeypatch.setattr(flush, "file_system_of", lambda path, table: kind)
    descriptor = flush.whole_file_system(tmp_path)
    try:
        assert (descriptor is not None) is whole
        if descriptor is not None:
            assert os.path.samefile(f"/proc/self/fd/{descriptor}", tmp_path)
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
