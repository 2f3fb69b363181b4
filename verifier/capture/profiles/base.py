"""What the harness needs to know about one server: start, reset, opt out, telemetry."""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verifier.errors import UsageError


class ResetProof(enum.StrEnum):
    """How a cache reset is proven."""

    STATS_ENTRIES = "stats-entries"  # the stats document shows zero entries right after it
    NEXT_COLD_REQUEST = "next-cold-request"  # only the next cold request's cached_tokens == 0


@dataclass(frozen=True)
class ResetCall:
    """The HTTP call that clears the prefix cache."""

    method: str
    path: str


@dataclass(frozen=True)
class TelemetryMap:
    """Where each kind of cache evidence lives (common.schema.json#/$defs/telemetry_map)."""

    cached_tokens_pointer: str = "/usage/prompt_tokens_details/cached_tokens"
    prompt_tokens_pointer: str = "/usage/prompt_tokens"
    hit_counters: tuple[str, ...] = ()
    reuse_counters: tuple[str, ...] = ()
    store_counters: tuple[str, ...] = ()
    path_counters: tuple[str, ...] = ()
    cache_enabled_pointer: str | None = None
    cache_entries_pointer: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "cached_tokens_pointer": self.cached_tokens_pointer,
            "prompt_tokens_pointer": self.prompt_tokens_pointer,
            "hit_counters": list(self.hit_counters),
            "reuse_counters": list(self.reuse_counters),
            "store_counters": list(self.store_counters),
            "path_counters": list(self.path_counters),
            "cache_enabled_pointer": self.cache_enabled_pointer,
            "cache_entries_pointer": self.cache_entries_pointer,
        }


@dataclass(frozen=True)
class LaunchSpec:
    """Everything a profile needs to build one server's command line."""

    binary: Path
    model: Path
    alias: str
    port: int
    cache_disabled: bool
    scratch_dir: Path
    extra_args: tuple[str, ...] = ()


@dataclass(frozen=True)
class ServerProfile(ABC):
    """One server's facts. The harness reads these; it never branches on `name`."""

    name: str
    server_name: str
    experiment_env_prefixes: tuple[str, ...]
    reset: ResetCall
    telemetry: TelemetryMap
    chat_path: str = "/v1/chat/completions"
    readiness_path: str = "/health"
    stats_path: str | None = None
    metrics_path: str | None = "/metrics"
    opt_out_fields: Mapping[str, Any] | None = None
    opt_out_missing_reason: str = "the server has no per-request cache opt-out"
    pinned_request_fields: Mapping[str, Any] = field(default_factory=dict)
    extra_env: Mapping[str, str] = field(default_factory=dict)
    parallelism: int | None = None
    block_size: int | None = None
    block_size_pointer: str | None = None  # into the stats document, when it says
    can_disable_cache: bool = True

    @property
    def reset_proof(self) -> ResetProof:
        if self.stats_path is not None and self.telemetry.cache_entries_pointer is not None:
            return ResetProof.STATS_ENTRIES
        return ResetProof.NEXT_COLD_REQUEST

    @abstractmethod
    def start_argv(self, spec: LaunchSpec) -> list[str]:
        """The server's command line, with the cache on or off as `spec` says."""

    def model_argument(self, model: Path) -> Path:
        """The path the server is given: the model directory or file as is, by default."""
        return model


def single_file_in(model: Path, suffix: str) -> Path:
    """A file model as is; a directory holding exactly one `*suffix` file, that file."""
    if model.is_file():
        return model
    candidates = sorted(model.glob(f"*{suffix}"))
    if len(candidates) != 1:
        raise UsageError(
            f"{model} holds {len(candidates)} {suffix} files; give --model the one file to serve"
        )
    return candidates[0]
