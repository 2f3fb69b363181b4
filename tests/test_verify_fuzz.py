"""No mutation of a valid bundle crashes verify, and none that touches evidence verifies.

`EVIDENCE_FUZZ_EXAMPLES` sets how many archives are tried (`make fuzz` tries many more).
"""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import tarfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from make_samples import resum_tree

from verifier.bundle.reader import read_bundle
from verifier.errors import UnreadableInput, UnsafeInput
from verifier.verify import VerifyOptions, verify_path

SEED = Path(__file__).resolve().parent.parent / "sample_bundles" / "seed-mlxcel"
DOCUMENTS = sorted(p.relative_to(SEED).as_posix() for p in SEED.rglob("*.json"))

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _paths(value, (*prefix, index))
    return found


def _replace(node: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    head, *rest = path
    node[head] = _replace(node[head], tuple(rest), value)
    return node


@settings(
    max_examples=int(os.environ.get("EVIDENCE_FUZZ_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    document=st.sampled_from(DOCUMENTS),
    choice=st.integers(min_value=0),
    value=JSON_VALUES,
    resum=st.booleans(),
)
def test_mutations_never_crash_and_never_verify_silently(
    tmp_path_factory: pytest.TempPathFactory, document: str, choice: int, value: Any, resum: bool
) -> None:
    bundle = tmp_path_factory.mktemp("fuzz") / "bundle"
    shutil.copytree(SEED, bundle)
    path = bundle / document
    original = json.loads(path.read_text())
    paths = _paths(original)
    target = paths[choice % len(paths)]
    mutated = _replace(json.loads(path.read_text()), target, value)
    if mutated == original:
        return
    path.write_text(json.dumps(mutated, indent=2))
    if resum:
        resum_tree(bundle)
    result = verify_path(bundle)  # must not raise, whatever the mutation
    broken = [f for f in result.findings if "internal error" in f.message]
    assert not broken, broken  # a check that failed is a bug, even though it fails closed
    if not resum:
        assert not result.verified, "a change without new checksums must fail verification"


# --- whole archives: any change fails, or provably alters nothing -----------------------
#
# Changes that may pass, because they alter nothing the bundle claims (the files, their
# contents and the signature over them): the order of the members in the archive; the
# gzip header's modification time, extra flags, OS byte and FTEXT bit; the zero padding
# after a member's data (no tar reader reads it); more zero bytes after the end-of-archive
# marker (the padding tar itself writes there). The oracle below is exactly that: a
# mutated archive that verifies must read as the very same files as the original.

KEY = SEED.parent / "keys" / "evidence-signing-key.pub.pem"
EXAMPLES = int(os.environ.get("EVIDENCE_FUZZ_EXAMPLES", "1000"))


def _members(files: dict[str, bytes]) -> list[tuple[str, bytes]]:
    return sorted(files.items())


def _tar(members: list[tuple[str, bytes]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _gz(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


def _sample_files() -> dict[str, dict[str, bytes]]:
    real = SEED.parent / "llama-cpp-real.tar.gz"
    return {
        "seed-mlxcel": dict(read_bundle(SEED).files),
        "llama-cpp-real": dict(read_bundle(real).files),
    }


SAMPLES = _sample_files()
ORIGINAL = {
    name: verify_path(SEED if name == "seed-mlxcel" else SEED.parent / f"{name}.tar.gz",
                      VerifyOptions(public_key=KEY))
    for name in SAMPLES
}  # fmt: skip


@st.composite
def _mutated_archives(draw: st.DrawFn) -> tuple[str, str, bytes]:
    name = draw(st.sampled_from(sorted(SAMPLES)))
    members = _members(SAMPLES[name])
    index = draw(st.integers(0, len(members) - 1))
    kind = draw(
        st.sampled_from(
            ["flip-member", "flip-tar", "flip-gzip", "delete", "duplicate", "reorder",
             "truncate", "append-gzip", "append-tar", "none"]
        )
    )  # fmt: skip
    flip = draw(st.integers(1, 255))
    if kind == "flip-member":
        path, data = members[index]
        if data:
            mutable = bytearray(data)
            mutable[draw(st.integers(0, len(data) - 1))] ^= flip
            members[index] = (path, bytes(mutable))
    elif kind == "delete":
        del members[index]
    elif kind == "duplicate":
        members.insert(draw(st.integers(0, len(members))), members[index])
    elif kind == "reorder":
        members = draw(st.permutations(members))
    tar = _tar(members)
    if kind == "flip-tar":
        mutable = bytearray(tar)
        mutable[draw(st.integers(0, len(tar) - 1))] ^= flip
        tar = bytes(mutable)
    elif kind == "append-tar":
        appended = draw(st.binary(min_size=1, max_size=600))
        tar += appended
        if not appended.strip(b"\0"):
            kind = "append-tar-zeros"  # more zero padding after the end-of-archive: harmless
    archive = _gz(tar)
    if kind == "flip-gzip":
        mutable = bytearray(archive)
        mutable[draw(st.integers(0, len(archive) - 1))] ^= flip
        archive = bytes(mutable)
    elif kind == "truncate":
        archive = archive[: draw(st.integers(0, len(archive) - 1))]
    elif kind == "append-gzip":
        archive += draw(st.binary(min_size=1, max_size=64))
    return name, kind, archive


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(mutation=_mutated_archives())
def test_archive_mutations_fail_or_change_nothing(
    tmp_path_factory: pytest.TempPathFactory, mutation: tuple[str, str, bytes]
) -> None:
    name, kind, archive = mutation
    path = tmp_path_factory.mktemp("archive") / "bundle.tar.gz"
    path.write_bytes(archive)
    try:
        result = verify_path(path, VerifyOptions(public_key=KEY))
    except (UnreadableInput, UnsafeInput):
        return  # refused with a clear error: not verified
    broken = [f for f in result.findings if "internal error" in f.message]
    assert not broken, broken  # a check that failed is a bug, even though it fails closed
    if not result.verified:
        assert any(f.is_error for f in result.findings) or result.classification is None
        return
    assert dict(read_bundle(path).files) == SAMPLES[name], f"{kind} verified a changed bundle"
    assert result.verdict == ORIGINAL[name].verdict
    if kind in ("flip-member", "delete", "duplicate", "truncate", "append-gzip", "append-tar"):
        raise AssertionError(f"a {kind} change verified")


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_the_oracle_is_live_rebuilt_and_reordered_archives_verify(
    name: str, tmp_path: Path
) -> None:
    """The fuzzed archives start from bundles that verify, so a failure means the change."""
    members = _members(SAMPLES[name])
    for order in (members, members[::-1]):
        path = tmp_path / "bundle.tar.gz"
        archive = bytearray(_gz(_tar(order)))
        archive[4:10] = b"\x01\x02\x03\x04\x02\x03"  # gzip mtime, extra flags, OS: no claim
        path.write_bytes(bytes(archive))
        result = verify_path(path, VerifyOptions(public_key=KEY))
        assert result.verified, result.findings
        assert result.verdict == ORIGINAL[name].verdict
        assert ORIGINAL[name].verified
