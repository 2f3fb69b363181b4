"""Regenerate every committed sample bundle: `python tools/make_samples.py [OUT_DIR]`.

1. `sample_bundles/raw/seed-mlxcel/`: the seed-shaped raw capture (tools/seed_sample.py).
2. `sample_bundles/seed-mlxcel/`: `evidence export` of it, signed with the test key in
   `sample_bundles/keys/` (a key for tests and demos only, never for real evidence).
3. `sample_bundles/negative/<defect>/` (or `<defect>.tar.gz`): the public sample with one
   defect each; `sample_bundles/negative/EXPECTED.json` says what verify must make of it.

The output is byte-identical on every run (Ed25519 signatures are deterministic, archives
have fixed times and owners), so a test regenerates it and compares.
"""

from __future__ import annotations

import gzip
import io
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from seed_sample import STORY_A, write_seed_raw

from verifier import layout, signing
from verifier.canonical import output_hash
from verifier.checksums import format_sums

REPO = Path(__file__).resolve().parent.parent
KEY = REPO / "sample_bundles" / "keys" / signing.PRIVATE_KEY_FILE
GENERATED = ("raw", "seed-mlxcel", "negative")

Files = dict[str, bytes]


def _dump(document: Any) -> bytes:
    return (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def read_tree(root: Path) -> Files:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _write_tree(root: Path, files: Files) -> None:
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def _resum(files: Files, *, sign: bool = False) -> Files:
    """Recompute SHA256SUMS as a forger would; drop the signature, or redo it."""
    files = {k: v for k, v in files.items() if k not in layout.UNSUMMED}
    files[layout.SHA256SUMS] = format_sums(files)
    if sign:
        key = signing.load_private_key(KEY)
        files[layout.SIGNATURE] = signing.sign(files[layout.SHA256SUMS], key)
    return files


def resum_tree(root: Path) -> None:
    """Rewrite a bundle directory's SHA256SUMS to match its files, as a forger would."""
    files = {k: v for k, v in read_tree(root).items() if k not in layout.UNSUMMED}
    (root / layout.SHA256SUMS).write_bytes(format_sums(files))
    (root / layout.SIGNATURE).unlink(missing_ok=True)


def _edit(files: Files, name: str, change: Callable[[dict[str, Any]], None]) -> Files:
    files = dict(files)
    document = json.loads(files[name])
    change(document)
    files[name] = _dump(document)
    return files


def _records(files: Files, arm: str) -> list[str]:
    return sorted(
        name
        for name in files
        if name.startswith(layout.RECORDS_DIR + "/")
        and json.loads(files[name])["claimed_arm"] == arm
    )


def _tamper_content(document: dict[str, Any]) -> None:
    message = document["response"]["choices"][0]["message"]
    message["content"] = message["content"].replace("cold", "cool", 1)


def _strip_warm_evidence(document: dict[str, Any]) -> None:
    document["response"]["usage"].pop("prompt_tokens_details", None)
    document["usage"] = document["response"]["usage"]
    document["telemetry"]["after"] = document["telemetry"]["before"]


def _vary_cold(document: dict[str, Any]) -> None:
    message = document["response"]["choices"][0]["message"]
    message["content"] = STORY_A.replace("red thread", "blue thread")
    document["output_hash"] = output_hash(document["response"])


def _leak_home(document: dict[str, Any]) -> None:
    document["conditions"][0]["servers"][0]["argv"][0] = "/home/alice/bin/mlxcel-server"


def negatives(public: Files) -> dict[str, tuple[Files, dict[str, Any]]]:
    """Each defect: the bundle's files and what verify must conclude."""
    colds = _records(public, "cold")
    warm = _records(public, "warm")
    out: dict[str, tuple[Files, dict[str, Any]]] = {}

    def add(name: str, files: Files, verdict: str, exit_code: int, check: str | None) -> None:
        out[name] = (files, {"verdict": verdict, "exit_code": exit_code, "check": check})

    tampered = _edit(public, colds[0], _tamper_content)
    add("tampered-output", tampered, "invalid", 1, "output-hash")
    add("tampered-output-resummed", _resum(tampered, sign=True), "invalid", 1, "output-hash")
    stale = _edit(public, layout.EXPERIMENT, lambda d: d.update(title="edited"))
    add("stale-checksum", stale, "invalid", 1, "checksums")
    missing = dict(public)
    del missing[warm[-1]]
    add("missing-file", missing, "invalid", 1, "checksums")
    extra = {**public, "records/notes.json": _dump({"note": "not listed"})}
    add("extra-file", extra, "invalid", 1, "checksums")
    signature = public[layout.SIGNATURE]
    bad_signature = {**public, layout.SIGNATURE: bytes([signature[0] ^ 1]) + signature[1:]}
    add("bad-signature", bad_signature, "invalid", 1, "signature")
    wrong_arm = _edit(public, colds[0], lambda d: d.update(claimed_arm="lukewarm"))
    add("schema-violation", _resum(wrong_arm), "invalid", 1, "schema")
    future = _edit(public, layout.EXPERIMENT, lambda d: d.update(schema_version="2.0"))
    add("unknown-major-version", _resum(future), "invalid", 1, "schema")
    sums = public[layout.SHA256SUMS].replace(b"  ", b" ", 1)
    add("malformed-checksums", {**public, layout.SHA256SUMS: sums}, "invalid", 1, "checksums")
    duplicate = {
        **public,
        layout.EXPERIMENT: b'{"kind": "evidence.experiment", "kind": "evidence.record"}\n',
    }
    add("duplicate-json-key", _resum(duplicate), "invalid", 1, "safety")
    unproven = dict(public)
    for name in warm:
        unproven = _edit(unproven, name, _strip_warm_evidence)
    add("unproven-warm-hits", _resum(unproven, sign=True), "inconclusive", 0, "telemetry")
    varied = _edit(public, colds[1], _vary_cold)
    add("variation-within-arm", _resum(varied, sign=True), "nondeterministic", 0, None)
    leaked = _edit(public, layout.EXPERIMENT, _leak_home)
    add("leaked-home-path", _resum(leaked, sign=True), "invalid", 1, "leaks")
    return out


def _hostile_archive(public: Files, extra: tarfile.TarInfo) -> bytes:
    """The public bundle as a .tar.gz plus one member that must be refused."""
    buffer = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=buffer, mode="wb", filename="", mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for name in sorted(public):
            info = tarfile.TarInfo(name)
            info.size = len(public[name])
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(public[name]))
        tar.addfile(extra, io.BytesIO(b"x" * extra.size) if extra.isfile() else None)
    return buffer.getvalue()


def _hostile_members() -> list[tuple[str, tarfile.TarInfo]]:
    link = tarfile.TarInfo("records/link.json")
    link.type = tarfile.SYMTYPE
    link.linkname = "/etc/passwd"
    traversal = tarfile.TarInfo("../../escaped.json")
    traversal.size = 1
    device = tarfile.TarInfo("records/device")
    device.type = tarfile.CHRTYPE
    device.devmajor, device.devminor = 1, 3
    return [("link-member", link), ("traversal-member", traversal), ("device-member", device)]


def build(out: Path) -> None:
    """Write every sample under `out` (which must not exist)."""
    out.mkdir(parents=True)
    raw = out / "raw" / "seed-mlxcel"
    write_seed_raw(raw)
    public_dir = out / "seed-mlxcel"
    command = [sys.executable, "-m", "verifier", "export", str(raw), "--out", str(public_dir)]
    subprocess.run(
        [*command, "--sign-key", str(KEY)],
        check=True,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    public = read_tree(public_dir)
    negative = out / "negative"
    expected: dict[str, Any] = {}
    for name, (files, expectation) in negatives(public).items():
        _write_tree(negative / name, files)
        expected[name] = expectation
    for name, member in _hostile_members():
        (negative / f"{name}.tar.gz").write_bytes(_hostile_archive(public, member))
        expected[f"{name}.tar.gz"] = {"verdict": "invalid", "exit_code": 1, "check": "safety"}
    (negative / "EXPECTED.json").write_bytes(_dump(dict(sorted(expected.items()))))


def main() -> None:
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "sample_bundles"
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target) as scratch:
        staging = Path(scratch) / "samples"
        build(staging)
        for name in GENERATED:
            if (target / name).exists():
                shutil.rmtree(target / name)
            (staging / name).rename(target / name)
    print(f"samples written to {target}")


if __name__ == "__main__":
    main()
