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
from verifier.profiles.llamacpp import RULES as LLAMA_RULES

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
    """A warm answer without its cached-token count: the hit is unknown, not proven. (Its
    telemetry is kept: snapshots copied over each other would freeze the server's prompt
    counters across an answered request, which is an error of its own.)"""
    document["response"]["usage"].pop("prompt_tokens_details", None)
    document["usage"] = document["response"]["usage"]


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
    _soundness_negatives(public, varied, add)
    return out


def _soundness_negatives(
    public: Files, varied: Files, add: Callable[[str, Files, str, int, str | None], None]
) -> None:
    """Lies a bundle could tell to argue its way into a verdict (issue 7), each re-summed
    and re-signed as a forger would, with the tool's own canonical hash where needed."""
    c0, c1 = "records/sdpa-det-0", "records/sdpa-det-1"

    def without(files: Files, *names: str) -> Files:
        return {k: v for k, v in files.items() if k not in names}

    def signed(files: Files) -> Files:
        return _resum(files, sign=True)

    # records deleted
    add("missing-cold-record", signed(without(public, f"{c0}/004.json")),
        "invalid", 1, "completeness")  # fmt: skip
    controls = [f"{c1}/{n:03d}.json" for n in (7, 8, 9, 12, 13, 14)]
    add("missing-controls", signed(without(public, *controls)), "invalid", 1, "completeness")
    add("varying-record-removed", signed(without(varied, _records(varied, "cold")[1])),
        "invalid", 1, "completeness")  # fmt: skip
    copied = {**public, f"{c0}/015.json": public[f"{c0}/003.json"]}
    copied = _edit(copied, f"{c0}/015.json", lambda d: d.update(sequence=15))
    add("copied-warm-record", signed(copied), "invalid", 1, "completeness")

    # the bundle supplies its own rules
    def no_hit_counters(d: dict[str, Any]) -> None:
        d["profile_rules"]["signals"]["hits"] = []

    add("bundle-supplied-rules", signed(_edit(public, layout.EXPERIMENT, no_hit_counters)),
        "invalid", 1, "profile")  # fmt: skip

    def future_profile(d: dict[str, Any]) -> None:
        d["server"]["profile_version"] = "99"
        d["profile_rules"]["version"] = "99"

    add("unknown-profile-version", signed(_edit(public, layout.EXPERIMENT, future_profile)),
        "inconclusive", 0, "profile")  # fmt: skip

    # evidence that contradicts itself
    def frozen_hit_counter(d: dict[str, Any]) -> None:
        d["telemetry"]["after"]["metrics"] = d["telemetry"]["before"]["metrics"]

    add("frozen-hit-counter", signed(_edit(public, f"{c0}/002.json", frozen_hit_counter)),
        "invalid", 1, "telemetry")  # fmt: skip

    def cold_shows_hit(d: dict[str, Any]) -> None:
        d["telemetry"]["after"]["cache_stats"]["hits"] += 1

    add("cold-shows-hit", signed(_edit(public, f"{c0}/001.json", cold_shows_hit)),
        "invalid", 1, "telemetry")  # fmt: skip

    def stats_never_read(d: dict[str, Any]) -> None:
        d["telemetry"]["before"]["cache_stats"] = None

    add("reset-never-read", signed(_edit(public, f"{c0}/004.json", stats_never_read)),
        "inconclusive", 0, "telemetry")  # fmt: skip

    # undeclared servers
    moved = public
    for n in (10, 11):
        moved = _edit(moved, f"{c0}/{n:03d}.json", lambda d: d.update(server_instance=7))
    add("undeclared-server", signed(moved), "invalid", 1, "completeness")

    def cache_off_unflagged(d: dict[str, Any]) -> None:
        d["conditions"][0]["servers"][2]["argv"].remove("--no-prompt-cache")

    add("cache-off-without-flag", signed(_edit(public, layout.EXPERIMENT, cache_off_unflagged)),
        "invalid", 1, "servers")  # fmt: skip

    # settings that are not what ran
    def ran_otherwise(d: dict[str, Any]) -> None:
        for server in d["conditions"][1]["servers"]:
            server["environment"]["MLXCEL_SDPA_DETERMINISTIC"] = "0"

    add("settings-not-what-ran", signed(_edit(public, layout.EXPERIMENT, ran_otherwise)),
        "invalid", 1, "servers")  # fmt: skip

    # a different prompt hidden
    hidden = public
    for name in _records(public, "cold"):
        hidden = _edit(hidden, name, lambda d: _set_usage(d, prompt_tokens=None))
    for name in _records(public, "warm"):
        hidden = _edit(hidden, name, lambda d: _set_usage(d, prompt_tokens=50))
    add("hidden-prompt-change", signed(hidden), "inconclusive", 0, "telemetry")

    # numbers
    def huge_counter(d: dict[str, Any]) -> None:
        d["telemetry"]["after"]["metrics"]["mlxcel_prompt_cache_hits_total"] = 10**400

    add("huge-counter", signed(_edit(public, f"{c0}/002.json", huge_counter)),
        "invalid", 1, "schema")  # fmt: skip

    def huge_cached(d: dict[str, Any]) -> None:
        _set_usage(d, cached_tokens=10**400)

    add("huge-cached-tokens", signed(_edit(public, f"{c0}/002.json", huge_cached)),
        "invalid", 1, "telemetry")  # fmt: skip

    # found by a hostile audit of the checks above
    def borrowed_profile(d: dict[str, Any]) -> None:
        d["server"]["profile"] = "llama.cpp"
        d["server"]["profile_version"] = LLAMA_RULES.version
        d["profile_rules"] = LLAMA_RULES.to_json()
        for condition in d["conditions"]:
            for server in condition["servers"]:
                server["argv"] = [
                    "--no-cache-prompt" if a == "--no-prompt-cache" else a for a in server["argv"]
                ]

    add("borrowed-profile", signed(_edit(public, layout.EXPERIMENT, borrowed_profile)),
        "invalid", 1, "consistency")  # fmt: skip

    def undeclared_args(d: dict[str, Any]) -> None:
        for server in d["conditions"][1]["servers"]:
            server["argv"] += ["--kv-cache-dtype", "fp8"]

    add("undeclared-server-args", signed(_edit(public, layout.EXPERIMENT, undeclared_args)),
        "invalid", 1, "consistency")  # fmt: skip
    copied_condition = dict(public)
    for n in range(1, 15):
        document = json.loads(public[f"{c0}/{n:03d}.json"])
        document["condition"] = "sdpa-det-1"
        copied_condition[f"{c1}/{n:03d}.json"] = _dump(document)
    add("copied-condition", signed(copied_condition), "invalid", 1, "consistency")

    def sample_fall(d: dict[str, Any]) -> None:
        for side, (a, b) in (("before", (0.0, 5.0)), ("after", (1.0, 4.0))):
            metrics = d["telemetry"][side]["metrics"]
            metrics['mlxcel_prompt_cache_hits_total{slot="a"}'] = a
            metrics['mlxcel_prompt_cache_hits_total{slot="b"}'] = b

    add("hidden-sample-fall", signed(_edit(public, f"{c1}/010.json", sample_fall)),
        "inconclusive", 0, "telemetry")  # fmt: skip

    # documents of the wrong kind
    misplaced = {**public, f"{c0}/015.json": public[layout.MODEL_MANIFEST]}
    add("manifest-as-record", signed(misplaced), "invalid", 1, "schema")
    swapped = {**public, layout.EXPERIMENT: public[f"{c0}/001.json"]}
    add("record-as-experiment", signed(swapped), "invalid", 1, "schema")


def _set_usage(
    document: dict[str, Any], *, prompt_tokens: int | None = -1, cached_tokens: int = -1
) -> None:
    """Edit the response's usage and its copy alike (-1: leave as is; None: remove), as a
    careful forger would: a new prompt count moves total_tokens with it."""
    usage = document["response"]["usage"]
    if prompt_tokens is None:
        usage.pop("prompt_tokens", None)
    elif prompt_tokens != -1:
        usage["prompt_tokens"] = prompt_tokens
        usage["total_tokens"] = prompt_tokens + usage["completion_tokens"]
    if cached_tokens != -1:
        usage.setdefault("prompt_tokens_details", {})["cached_tokens"] = cached_tokens
    document["usage"] = usage


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
