"""A small raw capture directory, valid against the raw schemas, for export tests.

`RawFactory` holds the documents as plain dicts so a test can plant values anywhere
before `write()`. One condition, one server, four requests: cold, warm, warm, opt-out.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from verifier.profiles.mlxcel import RULES as MLXCEL_RULES
from verifier.protocol import Capabilities, ProtocolSpec, build_protocol, plan_requests

CONDITION = "c1"
# Ordinary words that a user or host may be named: evidence keeps them, whatever the names.
PROMPT = "Write a short story: the cache, the model, the prompt; gather metrics. /no_think"
GATHER = 'mlxcel_paged_decode_launches_total{path="gather"}'
CONTENT_A = "The keeper lit the lamp and watched the sea until dawn."
CONTENT_B = "The keeper lit the lamp and slept until the gulls woke him."


def digest(label: str) -> str:
    return hashlib.sha256(label.encode()).hexdigest()


@dataclass
class Host:
    user: str = "alice"
    hostname: str = "lab-host-07"
    home: str = "/home/alice"
    cwd: str = "/home/alice/work"
    tmpdir: str = "/tmp"
    binary: str = "/home/alice/src/mlxcel/target/release/mlxcel-server"
    model: str = "/home/alice/models/Qwen3-1.7B-4bit"


@dataclass
class _Cache:
    """One server's cache counters, moved as mlxcel moves them (SERVERS.md)."""

    enabled: bool = True
    entries: int = 0
    hits: int = 0
    lookups: int = 0
    inserts: int = 0
    misses: int = 0  # the scheduler's: a lookup that found nothing

    def serve(self, arm: str) -> None:
        if arm == "cold":
            self.lookups, self.inserts, self.entries = self.lookups + 1, self.inserts + 1, 1
            self.misses += 1
        elif arm == "warm":
            self.hits, self.lookups = self.hits + 1, self.lookups + 1

    def snapshot(self) -> dict[str, Any]:
        return _snapshot(self.entries, self.hits, self.hits * 32, self)


def _snapshot(entries: int, hits: int, reused: int, cache: _Cache | None = None) -> dict[str, Any]:
    cache = cache or _Cache(entries=entries, hits=hits, lookups=hits)
    metrics = {
        "mlxcel_prompt_cache_hits_total": float(hits),
        "mlxcel_prompt_cache_misses_total": float(cache.misses),
        "mlxcel_prompt_cache_prefix_tokens_reused_total": float(reused),
        GATHER: float(hits * 100),
        "llamacpp:prompt_tokens_cached_total": float(reused),  # mlxcel writes it (SERVERS.md)
    }
    stats = {
        "enabled": cache.enabled,
        "entries": entries,
        "hits": hits,
        "lookups": cache.lookups,
        "inserts": cache.inserts,
    }
    return {
        "taken_at": "2026-01-01T00:00:00Z",
        "cache_stats": stats,
        "cache_stats_status": 200,
        "metrics": metrics,
        "metrics_text": "".join(f"{k} {v}\n" for k, v in metrics.items()),
        "metrics_status": 200,
    }


def _response(content: str, cached: int | None, sequence: int) -> dict[str, Any]:
    usage: dict[str, Any] = {"prompt_tokens": 40, "completion_tokens": 12, "total_tokens": 52}
    if cached is not None:  # a cache-off mlxcel server reports no cached-token details
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    return {
        "id": f"chatcmpl-{sequence}",
        "object": "chat.completion",
        "model": "repro",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": usage,
    }


@dataclass
class RawFactory:
    host: Host = field(default_factory=Host)
    documents: dict[str, dict[str, Any]] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.documents:
            self.documents, self.texts = self._build()

    @property
    def run(self) -> dict[str, Any]:
        return self.documents["run.json"]

    @property
    def server(self) -> dict[str, Any]:
        return self.documents[f"conditions/{CONDITION}/servers/1.json"]

    def exchanges(self) -> list[dict[str, Any]]:
        return [d for p, d in sorted(self.documents.items()) if "/exchanges/" in p]

    def _build(self) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
        h = self.host
        body = {
            "model": "repro",
            "messages": [{"role": "user", "content": PROMPT}],
            "max_tokens": 64,
            "temperature": 0,
        }
        run = {
            "schema_version": "1.0",
            "kind": "evidence.raw-run",
            "title": "factory run",
            "capture_tool": {"name": "evidence", "version": "0.1.0"},
            "argv": ["evidence", "capture", "--binary", h.binary, "--output", f"{h.cwd}/raw"],
            "started_at": "2026-01-01T00:00:00Z",
            "finished_at": "2026-01-01T00:05:00Z",
            "outcome": "completed",
            "host": {
                "user": h.user,
                "hostname": h.hostname,
                "home": h.home,
                "cwd": h.cwd,
                "tmpdir": h.tmpdir,
                "os": "Linux",
                "kernel": "6.8.0",
                "machine": "x86_64",
                "cpu": "Test CPU",
                "cpu_count": 4,
                "accelerator": None,
                "driver_versions": {},
                "python": "3.11.9",
            },
            "server": {
                "profile": "mlxcel",
                "profile_version": MLXCEL_RULES.version,
                "name": "mlxcel-server",
                "binary_path": h.binary,
                "binary_sha256": digest("binary"),
                "version": "0.9.0",
                "build_commit": "e466f5118b8e25d0c9a295ab017468db77b87313",
                "attached": False,
                "url": None,
                "alias": "repro",
                "experiment_env_prefixes": ["MLXCEL_"],
            },
            "model": {
                "path": h.model,
                "repo_id": "org/model",
                "revision": "0" * 40,
                "model_file": "model.safetensors",
                "config_file": "config.json",
            },
            "request_body": body,
            "conditions": [
                {
                    "id": CONDITION,
                    "label": "MLXCEL_SDPA_DETERMINISTIC=1",
                    "settings": {"MLXCEL_SDPA_DETERMINISTIC": "1"},
                }
            ],
            "protocol": {"cycles": 1, "max_tokens": 64, "parallelism": 1, "block_size": 32},
            "profile_rules": MLXCEL_RULES.to_json(),
        }
        manifest = {
            "schema_version": "1.0",
            "kind": "evidence.raw-model-manifest",
            "root": h.model,
            "repo_id": "org/model",
            "revision": "0" * 40,
            "files": [
                {"path": "config.json", "size": 10, "sha256": digest("config")},
                {"path": "model.safetensors", "size": 1000, "sha256": digest("weights")},
            ],
        }
        server = {
            "schema_version": "1.0",
            "kind": "evidence.raw-server",
            "condition": CONDITION,
            "instance": 1,
            "cache_disabled": False,
            "argv": [h.binary, "-m", h.model, "--host", "127.0.0.1", "--port", "18128"],
            "env": {
                "HOME": h.home,
                "USER": h.user,
                "PATH": f"{h.home}/bin:/usr/bin:/bin",
                "MLXCEL_SDPA_DETERMINISTIC": "1",
                "MLXCEL_DEVICE": "cpu",
            },
            "cwd": h.cwd,
            "pid": 1234,
            "started_at": "2026-01-01T00:00:00Z",
            "ready_at": "2026-01-01T00:00:01Z",
            "stopped_at": "2026-01-01T00:01:00Z",
            "exit_code": 0,
            "log_path": f"{h.cwd}/raw/conditions/{CONDITION}/servers/1.log",
            "libraries": [
                {"path": h.binary, "version": None, "sha256": digest("binary")},
                {"path": "/usr/lib/libc.so.6", "version": "6", "sha256": digest("libc")},
            ],
        }
        documents: dict[str, dict[str, Any]] = {
            "run.json": run,
            "model-manifest.json": manifest,
            f"conditions/{CONDITION}/servers/1.json": server,
        }
        protocol = build_protocol(
            ProtocolSpec(cycles=1), Capabilities(True, has_opt_out=True, can_disable_cache=True)
        )
        steps, roles = plan_requests(protocol)
        self._lives = {instance: _life(steps, instance) for instance in roles}
        caches = {i: _Cache(enabled=not off) for i, off in roles.items()}
        for step in steps:
            cache = caches[step.instance]
            arm = str(step.arm)
            request_body = copy.deepcopy(body)
            if arm == "request-disabled":
                request_body["cache_prompt"] = False
            before = cache.snapshot()
            cache.serve(arm)
            cached = {"warm": 32, "server-disabled": None}.get(arm, 0)
            content = CONTENT_B if arm == "warm" else CONTENT_A
            documents[f"conditions/{CONDITION}/exchanges/{step.sequence:03d}.json"] = {
                "schema_version": "1.0",
                "kind": "evidence.raw-exchange",
                "condition": CONDITION,
                "sequence": step.sequence,
                "phase": step.phase,
                "server_instance": step.instance,
                "claimed_arm": arm,
                "preceded_by": step.preceded_by,
                "reset": None,
                "request": {
                    "method": "POST",
                    "url": "http://127.0.0.1:18128/v1/chat/completions",
                    "body": request_body,
                },
                "response": {
                    "status": 200,
                    "headers": {"content-type": "application/json"},
                    "body": _response(content, cached, step.sequence),
                    "text": None,
                    "error": None,
                },
                # one request at a time, each on its server while it runs (`_life`)
                "timing": {"started_at": _at(3 * step.sequence), "elapsed_s": 0.5},
                "telemetry": {"before": before, "after": cache.snapshot()},
            }
        server.update(_life(steps, 1))
        texts = {
            "harness.log": f"capture by {h.user}@{h.hostname} in {h.cwd}\n",
            f"conditions/{CONDITION}/servers/1.log": f"loading {h.model}\n",
        }
        return documents, texts

    def _later_servers(self) -> dict[str, dict[str, Any]]:
        """The restart and cache-off servers of the protocol: copies of server 1 as it is
        when the capture is written, so that an edit to `server` reaches every server."""
        found: dict[str, dict[str, Any]] = {}
        for instance in (2, 3):
            path = f"conditions/{CONDITION}/servers/{instance}.json"
            if path in self.documents:
                continue
            other = copy.deepcopy(self.server)
            other["instance"] = instance
            other.update(self._lives[instance])
            other["log_path"] = f"{self.host.cwd}/raw/conditions/{CONDITION}/servers/{instance}.log"
            if instance == 3:
                other["cache_disabled"] = True
                other["argv"].append("--no-prompt-cache")
            found[path] = other
        return found

    def write(self, root: Path) -> Path:
        root.mkdir(parents=True)
        for relative, document in {**self.documents, **self._later_servers()}.items():
            path = root / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(document, indent=2), encoding="utf-8")
        for relative, text in self.texts.items():
            (root / relative).write_text(text, encoding="utf-8")
        return root


def _at(seconds: float) -> str:
    """A time of the factory's capture, `seconds` after it started."""
    when = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=seconds)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _life(steps: Any, instance: int) -> dict[str, str]:
    """When a server of the factory's protocol started, was ready and stopped: around its
    own requests (each 3 s after the one before it), never alive with another."""
    times = [3 * step.sequence for step in steps if step.instance == instance]
    first, last = (min(times), max(times)) if times else (1, 1)
    return {
        "started_at": _at(first - 1.0),
        "ready_at": _at(first - 0.5),
        "stopped_at": _at(last + 1.0),
    }
