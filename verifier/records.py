"""Typed views of the public bundle's experiment and request records."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from verifier.jsonio import resolve_pointer
from verifier.model import Arm


@dataclass(frozen=True)
class TelemetryMap:
    """Where this server keeps each kind of cache evidence (from experiment.json)."""

    cached_tokens_pointer: str
    prompt_tokens_pointer: str
    hit_counters: tuple[str, ...]
    reuse_counters: tuple[str, ...]
    store_counters: tuple[str, ...]
    path_counters: tuple[str, ...]
    cache_enabled_pointer: str | None
    cache_entries_pointer: str | None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TelemetryMap:
        return cls(
            cached_tokens_pointer=data["cached_tokens_pointer"],
            prompt_tokens_pointer=data["prompt_tokens_pointer"],
            hit_counters=tuple(data["hit_counters"]),
            reuse_counters=tuple(data["reuse_counters"]),
            store_counters=tuple(data["store_counters"]),
            path_counters=tuple(data["path_counters"]),
            cache_enabled_pointer=data.get("cache_enabled_pointer"),
            cache_entries_pointer=data.get("cache_entries_pointer"),
        )


@dataclass(frozen=True)
class Snapshot:
    cache_stats: dict[str, Any] | None
    metrics: dict[str, float] | None

    def counter(self, ref: str) -> float | None:
        """The value of a counter reference (`metric:FAMILY` sums the family's samples)."""
        source, _, name = ref.partition(":")
        if source == "metric":
            if self.metrics is None:
                return None
            values = [v for k, v in self.metrics.items() if k == name or k.startswith(name + "{")]
            return float(sum(values)) if values else None
        if source == "stats":
            value = (self.cache_stats or {}).get(name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                return None
            return float(value)
        return None

    def samples(self, ref: str) -> dict[str, float]:
        """Every sample of a `metric:` family by its full key (labels included)."""
        source, _, name = ref.partition(":")
        if source != "metric" or self.metrics is None:
            return {}
        return {k: v for k, v in self.metrics.items() if k == name or k.startswith(name + "{")}

    def stat(self, pointer: str | None) -> Any:
        if pointer is None or self.cache_stats is None:
            return None
        try:
            return resolve_pointer(self.cache_stats, pointer)
        except KeyError:
            return None


@dataclass(frozen=True)
class Record:
    """One request of the public bundle, as read from records/<condition>/<seq>.json."""

    file: str
    condition: str
    sequence: int
    phase: str
    server_instance: int
    claimed_arm: Arm
    preceded_by: str
    request_body: dict[str, Any]
    http_status: int | None
    response: dict[str, Any] | None
    output_hash: str | None
    before: Snapshot
    after: Snapshot

    @classmethod
    def from_json(cls, file: str, data: dict[str, Any]) -> Record:
        telemetry = data["telemetry"]
        return cls(
            file=file,
            condition=data["condition"],
            sequence=data["sequence"],
            phase=data["phase"],
            server_instance=data["server_instance"],
            claimed_arm=Arm(data["claimed_arm"]),
            preceded_by=data["preceded_by"],
            request_body=data["request_body"],
            http_status=data["http_status"],
            response=data["response"],
            output_hash=data["output_hash"],
            before=Snapshot(telemetry["before"]["cache_stats"], telemetry["before"]["metrics"]),
            after=Snapshot(telemetry["after"]["cache_stats"], telemetry["after"]["metrics"]),
        )

    def response_value(self, pointer: str) -> Any:
        if self.response is None:
            return None
        try:
            return resolve_pointer(self.response, pointer)
        except KeyError:
            return None

    @property
    def finish_reason(self) -> str | None:
        value = self.response_value("/choices/0/finish_reason")
        return value if isinstance(value, str) else None

    @property
    def content(self) -> str | None:
        value = self.response_value("/choices/0/message/content")
        return value if isinstance(value, str) else None

    @property
    def reasoning(self) -> str | None:
        for pointer in ("/choices/0/message/reasoning_content", "/choices/0/message/reasoning"):
            value = self.response_value(pointer)
            if isinstance(value, str):
                return value
        return None


@dataclass(frozen=True)
class Condition:
    id: str
    label: str
    settings: dict[str, str]
    disabled_instances: frozenset[int]


@dataclass(frozen=True)
class Experiment:
    """The parts of experiment.json that the checks and the classifier use."""

    document: dict[str, Any]
    conditions: tuple[Condition, ...]
    telemetry: TelemetryMap
    opt_out_fields: dict[str, Any]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Experiment:
        conditions = tuple(
            Condition(
                id=c["id"],
                label=c.get("label") or ",".join(f"{k}={v}" for k, v in c["settings"].items()),
                settings=c["settings"],
                disabled_instances=frozenset(
                    s["instance"] for s in c["servers"] if s["cache_disabled"]
                ),
            )
            for c in data["conditions"]
        )
        return cls(
            document=data,
            conditions=conditions,
            telemetry=TelemetryMap.from_json(data["telemetry"]),
            opt_out_fields=dict(data.get("opt_out_fields") or {}),
        )
