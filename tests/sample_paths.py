"""Where the committed sample bundles are: the differential tests run every one of them."""

from __future__ import annotations

from pathlib import Path

SAMPLES = Path(__file__).resolve().parent.parent / "sample_bundles"
KEY = SAMPLES / "keys" / "evidence-signing-key.pub.pem"
BUNDLES = sorted(
    p.relative_to(SAMPLES).as_posix()
    for p in SAMPLES.rglob("*")
    if p.name.endswith(".tar.gz")
    or (p / "SHA256SUMS").is_file()
    or (p / "experiment.json").is_file()
)
"""Every sample bundle (directories and archives), as paths relative to SAMPLES."""
