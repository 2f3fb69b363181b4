"""The plain proof rules, as `verifier.proofs` was before its fast paths: the tests' reference.

`test_proofs_fast.py` checks that `verifier.proofs` proves exactly what this module proves.
Only the parts the fast paths changed, and those that call them, are kept here (the moves of
a request, the readings of its signals, the names in its reasons, the proof itself, a
snapshot's counters and samples); every definition `verifier.proofs` still has word for
word, and that uses nothing changed, is imported from it.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import pytest

from verifier import classify, records
from verifier.checks import context
from verifier.classify import ClassTelemetry, _delta
from verifier.jsonio import json_key
from verifier.model import Arm
from verifier.profiles.rules import CacheSignals, ProfileRules
from verifier.proofs import (
    _CAP_FIELDS,
    RequestProof,
    _cache_state_disagrees,
    _is_count,
    _not_said_on,
    _reset_shown,
    _short,
    _Verdict,
    as_count,
    counter_deltas,
    limited_otherwise,
    request_failed,
)
from verifier.records import Record, Snapshot


def at_cap(record: Record) -> bool:
    """`verifier.proofs._at_cap` as it was: the caps listed, then their least (and a body
    that limits its replies otherwise, `limited_otherwise`, shared)."""
    body = record.request_body
    if limited_otherwise(body):
        return True
    raw_caps = [body[name] for name in _CAP_FIELDS if body.get(name) is not None]
    if not raw_caps:
        return False
    caps = [as_count(raw) for raw in raw_caps]
    used = as_count(record.response_value("/usage/completion_tokens"))
    if used is None or any(cap is None for cap in caps):
        return True
    return used >= min(cap for cap in caps if cap is not None)


def miss_reason_refs(record: Record, rules: ProfileRules | None) -> tuple[str, ...]:
    """The server's own miss-reason counters in a record's stats (e.g. mlxcel reject_*)."""
    prefix = rules.miss_reason_prefix if rules is not None else None
    if prefix is None:
        return ()
    names = record.before.stat_names(prefix) | record.after.stat_names(prefix)
    return tuple(f"stats:{name}" for name in sorted(names))


def miss_reasons(record: Record, rules: ProfileRules) -> str | None:
    """Why the server says a lookup missed, from its own counters: shown, never a proof."""
    moved = [
        f"{_short(d.ref).removeprefix('stats ')} +{d.delta:g}"
        for d in counter_deltas(record, miss_reason_refs(record, rules))
        if d.delta
    ]
    last = record.after.stat(rules.last_miss_reason_pointer)
    if isinstance(last, str) and last:
        moved.append(f"last reason {last[:80]!r}")
    return ("the server says why it missed: " + ", ".join(moved)) if moved else None


def _names(refs: Iterable[str]) -> str:
    return ", ".join(_short(r) for r in refs)


@dataclass(frozen=True)
class _Readings:
    """The profile's cache signals across one request: which moved, which stayed, which
    were not recorded."""

    moved: tuple[str, ...]
    still: tuple[str, ...]
    unread: tuple[str, ...]

    @classmethod
    def of(cls, refs: Sequence[str], across: _Moves) -> _Readings:
        moved: list[str] = []
        still: list[str] = []
        unread: list[str] = []
        seen: set[str] = set()
        for ref in refs:
            if ref in seen:  # as the dict of moves by reference did: each one once
                continue
            seen.add(ref)
            m = across(ref)
            if m is None:
                unread.append(ref)
                continue
            if any(x > 0 for x in m):
                moved.append(ref)
            if all(x == 0 for x in m):
                still.append(ref)
        return cls(tuple(moved), tuple(still), tuple(unread))


class _Moves:
    """_moves() between two snapshots, each counter worked out once: a request's proof
    asks for the same counters across it (or since the request before) several times."""

    def __init__(self, before: Snapshot, after: Snapshot, unborn: Sequence[str] = ()) -> None:
        self.before = before
        self.after = after
        self.unborn = unborn
        self.known: dict[str, list[float] | None] = {}

    def __call__(self, ref: str) -> list[float] | None:
        known = self.known
        if ref not in known:
            moves = _moves(ref, self.before, self.after)
            if moves is None and ref in self.unborn:
                moves = _from_zero(ref, self.before, self.after)
            known[ref] = moves
        return known[ref]

    def fell(self, ref: str) -> bool:
        """Whether any sample of the counter went down (False when it was not recorded)."""
        moves = self(ref)
        if moves:
            for x in moves:
                if x < 0:
                    return True
        return False


def _moves(ref: str, before: Snapshot, after: Snapshot) -> list[float] | None:
    """How far each sample of a counter moved (a metric family sample by sample, so that
    one sample's rise cannot hide behind another's fall); None when it was not recorded."""
    if ref.startswith("metric:"):
        old, new = before.samples(ref), after.samples(ref)
        if not old or not new:
            return None
        return [new.get(k, 0.0) - old.get(k, 0.0) for k in sorted(old.keys() | new.keys())]
    old_value, new_value = before.counter(ref), after.counter(ref)
    return None if old_value is None or new_value is None else [new_value - old_value]


def _from_zero(ref: str, before: Snapshot, after: Snapshot) -> list[float] | None:
    """A counter its server creates on first use, not yet created before the request: from
    zero, where both snapshots' metrics were read and the one before lacks it."""
    if before.metrics is None or after.metrics is None or before.samples(ref):
        return None
    return list(after.samples(ref).values())


def _contradiction(cached: int | None, hit_evidence: _Readings) -> str | None:
    """Signals of one request that disagree on whether the cache supplied tokens."""
    says_hit = list(hit_evidence.moved) + (["cached_tokens"] if cached else [])
    says_miss = list(hit_evidence.still) + (["cached_tokens"] if cached == 0 else [])
    if says_hit and says_miss:
        return (
            f"the cache signals disagree: {_names(says_hit)} show a hit, "
            f"{_names(says_miss)} show none"
        )
    return None


LABEL = r'[A-Za-z_][A-Za-z0-9_]*="([^"\\\n]|\\[\\"n])*"'  # as capture writes a label


def prove_request(
    record: Record,
    rules: ProfileRules | None,
    *,
    server_disabled: bool,
    previous: Record | None,
    no_rules_reason: str = "no profile rules apply",
    attached: bool = False,
    unborn: Sequence[str] = (),
    unborn_since: Sequence[str] = (),
    absent_is_zero: bool = False,
) -> RequestProof:
    """Apply the proof rule of the request's claimed arm to its recorded telemetry.

    `server_disabled` says the record's server instance is declared cache-off with the
    profile's flag in its command line; `previous` is the request before it on the same
    server instance, for counters that must not move between requests; `unborn` and
    `unborn_since`, the lazily created counters its server had not created before it and
    before the request before it; `absent_is_zero`, that its server leaves a count of
    cached tokens that is zero out of its answer.
    """
    failed: str | None = None
    failed = request_failed(record)
    capped = record.finish_reason not in ("stop", "tool_calls", "function_call") or at_cap(record)

    def proof(
        proven: bool,
        reason: str,
        cached: int | None = None,
        prompt: int | None = None,
        contradiction: str | None = None,
        bad: tuple[str, ...] = (),
    ) -> RequestProof:
        return RequestProof(
            record, cached, prompt, failed, capped, proven, reason, contradiction, bad,
            tuple(unborn),
        )  # fmt: skip

    if failed is not None:
        return proof(False, f"request failed: {failed}")
    if rules is None:
        return proof(False, no_rules_reason)

    raw_cached = record.response_value(rules.cached_tokens_pointer)
    raw_prompt = record.response_value(rules.prompt_tokens_pointer)
    cached, prompt = as_count(raw_cached), as_count(raw_prompt)
    bad = tuple(
        pointer
        for pointer, raw, value in (
            (rules.cached_tokens_pointer, raw_cached, cached),
            (rules.prompt_tokens_pointer, raw_prompt, prompt),
        )
        if raw is not None and value is None
    )
    if bad:
        return proof(False, "a token count is not an integer in 0..2^53", bad=bad)

    def verdict(proven: bool, reason: str, contradiction: str | None = None) -> RequestProof:
        return proof(proven, reason, cached, prompt, contradiction)

    signals: CacheSignals = rules.signals
    everything = signals.all
    bad_counters = tuple(
        f"/telemetry/{side}: {ref}"
        for side, snapshot in (("before", record.before), ("after", record.after))
        for ref in everything
        if (
            ((value := snapshot.counter(ref)) is not None and not _is_count(value))
            or not all(_is_count(v) for v in plain_samples(snapshot.metrics, ref).values())
        )
    )
    if bad_counters:
        return proof(
            False, "a cache counter is not a whole number >= 0", cached, prompt, bad=bad_counters
        )

    odd = [
        key
        for snapshot in (record.before, record.after)
        for key in snapshot.metrics or ()
        if re.fullmatch(rf"[A-Za-z_:][A-Za-z0-9_:]*(\{{{LABEL}(,{LABEL})*\}})?", key) is None
    ]
    if odd:
        return verdict(
            False,
            f"the telemetry holds a metric key that is no Prometheus sample's name and labels "
            f"({odd[0][:80]!r}): a cache counter written under it would not be read as its "
            "server wrote it",
        )

    across = _Moves(record.before, record.after, unborn)
    backwards = [ref for ref in everything if across.fell(ref)]
    moved_between: list[str] = []
    if previous is not None:
        since = _Moves(previous.after, record.before, unborn_since)
        backwards += [
            f"{ref} (since the previous request)" for ref in everything if since.fell(ref)
        ]
        moved_between = [ref for ref in signals.store_access if any(since(ref) or [])]
    if backwards:
        return verdict(
            False, "a counter went backwards on the same server: " + ", ".join(backwards)
        )
    if moved_between:
        return verdict(
            False,
            f"{_names(moved_between)} moved between this request and the one before it "
            "on the same server: something else used the cache",
        )
    if record.preceded_by == "server-start" or (previous is None and not attached):
        started = [
            ref
            for ref in signals.store_access
            if any((record.before.samples(ref) or {ref: record.before.counter(ref) or 0}).values())
        ]
        if started:
            return verdict(
                False,
                f"a fresh server whose counters do not start at zero ({_names(started)}): "
                "something used it before this request",
            )
    if prompt is None:
        return verdict(False, "prompt_tokens is absent: the prompt may not have been the same")

    hit_evidence = _Readings.of(signals.hit_evidence, across)
    quiet = hit_evidence.still and not hit_evidence.moved and not hit_evidence.unread
    holder = record.response_value(rules.cached_tokens_pointer.rpartition("/")[0])
    if holder is None and absent_is_zero and quiet:
        cached = 0
    contradiction = _contradiction(cached, hit_evidence) or _cache_state_disagrees(
        record, rules, cached
    )
    if contradiction is not None:
        return verdict(False, contradiction, contradiction)

    arm = record.claimed_arm
    if arm is not Arm.SERVER_DISABLED:
        off = _not_said_on(record, rules.cache_enabled_pointer)
        if off:
            return verdict(
                False,
                f"a {arm} request is served with the cache on, and the server's stats do not "
                f"say it is ({rules.cache_enabled_pointer} not true {' and '.join(off)} it)",
            )
    if arm is Arm.WARM:
        warm = _prove_warm(
            across, signals, cached, prompt, verdict, rules.reuse_counts_cached_tokens
        )
        why = None if warm.proven else miss_reasons(record, rules)
        return warm if why is None else replace(warm, reason=f"{warm.reason}; {why}")
    if arm is Arm.COLD:
        return _prove_cold(record, rules, hit_evidence, cached, verdict)
    if arm is Arm.REQUEST_DISABLED:
        return _prove_opt_out(record, across, rules, cached, verdict)
    return _prove_cache_off(record, across, rules, server_disabled, cached, verdict)


def _prove_warm(
    across: _Moves,
    signals: CacheSignals,
    cached: int | None,
    prompt: int,
    verdict: _Verdict,
    reuse_is_tokens: bool = False,
) -> RequestProof:
    if cached is None:
        return verdict(False, "cached_tokens is absent: a hit is unknown, not proven")
    if not 0 < cached < prompt:
        return verdict(False, f"cached_tokens {cached} is not in (0, {prompt})")
    needed = _Readings.of(signals.hits + signals.reuse + signals.lookups, across)
    if reuse_is_tokens and not needed.unread:
        reused = sum(sum(across(ref) or []) for ref in signals.reuse)
        if reused != cached:
            return verdict(
                False,
                f"the reuse counter moved by {reused:g}, the response says {cached} cached "
                "tokens: the telemetry disagrees",
                f"reuse counter +{reused:g} vs cached_tokens {cached}",
            )
    if needed.unread:
        return verdict(False, f"{_names(needed.unread)} not recorded: the hit is not proven")
    if needed.still:
        return verdict(False, f"{_names(needed.still)} did not move: the hit is not proven")
    missed = _Readings.of(signals.misses, across)
    if missed.unread:
        return verdict(False, f"{_names(missed.unread)} not recorded: no miss ruled out")
    if missed.moved:
        return verdict(
            False,
            f"{_names(missed.moved)} moved: the server counted a miss, and the hit is not proven",
            f"a miss counted ({_names(missed.moved)}) beside the hit",
        )
    shown = (
        f"; advanced: {_names(needed.moved)}"
        if needed.moved
        else ("; the profile defines no cache counter to confirm it")
    )
    return verdict(True, f"{cached} of {prompt} prompt tokens from the cache" + shown)


def _prove_cold(
    record: Record,
    rules: ProfileRules,
    hit_evidence: _Readings,
    cached: int | None,
    verdict: _Verdict,
) -> RequestProof:
    if record.preceded_by == "server-start":
        how = "fresh server"
    elif record.preceded_by == "cache-reset":
        ok, how = _reset_shown(record, rules)
        if not ok:
            return verdict(False, how)
    else:
        return verdict(False, "no reset or fresh server right before it")
    if cached is None:
        return verdict(False, "cached_tokens is absent: a miss is unknown, not proven")
    if cached != 0:
        return verdict(False, f"cached_tokens is {cached}, not 0: the cache supplied tokens")
    if hit_evidence.unread:
        return verdict(False, f"{_names(hit_evidence.unread)} not recorded: no miss shown")
    still = f"; did not move: {_names(hit_evidence.still)}" if hit_evidence.still else ""
    return verdict(True, f"{how}; 0 cached tokens{still}")


def _prove_opt_out(
    record: Record, across: _Moves, rules: ProfileRules, cached: int | None, verdict: _Verdict
) -> RequestProof:
    opt_out = rules.opt_out_fields
    if opt_out is None:
        return verdict(False, f"the {rules.key} profile has no per-request opt-out")
    body = record.request_body
    missing = [k for k, v in opt_out.items() if k not in body or json_key(body[k]) != json_key(v)]
    if missing:
        return verdict(False, "the request lacks the opt-out " + ", ".join(missing))
    if cached is None:
        return verdict(False, "cached_tokens is absent: a miss is unknown, not proven")
    if cached != 0:
        return verdict(False, f"cached_tokens is {cached}, not 0")
    fields = ", ".join(f"{k}: {json_key(v)}" for k, v in opt_out.items())
    return _untouched_store(
        record, across, rules, verdict, f"opted out ({fields}); 0 cached tokens"
    )


def _prove_cache_off(
    record: Record,
    across: _Moves,
    rules: ProfileRules,
    server_disabled: bool,
    cached: int | None,
    verdict: _Verdict,
) -> RequestProof:
    if not rules.can_disable_cache:
        return verdict(False, f"the {rules.key} profile cannot turn the cache off")
    if not server_disabled:
        flag = " ".join(rules.cache_off_args)
        return verdict(
            False, f"the server is not declared cache-off with {flag} in its command line"
        )
    how = f"started with {' '.join(rules.cache_off_args)}"
    if rules.cache_enabled_pointer is not None:
        if record.before.cache_stats is None or record.after.cache_stats is None:
            return verdict(False, "the server's cache state was not read before and after")
        if record.before.stat(rules.cache_enabled_pointer) is not False:
            return verdict(False, "the server did not report its cache disabled")
        if record.after.stat(rules.cache_enabled_pointer) is not False:
            return verdict(False, "the server did not report its cache disabled after it")
        how += ", reports its cache disabled"
    if cached not in (None, 0):
        return verdict(False, f"cached_tokens is {cached}")
    shown = "no cached tokens" if cached is None else "0 cached tokens"
    return _untouched_store(record, across, rules, verdict, f"{how}; {shown}")


def _untouched_store(
    record: Record, across: _Moves, rules: ProfileRules, verdict: _Verdict, proven: str
) -> RequestProof:
    """The rule of both controls: every store signal read, and none moved; no miss counted
    (a miss is a lookup that found nothing, which neither control makes); and the cache's
    entries, where its stats count them, not more after the request than before it."""
    access = _Readings.of(rules.signals.store_access, across)
    if access.unread:
        return verdict(False, f"{_names(access.unread)} not recorded: no store access not shown")
    if access.moved:
        return verdict(False, f"{_names(access.moved)} moved: the cache was used")
    missed = _Readings.of(rules.signals.misses, across)
    if missed.unread:
        return verdict(False, f"{_names(missed.unread)} not recorded: no lookup ruled out")
    if missed.moved:
        return verdict(
            False, f"{_names(missed.moved)} moved: the server counted a miss, so it looked up"
        )
    pointer = rules.cache_entries_pointer
    if pointer is not None:
        before = as_count(record.before.stat(pointer))
        after = as_count(record.after.stat(pointer))
        if before is not None and after is not None and after > before:
            return verdict(
                False, f"the cache's entries ({pointer}) rose from {before} to {after}: it stored"
            )
    still = f"; did not move: {_names(access.still)}" if access.still else ""
    return verdict(True, proven + still)


def prove_all(
    records: Sequence[Record],
    rules: ProfileRules | None,
    disabled_instances: dict[str, frozenset[int]],
    *,
    no_rules_reason: str = "no profile rules apply",
    attached: bool = False,
    lazy: Sequence[str] = (),
    zero_when_absent: dict[str, frozenset[int]] | None = None,
) -> list[RequestProof]:
    """Prove every record, in condition and sequence order.

    `disabled_instances` holds, per condition, the instances declared cache-off whose
    command line shows the profile's flag; `lazy`, the counters the server creates on
    first use; `zero_when_absent`, per condition, the instances whose answers leave out a
    count of cached tokens that is zero.
    """
    proofs = []
    ordered = sorted(records, key=lambda r: (r.condition, r.sequence))
    written = [
        ref for ref in lazy if any(r.before.samples(ref) or r.after.samples(ref) for r in ordered)
    ]

    def unborn(index: int) -> list[str]:
        """The lazy counters no snapshot of the record's server held, each read, up to its
        `before` (the record at `index`)."""
        if not written:
            return []
        record = ordered[index]
        mine = [
            r for r in ordered[: index + 1]
            if (r.condition, r.server_instance) == (record.condition, record.server_instance)
        ]  # fmt: skip
        snapshots = [s for r in mine[:-1] for s in (r.before, r.after)] + [record.before]
        return [
            ref for ref in written
            if all(s.metrics is not None and not s.samples(ref) for s in snapshots)
        ]  # fmt: skip

    previous: dict[tuple[str, int], int] = {}
    for index, record in enumerate(ordered):
        key = (record.condition, record.server_instance)
        before = previous.get(key)
        proofs.append(
            prove_request(
                record,
                rules,
                server_disabled=record.server_instance
                in disabled_instances.get(record.condition, frozenset()),
                previous=ordered[before] if before is not None else None,
                no_rules_reason=no_rules_reason,
                attached=attached,
                unborn=unborn(index),
                unborn_since=unborn(before) if before is not None else [],
                absent_is_zero=record.server_instance
                in (zero_when_absent or {}).get(record.condition, frozenset()),
            )
        )
        previous[key] = index
    return proofs


# --- the class telemetry and the one-cache-state rule, as `verifier.classify` had them ---


def uneven_cache(proofs: Sequence[RequestProof], rules: ProfileRules | None) -> str | None:
    """Requests of one arm were served in one cache state: their cached tokens and every
    cache counter's delta must agree. When they do not, the arm is not one state."""
    refs = rules.signals.store_access if rules is not None else ()
    for arm in Arm:
        members = [p for p in proofs if p.arm is arm]
        seen: dict[str, set[float | None]] = {"cached_tokens": {p.cached_tokens for p in members}}
        for ref in refs:
            seen[ref] = {_unborn_delta(p, ref) for p in members}
        for name, values in seen.items():
            if len(values) > 1:
                shown = ", ".join(sorted("absent" if v is None else f"{v:g}" for v in values))
                what = name if name == "cached_tokens" else f"{name.partition(':')[2]} moved by"
                return f"the {arm} requests did not meet the same cache state: {what} {shown}"
    return None


def _unborn_delta(proof: RequestProof, ref: str) -> float | None:
    """`_delta`, or of a lazily created counter its server had not created, from zero."""
    delta = _delta(proof.record, ref)
    if delta is None and ref in proof.unborn:
        moves = _from_zero(ref, proof.record.before, proof.record.after)
        return None if moves is None else math.fsum(moves)
    return delta


def class_telemetry(
    proofs: Sequence[RequestProof], labels: dict[str, str], rules: ProfileRules | None
) -> tuple[ClassTelemetry, ...]:
    grouped: dict[tuple[str, Arm], list[RequestProof]] = defaultdict(list)
    for proof in proofs:
        grouped[(labels[proof.record.output_hash or ""], proof.arm)].append(proof)
    result = []
    refs = rules.signals.store_access if rules is not None else ()
    paths = rules.signals.paths if rules is not None else ()
    arm_order = list(Arm)
    for label, arm in sorted(grouped, key=lambda k: (len(k[0]), k[0], arm_order.index(k[1]))):
        members = grouped[(label, arm)]
        deltas: dict[str, set[float]] = defaultdict(set)
        for proof in members:
            record = proof.record
            for ref in (*refs, *miss_reason_refs(record, rules)):
                delta = _unborn_delta(proof, ref)
                if delta is not None:
                    deltas[ref].add(delta)
            for ref in paths:
                before = record.before.samples(ref)
                for key, after in record.after.samples(ref).items():
                    deltas[key].add(after - before.get(key, 0.0))
        cached = sorted({p.cached_tokens for p in members}, key=lambda v: (v is None, v or 0))
        result.append(
            ClassTelemetry(
                label,
                arm,
                len(members),
                tuple(cached),
                {k: tuple(sorted(v)) for k, v in sorted(deltas.items())},
            )
        )
    return tuple(result)


# --- a snapshot's counters and samples, read by a scan of every key each time ---


def plain_samples(metrics: dict[str, float] | None, ref: str) -> dict[str, float]:
    source, _, name = ref.partition(":")
    if source != "metric" or metrics is None:
        return {}
    return {k: v for k, v in metrics.items() if k == name or k.startswith(name + "{")}


def plain_counter(snapshot: Snapshot, ref: str) -> float | None:
    source, _, name = ref.partition(":")
    if source == "metric":
        if snapshot.metrics is None:
            return None
        values = list(plain_samples(snapshot.metrics, ref).values())
        return math.fsum(values) if values else None
    if source == "stats":
        value = (snapshot.cache_stats or {}).get(name)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return float(value)
    return None


def _snapshot_samples(self: Snapshot, ref: str) -> dict[str, float]:
    return plain_samples(self.metrics, ref)


def _snapshot_counters(self: Snapshot, refs: tuple[str, ...]) -> list[float | None]:
    return [plain_counter(self, ref) for ref in refs]


# --- the snapshot's family index and prefixed names, worked out for each snapshot ---


def family_index(keys: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    families: dict[str, list[str]] = {}
    for key in keys:
        families.setdefault(key.partition("{")[0], []).append(key)
    return {family: tuple(members) for family, members in families.items()}


def prefixed(prefix: str, keys: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(key for key in keys if key.startswith(prefix))


def use_plain_paths(patch: pytest.MonkeyPatch) -> None:
    """Verify with this module's proofs and class telemetry instead of the fast paths."""
    patch.setattr(context, "prove_all", prove_all)
    patch.setattr(classify, "miss_reason_refs", miss_reason_refs)
    patch.setattr(
        classify, "_uneven_cache", lambda proofs, rules, store_deltas: uneven_cache(proofs, rules)
    )
    patch.setattr(
        classify,
        "_class_telemetry",
        lambda proofs, labels, rules, store_deltas: class_telemetry(proofs, labels, rules),
    )
    patch.setattr(records, "_family_index", family_index)
    patch.setattr(records, "_prefixed", prefixed)
    patch.setattr(records.Snapshot, "counter", plain_counter)
    patch.setattr(records.Snapshot, "counters", _snapshot_counters)
    patch.setattr(records.Snapshot, "samples", _snapshot_samples)
