"""How a command's process ends: verify, once its report is written, ends at once
(verifier/__main__.py: no interpreter teardown); every other way out is Python's own exit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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


def test_every_other_way_out_is_pythons_exit() -> None:
    # a usage error of verify: no report was written
    done = _evidence("verify", str(SAMPLE), "--key", str(REPO / "no-such-key.pem"))
    assert done.returncode == 2 and TEARDOWN in done.stderr and "no such file" in done.stderr
    # another command
    done = _evidence("schema", "list")
    assert done.returncode == 0 and TEARDOWN in done.stderr
    assert "record" in done.stdout


def test_a_stream_that_cannot_be_flushed_gets_pythons_exit() -> None:
    """Where the report cannot be flushed (a reader gone), Python's exit says what it
    says: the fast way out never hides that a write failed."""
    broken = (
        "import io\n"
        "class Gone(io.StringIO):\n"
        "    def flush(self):\n"
        "        raise BrokenPipeError(32, 'Broken pipe')\n"
        "sys.stdout = Gone()\n"
    )
    done = _evidence("verify", str(SAMPLE), "-q", before=broken)
    assert TEARDOWN in done.stderr
    assert done.returncode != 0 or "BrokenPipeError" in done.stderr


def test_a_reader_gone_is_said_plainly_not_as_a_bug() -> None:
    """`evidence verify b.tar.gz | head`: the report cannot be written whole, which is no
    internal error; exit 1 (the report was not delivered) and one line saying why."""
    with subprocess.Popen(
        [sys.executable, "-m", "verifier", "verify", str(SAMPLE), "-f", "json"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as done:
        assert done.stdout is not None and done.stderr is not None
        done.stdout.close()  # before it writes a byte (start-up alone takes longer)
        err = done.stderr.read()
        assert done.wait() == 1
    assert "broken pipe" in err and "internal error" not in err and "Traceback" not in err
