"""The model manifest: claimed hashes are entries of it; optionally rehash a local model."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from verifier import layout
from verifier.checks.context import BundleContext
from verifier.model import Finding, Severity

CHECK = "manifest"


def check_manifest(ctx: BundleContext) -> Iterator[Finding]:
    manifest = ctx.valid(layout.MODEL_MANIFEST)
    experiment = ctx.experiment
    if manifest is None or experiment is None:
        return
    files: dict[str, dict[str, Any]] = {}
    seen: set[str] = set()
    for index, entry in enumerate(manifest["files"]):
        path = entry["path"]
        if not _plain(path):  # `./x`, `a/../x`, `/x`: one file, many spellings
            yield Finding(
                CHECK,
                Severity.ERROR,
                "a manifest path must be a plain relative path (no `.` or `..` component, no "
                "empty one, no leading `/` or `\\`)",
                file=layout.MODEL_MANIFEST,
                pointer=f"/files/{index}/path",
                actual=path,
            )
        elif path.casefold() in seen:  # which of the two ran cannot be told
            yield Finding(
                CHECK,
                Severity.ERROR,
                "the manifest lists this file twice (names equal but for case count as one, "
                "as on macOS and Windows): it contradicts itself about the model",
                file=layout.MODEL_MANIFEST,
                pointer=f"/files/{index}/path",
                actual=path,
            )
        seen.add(path.casefold())
        files[path] = entry
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
        if claim == "model_sha256" and isinstance(named, str) and _NOT_WEIGHTS.search(named):
            yield Finding(
                CHECK,
                Severity.ERROR,
                "model_file names a file of another kind than model weights (a tokenizer, "
                "an index, a config): model_sha256 binds no weights",
                file=layout.EXPERIMENT,
                pointer="/model/model_file",
                actual=named,
            )
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
        elif named is not None:  # not a manifest entry: its digest could be any file's
            yield Finding(
                CHECK,
                Severity.ERROR,
                f"{file_key} names a file the manifest does not list",
                file=layout.EXPERIMENT,
                pointer=f"/model/{file_key}",
                actual=str(named),
            )
        else:  # a digest that names no file binds nothing: any entry's (a tokenizer's) fits
            yield Finding(
                CHECK,
                Severity.ERROR,
                f"{claim} is given without {file_key}: the digest names no file of the model"
                + ("" if digest in digests else ", and no file in the manifest has it"),
                file=layout.EXPERIMENT,
                pointer=f"/model/{file_key}",
                actual=digest,
            )
    if ctx.options.model_dir is not None:
        yield from _rehash(ctx, ctx.options.model_dir, manifest["files"])


# The files beside a model's weights that a model_file could be made to name: text, JSON
# (configs, tokenizers, shard indexes), templates, code, and tokenizer vocabularies.
_NOT_WEIGHTS = re.compile(r"\.(?:json|txt|md|py|jinja|tiktoken|model|vocab)$", re.IGNORECASE)


def _plain(path: str) -> bool:
    """Whether a path names one file one way: relative, `/`-separated, every component a
    name (as `evidence manifest` writes them)."""
    parts = path.split("/")
    return "\\" not in path and all(part not in ("", ".", "..") for part in parts)


def _rehash(ctx: BundleContext, root: Path, entries: list[dict[str, Any]]) -> Iterator[Finding]:
    from verifier.modelfiles import ModelFilesError, hash_files, model_files  # --model-dir only

    try:
        local = model_files(root)
    except ModelFilesError as exc:
        yield Finding(CHECK, Severity.ERROR, f"--model-dir: {exc.message}")
        return
    wanted = {entry["path"]: local[entry["path"]] for entry in entries if entry["path"] in local}
    progress = ctx.options.progress
    on_bytes = None
    if progress is not None:
        description = f"hashing {len(wanted)} model file(s)"

        def on_bytes(done: int, total: int) -> None:
            progress(description, done, total)

    hashed = hash_files(wanted, on_bytes)
    for index, entry in enumerate(entries):
        pointer = f"/files/{index}"
        name = entry["path"]
        result = hashed.get(name)
        if result is None:
            yield Finding(
                CHECK, Severity.ERROR, f"{name} is in the manifest but not in --model-dir",
                file=layout.MODEL_MANIFEST, pointer=pointer,
            )  # fmt: skip
        elif result.sha256 is None:
            yield Finding(
                CHECK, Severity.ERROR, f"cannot read {name}: {result.error}",
                file=layout.MODEL_MANIFEST, pointer=pointer,
            )  # fmt: skip
        elif result.size != entry["size"] or result.sha256 != entry["sha256"]:
            yield Finding(
                CHECK, Severity.ERROR, f"{name} in --model-dir does not match the manifest",
                file=layout.MODEL_MANIFEST, pointer=pointer,
                expected=f"{entry['sha256']} ({entry['size']} bytes)",
                actual=f"{result.sha256} ({result.size} bytes)",
            )  # fmt: skip
    listed = {entry["path"] for entry in entries}
    for extra in sorted(set(local) - listed):
        yield Finding(
            CHECK, Severity.WARNING, f"{extra} is in --model-dir but not in the manifest",
            file=layout.MODEL_MANIFEST,
        )  # fmt: skip
