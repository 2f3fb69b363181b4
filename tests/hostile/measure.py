"""Measure verify's cost on the hostile cost cases: `python tests/hostile/measure.py`.

Builds each archive in a temporary folder (the seed sample plus one hostile JSON file),
runs `evidence verify` on it under `/usr/bin/time -v` and prints the archive size, the
exit code, the wall time and the peak resident memory. Used for the figures in SECURITY.md.
"""

from __future__ import annotations

import gzip
import io
import random
import re
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SEED = REPO / "sample_bundles" / "seed-mlxcel"
EVIDENCE = Path(sys.executable).parent / "evidence"


def _block(make: Callable[[random.Random], bytes], size: int) -> bytes:
    """About `size` bytes of comma-separated items: a 1 MiB random block, repeated.

    Mostly one item with a few random others, so the archive compresses about 60-120
    times: under the default ratio limit, like the archives of the issue.
    """
    rng = random.Random(7)
    block = b",".join(make(rng) for _ in range(200_000))
    while len(block) < 1024 * 1024:
        block += b"," + make(rng)
    return b"[" + b",".join([block] * max(1, size // len(block))) + b"]"


def _numbers(size: int) -> bytes:
    return _block(lambda rng: b"0" if rng.random() < 0.995 else b"%d" % rng.randrange(10**6), size)


def _short_strings(size: int) -> bytes:
    letters = b"abcdefghijklmnopqrstuvwxyz"
    return _block(
        lambda rng: (
            b'"ab"' if rng.random() < 0.99 else b'"%c%c"' % tuple(rng.choices(letters, k=2))
        ),
        size,
    )


def _one_string(size: int) -> bytes:
    rng = random.Random(7)
    block = bytes(rng.choice(b"ab") if rng.random() < 0.01 else 97 for _ in range(1024 * 1024))
    return b'{"s": "' + block * max(1, size // len(block)) + b'"}'


def _empty_objects(size: int) -> bytes:
    return _block(lambda rng: b"{}" if rng.random() < 0.99 else b"[]", size)


CASES: dict[str, Callable[[], bytes]] = {
    "100 MB JSON array of numbers": lambda: _numbers(100 * 1024 * 1024),
    "10 MB JSON of short strings": lambda: _short_strings(10 * 1024 * 1024),
    "100 MB JSON of short strings": lambda: _short_strings(100 * 1024 * 1024),
    "one 200 MB string": lambda: _one_string(200 * 1024 * 1024),
    "30 MB of empty objects": lambda: _empty_objects(30 * 1024 * 1024),
}


def build(folder: Path, name: str, payload: bytes) -> Path:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path in sorted(SEED.rglob("*")):
            if path.is_file():
                tar.add(path, arcname=path.relative_to(SEED).as_posix())
        info = tarfile.TarInfo("extra.json")
        info.size = len(payload)
        tar.addfile(info, io.BytesIO(payload))
    archive = folder / (re.sub(r"\W+", "-", name) + ".tar.gz")
    archive.write_bytes(gzip.compress(buffer.getvalue(), compresslevel=6))
    return archive


def measure(archive: Path, *extra: str) -> tuple[int, float, int]:
    run = subprocess.run(
        ["/usr/bin/time", "-v", str(EVIDENCE), "verify", str(archive), "-f", "json", *extra],
        capture_output=True,
        text=True,
        check=False,
    )
    wall = re.search(r"Elapsed \(wall clock\) time.*: (?:(\d+):)?(\d+):([\d.]+)", run.stderr)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", run.stderr)
    assert wall is not None and rss is not None, run.stderr
    hours, minutes, seconds = wall.groups()
    elapsed = int(hours or 0) * 3600 + int(minutes) * 60 + float(seconds)
    return run.returncode, elapsed, int(rss.group(1)) // 1024


def main() -> None:
    chosen = sys.argv[1:]
    with tempfile.TemporaryDirectory() as folder:
        for name, make in CASES.items():
            if chosen and not any(c in name for c in chosen):
                continue
            archive = build(Path(folder), name, make())
            code, elapsed, peak = measure(archive)
            size = archive.stat().st_size
            print(f"{name}: archive {size / 1e6:.2f} MB, exit {code}, {elapsed:.1f} s, {peak} MiB")


if __name__ == "__main__":
    main()
