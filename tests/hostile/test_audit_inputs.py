"""Hostile inputs a fresh-eyed audit (helper-43, 2026-12-04) found crashing or misleading
commands: each is now a clear error with its exit code, and leaves nothing behind."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from verifier import signing
from verifier.errors import UsageError

REPO = Path(__file__).resolve().parent.parent.parent
SEED = REPO / "sample_bundles" / "seed-mlxcel"
RAW = REPO / "sample_bundles" / "raw"


def _evidence(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "verifier", *args],
        cwd=REPO, capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip


def _clear(done: subprocess.CompletedProcess[str], code: int, words: str) -> None:
    assert done.returncode == code, done.stderr
    assert words in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr


def _chained_headers(path: Path, count: int, *, gnu: bool) -> Path:
    """A tar.gz whose one member comes after `count` extended headers (PAX, or GNU long
    names) in a row: tarfile reads each by calling itself for the next."""
    blocks = []
    for index in range(count):
        if gnu:
            name = b"n%d" % index
            header = tarfile.TarInfo("././@LongLink")
            header.type, header.size = tarfile.GNUTYPE_LONGNAME, len(name) + 1
            blocks.append(header.tobuf(tarfile.GNU_FORMAT) + name + b"\0" * (512 - len(name)))
        else:
            body = b"10 c=xxxx\n"
            header = tarfile.TarInfo("././@PaxHeader")
            header.type, header.size = tarfile.XHDTYPE, len(body)
            blocks.append(header.tobuf(tarfile.USTAR_FORMAT) + body + b"\0" * (512 - len(body)))
    member = tarfile.TarInfo("f.json")
    member.size = 2
    blocks.append(member.tobuf(tarfile.USTAR_FORMAT) + b"{}" + b"\0" * 510 + b"\0" * 1024)
    path.write_bytes(gzip.compress(b"".join(blocks)))
    return path


@pytest.mark.parametrize("gnu", [False, True])
def test_a_long_chain_of_extended_headers_is_a_corrupt_archive(tmp_path: Path, gnu: bool) -> None:
    archive = _chained_headers(tmp_path / "chain.tar.gz", 400, gnu=gnu)
    _clear(_evidence("verify", str(archive)), 2, "too long to read")
    _clear(_evidence("diff", str(SEED), str(archive)), 2, "too long to read")


@pytest.mark.parametrize(
    ("option", "what"),
    [("--profile", "--profile"), ("--key", "--key")],
)
def test_an_option_file_that_is_a_device_or_a_pipe(tmp_path: Path, option: str, what: str) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for given in ("/dev/zero", str(fifo)):
        _clear(_evidence("verify", str(SEED), option, given), 2, "is not a regular file")


def test_an_option_file_too_large_to_be_one(tmp_path: Path) -> None:
    big = tmp_path / "big.pem"
    with big.open("wb") as handle:
        handle.truncate(signing.MAX_KEY_FILE_BYTES + 1)  # sparse: nothing written
    _clear(_evidence("verify", str(SEED), "--key", str(big)), 2, "more than 65,536 read")
    with pytest.raises(UsageError, match="more than"):
        signing.load_private_key(big)


def test_a_model_folder_with_a_link_loop(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    os.symlink("b", model / "a")
    os.symlink("a", model / "b")
    done = _evidence("manifest", str(model))
    assert done.returncode != 0 and "leads nowhere" in done.stderr, done.stderr
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr


def test_paths_with_markup_are_printed_as_they_are(tmp_path: Path) -> None:
    out = tmp_path / "a[/]keys"
    done = _evidence("keygen", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "a[/]keys" in done.stderr and "internal error" not in done.stderr


def test_keygen_writes_both_keys_or_neither(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.mkdir()
    os.symlink(tmp_path / "nowhere", keys / signing.PUBLIC_KEY_FILE)  # a dangling link
    _clear(_evidence("keygen", "--out", str(keys)), 2, "already exists")
    assert not (keys / signing.PRIVATE_KEY_FILE).exists()
    a_file = tmp_path / "file"
    a_file.write_text("x")
    _clear(_evidence("keygen", "--out", str(a_file)), 2, "is not a folder")
    _clear(_evidence("keygen", "--out", str(a_file / "sub")), 2, "Not a directory")


def test_a_report_whose_name_leaves_no_room_for_its_temporary(tmp_path: Path) -> None:
    target = tmp_path / ("r" * 250 + ".txt")  # 254 bytes: valid, its `.NAME.PID.partial` not
    done = _evidence("verify", str(SEED), "-f", "json", "--output", str(target))
    assert done.returncode == 0, done.stderr
    assert target.read_text().startswith("{")
    assert [p.name for p in tmp_path.iterdir()] == [target.name]


def test_export_refuses_to_write_inside_the_raw_capture(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    subprocess.run(["cp", "-r", str(RAW / "seed-mlxcel"), str(raw)], check=True)
    for inside in (raw / "conditions" / "pub", raw / "pub"):
        _clear(_evidence("export", str(raw), "--out", str(inside)), 2, "inside the raw capture")
        assert not inside.exists()


@pytest.mark.parametrize(
    "option",
    [
        ["--request-timeout", "nan"],
        ["--wall-timeout", "-1"],
        ["--ready-timeout", "inf"],
        ["--cycles", "99999999999999999999"],
        ["--max-tokens", "100000000000000000000000"],
        ["--request-timeout", "1e10"],  # past what a socket's clock holds
        ["--condition", 'tpl:--chat-template-kwargs {"lang":"fran\u00e7ais"}'],
        ["--condition", "fa:-fa,\u2010ub=8"],
        ["--condition", "x:VAR=\uff11"],
    ],
)
def test_capture_refuses_options_out_of_range(tmp_path: Path, option: list[str]) -> None:
    out = tmp_path / "out"
    model = tmp_path / "m.gguf"
    model.write_text("x")
    done = _evidence(
        "capture", "--server-profile", "llama.cpp", "--binary", "/bin/true",
        "--model", str(model), "--output", str(out), *option,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
    assert not out.exists()
