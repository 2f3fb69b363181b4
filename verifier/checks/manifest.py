"""The model manifest: claimed hashes are entries of it; optionally rehash a local model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from verifier import layout
from verifier.checks.context import BundleContext
from verifier.model import Finding, Severity
from verifier.modelfiles import ModelFilesError, model_files, sha256_file

CHECK = "manifest"


def check_manifest(ctx: BundleContext) -> Iterator[Finding]:
    manifest = ctx.valid(layout.MODEL_MANIFEST)
    experiment = ctx.experiment
    if manifest is None or experiment is None:
        return
    files = {entry["path"]: entry for entry in manifest["files"]}
    digests = {entry["sha256"] for entry in manifest["files"]}
    model = experiment.document["model"]
    for key in ("repo_id", "revision"):
        if model[key] != manifest[key]:
            yield Finding(
                CHECK,
                Severity.ERROR,
                f"the experiment's model {key} differs from the manifest's",
                file=layout.EXPERIMENT,
                pointer=f"/model/{key}",
                expected=str(manifest[key]),
                actual=str(model[key]),
            )
    for claim, file_key in (("model_sha256", "model_file"), ("config_sha256", "config_file")):
        digest = model[claim]
        if digest is None:
            continue
        named = model.get(file_key)
        if named is not None and named in files:
            if files[named]["sha256"] != digest:
                yield Finding(
                    CHECK,
                    Severity.ERROR,
                    f"{claim} differs from the manifest entry of {named}",
                    file=layout.EXPERIMENT,
                    pointer=f"/model/{claim}",
                    expected=files[named]["sha256"],
                    actual=digest,
                )
        elif digest not in digests:
            yield Finding(
                CHECK,
                Severity.ERROR,
                f"{claim} is not the digest of any file in the manifest",
                file=layout.EXPERIMENT,
                pointer=f"/model/{claim}",
                actual=digest,
            )
    if ctx.options.model_dir is not None:
        yield from _rehash(ctx, ctx.options.model_dir, manifest["files"])


def _rehash(ctx: BundleContext, root: Path, entries: list[dict[str, Any]]) -> Iterator[Finding]:
    try:
        local = model_files(root)
    except ModelFilesError as exc:
        yield Finding(CHECK, Severity.ERROR, f"--model-dir: {exc.message}")
        return
    total = sum(entry["size"] for entry in entries if entry["path"] in local)
    done = 0
    progress = ctx.options.progress

    def advance(count: int) -> None:
        nonlocal done
        done += count
        if progress is not None:
            progress(f"hashing {name}", done, total)

    for index, entry in enumerate(entries):
        pointer = f"/files/{index}"
        name = entry["path"]
        path = local.get(name)
        if path is None:
            yield Finding(
                CHECK, Severity.ERROR, f"{name} is in the manifest but not in --model-dir",
                file=layout.MODEL_MANIFEST, pointer=pointer,
            )  # fmt: skip
            continue
        try:
            size = path.stat().st_size
            digest = sha256_file(path, advance)
        except OSError as exc:
            yield Finding(
                CHECK, Severity.ERROR, f"cannot read {name}: {exc.strerror}",
                file=layout.MODEL_MANIFEST, pointer=pointer,
            )  # fmt: skip
            continue
        if size != entry["size"] or digest != entry["sha256"]:
            yield Finding(
                CHECK, Severity.ERROR, f"{name} in --model-dir does not match the manifest",
                file=layout.MODEL_MANIFEST, pointer=pointer,
                expected=f"{entry['sha256']} ({entry['size']} bytes)",
                actual=f"{digest} ({size} bytes)",
            )  # fmt: skip
    listed = {entry["path"] for entry in entries}
    for extra in sorted(set(local) - listed):
        yield Finding(
            CHECK, Severity.WARNING, f"{extra} is in --model-dir but not in the manifest",
            file=layout.MODEL_MANIFEST,
        )  # fmt: skip
