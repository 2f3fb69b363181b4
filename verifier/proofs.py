"""The proof rules of EVIDENCE.md: which arm each request is proven to have been served in."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from verifier.model import Arm
from verifier.records import Record, Snapshot, TelemetryMap


@dataclass(frozen=True)
class CounterDelta:
    ref: str
    before: float | None
    after: float | None

    @property
    def delta(self) -> float | None:
        if self.before is None or self.after is None:
            return None
        return self.after - self.before


@dataclass(frozen=True)
class RequestProof:
    """What the telemetry of one request proves about its claimed arm."""

    record: Record
    cached_tokens: int | None  # None: unknown (absent), never read as zero
    prompt_tokens: int | None
    hit_advanced: bool | None  # None: the server has no hit counter, or it was not recorded
    store_advanced: bool | None
    backwards: tuple[str, ...]  # counters that went backwards: telemetry unusable
    failed: str | None  # why the request is left out of the comparison
    capped: bool
    proven: bool
    reason: str  # one line: why the arm is proven, or why not

    @property
    def arm(self) -> Arm:
        return self.record.claimed_arm

    @property
    def comparable(self) -> bool:
        return self.proven and self.failed is None


def _as_int(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value) if float(value).is_integer() else None


def _deltas(refs: Iterable[str], before: Snapshot, after: Snapshot) -> list[CounterDelta]:
    return [CounterDelta(ref, before.counter(ref), after.counter(ref)) for ref in refs]


def _advanced(deltas: Sequence[CounterDelta]) -> bool | None:
    """True if any counter moved forward, False if all were read and none did, else None."""
    known = [d.delta for d in deltas if d.delta is not None]
    if any(d > 0 for d in known):
        return True
    if deltas and len(known) == len(deltas):
        return False
    return None


def counter_deltas(record: Record, refs: Iterable[str]) -> list[CounterDelta]:
    return _deltas(refs, record.before, record.after)


def prove_request(
    record: Record,
    telemetry: TelemetryMap,
    *,
    server_disabled: bool,
    opt_out_fields: dict[str, object],
    previous: Record | None,
) -> RequestProof:
    """Apply the proof rule of the request's claimed arm to its recorded telemetry.

    `previous` is the request before it on the same server process, for counters that
    must not go backwards between requests either.
    """
    failed: str | None = None
    if record.http_status != 200:
        failed = f"HTTP status {record.http_status}" if record.http_status else "no HTTP answer"
    elif record.output_hash is None:
        failed = "no output hash"

    cached = _as_int(record.response_value(telemetry.cached_tokens_pointer))
    prompt = _as_int(record.response_value(telemetry.prompt_tokens_pointer))
    all_refs = (
        telemetry.hit_counters
        + telemetry.reuse_counters
        + telemetry.store_counters
        + telemetry.path_counters
    )
    backwards = [
        d.ref for d in _deltas(all_refs, record.before, record.after) if (d.delta or 0) < 0
    ]
    if previous is not None:
        between = _deltas(all_refs, previous.after, record.before)
        backwards += [
            f"{d.ref} (since the previous request)" for d in between if (d.delta or 0) < 0
        ]
    hit = _advanced(_deltas(telemetry.hit_counters, record.before, record.after))
    store = _advanced(_deltas(telemetry.store_counters, record.before, record.after))
    reuse = _advanced(_deltas(telemetry.reuse_counters, record.before, record.after))
    capped = record.finish_reason == "length"

    def verdict(proven: bool, reason: str) -> RequestProof:
        return RequestProof(
            record, cached, prompt, hit, store, tuple(backwards), failed, capped, proven, reason
        )

    if failed is not None:
        return verdict(False, f"request failed: {failed}")
    if backwards:
        return verdict(False, "a counter went backwards: " + ", ".join(backwards))

    arm = record.claimed_arm
    if arm is Arm.WARM:
        if cached is None:
            return verdict(False, "cached_tokens is absent: a hit is unknown, not proven")
        if prompt is None:
            return verdict(False, "prompt_tokens is absent")
        if not 0 < cached < prompt:
            return verdict(False, f"cached_tokens {cached} is not in (0, {prompt})")
        if telemetry.hit_counters and hit is not True:
            missing = hit is None
            return verdict(
                False,
                "the hit counter was not recorded" if missing else "the hit counter did not move",
            )
        return verdict(True, f"{cached} of {prompt} prompt tokens from the cache; hit counted")

    if arm is Arm.COLD:
        if record.preceded_by not in ("server-start", "cache-reset"):
            return verdict(False, "no reset or fresh server right before it")
        entries = _as_int(record.before.stat(telemetry.cache_entries_pointer))
        if telemetry.cache_entries_pointer and entries not in (None, 0):
            return verdict(False, f"the cache held {entries} entries before it: reset not proven")
        if cached is None:
            return verdict(False, "cached_tokens is absent: a miss is unknown, not proven")
        if cached != 0:
            return verdict(False, f"cached_tokens is {cached}, not 0: the reset did not clear it")
        if hit is True or reuse is True:
            return verdict(False, "a cache hit was counted")
        if telemetry.hit_counters and hit is None:
            return verdict(False, "the hit counter was not recorded: no miss shown")
        after = "fresh server" if record.preceded_by == "server-start" else "proven reset"
        return verdict(True, f"{after}; 0 cached tokens; no hit counted")

    if arm is Arm.REQUEST_DISABLED:
        body = record.request_body
        missing_fields = [k for k, v in opt_out_fields.items() if body.get(k) != v]
        if missing_fields:
            return verdict(False, "the request lacks the opt-out " + ", ".join(missing_fields))
        if cached is None:
            return verdict(False, "cached_tokens is absent: a miss is unknown, not proven")
        if cached != 0:
            return verdict(False, f"cached_tokens is {cached}, not 0")
        if hit is True or reuse is True:
            return verdict(False, "a cache hit was counted")
        if store is True:
            return verdict(False, "the cache store was looked up or written")
        if telemetry.hit_counters and hit is None:
            return verdict(False, "the hit counter was not recorded: no miss shown")
        return verdict(True, "opted out; 0 cached tokens; no hit, no store access")

    # Arm.SERVER_DISABLED
    if telemetry.cache_enabled_pointer is not None:
        enabled = record.before.stat(telemetry.cache_enabled_pointer)
        if enabled is not False:
            return verdict(False, "the server did not report its cache disabled")
        how = "server reports its cache disabled"
    elif server_disabled:
        how = "server started with its cache off (it has no cache-state report)"
    else:
        return verdict(False, "the server neither reports nor was started with its cache off")
    if cached not in (None, 0):
        return verdict(False, f"cached_tokens is {cached}")
    if hit is True or reuse is True or store is True:
        return verdict(False, "a cache counter advanced")
    return verdict(True, how + "; no cached tokens; no cache counter advanced")


def prove_all(
    records: Sequence[Record],
    telemetry: TelemetryMap,
    disabled_instances: dict[str, frozenset[int]],
    opt_out_fields: dict[str, object],
) -> list[RequestProof]:
    """Prove every record, in condition and sequence order."""
    proofs = []
    previous: dict[tuple[str, int], Record] = {}
    for record in sorted(records, key=lambda r: (r.condition, r.sequence)):
        key = (record.condition, record.server_instance)
        proofs.append(
            prove_request(
                record,
                telemetry,
                server_disabled=record.server_instance
                in disabled_instances.get(record.condition, frozenset()),
                opt_out_fields=opt_out_fields,
                previous=previous.get(key),
            )
        )
        previous[key] = record
    return proofs
