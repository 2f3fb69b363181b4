"""The compiled schema fast path never passes what jsonschema rejects; findings are the same."""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import json
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verifier import schemas
from verifier.checks.context import VerifyOptions
from verifier.verify import verify_path

SAMPLES = Path(__file__).resolve().parent.parent / "sample_bundles"
KEY = SAMPLES / "keys" / "evidence-signing-key.pub.pem"
TOOLS = Path(__file__).resolve().parent.parent / "tools"


def _parsed(where: str, data: bytes) -> Iterator[tuple[str, Any]]:
    # a sample that is broken JSON on purpose never reaches a schema
    with contextlib.suppress(ValueError):
        yield where, json.loads(data)


def _documents() -> Iterator[tuple[str, Any]]:
    """Every JSON document of every committed sample, negative ones included."""
    for path in sorted(SAMPLES.rglob("*.json")):
        if path.name != "EXPECTED.json":
            yield from _parsed(path.relative_to(SAMPLES).as_posix(), path.read_bytes())
    for archive in sorted(SAMPLES.rglob("*.tar.gz")):
        with tarfile.open(archive) as tar:
            for member in tar:
                handle = tar.extractfile(member) if member.isfile() else None
                if handle is not None and member.name.endswith(".json"):
                    yield from _parsed(f"{archive.name}:{member.name}", handle.read())


DOCUMENTS = [
    (where, doc, schemas.KIND_TO_SCHEMA[doc["kind"]])
    for where, doc in _documents()
    if isinstance(doc, dict) and doc.get("kind") in schemas.KIND_TO_SCHEMA
]
# One document of each kind: the base of the systematic mutations.
ONE_OF_EACH = list({name: (where, doc, name) for where, doc, name in DOCUMENTS}.values())


def agree(document: Any, name: str) -> None:
    """The fast path may refuse more (jsonschema then decides), never pass a rejected one.

    It does refuse more: fastjsonschema reads a `$` in a pattern as the end of the
    string, jsonschema (re.search) also before a final newline.
    """
    fast = schemas.fast_validator(name)
    assert fast is not None, "fastjsonschema is a dependency"
    if fast(document):
        assert schemas.validator(name).is_valid(document), (name, json.dumps(document)[:300])


def test_every_kind_of_the_samples_is_covered() -> None:
    kinds = {name for _, _, name in ONE_OF_EACH}
    assert {"experiment", "record", "model-manifest", "redaction-ledger"} <= kinds
    assert {"raw-run", "raw-exchange", "raw-server", "raw-model-manifest"} <= kinds


@pytest.mark.parametrize(("where", "document", "name"), DOCUMENTS, ids=[d[0] for d in DOCUMENTS])
def test_samples_agree(where: str, document: Any, name: str) -> None:
    agree(document, name)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _paths(value, (*prefix, index))


def _get(node: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        node = node[part]
    return node


def _set(document: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    copied = copy.deepcopy(document)
    _get(copied, path[:-1])[path[-1]] = value
    return copied


# Values at the edges where validators tend to differ: bool vs int, 1.0 vs 1, big ints,
# empty containers, a trailing newline after a `$`-anchored pattern, case of hex digits.
EDGE_VALUES: tuple[Any, ...] = (None, True, False, 0, 1, -1, 1.0, 0.5, 2**70, "", "x", [], {})


def _variants(value: Any) -> Iterator[Any]:
    yield from EDGE_VALUES
    if isinstance(value, str):
        yield value + "\n"
        yield value.upper()
        yield value[:-1]
    if isinstance(value, int) and not isinstance(value, bool):
        yield float(value)
        yield -value - 1
    if isinstance(value, list):
        yield [*value, value[0]] if value else [None]
        yield value[:-1]
    if isinstance(value, dict):
        yield {**value, "unexpected": 1}
        for key in value:
            yield {k: v for k, v in value.items() if k != key}


@pytest.mark.parametrize(
    ("where", "document", "name"), ONE_OF_EACH, ids=[d[2] for d in ONE_OF_EACH]
)
def test_systematic_mutations_agree(where: str, document: Any, name: str) -> None:
    for path in _paths(document):
        for variant in _variants(_get(document, path)):
            agree(_set(document, path, variant), name)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)


@settings(max_examples=300, deadline=None)
@given(base=st.sampled_from(ONE_OF_EACH), choice=st.integers(min_value=0), value=JSON_VALUES)
def test_random_mutations_agree(base: tuple[str, Any, str], choice: int, value: Any) -> None:
    _, document, name = base
    paths = list(_paths(document))
    agree(_set(document, paths[choice % len(paths)], value), name)


def _findings(path: Path) -> list[tuple[str, str, str | None, str | None]]:
    result = verify_path(path, VerifyOptions(public_key=KEY))
    return [(f.check, f.message, f.file, f.pointer) for f in result.findings]


@pytest.mark.parametrize(
    "sample", ["seed-mlxcel", "negative/schema-violation", "negative/tampered-output"]
)
def test_verify_findings_are_the_same_on_both_paths(
    sample: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as patched:
        patched.setattr(schemas, "fast_validator", lambda name: None)  # jsonschema alone
        plain = _findings(SAMPLES / sample)
    calls: list[str] = []
    real = schemas.fast_validator

    def counting(name: str) -> Any:
        calls.append(name)
        return real(name)

    monkeypatch.setattr(schemas, "fast_validator", counting)
    assert _findings(SAMPLES / sample) == plain
    assert "record" in calls  # the fast path did run


# --- the generated validators -----------------------------------------------------------


def _make_validators() -> Any:
    spec = importlib.util.spec_from_file_location("make_validators", TOOLS / "make_validators.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_generated_validators_are_what_the_schemas_give() -> None:
    """verifier/_validators/ is exactly what tools/make_validators.py writes from schemas/."""
    expected = _make_validators().generated()
    folder = Path(schemas.__file__).parent / "_validators"
    on_disk = {p.name: p.read_text("utf-8") for p in folder.glob("*.py")}
    assert sorted(on_disk) == sorted(expected)
    for name, text in expected.items():
        assert on_disk[name] == text, f"run tools/make_validators.py: {name} is out of date"


def test_every_schema_has_its_validator_in_use() -> None:
    assert schemas._validators_current()
    for name in schemas.load_all():
        assert schemas.fast_validator(name) is not None, name


def test_validators_of_other_schemas_are_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """A schema edited without generating the validators again: jsonschema alone decides."""
    digest = schemas.schemas_digest()
    monkeypatch.setattr(schemas, "schemas_digest", lambda: digest[::-1])
    schemas._validators_current.cache_clear()
    schemas.fast_validator.cache_clear()
    try:
        assert schemas.fast_validator("record") is None
        document = next(d for w, d, n in DOCUMENTS if n == "record" and w.startswith("seed-"))
        assert schemas.validate(document, "record") == []
        assert schemas.validate({**document, "unexpected": 1}, "record") != []
    finally:
        schemas._validators_current.cache_clear()
        schemas.fast_validator.cache_clear()


def test_valid_documents_never_import_jsonschema() -> None:
    valid = [(doc, name) for _, doc, name in DOCUMENTS if schemas.validator(name).is_valid(doc)]
    probe = (
        "import json, sys\n"
        "from verifier import schemas\n"
        "for doc, name in json.loads(sys.stdin.read()):\n"
        "    assert schemas.validate(doc, name) == []\n"
        "assert 'jsonschema' not in sys.modules and 'referencing' not in sys.modules\n"
        "schemas.validate({}, 'record')\n"
        "assert 'jsonschema' in sys.modules  # an invalid one does\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        input=json.dumps(valid),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
