"""Build the public documents from a raw capture: keep the evidence, drop what is private.

This step removes by structure (host facts, environment values, process maps, headers,
logs); `redact` then replaces private strings inside what is kept.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from verifier import layout, schemas
from verifier.canonical import OutputHashError, output_hash
from verifier.errors import ExportError
from verifier.export.redact import LedgerEntry, is_toggle
from verifier.raw import RawCapture, RawCondition, RawExchange, RawServer

# Command-line flags whose next argument (or `=value`) is a secret, whatever its length.
SECRET_FLAGS = frozenset({"--api-key", "--hf-token", "--token", "--password", "--auth", "--secret"})
TOKEN_PLACEHOLDER = "<token>"  # noqa: S105 - a placeholder, not a credential


@dataclass(frozen=True)
class Assembled:
    """Public documents by bundle path, before redaction, and what assembly removed."""

    documents: dict[str, dict[str, Any]]
    removals: tuple[LedgerEntry, ...]
    secret_arguments: tuple[str, ...]
    """Values of secret flags: redact also removes them wherever else they appear."""


def plain(value: Any) -> Any:
    """A deep, mutable, JSON-only copy (raw records hold read-only mappings)."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def _header(kind: str) -> dict[str, Any]:
    return {"schema_version": schemas.SCHEMA_VERSION, "kind": kind}


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
        hardware.setdefault(name, value)
    return hardware


def _runtime_libraries(raw: RawCapture) -> tuple[list[dict[str, Any]], int]:
    """Process maps reduced to identities, de-duplicated over every server, sorted."""
    seen: set[tuple[str, str | None, str | None]] = set()
    mapped = 0
    for servers in raw.servers.values():
        for server in servers:
            for lib in server.libraries:
                mapped += 1
                seen.add((posixpath.basename(lib.path), lib.version, lib.sha256))
    ordered = sorted(seen, key=lambda t: (t[0], t[1] or "", t[2] or ""))
    return [{"name": n, "version": v, "sha256": s} for n, v, s in ordered], mapped


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


def _argv(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """The argv with the values of secret flags replaced; and those values."""
    public: list[str] = []
    secrets: list[str] = []
    expect_secret = False
    for arg in argv:
        flag, eq, value = arg.partition("=")
        if expect_secret:
            public.append(TOKEN_PLACEHOLDER)
            secrets.append(arg)
            expect_secret = False
        elif flag in SECRET_FLAGS and eq:
            public.append(f"{flag}={TOKEN_PLACEHOLDER}")
            secrets.append(value)
        else:
            public.append(arg)
            expect_secret = arg in SECRET_FLAGS
    return public, secrets


def _server(
    server: RawServer, condition: RawCondition, toggles: Sequence[str], keep_env: Sequence[str]
) -> tuple[dict[str, Any], int, list[str]]:
    """(public server entry, number of environment values dropped, secret argv values)."""
    keep = [*toggles, *keep_env]
    environment = {
        name: value
        for name, value in sorted(server.env.items())
        if name in condition.settings or is_toggle(name, keep)
    }
    argv, secrets = _argv(server.argv)
    entry = {
        "instance": server.instance,
        "cache_disabled": server.cache_disabled,
        "argv": argv,
        "environment": environment,
        "started_at": server.started_at,
        "stopped_at": server.stopped_at,
    }
    return entry, len(server.env) - len(environment), secrets


def _experiment(
    raw: RawCapture, keep_env: Sequence[str]
) -> tuple[dict[str, Any], list[LedgerEntry], list[str]]:
    run = raw.run.document
    server = run["server"]
    removals: list[LedgerEntry] = []
    secrets: list[str] = []
    conditions = []
    for c_index, condition in enumerate(raw.run.conditions):
        servers = []
        for s_index, raw_server in enumerate(raw.servers.get(condition.id, ())):
            entry, dropped, argv_secrets = _server(
                raw_server, condition, raw.run.experiment_env_prefixes, keep_env
            )
            servers.append(entry)
            secrets += argv_secrets
            pointer = f"/conditions/{c_index}/servers/{s_index}"
            if dropped:
                removals.append(
                    LedgerEntry(
                        "environment-value",
                        layout.EXPERIMENT,
                        pointer + "/environment",
                        dropped,
                        "(removed: not an experiment toggle)",
                    )
                )
            if argv_secrets:
                removals.append(
                    LedgerEntry(
                        "token",
                        layout.EXPERIMENT,
                        pointer + "/argv",
                        len(argv_secrets),
                        TOKEN_PLACEHOLDER,
                    )
                )
        item: dict[str, Any] = {"id": condition.id}
        if condition.label is not None:
            item["label"] = condition.label
        item["settings"] = dict(condition.settings)
        item["servers"] = servers
        conditions.append(item)

    libraries, mapped = _runtime_libraries(raw)
    if mapped:
        removals.append(
            LedgerEntry(
                "process-map",
                layout.EXPERIMENT,
                "/runtime_libraries",
                mapped,
                "(reduced to file name, version, sha256)",
            )
        )
    doc = _header("evidence.experiment")
    for key in ("title", "notes"):
        if key in run:
            doc[key] = plain(run[key])
    doc["capture_tool"] = plain(run["capture_tool"])
    doc["server"] = {
        key: server.get(key)
        for key in ("profile", "name", "version", "build_commit", "binary_sha256", "attached")
    } | {"alias": server.get("alias")}
    if "profile_version" in server:
        doc["server"]["profile_version"] = server["profile_version"]
    doc["hardware"] = _hardware(raw)
    doc["runtime_libraries"] = libraries
    doc["model"] = _model(raw)
    doc["request_body"] = plain(run["request_body"])
    if "opt_out_fields" in run:
        doc["opt_out_fields"] = plain(run["opt_out_fields"])
    doc["conditions"] = conditions
    doc["protocol"] = plain(run["protocol"])
    for key in ("telemetry", "profile_rules"):  # telemetry: a capture of schema 1.0
        if key in run:
            doc[key] = plain(run[key])
    if "synthetic" in run:
        doc["synthetic"] = run["synthetic"]
    return doc, removals, secrets


def _record(exchange: RawExchange) -> dict[str, Any]:
    public_file = layout.record_path(exchange.condition, exchange.sequence)
    body = plain(exchange.body)
    succeeded = exchange.status is not None and 200 <= exchange.status < 300
    digest = None
    if succeeded:
        if body is None:
            raise ExportError(
                f"{exchange.file}/response/body (public {public_file}/response): HTTP "
                f"{exchange.status} but no JSON body, so there is no output to hash"
            )
        try:
            digest = output_hash(body)
        except OutputHashError as exc:
            raise ExportError(
                f"{exchange.file}/response/body (public {public_file}/response): HTTP "
                f"{exchange.status} but no canonical output hash: {exc}"
            ) from None
    error = exchange.error
    if error is None and not succeeded:
        status = "no HTTP answer" if exchange.status is None else f"HTTP {exchange.status}"
        detail = f": {exchange.text[:500]}" if exchange.text else ""
        error = status + detail
    usage = body.get("usage") if isinstance(body, dict) else None
    doc = _header("evidence.record")
    doc |= {
        "condition": exchange.condition,
        "sequence": exchange.sequence,
        "phase": exchange.phase,
        "server_instance": exchange.server_instance,
        "claimed_arm": exchange.claimed_arm,
        "preceded_by": exchange.preceded_by,
        "request_body": plain(exchange.request_body),
        "http_status": exchange.status,
        "error": error,
        "response": body,
        "output_hash": digest,
        "usage": usage if isinstance(usage, dict) else None,
        "telemetry": {
            name: {"cache_stats": plain(snap.cache_stats), "metrics": plain(snap.metrics)}
            for name, snap in (("before", exchange.before), ("after", exchange.after))
        },
        "started_at": exchange.started_at,
        "elapsed_s": exchange.elapsed_s,
    }
    return doc


def assemble(raw: RawCapture, keep_env: Sequence[str] = ()) -> Assembled:
    """The public documents of a raw capture, before string redaction."""
    experiment, removals, secrets = _experiment(raw, keep_env)
    documents: dict[str, dict[str, Any]] = {layout.EXPERIMENT: experiment}
    for condition in raw.run.conditions:
        for exchange in raw.exchanges[condition.id]:
            documents[layout.record_path(condition.id, exchange.sequence)] = _record(exchange)
    manifest = _header("evidence.model-manifest")
    manifest |= {
        "repo_id": raw.manifest.repo_id,
        "revision": raw.manifest.revision,
        "files": [{"path": f.path, "size": f.size, "sha256": f.sha256} for f in raw.manifest.files],
    }
    documents[layout.MODEL_MANIFEST] = manifest
    return Assembled(documents, tuple(removals), tuple(secrets))
