"""The JSON Schemas of every document, loaded offline through a `referencing` registry."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from verifier.errors import SchemaVersionError

if TYPE_CHECKING:  # jsonschema and referencing take ~75 ms to import: only when validating
    from referencing import Registry

SUPPORTED_MAJOR = 1
SCHEMA_VERSION = "1.1"
SUFFIX = ".schema.json"

# The schema each document kind is validated against.
KIND_TO_SCHEMA = {
    "evidence.experiment": "experiment",
    "evidence.record": "record",
    "evidence.model-manifest": "model-manifest",
    "evidence.redaction-ledger": "redaction-ledger",
    "evidence.report": "report",
    "evidence.diff": "diff",
    "evidence.raw-run": "raw-run",
    "evidence.raw-server": "raw-server",
    "evidence.raw-exchange": "raw-exchange",
    "evidence.raw-model-manifest": "raw-model-manifest",
}


def schema_dir() -> Path:
    """Where the schemas are: inside the installed wheel, else the source tree's `schemas/`.

    The package's own folder, as `importlib.resources.files("verifier")` gives it for a
    package on disk (importing importlib.resources would cost a verify about 3 ms)."""
    packaged = Path(__file__).parent / "_schemas"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parent.parent / "schemas"


@cache
def load_all() -> dict[str, dict[str, Any]]:
    """Every schema by name (file name without `.schema.json`)."""
    schemas: dict[str, dict[str, Any]] = {}
    for path in sorted(schema_dir().glob("*" + SUFFIX)):
        schemas[path.name.removesuffix(SUFFIX)] = json.loads(path.read_text("utf-8"))
    return schemas


@cache
def registry() -> Registry[Any]:
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    resources_ = [
        (schema["$id"], Resource.from_contents(schema, default_specification=DRAFT202012))
        for schema in load_all().values()
    ]
    return Registry().with_resources(resources_)


def _is_strict_integer(_checker: Any, instance: Any) -> bool:
    return isinstance(instance, int) and not isinstance(instance, bool)


@cache
def _validator_class() -> Any:
    """Draft 2020-12 with strict integers, built (and jsonschema imported) on first use.

    JSON Schema calls 2.0 an integer; a count, a sequence or a cycle number written 2.0 is
    not one here: every document is read as it will be used.
    """
    from jsonschema import Draft202012Validator, validators

    return validators.extend(  # type: ignore[no-untyped-call]
        Draft202012Validator,
        type_checker=Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_strict_integer),
    )


@cache
def validator(name: str) -> Any:
    """One validator per schema, built on first use and reused for every document."""
    schema = load_all()[name]
    return _validator_class()(schema, registry=registry())


class SchemaViolation(NamedTuple):
    pointer: str
    message: str
    schema_path: str


# A compiled validator (fastjsonschema) answers only "valid or not", ~30x faster than
# jsonschema; every document it does not pass goes through jsonschema, which alone writes
# the findings, so both paths give the same findings by construction (tests/test_schemas.py
# checks that it never passes what jsonschema rejects). The validators are generated
# ahead of time from the schemas into verifier/_validators/ (tools/make_validators.py; a
# test checks that generating them again gives the same files), so a valid document never
# imports jsonschema, and they are used only while the schemas they were generated from
# are the schemas read here (the digest of every schema file is compared once).
_EMBEDDED = "__schema__"
VALIDATORS_PACKAGE = "verifier._validators"


def _bundle_refs(node: Any, own: str, root: str, names: dict[str, str]) -> Any:
    """`node` of schema `own`, its $refs rewritten to point into one self-contained `root`."""
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                base, _, fragment = value.partition("#")
                target = names[base] if base else own
                out[key] = (
                    f"#{fragment}" if target == root else f"#/$defs/{_EMBEDDED}{target}{fragment}"
                )
            elif key not in ("$id", "$schema"):
                out[key] = _bundle_refs(value, own, root, names)
        return out
    if isinstance(node, list):
        return [_bundle_refs(item, own, root, names) for item in node]
    return node


def bundled_schema(name: str) -> dict[str, Any]:
    """The named schema with every other schema embedded under $defs: no external $ref."""
    schemas = load_all()
    names = {schema["$id"]: other for other, schema in schemas.items()}
    bundle: dict[str, Any] = _bundle_refs(schemas[name], name, name, names)
    defs = bundle.setdefault("$defs", {})
    for other, schema in schemas.items():
        if other != name:
            defs[_EMBEDDED + other] = _bundle_refs(schema, other, name, names)
    bundle["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return bundle


def schemas_digest() -> str:
    """SHA-256 over every schema file's name and bytes: what the validators were made from."""
    import hashlib

    digest = hashlib.sha256()
    for path in sorted(schema_dir().glob("*" + SUFFIX)):
        data = path.read_bytes()
        digest.update(f"{path.name}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()


def validator_module(name: str) -> str:
    """The module of verifier/_validators that holds the named schema's validator."""
    return name.replace("-", "_")


# The generated modules raise and catch the exception classes of verifier._validators
# (tools/make_validators.py writes them there), not fastjsonschema's: importing
# fastjsonschema loads its code generator too (about 2 ms of every verify), and a
# validator needs none of it.
_THEIR_EXCEPTIONS = "from fastjsonschema import JsonSchemaValueException, JsonSchemaValuesException"
_OUR_EXCEPTIONS = (
    "from verifier._validators import JsonSchemaValueException, JsonSchemaValuesException"
)


def validator_source(name: str) -> str:
    """The compiled "is it valid?" test of the named schema, as the source of a module.

    Draft 2019-09 code (fastjsonschema's latest) with draft 4's type test, so that 2.0 is
    no integer, as for our jsonschema; every failure raises one bare exception (jsonschema
    writes the findings), which keeps the code small.
    """
    from fastjsonschema.draft04 import CodeGeneratorDraft04
    from fastjsonschema.draft2019 import CodeGeneratorDraft2019
    from fastjsonschema.ref_resolver import RefResolver

    class StrictIntegers(CodeGeneratorDraft2019):
        generate_type = CodeGeneratorDraft04.generate_type

        def exc(self, msg: str, *args: Any, append_to_msg: Any = None, rule: Any = None) -> None:
            self.l('raise JsonSchemaValueException("invalid")')

        def generate_ref(self) -> None:
            # fastjsonschema's own, less the name of the value for messages no one reads
            # (formatting it cost more than validating a telemetry sample)
            definition = cast(dict[str, Any], self._definition)
            with self._resolver.in_scope(definition["$ref"]):
                name = self._resolver.get_scope_name()
                uri = self._resolver.get_uri()
                if uri not in self._validation_functions_done:
                    self._needed_validation_functions[uri] = name
                self.l("{}({variable}, custom_formats, None)", name)

    definition = bundled_schema(name)
    resolver = RefResolver.from_schema(definition, handlers={}, store={})
    generator = StrictIntegers(  # type: ignore[no-untyped-call]
        definition, resolver=resolver, formats={}, use_default=False, use_formats=False
    )
    entry = resolver.get_scope_name()
    state = generator.global_state_code
    if _THEIR_EXCEPTIONS not in state:
        raise RuntimeError("fastjsonschema's generated imports changed: see _THEIR_EXCEPTIONS")
    state = state.replace(_THEIR_EXCEPTIONS, _OUR_EXCEPTIONS)
    return f"{state}\n{generator.func_code}\n\nVALIDATE = {entry}\n"


@cache
def _validators_current() -> bool:
    """Whether verifier/_validators was generated from the schemas this process reads."""
    import importlib

    try:
        package = importlib.import_module(VALIDATORS_PACKAGE)
    except ImportError:
        return False
    return bool(getattr(package, "SCHEMAS_SHA256", None) == schemas_digest())


@cache
def fast_validator(name: str) -> Callable[[Any], bool] | None:
    """The generated "is it valid?" test of the named schema; None if it is out of date."""
    import importlib

    if not _validators_current():
        return None
    try:
        compiled = importlib.import_module(
            f"{VALIDATORS_PACKAGE}.{validator_module(name)}"
        ).VALIDATE
    except (ImportError, AttributeError):
        return None

    def is_valid(document: Any) -> bool:
        try:
            compiled(document)
        except Exception:  # invalid, or anything unexpected: jsonschema decides
            return False
        return True

    return is_valid


def validate(document: Any, name: str) -> list[SchemaViolation]:
    """Every violation of the named schema, sorted by location (not only the first)."""
    fast = fast_validator(name)
    if fast is not None and fast(document):
        return []
    violations = []
    for error in validator(name).iter_errors(document):
        pointer = "".join(
            "/" + str(part).replace("~", "~0").replace("/", "~1") for part in error.absolute_path
        )
        schema_path = "/".join(str(p) for p in error.absolute_schema_path)
        violations.append(SchemaViolation(pointer, error.message, schema_path))
    return sorted(violations, key=lambda v: (v.pointer, v.message))


def check_schema_version(document: Any, *, where: str) -> None:
    """Refuse a document whose schema_version has an unknown major version."""
    if not isinstance(document, dict):
        return
    version = document.get("schema_version")
    if not isinstance(version, str):
        return  # the schema check reports a missing or mistyped version
    major = version.split(".", 1)[0]
    if major != str(SUPPORTED_MAJOR):
        raise SchemaVersionError(
            f"{where}: schema_version {version!r} has major version {major}; this tool reads "
            f"major version {SUPPORTED_MAJOR} only. Upgrade evidence to read it."
        )
