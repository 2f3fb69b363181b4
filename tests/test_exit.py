"""How a command's process ends: verify, once its report is written, ends at once
(verifier/__main__.py: no interpreter teardown); every other way out is Python's own exit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "sample_bundles" / "seed-mlxcel"
TEARDOWN = "ATEXIT-RAN"


def _evidence(*args: str, before: str = "") -> subprocess.CompletedProcess[str]:
    """`evidence ARGS` through verifier.__main__, with an atexit handler that says whether
    the interpreter's ordinary exit ran."""
    probe = (
        "import atexit, os, sys\n"
        f"atexit.register(lambda: os.write(2, b'{TEARDOWN}'))\n"
        f"{before}"
        f"sys.argv = ['evidence', *{list(args)!r}]\n"
        "from verifier.__main__ import main\n"
        "main()\n"
    )
    return subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=False
    )


def test_verify_ends_at_once_with_its_whole_report_and_exit_code() -> None:
    done = _evidence("verify", str(SAMPLE), "-f", "json")
    assert done.returncode == 0, done.stderr
    assert TEARDOWN not in done.stderr  # ended without the interpreter's teardown
    report = json.loads(done.stdout)  # and every byte of the report was flushed first
    assert report["bundles"][0]["verdict"] == "cache-state-dependent"
    assert "verifying" in done.stderr  # the progress line too


def test_verify_not_verified_keeps_its_exit_code(tmp_path: Path) -> None:
    broken = tmp_path / "bundle"
    subprocess.run(["cp", "-r", str(SAMPLE), str(broken)], check=True)
    sums = broken / "SHA256SUMS"
    sums.write_text(sums.read_text().replace("0", "1", 1))
    done = _evidence("verify", str(broken), "-q")
    assert done.returncode == 1, done.stderr
    assert TEARDOWN not in done.stderr
    assert done.stdout.startswith("invalid ")


def test_verify_to_a_file_is_complete(tmp_path: Path) -> None:
    out = tmp_path / "report.md"
    done = _evidence("verify", str(SAMPLE), "-f", "markdown", "-o", str(out))
    assert done.returncode == 0 and TEARDOWN not in done.stderr
    assert "cache-state-dependent" in out.read_text() and "written to" in done.stderr


def test_a_report_that_cannot_be_written_whole_leaves_no_file(tmp_path: Path) -> None:
    # A file system that takes 2 KiB and no more (a full disk, as RLIMIT_FSIZE makes it).
    out = tmp_path / "report.json"
    limit = "import resource; resource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048))\n"
    done = _evidence("verify", str(SAMPLE), "-f", "json", "-o", str(out), before=limit)
    assert done.returncode == 2 and "--output" in done.stderr, done.stderr
    assert list(tmp_path.iterdir()) == []


def test_every_other_way_out_is_pythons_exit() -> None:
    # a usage error of verify: no report was written
    done = _evidence("verify", str(SAMPLE), "--key", str(REPO / "no-such-key.pem"))
    assert done.returncode == 2 and TEARDOWN in done.stderr and "no such file" in done.stderr
    # another command
    done = _evidence("schema", "list")
    assert done.returncode == 0 and TEARDOWN in done.stderr
    assert "record" in done.stdout


def test_a_stream_that_cannot_be_flushed_gets_pythons_exit() -> None:
    """Where the report cannot be flushed for another reason than a reader gone (a full
    disk), the exit is Python's own, which says so and exits 120: the fast way out never
    hides that a write failed."""
    broken = (
        "import io\n"
        "class Full(io.StringIO):\n"
        "    def flush(self):\n"
        "        raise OSError(28, 'No space left on device')\n"
        "sys.stdout = Full()\n"
    )
    done = _evidence("verify", str(SAMPLE), "-q", before=broken)
    assert TEARDOWN in done.stderr
    assert done.returncode == 120 and "No space left on device" in done.stderr


def _with_a_reader_gone(gone: str, *args: str) -> tuple[int, str]:
    """`evidence ARGS` with the reading end of its stdout or stderr pipe closed before it
    writes a byte (start-up alone takes longer), buffered as without PYTHONUNBUFFERED:
    (exit code, what the other stream got)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    with subprocess.Popen(
        [sys.executable, "-m", "verifier", *args],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    ) as done:
        assert done.stdout is not None and done.stderr is not None
        closed, other = (
            (done.stdout, done.stderr) if gone == "stdout" else (done.stderr, done.stdout)
        )
        closed.close()
        got = other.read()
        return done.wait(), got


@pytest.mark.parametrize(
    "args",
    [
        ("verify", str(SAMPLE), "-f", "json"),  # larger than stdout's buffer: fails in the command
        ("verify", str(SAMPLE), "-q"),  # a line, left in the buffer: fails at the end
        ("verify", str(REPO / "no-such-bundle"), "-f", "json"),  # a report of an error
        ("schema", "show", "record"),  # another command
    ],
    ids=["large", "small", "unreadable", "schema"],
)
def test_a_reader_gone_is_said_plainly_not_as_a_bug(args: tuple[str, ...]) -> None:
    """`evidence verify b.tar.gz | head`: the output cannot be written whole, which is no
    internal error: exit 1 (the output was not delivered) and one line saying why."""
    code, err = _with_a_reader_gone("stdout", *args)
    assert code == 1, err
    assert "broken pipe" in err and "internal error" not in err and "Traceback" not in err
    assert "Exception ignored" not in err


def test_a_stderr_no_one_reads_loses_no_report() -> None:
    """The progress lines on stderr are not the report: with no reader there, verify still
    writes its whole report to stdout, and its exit code is the report's."""
    code, out = _with_a_reader_gone("stderr", "verify", str(SAMPLE), "-f", "json")
    assert code == 0
    assert json.loads(out)["bundles"][0]["verdict"] == "cache-state-dependent"
