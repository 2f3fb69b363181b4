"""Build the public documents from a raw capture, field by field, each field with one treatment.

`FIELDS` is the whole table: every field of the raw capture, what happens to it, and where
it is published. Treatments (EVIDENCE.md, "What export removes"):

- `EVIDENCE`: published byte for byte. A private value in it, in a form that identifies
  someone, stops the export (`redact`), which never alters it;
- `PATH`: a private path, replaced by its stable placeholder (`/path/to/model`); a value
  that is not a path at all is kept as evidence;
- `FREE_TEXT`: words of people or servers (notes, errors, command lines, the server's own
  fields): scanned, and what the detectors find is replaced;
- `DROPPED`: never published.

A row's `build` says how its public value is made: `copy` (the raw value as is, or nothing
when the raw field is absent), `part` (inside a value that another row copies or builds),
or the name of a builder below (values derived from several fields). Adding a field that is
copied as it is takes one row. A field the table does not name is refused (`treatment_of`
returns None and the exporter stops); a test walks the raw schemas and documents.
"""

from __future__ import annotations

import enum
import fnmatch
import functools
import posixpath
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from verifier import layout, schemas
from verifier.canonical import OutputHashError, output_hash
from verifier.errors import ExportError
from verifier.raw import RawCapture, RawCondition, RawExchange, RawServer


class Treatment(enum.Enum):
    EVIDENCE = "evidence"
    PATH = "path"
    FREE_TEXT = "free-text"
    DROPPED = "dropped"


E, P, T, D = Treatment.EVIDENCE, Treatment.PATH, Treatment.FREE_TEXT, Treatment.DROPPED

# Raw files: run, server, exchange, manifest, log. Public files: experiment, record, manifest.
RAW_KINDS = ("run", "server", "exchange", "manifest", "log")
PUBLIC_KINDS = ("experiment", "record", "manifest", "ledger")


@dataclass(frozen=True)
class Field:
    """One field of the raw capture: how export treats it and where it publishes it."""

    raw: str | None
    """`<raw file>:<pointer>`; `*` is one step, `**` any number; None: made by export."""
    treatment: Treatment
    public: str | None = None
    """`<public file>:<pointer>` where it is published; None: not published."""
    build: str = "copy"
    missing: str = "omit"
    """For a copied field absent from the raw file: `omit` it, or publish `null`."""


# fmt: off
FIELDS: tuple[Field, ...] = (
    # ---- run.json -> experiment.json
    Field(None, E, "experiment:/schema_version", "header"),
    Field(None, E, "experiment:/kind", "header"),
    Field("run:/schema_version", D),
    Field("run:/kind", D),
    Field("run:/title", T, "experiment:/title"),
    Field("run:/notes", T, "experiment:/notes"),
    Field("run:/notes/*", T, "experiment:/notes/*", "part"),
    Field("run:/capture_tool", E, "experiment:/capture_tool"),
    Field("run:/capture_tool/*", E, "experiment:/capture_tool/*", "part"),
    Field("run:/argv/**", D),  # the harness's own command line: private paths
    Field("run:/started_at", D),
    Field("run:/finished_at", D),
    Field("run:/outcome", D),  # only a completed capture is exported
    Field("run:/host/user", D),  # its forms elsewhere are found as a private name
    Field("run:/host/hostname", D),
    Field("run:/host/home", D),
    Field("run:/host/cwd", D),
    Field("run:/host/tmpdir", D),
    Field("run:/host/python", D),
    Field("run:/host/**", D),  # facts this tool does not know: private until proven otherwise
    Field("run:/host/os", E, "experiment:/hardware/os", "part"),
    Field("run:/host/machine", E, "experiment:/hardware/machine", "part"),
    Field("run:/host/cpu", E, "experiment:/hardware/cpu", "part"),
    Field("run:/host/cpu_count", E, "experiment:/hardware/cpu_count", "part"),
    Field("run:/host/accelerator", E, "experiment:/hardware/accelerator", "part"),
    Field("run:/host/kernel", E, "experiment:/hardware/kernel", "part"),
    Field("run:/host/driver_versions/*", E, "experiment:/hardware/*", "part"),
    Field("run:/hardware_extra", E, "experiment:/hardware", "part"),
    Field("run:/hardware_extra/*", E, "experiment:/hardware/*", "part"),
    Field("run:/server/profile", E, "experiment:/server/profile"),
    Field("run:/server/profile_version", E, "experiment:/server/profile_version"),
    Field("run:/server/name", E, "experiment:/server/name"),
    # what `BINARY --version` printed, stderr too: a build that loads its backends at run
    # time names their folder on every run (`load_backend: loaded CUDA backend from
    # /home/u/llama.cpp/build/bin/...`); its version and commit are words no path holds
    Field("run:/server/version", T, "experiment:/server/version", missing="null"),
    Field("run:/server/build_commit", E, "experiment:/server/build_commit", missing="null"),
    Field("run:/server/binary_sha256", E, "experiment:/server/binary_sha256"),
    Field("run:/server/attached", E, "experiment:/server/attached"),
    Field("run:/server/alias", E, "experiment:/server/alias", missing="null"),
    Field(None, E, "experiment:/hardware", "hardware"),
    Field(None, E, "experiment:/runtime_libraries", "runtime_libraries"),
    Field("run:/server/binary_path", D),  # its placeholder stands in every command line
    Field("run:/server/url", D),
    Field("run:/server/experiment_env_prefixes/**", D),  # used: which environment is kept
    Field("run:/model/path", D),
    Field("run:/model/repo_id", E, "experiment:/model/repo_id", "part"),
    Field("run:/model/revision", E, "experiment:/model/revision", "part"),
    Field("run:/model/model_file", E, "experiment:/model/model_file", "part"),
    Field("run:/model/config_file", E, "experiment:/model/config_file", "part"),
    Field(None, E, "experiment:/model/model_sha256", "part"),
    Field(None, E, "experiment:/model/config_sha256", "part"),
    Field(None, E, "experiment:/model", "model"),
    Field("server:/libraries", E, "experiment:/runtime_libraries", "part"),
    Field("server:/libraries/*/path", E, "experiment:/runtime_libraries/*/name", "part"),
    Field("server:/libraries/*/version", E, "experiment:/runtime_libraries/*/version", "part"),
    Field("server:/libraries/*/sha256", E, "experiment:/runtime_libraries/*/sha256", "part"),
    Field("run:/request_body", E, "experiment:/request_body"),
    Field("run:/request_body/**", E, "experiment:/request_body/**", "part"),
    Field("run:/opt_out_fields", E, "experiment:/opt_out_fields"),
    Field("run:/opt_out_fields/**", E, "experiment:/opt_out_fields/**", "part"),
    Field("run:/conditions/*/id", E, "experiment:/conditions/*/id", "part"),
    Field("run:/conditions/*/label", T, "experiment:/conditions/*/label", "part"),
    Field("run:/conditions/*/settings", E, "experiment:/conditions/*/settings", "part"),
    Field("run:/conditions/*/settings/*", E, "experiment:/conditions/*/settings/*", "part"),
    Field("run:/conditions/*/server_args", E, "experiment:/conditions/*/server_args", "part"),
    Field("run:/conditions/*/server_args/*", E, "experiment:/conditions/*/server_args/*", "part"),
    Field(None, E, "experiment:/conditions", "conditions"),
    Field(None, E, "experiment:/conditions/*/servers", "part"),
    Field("run:/protocol", E, "experiment:/protocol"),
    Field("run:/protocol/**", E, "experiment:/protocol/**", "part"),
    Field("run:/protocol/skipped_phases/*/reason", T,
          "experiment:/protocol/skipped_phases/*/reason", "part"),
    Field("run:/profile_rules", E, "experiment:/profile_rules"),
    Field("run:/profile_rules/**", E, "experiment:/profile_rules/**", "part"),
    Field("run:/telemetry", E, "experiment:/telemetry"),
    Field("run:/telemetry/**", E, "experiment:/telemetry/**", "part"),
    Field("run:/synthetic", E, "experiment:/synthetic"),
    # ---- conditions/<id>/servers/<n>.json -> experiment.json /conditions/*/servers/*
    Field("server:/schema_version", D),
    Field("server:/kind", D),
    Field("server:/condition", D),  # the condition it is listed under
    Field("server:/instance", E, "experiment:/conditions/*/servers/*/instance", "part"),
    Field("server:/cache_disabled", E, "experiment:/conditions/*/servers/*/cache_disabled",
          "part"),
    Field("server:/argv", E, "experiment:/conditions/*/servers/*/argv", "part"),
    Field("server:/argv/*", T, "experiment:/conditions/*/servers/*/argv/*", "part"),
    # Only the experiment's toggles; a toggle that is a path (a cache dir) gets a placeholder.
    Field("server:/env/*", P, "experiment:/conditions/*/servers/*/environment/*", "part"),
    Field("server:/env", E, "experiment:/conditions/*/servers/*/environment", "part"),
    Field("server:/cwd", D),
    Field("server:/pid", D),
    Field("server:/started_at", E, "experiment:/conditions/*/servers/*/started_at", "part"),
    Field("server:/ready_at", D),
    Field("server:/stopped_at", E, "experiment:/conditions/*/servers/*/stopped_at", "part"),
    Field("server:/exit_code", D),
    Field("server:/log_path", D),
    # ---- conditions/<id>/exchanges/<seq>.json -> records/<id>/<seq>.json
    Field(None, E, "record:/schema_version", "header"),
    Field(None, E, "record:/kind", "header"),
    Field("exchange:/schema_version", D),
    Field("exchange:/kind", D),
    Field("exchange:/condition", E, "record:/condition"),
    Field("exchange:/sequence", E, "record:/sequence"),
    Field("exchange:/phase", E, "record:/phase"),
    Field("exchange:/server_instance", E, "record:/server_instance"),
    Field("exchange:/claimed_arm", E, "record:/claimed_arm"),
    Field("exchange:/preceded_by", E, "record:/preceded_by"),
    Field("exchange:/reset/**", D),
    Field("exchange:/request/method", D),
    Field("exchange:/request/url", D),
    Field("exchange:/request/body", E, "record:/request_body"),
    Field("exchange:/request/body/**", E, "record:/request_body/**", "part"),
    Field("exchange:/response/status", E, "record:/http_status"),
    Field("exchange:/response/headers/**", D),
    Field("exchange:/response/text", T, "record:/error", "part"),
    Field("exchange:/response/error", T, "record:/error", "part"),
    Field(None, T, "record:/error", "error"),
    Field("exchange:/response/body", T, "record:/response"),
    Field("exchange:/response/body/**", T, "record:/response/**", "part"),
    Field("exchange:/response/body/choices/*/message/content", E,
          "record:/response/choices/*/message/content", "part"),
    Field("exchange:/response/body/choices/*/message/reasoning_content", E,
          "record:/response/choices/*/message/reasoning_content", "part"),
    Field("exchange:/response/body/choices/*/message/reasoning", E,
          "record:/response/choices/*/message/reasoning", "part"),
    Field("exchange:/response/body/choices/*/message/tool_calls/**", E,
          "record:/response/choices/*/message/tool_calls/**", "part"),
    Field("exchange:/response/body/usage/**", E, "record:/response/usage/**", "part"),
    Field(None, E, "record:/output_hash", "output_hash"),
    Field(None, E, "record:/usage", "usage"),
    Field(None, E, "record:/usage/**", "part"),
    Field("exchange:/telemetry/*/taken_at", D),
    Field("exchange:/telemetry/*/cache_stats_status", D),
    Field("exchange:/telemetry/*/metrics_text", D),  # the parsed samples below are the evidence
    Field("exchange:/telemetry/*/metrics_status", D),
    Field("exchange:/telemetry/before/cache_stats", T, "record:/telemetry/before/cache_stats"),
    Field("exchange:/telemetry/before/metrics", E, "record:/telemetry/before/metrics"),
    Field("exchange:/telemetry/after/cache_stats", T, "record:/telemetry/after/cache_stats"),
    Field("exchange:/telemetry/after/metrics", E, "record:/telemetry/after/metrics"),
    Field("exchange:/telemetry/*/cache_stats/**", T, "record:/telemetry/*/cache_stats/**", "part"),
    Field("exchange:/telemetry/*/metrics/*", E, "record:/telemetry/*/metrics/*", "part"),
    Field(None, E, "record:/telemetry", "part"),
    Field(None, E, "record:/telemetry/*", "part"),
    Field("exchange:/timing/started_at", E, "record:/started_at"),
    Field("exchange:/timing/elapsed_s", E, "record:/elapsed_s"),
    # ---- model-manifest.json -> model-manifest.json
    Field(None, E, "manifest:/schema_version", "header"),
    Field(None, E, "manifest:/kind", "header"),
    Field("manifest:/schema_version", D),
    Field("manifest:/kind", D),
    Field("manifest:/root", D),
    Field("manifest:/repo_id", E, "manifest:/repo_id"),
    Field("manifest:/revision", E, "manifest:/revision"),
    Field("manifest:/files", E, "manifest:/files"),
    Field("manifest:/files/*/*", E, "manifest:/files/*/*", "part"),
    # ---- logs: the harness's and each server's output
    Field("log:", D),
    # ---- redaction-ledger.json: written by export, from nothing private
    Field(None, E, "ledger:/**", "ledger"),
)
# fmt: on

Path = tuple[str | int, ...]


def _split(location: str) -> tuple[str, tuple[str, ...]]:
    kind, _, pointer = location.partition(":")
    return kind, tuple(pointer.split("/")[1:]) if pointer else ()


def _matches(pattern: tuple[str, ...], path: Path) -> bool:
    if pattern and pattern[-1] == "**":
        head = pattern[:-1]
        return len(path) >= len(head) and _matches(head, path[: len(head)])
    if len(pattern) != len(path):
        return False
    return all(p == "*" or p == str(part) for p, part in zip(pattern, path, strict=True))


def _specificity(pattern: tuple[str, ...]) -> tuple[int, int, int]:
    literal = sum(1 for p in pattern if p not in ("*", "**"))
    return (literal, len(pattern), 0 if pattern[-1:] == ("**",) else 1)


@functools.cache
def _table(side: str) -> dict[str, list[tuple[tuple[str, ...], Treatment]]]:
    table: dict[str, list[tuple[tuple[str, ...], Treatment]]] = {}
    for row in FIELDS:
        location = row.raw if side == "raw" else row.public
        if location is None:
            continue
        kind, pattern = _split(location)
        table.setdefault(kind, []).append((pattern, row.treatment))
    for rows in table.values():
        rows.sort(key=lambda r: _specificity(r[0]), reverse=True)
    return table


@functools.lru_cache(maxsize=1 << 16)
def _lookup(side: str, kind: str, path: Path) -> Treatment | None:
    """The first row of the most specific patterns that matches (a pure function of its
    arguments: cached, as the same fields recur in every record)."""
    for pattern, treatment in _table(side).get(kind, ()):
        if _matches(pattern, path):
            return treatment
    return None


def treatment_of(kind: str, path: Path) -> Treatment | None:
    """The treatment of a public field (`kind` one of PUBLIC_KINDS); None: not in the table."""
    return _lookup("public", kind, _general("public", kind, path))


def raw_treatment_of(kind: str, path: Path) -> Treatment | None:
    """The treatment of a raw field (`kind` one of RAW_KINDS); None: not in the table."""
    return _lookup("raw", kind, _general("raw", kind, path))


# A path part that no pattern spells: "\x00" is in no JSON pointer of the table.
_ANY_OTHER = "\x00"


def _general(side: str, kind: str, path: Path) -> Path:
    """`path` with each part that no pattern of its kind spells (a list index, a server's
    environment name) as one part that none spells either: a pattern's part matches such
    parts only by "*" or "**", so `_lookup` answers the same, and its cache then holds one
    entry for all of them (experiment.json alone has tens of thousands of such paths)."""
    spelled = _spelled_parts(side, kind)
    return tuple(part if str(part) in spelled else _ANY_OTHER for part in path)


@functools.cache
def _spelled_parts(side: str, kind: str) -> frozenset[str]:
    """Every literal part of the patterns of `kind` on that side."""
    patterns = [pattern for pattern, _ in _table(side).get(kind, ())]
    spelled = frozenset(part for pattern in patterns for part in pattern) - {"*", "**"}
    assert _ANY_OTHER not in spelled  # the table is this module's own
    return spelled


def public_kind(file: str) -> str:
    if file == layout.EXPERIMENT:
        return "experiment"
    if file == layout.MODEL_MANIFEST:
        return "manifest"
    if file == layout.REDACTION_LEDGER:
        return "ledger"
    return "record"


# ---------------------------------------------------------------------------------------------
# Assembly


@dataclass(frozen=True)
class Removal:
    """What assembly removed by structure (counts only), for the ledger."""

    category: str
    file: str
    pointer: str
    count: int
    placeholder: str


@dataclass(frozen=True)
class Assembled:
    """Public documents by bundle path, before redaction, and what assembly removed."""

    documents: dict[str, dict[str, Any]]
    sources: dict[str, str]
    """Public file -> the raw file most of it comes from (for messages)."""
    removals: tuple[Removal, ...]


SCALARS = frozenset({str, int, float, bool, type(None)})


def plain(value: Any) -> Any:
    """A deep, mutable, JSON-only copy (raw records hold read-only mappings)."""
    kind = type(value)
    if kind in SCALARS:  # most values: no abstract type check needed
        return value
    scalars = SCALARS
    # A scalar child is kept as it is, without a call; the exact types first (an abstract
    # isinstance check costs more than the copy of a small mapping).
    if kind is dict or kind is MappingProxyType or isinstance(value, Mapping):
        return {
            (k if type(k) is str else str(k)): (v if type(v) in scalars else plain(v))
            for k, v in value.items()
        }
    if kind is list or kind is tuple or isinstance(value, list | tuple):
        return [v if type(v) in scalars else plain(v) for v in value]
    return value


_ABSENT = object()


def _get(document: Any, pointer: tuple[str, ...]) -> Any:
    node = document
    for part in pointer:
        if not isinstance(node, Mapping) or part not in node:
            return _ABSENT
        node = node[part]
    return node


def _set(document: dict[str, Any], pointer: tuple[str, ...], value: Any) -> None:
    node = document
    for part in pointer[:-1]:
        node = node.setdefault(part, {})
    node[pointer[-1]] = value


def is_toggle(name: str, patterns: Sequence[str]) -> bool:
    """Experiment env prefixes may be given as `MLXCEL_` or as globs like `MLXCEL_*`."""
    return any(fnmatch.fnmatchcase(name, p if "*" in p or "?" in p else p + "*") for p in patterns)


def _hardware(raw: RawCapture) -> dict[str, Any]:
    host = raw.run.host
    hardware: dict[str, Any] = {
        "os": host.os,
        "machine": host.machine,
        "cpu": host.cpu,
        "cpu_count": host.cpu_count,
        "accelerator": host.accelerator,
    }
    if host.kernel is not None:
        hardware["kernel"] = host.kernel
    extra = raw.run.document.get("hardware_extra", {})
    for name, value in [*sorted(host.driver_versions.items()), *sorted(extra.items())]:
        if name in hardware and hardware[name] != value:
            # Hardware facts are published as recorded: one of two that disagree is not
            # dropped in silence.
            raise ExportError(
                f"the raw capture records two values of the hardware fact {name!r}: one in "
                f"hardware_extra of {layout.RAW_RUN}, one among the host's own facts or its "
                "driver versions; rename the one in hardware_extra (nothing was published)"
            )
        hardware[name] = value
    return hardware


def _runtime_libraries(raw: RawCapture) -> list[dict[str, Any]]:
    """Process maps reduced to identities, de-duplicated over every server, sorted."""
    seen: set[tuple[str, str | None, str | None]] = set()
    for servers in raw.servers.values():
        for server in servers:
            for lib in server.libraries:
                seen.add((posixpath.basename(lib.path), lib.version, lib.sha256))
    ordered = sorted(seen, key=lambda t: (t[0], t[1] or "", t[2] or ""))
    return [{"name": n, "version": v, "sha256": s} for n, v, s in ordered]


def _relative_model_name(name: str | None, root: str) -> str | None:
    if name is not None and name.startswith(root.rstrip("/") + "/"):
        return name[len(root.rstrip("/")) + 1 :]
    return name


def _model(raw: RawCapture) -> dict[str, Any]:
    run, manifest = raw.run, raw.manifest
    model_file = _relative_model_name(run.model_file, run.model_path)
    config_file = _relative_model_name(run.config_file, run.model_path)
    if model_file is None and len(manifest.files) == 1:
        model_file = manifest.files[0].path  # a single-file model (GGUF)
    if model_file is None:
        raise ExportError(
            f"{layout.RAW_RUN}/model/model_file: null, and the manifest lists several files; "
            "name the weights file so its SHA-256 can be published"
        )
    model_sha = manifest.sha256_of(model_file)
    if model_sha is None:
        raise ExportError(
            f"{layout.RAW_RUN}/model/model_file: {model_file!r} is not a file of "
            f"{layout.RAW_MODEL_MANIFEST}/files"
        )
    config_sha = None if config_file is None else manifest.sha256_of(config_file)
    if config_file is not None and config_sha is None:
        raise ExportError(
            f"{layout.RAW_RUN}/model/config_file: {config_file!r} is not a file of "
            f"{layout.RAW_MODEL_MANIFEST}/files"
        )
    model = run.document["model"]
    return {
        "repo_id": model["repo_id"],
        "revision": model["revision"],
        "model_file": model_file,
        "config_file": config_file,
        "model_sha256": model_sha,
        "config_sha256": config_sha,
    }


def _server(
    server: RawServer, condition: RawCondition, toggles: Sequence[str], keep_env: Sequence[str]
) -> dict[str, Any]:
    keep = [*toggles, *keep_env]
    environment = {
        name: value
        for name, value in sorted(server.env.items())
        if name in condition.settings or is_toggle(name, keep)
    }
    return {
        "instance": server.instance,
        "cache_disabled": server.cache_disabled,
        "argv": list(server.argv),
        "environment": environment,
        "started_at": server.started_at,
        "stopped_at": server.stopped_at,
    }


def _conditions(raw: RawCapture, keep_env: Sequence[str]) -> list[dict[str, Any]]:
    conditions = []
    for condition in raw.run.conditions:
        item: dict[str, Any] = {"id": condition.id}
        if condition.label is not None:
            item["label"] = condition.label
        item["settings"] = dict(condition.settings)
        if condition.server_args:
            item["server_args"] = list(condition.server_args)
        item["servers"] = [
            _server(server, condition, raw.run.experiment_env_prefixes, keep_env)
            for server in raw.servers.get(condition.id, ())
        ]
        conditions.append(item)
    return conditions


def _output_hash(exchange: RawExchange) -> str | None:
    public_file = layout.record_path(exchange.condition, exchange.sequence)
    if exchange.status is None or not 200 <= exchange.status < 300:
        return None
    if exchange.body is None:
        raise ExportError(
            f"{exchange.file}/response/body (public {public_file}/response): HTTP "
            f"{exchange.status} but no JSON body, so there is no output to hash"
        )
    try:
        return output_hash(plain(exchange.body))
    except OutputHashError as exc:
        raise ExportError(
            f"{exchange.file}/response/body (public {public_file}/response): HTTP "
            f"{exchange.status} but no canonical output hash: {exc}"
        ) from None


def _error(exchange: RawExchange) -> str | None:
    succeeded = exchange.status is not None and 200 <= exchange.status < 300
    if exchange.error is not None or succeeded:
        return exchange.error
    status = "no HTTP answer" if exchange.status is None else f"HTTP {exchange.status}"
    return status + (f": {exchange.text}" if exchange.text else "")


# Free text published only in part: cut to this many characters once redacted, never
# before (a value cut in two no longer matches its detector, and its first part would be
# published). What was cut is scanned again, and that scan is the final check's.
CUT_ONCE_REDACTED: dict[str, dict[str, int]] = {"record": {"error": 512}}


def cut_once_redacted(kind: str, document: Any) -> bool:
    """Cut the document's free text that is published only in part; whether it cut any."""
    limits = CUT_ONCE_REDACTED.get(kind)
    if not limits or not isinstance(document, dict):
        return False
    cut = False
    for key, most in limits.items():
        value = document.get(key)
        if isinstance(value, str) and len(value) > most:
            document[key] = value[:most]
            cut = True
    return cut


def _usage(exchange: RawExchange) -> Any:
    usage = exchange.body.get("usage") if exchange.body is not None else None
    return plain(usage) if isinstance(usage, Mapping) else None


_EXPERIMENT_BUILDERS: dict[str, Callable[[RawCapture, Sequence[str]], Any]] = {
    "hardware": lambda raw, _keep: _hardware(raw),
    "model": lambda raw, _keep: _model(raw),
    "runtime_libraries": lambda raw, _keep: _runtime_libraries(raw),
    "conditions": _conditions,
}
_RECORD_BUILDERS: dict[str, Callable[[RawExchange], Any]] = {
    "output_hash": _output_hash,
    "error": _error,
    "usage": _usage,
}
_KIND_OF_PUBLIC = {
    "experiment": "evidence.experiment",
    "record": "evidence.record",
    "manifest": "evidence.model-manifest",
}


@functools.cache
def _rows(public: str) -> tuple[tuple[Field, tuple[str, ...], tuple[str, ...]], ...]:
    """The rows `_build` applies for a public kind, in table order, with their pointers
    split: (row, public pointer, raw pointer)."""
    rows = []
    for row in FIELDS:
        if row.public is None or row.build == "part":
            continue
        kind, pointer = _split(row.public)
        if kind == public:
            rows.append((row, pointer, _split(row.raw)[1] if row.raw is not None else ()))
    return tuple(rows)


def _build(public: str, source: Any, build: Callable[[str], Any]) -> dict[str, Any]:
    """One public document: the rows of `public` in table order, copied or built."""
    document: dict[str, Any] = {}
    for row, pointer, raw_pointer in _rows(public):
        if row.build == "header":
            value: Any = schemas.SCHEMA_VERSION if pointer == ("schema_version",) else None
            value = value or _KIND_OF_PUBLIC[public]
        elif row.build == "copy":
            assert row.raw is not None
            value = _get(source, raw_pointer)
            if value is _ABSENT:
                if row.missing == "omit":
                    continue
                value = None
            value = plain(value)
        else:
            value = build(row.build)
        _set(document, pointer, value)
    return document


def _removals(raw: RawCapture, experiment: dict[str, Any]) -> list[Removal]:
    removals = []
    for c_index, condition in enumerate(raw.run.conditions):
        for s_index, server in enumerate(raw.servers.get(condition.id, ())):
            kept = experiment["conditions"][c_index]["servers"][s_index]["environment"]
            dropped = len(server.env) - len(kept)
            if dropped:
                pointer = f"/conditions/{c_index}/servers/{s_index}/environment"
                removals.append(
                    Removal(
                        "environment-value",
                        layout.EXPERIMENT,
                        pointer,
                        dropped,
                        "(removed: not an experiment toggle)",
                    )
                )
    mapped = sum(len(s.libraries) for ss in raw.servers.values() for s in ss)
    if mapped:
        removals.append(
            Removal(
                "process-map",
                layout.EXPERIMENT,
                "/runtime_libraries",
                mapped,
                "(reduced to file name, version, sha256)",
            )
        )
    return removals


def exchanges_in_order(raw: RawCapture) -> list[RawExchange]:
    """Every exchange, in the order of the records `assemble` builds: condition by condition,
    by sequence."""
    return [e for condition in raw.run.conditions for e in raw.exchanges[condition.id]]


def assemble(raw: RawCapture, keep_env: Sequence[str] = ()) -> Assembled:
    """The public documents of a raw capture, field by field, before redaction (the records
    of the exchanges `raw` holds: export's forked child builds the rest, `assemble_records`)."""
    run = raw.run.document
    experiment = _build("experiment", run, lambda name: _EXPERIMENT_BUILDERS[name](raw, keep_env))
    documents: dict[str, dict[str, Any]] = {layout.EXPERIMENT: experiment}
    sources = {layout.EXPERIMENT: layout.RAW_RUN, layout.MODEL_MANIFEST: layout.RAW_MODEL_MANIFEST}
    built, built_sources = assemble_records(exchanges_in_order(raw))
    documents.update(built)
    sources.update(built_sources)
    documents[layout.MODEL_MANIFEST] = _build("manifest", raw.manifest.document, _no_builder)
    return Assembled(documents, sources, tuple(_removals(raw, experiment)))


def assemble_records(
    exchanges: Sequence[RawExchange],
) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """The record documents of `exchanges` by bundle path, in their order, and their
    sources: each record is built from its exchange alone."""
    documents: dict[str, dict[str, Any]] = {}
    sources: dict[str, str] = {}
    for exchange in exchanges:
        name = layout.record_path(exchange.condition, exchange.sequence)
        documents[name] = _build(
            "record", exchange.document, functools.partial(_record_value, exchange)
        )
        sources[name] = exchange.file
    return documents, sources


def _record_value(exchange: RawExchange, builder: str) -> Any:
    return _RECORD_BUILDERS[builder](exchange)


def _no_builder(name: str) -> Any:
    raise AssertionError(f"no builder {name!r} for the model manifest")
