"""No mutation of a valid bundle crashes verify, and none that touches evidence verifies."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from make_samples import resum_tree

from verifier.verify import verify_path

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
