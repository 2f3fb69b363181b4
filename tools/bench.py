"""Benchmarks: time and peak memory of export and verify as bundles grow.

`make bench` (or `python tools/bench.py`) prints a Markdown table; the README keeps the
latest one. Each case runs in a fresh subprocess so peak RSS (ru_maxrss) is its own.
Bundles are the seed-shaped sample with the condition count scaled up: 14 requests
per condition, as in the protocol with 2 cycles.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TOOLS = Path(__file__).resolve().parent
REPO = TOOLS.parent
sys.path.insert(0, str(TOOLS))

from seed_sample import write_seed_raw  # noqa: E402


def scale_raw(raw: Path, copies: int) -> None:
    """Duplicate the two conditions of the seed raw capture `copies` times."""
    run = json.loads((raw / "run.json").read_text())
    base = list(run["conditions"])
    for n in range(1, copies):
        for condition in base:
            new_id = f"{condition['id']}-x{n}"
            shutil.copytree(raw / "conditions" / condition["id"], raw / "conditions" / new_id)
            for path in (raw / "conditions" / new_id).rglob("*.json"):
                doc = json.loads(path.read_text())
                doc["condition"] = new_id
                path.write_text(json.dumps(doc, indent=2))
            run["conditions"].append({**condition, "id": new_id})
    (raw / "run.json").write_text(json.dumps(run, indent=2))


# Runs `python -m verifier ARGS` and prints its own peak RSS (KiB) on stderr at exit.
_MEASURED = (
    "import atexit, resource, runpy, sys\n"
    "atexit.register(lambda: sys.stderr.write("
    "f'\\nMAXRSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}\\n'))\n"
    "sys.argv = ['evidence', *sys.argv[1:]]\n"
    "runpy.run_module('verifier', run_name='__main__')\n"
)


def timed(args: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of one `evidence` run in its own process."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _MEASURED, *args], check=False, cwd=REPO, capture_output=True
    )
    elapsed = time.perf_counter() - start
    peak_kib = int(done.stderr.decode().rsplit("MAXRSS ", 1)[1].split()[0])
    return elapsed, peak_kib / 1024


def main() -> None:
    evidence: list[str] = []
    rows = []
    for copies in (1, 10, 50):
        with tempfile.TemporaryDirectory() as scratch:
            root = Path(scratch)
            raw = root / "raw"
            write_seed_raw(raw)
            scale_raw(raw, copies)
            public, archive = root / "public", root / "public.tar.gz"
            export_s, export_mb = timed(
                [*evidence, "export", str(raw), "--out", str(public), "--archive", str(archive)]
            )
            verify_dir_s, verify_dir_mb = timed([*evidence, "verify", str(public), "-f", "json"])
            verify_tar_s, verify_tar_mb = timed([*evidence, "verify", str(archive), "-f", "json"])
            size = sum(p.stat().st_size for p in public.rglob("*") if p.is_file())
            rows.append(
                (copies * 28, size / 1e6, archive.stat().st_size / 1e6, export_s, export_mb,
                 verify_dir_s, verify_dir_mb, verify_tar_s, verify_tar_mb)
            )  # fmt: skip
    print("| requests | bundle MB | archive MB | export s | export MiB | verify dir s "
          "| verify dir MiB | verify .tar.gz s | verify .tar.gz MiB |")  # fmt: skip
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        print(
            "| {} | {:.2f} | {:.2f} | {:.2f} | {:.0f} | {:.2f} | {:.0f} | {:.2f} | {:.0f} |".format(
                *row
            )
        )


if __name__ == "__main__":
    main()
