"""The rules a server profile gives verify: which signals prove which arm (EVIDENCE.md).

These are the tool's own facts about a server. A bundle names a profile and its version;
verify judges the bundle by its own copy of those rules, never by a copy the bundle
carries. A reviewer may supply rules in a file (`--profile FILE`): they chose it.
"""

from __future__ import annotations

import enum
import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

_COUNTER_REF = re.compile(r"^(metric|stats):[A-Za-z_:][A-Za-z0-9_:]*$")
_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")


class ResetProof(enum.StrEnum):
    """How a cache reset is proven."""

    STATS_ENTRIES = "stats-entries"  # a stats read right after it shows zero entries
    NEXT_COLD_REQUEST = "next-cold-request"  # the next cold request's cached_tokens == 0


class RulesError(ValueError):
    """A rules document that does not have the shape of ProfileRules."""


@dataclass(frozen=True)
class CacheSignals:
    """The counters a server moves when it touches its prefix cache.

    Each is a counter reference: `metric:FAMILY` (the sum of the family's Prometheus
    samples) or `stats:FIELD` (a numeric field of the cache stats document).

    - `hits`: advance on every prefix hit (hit counters, store hits). A warm request
      needs every one to advance; a cold, opt-out or cache-off request needs none to.
    - `reuse`: advance by the tokens a hit reused; judged like `hits`.
    - `lookups`: advance whenever the store is consulted: a warm request needs them to
      advance; an opt-out or cache-off request needs them still (a cold one may look up).
    - `inserts`: advance when the store is written: an opt-out or cache-off request
      needs them still.
    - `paths`: decode-path counters, reported per output class, never a proof.
    - `misses`: advance when a lookup finds nothing: a warm request needs them still (a
      hit and a miss in one request disagree: a cold request's telemetry with hits
      written over it), and so do an opt-out and a cache-off request (which look
      nothing up); a cold one may move them.
    """

    hits: tuple[str, ...] = ()
    reuse: tuple[str, ...] = ()
    lookups: tuple[str, ...] = ()
    inserts: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    misses: tuple[str, ...] = ()

    # Read for every record: worked out once (cached_property on a frozen dataclass keeps
    # the value in the instance's __dict__, outside the fields that equality compares).
    @functools.cached_property
    def hit_evidence(self) -> tuple[str, ...]:
        """Signals that say "the cache supplied tokens" when they move."""
        return self.hits + self.reuse

    @functools.cached_property
    def store_access(self) -> tuple[str, ...]:
        """Every signal that moves when the cache is touched at all."""
        return self.hits + self.reuse + self.lookups + self.inserts

    @functools.cached_property
    def all(self) -> tuple[str, ...]:
        return self.store_access + self.paths + self.misses


@dataclass(frozen=True)
class ProfileRules:
    """Everything verify needs to judge one server's evidence, named and versioned."""

    name: str
    version: str
    signals: CacheSignals
    reset_proof: ResetProof
    cache_off_args: tuple[str, ...]  # in a cache-off server's command line, never in another's
    cached_tokens_pointer: str = "/usage/prompt_tokens_details/cached_tokens"
    prompt_tokens_pointer: str = "/usage/prompt_tokens"
    cache_enabled_pointer: str | None = None  # into the stats: false when the cache is off
    cache_entries_pointer: str | None = None  # into the stats: the number of cached entries
    opt_out_fields: Mapping[str, Any] | None = None  # None: no per-request opt-out
    can_disable_cache: bool = True
    logprobs_top_k: int | None = None  # None: no logprobs, so no divergence diagnostic
    # Why a lookup missed, where the server says so: stats counters named PREFIX* (each
    # a reason) and a stats field with the last reason. Shown, never a proof.
    miss_reason_prefix: str | None = None
    last_miss_reason_pointer: str | None = None
    # What ties a bundle to this server, so that it cannot borrow another profile's rules.
    server_name: str | None = None  # experiment.json server.name
    toggle_prefixes: tuple[str, ...] = ()  # every environment name a server ran with
    has_stats: bool = False  # a cache stats document exists (None in every record otherwise)
    per_instance_args: tuple[str, ...] = ()  # flags whose value may differ per server
    reuse_counts_cached_tokens: bool = False  # reuse counters advance by cached_tokens
    notes: tuple[str, ...] = field(default=())

    @property
    def diagnostic_fields(self) -> dict[str, Any]:
        """What a diagnostic request adds to the body: logprobs with top-k alternatives."""
        if self.logprobs_top_k is None:
            return {}
        return {"logprobs": True, "top_logprobs": self.logprobs_top_k}

    @property
    def key(self) -> str:
        return f"{self.name} v{self.version}"

    def copied_as(self, copy: object) -> dict[str, Any]:
        """`to_json`, as a bundle written before a signal was added (`_ADDED_SIGNALS`)
        carries it: without the added signals its copy lacks. The copy of rules that had
        none is a copy of these rules; a bundle is judged by this tool's either way."""
        mine = self.to_json()
        signals = copy.get("signals") if isinstance(copy, dict) else None
        if isinstance(signals, dict):
            lacking = [name for name in _ADDED_SIGNALS if name not in signals]
            mine["signals"] = {k: v for k, v in mine["signals"].items() if k not in lacking}
        return mine

    def to_json(self) -> dict[str, Any]:
        """The rules as the document a bundle carries (experiment.json `profile_rules`)."""
        return {
            "name": self.name,
            "version": self.version,
            "signals": {
                "hits": list(self.signals.hits),
                "reuse": list(self.signals.reuse),
                "lookups": list(self.signals.lookups),
                "inserts": list(self.signals.inserts),
                "paths": list(self.signals.paths),
                "misses": list(self.signals.misses),
            },
            "reset_proof": str(self.reset_proof),
            "cache_off_args": list(self.cache_off_args),
            "cached_tokens_pointer": self.cached_tokens_pointer,
            "prompt_tokens_pointer": self.prompt_tokens_pointer,
            "cache_enabled_pointer": self.cache_enabled_pointer,
            "cache_entries_pointer": self.cache_entries_pointer,
            "opt_out_fields": None if self.opt_out_fields is None else dict(self.opt_out_fields),
            "can_disable_cache": self.can_disable_cache,
            "logprobs_top_k": self.logprobs_top_k,
            "miss_reason_prefix": self.miss_reason_prefix,
            "last_miss_reason_pointer": self.last_miss_reason_pointer,
            "server_name": self.server_name,
            "toggle_prefixes": list(self.toggle_prefixes),
            "has_stats": self.has_stats,
            "per_instance_args": list(self.per_instance_args),
            "reuse_counts_cached_tokens": self.reuse_counts_cached_tokens,
        }

    @classmethod
    def from_json(cls, data: object) -> ProfileRules:
        """Rules from a document (a reviewer's `--profile FILE`); RulesError if malformed."""
        if not isinstance(data, dict):
            raise RulesError("the profile rules must be a JSON object")
        expected = set(_EMPTY.to_json())
        unknown = sorted(set(data) - expected)
        missing = sorted({"name", "version", "signals", "reset_proof"} - set(data))
        if unknown or missing:
            parts = ([f"unknown fields: {', '.join(unknown)}"] if unknown else []) + (
                [f"missing fields: {', '.join(missing)}"] if missing else []
            )
            raise RulesError("; ".join(parts))
        name, version = data["name"], data["version"]
        if not isinstance(name, str) or not _NAME.match(name):
            raise RulesError("name must be a short lowercase name")
        if not isinstance(version, str) or not version:
            raise RulesError("version must be a non-empty string")
        signals_doc = data["signals"]
        if not isinstance(signals_doc, dict) or set(signals_doc) - set(_SIGNAL_FIELDS):
            raise RulesError(f"signals must be an object with {', '.join(_SIGNAL_FIELDS)}")
        signals = CacheSignals(**{k: _refs(signals_doc.get(k, []), k) for k in _SIGNAL_FIELDS})
        try:
            reset = ResetProof(data["reset_proof"])
        except ValueError:
            raise RulesError(
                "reset_proof must be one of " + ", ".join(p.value for p in ResetProof)
            ) from None
        opt_out = data.get("opt_out_fields")
        if opt_out is not None and (not isinstance(opt_out, dict) or not opt_out):
            raise RulesError("opt_out_fields must be null or a non-empty object")
        can_disable = data.get("can_disable_cache", True)
        if not isinstance(can_disable, bool):
            raise RulesError("can_disable_cache must be true or false")
        top_k = data.get("logprobs_top_k")
        if top_k is not None and (
            isinstance(top_k, bool) or not isinstance(top_k, int) or not 2 <= top_k <= 20
        ):
            raise RulesError("logprobs_top_k must be null or an integer from 2 to 20")
        return cls(
            name=name,
            version=version,
            signals=signals,
            reset_proof=reset,
            cache_off_args=_strings(data.get("cache_off_args", []), "cache_off_args"),
            cached_tokens_pointer=_pointer(
                data.get("cached_tokens_pointer", _EMPTY.cached_tokens_pointer), False
            ),
            prompt_tokens_pointer=_pointer(
                data.get("prompt_tokens_pointer", _EMPTY.prompt_tokens_pointer), False
            ),
            cache_enabled_pointer=_pointer(data.get("cache_enabled_pointer"), True),
            cache_entries_pointer=_pointer(data.get("cache_entries_pointer"), True),
            opt_out_fields=opt_out,
            can_disable_cache=can_disable,
            logprobs_top_k=top_k,
            miss_reason_prefix=_optional_name(data.get("miss_reason_prefix")),
            last_miss_reason_pointer=_pointer(data.get("last_miss_reason_pointer"), True),
            server_name=_optional_string(data.get("server_name")),
            toggle_prefixes=_strings(data.get("toggle_prefixes", []), "toggle_prefixes"),
            has_stats=_flag(data.get("has_stats", False), "has_stats"),
            per_instance_args=_strings(data.get("per_instance_args", []), "per_instance_args"),
            reuse_counts_cached_tokens=_flag(
                data.get("reuse_counts_cached_tokens", False), "reuse_counts_cached_tokens"
            ),
        )


_SIGNAL_FIELDS = ("hits", "reuse", "lookups", "inserts", "paths", "misses")
# Signals added since bundles first carried their rules: a copy without one is older.
_ADDED_SIGNALS = ("misses",)


def _refs(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(
        isinstance(v, str) and _COUNTER_REF.match(v) for v in value
    ):
        raise RulesError(f"signals.{where} must be a list of metric:NAME or stats:FIELD")
    return tuple(value)


def _optional_name(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", value):
        raise RulesError("miss_reason_prefix must be null or a stats field prefix")
    return value


def _optional_string(value: object) -> str | None:
    if value is not None and not isinstance(value, str):
        raise RulesError("server_name must be null or a string")
    return value


def _flag(value: object, where: str) -> bool:
    if not isinstance(value, bool):
        raise RulesError(f"{where} must be true or false")
    return value


def _strings(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise RulesError(f"{where} must be a list of strings")
    return tuple(value)


def _pointer(value: object, nullable: bool) -> Any:
    if value is None and nullable:
        return None
    if not isinstance(value, str) or not (value == "" or value.startswith("/")):
        raise RulesError(f"{value!r} is not a JSON pointer")
    return value


_EMPTY = ProfileRules(
    name="x", version="0", signals=CacheSignals(), reset_proof=ResetProof.NEXT_COLD_REQUEST,
    cache_off_args=(),
)  # fmt: skip
