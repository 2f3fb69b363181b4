"""The proof rules of EVIDENCE.md: which arm each request is proven to have been served in.

The rules come from the tool's own server profile (`verifier.profiles`), never from the
bundle. Every signal the profile defines must agree: a signal it defines but the record
lacks is not evidence either way, and signals that disagree make the record's telemetry
contradict itself.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from verifier.jsonio import json_key
from verifier.model import Arm
from verifier.profiles.base import ServerLimits
from verifier.profiles.rules import CacheSignals, ProfileRules, ResetProof
from verifier.records import _UNSET, Record, Snapshot

MAX_COUNT = 2**53  # the documented range of every count that enters a proof: 0..2^53


@dataclass(frozen=True)
class CounterDelta:
    """One counter before and after a request (None where it was not recorded)."""

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
    cached_tokens: int | None  # None: unknown (absent or not a count), never read as zero
    prompt_tokens: int | None
    failed: str | None  # why the request is left out of the comparison
    capped: bool
    proven: bool
    reason: str  # one line: why the arm is proven, or why not
    contradiction: str | None = None  # set when the record's own signals disagree
    bad_numbers: tuple[str, ...] = ()  # response pointers whose value is not a count
    # the lazily created counters its server had not created before it (`lazy_until`)
    unborn: tuple[str, ...] = ()

    def store_deltas(self, refs: tuple[str, ...]) -> tuple[float | None, ...]:
        """How far each counter of `refs` moved across the request (`Snapshot.deltas`), a
        lazily created one its server had not created before it from zero (`_from_zero`)."""
        before, after = self.record.before, self.record.after
        deltas = before.deltas(after, refs)
        if not self.unborn:
            return deltas
        return tuple(
            _sum(_from_zero(ref, before, after)) if delta is None and ref in self.unborn else delta
            for ref, delta in zip(refs, deltas, strict=True)
        )

    @property
    def arm(self) -> Arm:
        return self.record.claimed_arm

    @property
    def comparable(self) -> bool:
        return self.proven and self.failed is None


def miss_reason_refs(record: Record, rules: ProfileRules | None) -> tuple[str, ...]:
    """The server's own miss-reason counters in a record's stats (e.g. mlxcel reject_*)."""
    prefix = rules.miss_reason_prefix if rules is not None else None
    if prefix is None:
        return ()
    names = record.before.stat_names(prefix) | record.after.stat_names(prefix)
    return tuple(f"stats:{name}" for name in sorted(names)) if names else ()


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


_CAP_FIELDS = ("max_tokens", "max_completion_tokens", "n_predict")
# The finish reasons of a reply that ended by itself: at a stop (an end token, a stop
# string) or with its tool calls. Any other (`length`; `abort`, `error`, `content_filter`;
# none at all) may have cut the reply short: it is compared as a capped one.
FINISHED = frozenset({"stop", "tool_calls", "function_call"})


def unfinished(record: Record) -> bool:
    """Whether the reply does not say it ended by itself (`FINISHED`)."""
    return record.finish_reason not in FINISHED


def _at_cap(record: Record) -> bool:
    """A reply that used its whole token budget is capped, whatever its finish_reason says:
    finish_reason is not in the output hash, so a bundle could relabel it. Where the body
    sets a cap, a reply that does not count what it used (no completion_tokens, or one
    that is not an integer: 22.0, "22") cannot show it stopped short of it: capped too. So
    is every reply whose body sets a limit that is no count of its tokens (`_OTHER_LIMITS`):
    its count cannot show whether the limit cut it."""
    if limited_otherwise(record.request_body):
        return True
    least, some, uncounted = _body_caps(record)
    if not some:
        return False
    used = completion_count(record)
    if used is None or uncounted or least is None:
        return True
    return used >= least


# Limits of a body that llama-server stops a reply at and calls a limit's stop (`length`),
# whatever it counted: a time to generate, past a line break (`t_max_predict_ms`), and an
# indentation a new line must have (`n_indent`); each only where it is above zero.
_OTHER_LIMITS = ("t_max_predict_ms", "n_indent")


def limited_otherwise(body: Mapping[str, object]) -> bool:
    """Whether a request body sets a limit in `_OTHER_LIMITS`: any value but none, false or a
    number of zero or less (one that is not a number may be read as one: a limit)."""
    for name in _OTHER_LIMITS:
        value = body.get(name)
        if value is None or value is False:
            continue
        if isinstance(value, int | float) and not isinstance(value, bool) and value <= 0:
            continue
        return True
    return False


def _body_caps(record: Record) -> tuple[int | None, bool, bool]:
    """The least cap the body sets that is a count, whether it sets any, and whether one is
    not a count. Every name servers read a cap by, and the least of them: which one a
    server reads first differs (llama.cpp n_predict before max_tokens, SGLang and vLLM
    max_completion_tokens before max_tokens), so the least is the cap it may have used."""
    body = record.request_body
    least: int | None = None
    some = uncounted = False
    for name in _CAP_FIELDS:  # (one pass: read for every record)
        raw = body.get(name)
        if raw is None:
            continue
        some = True
        cap = as_count(raw)
        if cap is None:
            uncounted = True
        elif least is None or cap < least:
            least = cap
    return least, some, uncounted


def used_another_cache(
    proofs: list[RequestProof], counters: Sequence[str], *, attached: bool = False
) -> list[RequestProof]:
    """The proofs, with each proven request that claims the cache was not used (cold,
    opt-out, cache-off) left unproven where one of `counters` (a cache beside the rules'
    signals: `ServerProfile.other_hit_counters`) says it may have been (`_other_doubts`).
    `attached`: the harness did not start the servers (as `prove_request` reads it)."""
    if not counters:
        return proofs
    wanted = {i for i, proof in enumerate(proofs) if proof.proven and proof.arm is not Arm.WARM}
    doubts = _other_doubts([proof.record for proof in proofs], counters, wanted, attached)
    found = []
    for index, proof in enumerate(proofs):
        if index in doubts:
            said = doubts[index]
            reason = "; ".join(why for why, _ in said) + (
                ": the server says another cache supplied state"
                if any(rose for _, rose in said)
                else ": whether another cache supplied state is not known"
            )
            proof = replace(proof, proven=False, reason=reason)
        found.append(proof)
    return found


def _other_doubts(
    records: Sequence[Record], counters: Sequence[str], wanted: Collection[int], attached: bool
) -> dict[int, list[tuple[str, bool]]]:
    """By index in `records`, of those `wanted`, what each of `counters` says against a
    request's not using another cache, and whether it says the cache was used (a rise):
    - it rose across the request;
    - it rose between the request and the one before or after it on its server (a use
      nobody recorded, or this request's, its snapshot taken early);
    - it stands above zero in a fresh server's first snapshot (a use before this request,
      as `prove_request` reads the rules' signals);
    - a sample of it (a stats field) that one of the server's snapshots before held is
      missing after the request (a count the server keeps, taken out where it would have
      told), or a value of it is no count (`"1"`, `true`: read as nothing);
    - it went down anywhere on the server (5 after a warm request, 1 after the cold one
      hid the cold one's rise), across a request or between two.
    Honest snapshots of one server carry each sample of such a counter from the first that
    does on, as a count, and it moves only while a request is served. (Two snapshots that
    hold the same documents, `unmoved_since`, show no counter rising between them.)"""
    doubts: dict[int, list[tuple[str, bool]]] = {}
    keys = {ref: _held_key(ref) for ref in counters}
    servers: dict[tuple[str, int], list[int]] = {}
    for index, record in enumerate(records):
        servers.setdefault((record.condition, record.server_instance), []).append(index)
    for indices in servers.values():
        # Those no snapshot of the server holds say nothing of it (no value, no move)
        refs = [
            ref
            for ref in counters
            if any(
                _held(keys[ref], s) for i in indices for s in (records[i].before, records[i].after)
            )
        ]
        if not refs:
            continue
        seen: dict[str, set[str]] = {ref: set() for ref in refs}  # samples held so far
        fell: dict[str, str] = {}  # where each that went down first did
        for at, index in enumerate(indices):
            record = records[index]
            said = doubts.setdefault(index, []) if index in wanted else None
            fresh = record.preceded_by == "server-start" or (at == 0 and not attached)
            for ref in refs:
                name, key = _short(ref), keys[ref]
                seen[ref].update(_held(key, record.before))
                moves = _other_moves(ref, record.before, record.after)
                if moves and min(moves) < 0:
                    fell.setdefault(ref, f"across {record.file}")
                if said is None:
                    continue
                if fresh and (start := max(_other_values(ref, record.before), default=0)) > 0:
                    said.append((f"{name} at {start:g} in a fresh server's first snapshot", True))
                if moves and max(moves) > 0:
                    said.append((f"{name} +{max(moves):g} across it", True))
                if not seen[ref].issubset(_held(key, record.after)):
                    said.append(
                        (
                            f"{name} is missing after it, where its server's snapshots before "
                            "held it",
                            False,
                        )
                    )
                if not (_counts(key, record.before) and _counts(key, record.after)):
                    said.append((f"{name} is not a count in its snapshots", False))
            for ref in refs:
                seen[ref].update(_held(keys[ref], record.after))
            if at + 1 == len(indices):
                continue
            later = indices[at + 1]
            after = records[later].before
            if not unmoved_since(record.after, after):
                for ref in refs:
                    moves = _other_moves(ref, record.after, after)
                    if moves and min(moves) < 0:
                        fell.setdefault(ref, f"after {record.file}")
                    if moves and max(moves) > 0:
                        # (where the snapshot before lacks it, a failed read perhaps, what
                        # rose since the last one that held it is not known)
                        rose = bool(_held(keys[ref], record.after))
                        how = f"+{max(moves):g}" if rose else f"first held, at {max(moves):g},"
                        rise = f"{_short(ref)} {how} between"
                        if index in wanted:
                            doubts[index].append(
                                (f"{rise} it and the next request on its server", rose)
                            )
                        if later in wanted:
                            doubts.setdefault(later, []).append(
                                (f"{rise} the request before it on its server and it", rose)
                            )
        for ref, where in fell.items():  # (a rise may hide behind a fall: none is read)
            for index in indices:
                if index in wanted:
                    doubts[index].append(
                        (f"{_short(ref)} went down on its server ({where})", False)
                    )
    return {index: said for index, said in doubts.items() if said}


def _held(key: str, snapshot: Snapshot) -> tuple[str, ...]:
    """What a snapshot holds of a counter beside the rules' signals (`_held_key`): the keys
    of a family's samples, or a stats field's name where the stats have it (a number or
    not: `_counts`)."""
    if key.startswith("metric:"):
        return tuple(snapshot.samples(key))
    name = key.partition(":")[2]
    return (name,) if key.startswith("stats:") and name in (snapshot.cache_stats or {}) else ()


def _counts(key: str, snapshot: Snapshot) -> bool:
    """Whether each value a snapshot holds of the counter (`_held`) is a count."""
    if key.startswith("metric:"):
        return all(map(_is_count, snapshot.samples(key).values()))
    stats, name = snapshot.cache_stats or {}, key.partition(":")[2]
    if name not in stats:
        return True
    value = stats[name]  # (null too is no count)
    return as_count(value) is not None or (type(value) is float and _is_count(value))


def _other_values(ref: str, snapshot: Snapshot) -> list[float]:
    """The values of a counter beside the rules' signals that a snapshot holds (of a
    reference that selects by a label, the samples it selects)."""
    selected = _SELECTED.match(ref)
    if selected is None:
        if ref.startswith("metric:"):
            return list(snapshot.samples(ref).values())
        value = snapshot.counter(ref)
        return [] if value is None else [value]
    return list(_chosen(selected, snapshot).values())


def _held_key(ref: str) -> str:
    """What `_held` reads of a counter: of a reference that selects by a label, its family;
    otherwise the reference."""
    selected = _SELECTED.match(ref)
    return selected.group(1) if selected else ref


def _other_moves(ref: str, before: Snapshot, after: Snapshot) -> list[float] | None:
    """How far each sample of a counter beside the rules' signals moved across a request
    (`counter_moves`, or `_appeared` where it was absent before); of a reference that
    selects by one label (`_SELECTED`), only the samples it selects."""
    selected = _SELECTED.match(ref)
    if selected is None:
        return counter_moves(ref, before, after) or _appeared(ref, before, after)
    old, new = _chosen(selected, before), _chosen(selected, after)
    if not new:
        return None
    if not old:  # absent before, there after: moved from zero (_appeared)
        return list(new.values())
    return [new.get(k, 0.0) - old.get(k, 0.0) for k in sorted(old.keys() | new.keys())]


# `metric:FAMILY{label="value"}` (the family's samples with that label value) or
# `metric:FAMILY{label!="value"}` (those without it: other values, or no such label).
_SELECTED = re.compile(r'^(metric:[^{]+)\{([A-Za-z_][A-Za-z0-9_]*)(!?=)"([^"\\]*)"\}$')


def _chosen(selected: re.Match[str], snapshot: Snapshot) -> dict[str, float]:
    """The samples of a snapshot that a reference selecting by one label reads (`_SELECTED`
    matched it)."""
    family, label, how, value = selected.groups()
    return _having(snapshot.samples(family), label, how == "=", value)


def _having(samples: Mapping[str, float], label: str, equal: bool, value: str) -> dict[str, float]:
    """The samples whose `label` is `value` (`equal`), or is not (a sample without the label
    is not). A label written twice in one key is read both ways: either value selects it."""
    pattern = _label_pattern(label)
    found = {}
    for key, sample in samples.items():
        said = [m.group(1) for m in pattern.finditer(key, max(key.find("{"), 0))]
        if (value in said) if equal else (not said or any(v != value for v in said)):
            found[key] = sample
    return found


@functools.lru_cache(maxsize=16)
def _label_pattern(label: str) -> re.Pattern[str]:
    """A label `label="..."` in a sample's key, its value (as written, escapes kept) read."""
    return re.compile(r"[{,]\s*" + re.escape(label) + r'\s*=\s*"((?:[^"\\]|\\.)*)"')


def _sum(moves: list[float] | None) -> float | None:
    return None if moves is None else math.fsum(moves)


def _from_zero(ref: str, before: Snapshot, after: Snapshot) -> list[float] | None:
    """The moves of a counter that its server creates on first use and had not created
    before this request (`ServerProfile.lazy_counters`, `lazy_until`): absent from a
    snapshot whose metrics were read, it stood at zero (SGLang creates its counter of
    cached tokens at its first request with cached tokens, so a fresh server's cold
    requests, and a cache-off server's every one, have none). Absent after too, it did
    not move; there after, it moved from zero. None where a snapshot's metrics were not
    read, or the counter is there before (then it is read as it is)."""
    if before.metrics is None or after.metrics is None or before.samples(ref):
        return None
    return list(after.samples(ref).values())


def _appeared(ref: str, before: Snapshot, after: Snapshot) -> list[float] | None:
    """The values of a counter absent before a request and there after it (None where it is
    not so), read as its moves from zero. Across one request the server is one instance (a
    restart is another instance), so a counter it registers on first use (as labelled and
    lazily created Prometheus counters appear) was at zero while absent, and one above zero
    after has moved; a counter taken out of the before snapshot hides where it stood, and
    is read the same way: either way the request is not shown to have used no other
    cache."""
    if ref.startswith("metric:"):
        new = after.samples(ref)
        return list(new.values()) if new and not before.samples(ref) else None
    value = after.counter(ref)
    return [value] if value is not None and before.counter(ref) is None else None


def least_cap(record: Record) -> int | None:
    """The least cap the body sets by any name that is a count (None: none)."""
    return _body_caps(record)[0]


def capped_by_servers(
    proofs: list[RequestProof], limits: Mapping[tuple[str, int], ServerLimits]
) -> list[RequestProof]:
    """The proofs, with each reply the limits of its server may have cut counted as capped
    (`ServerLimits.capped`: llama-server's own `-n`, or a context it filled), whatever its
    body's cap and its finish_reason say."""
    none = ServerLimits()
    if all(limit == none for limit in limits.values()):
        return proofs
    return [
        replace(proof, capped=True)
        if not proof.capped
        and limits.get((proof.record.condition, proof.record.server_instance), none).capped(
            proof.prompt_tokens, completion_count(proof.record)
        )
        else proof
        for proof in proofs
    ]


def completion_count(record: Record) -> int | None:
    """The completion tokens the answer counts (`usage.completion_tokens`), as a count."""
    return as_count(record.response_value("/usage/completion_tokens"))


def request_failed(record: Record) -> str | None:
    """Why the request is left out of the comparison as one that failed, or None. A record
    that says its request errored is one, whatever its status and body say."""
    if record.http_status != 200:
        return f"HTTP status {record.http_status}" if record.http_status else "no HTTP answer"
    if record.error is not None:
        return f"the record says it errored: {record.error[:120]}"
    if record.output_hash is None:
        return "no output hash"
    return None


def _is_count(value: float) -> bool:
    return 0 <= value <= MAX_COUNT and float(value).is_integer()


def _all_counts(snapshot: Snapshot, refs: tuple[str, ...]) -> bool:
    """Whether every counter of `refs` the snapshot records is a count (_is_count), and
    each sample of a metric family too: the proofs read the samples one by one (which
    rose, which fell), and 1.25 + 0.75 is a whole number that counts nothing."""
    for value in snapshot.counters(refs):
        if value is not None and not (0 <= value <= MAX_COUNT and float(value).is_integer()):
            return False
    # (a family of one sample is its sum, checked above; `samples` of a stats field is {})
    return not snapshot.many_samples() or all(
        all(map(_is_count, snapshot.samples(ref).values())) for ref in refs
    )


def counts(snapshot: Snapshot, ref: str) -> bool:
    """Whether the counter and each of its samples is a count (_all_counts of one reference)."""
    value = snapshot.counter(ref)
    return (value is None or _is_count(value)) and all(
        _is_count(sample) for sample in snapshot.samples(ref).values()
    )


def as_count(value: object) -> int | None:
    """A count that may enter a proof: an integer in 0..2^53, else None."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if 0 <= value <= MAX_COUNT else None


def counter_deltas(record: Record, refs: Iterable[str]) -> list[CounterDelta]:
    """Each counter across one request, a metric family summed over its samples."""
    return [
        CounterDelta(ref, record.before.counter(ref), record.after.counter(ref)) for ref in refs
    ]


def _short(ref: str) -> str:
    source, colon, name = ref.partition(":")
    if not colon:
        return ref  # a response field such as cached_tokens
    return f"stats {name}" if source == "stats" else name


def _names(refs: Iterable[str]) -> str:
    return _joined_names(tuple(refs))


@functools.lru_cache(maxsize=256)
def _joined_names(refs: tuple[str, ...]) -> str:
    """The names of counters for a reason: the same few lists of the profile's counters in
    every record's reason, so each is written once."""
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
        for ref in dict.fromkeys(refs):  # as the dict of moves by reference did: each once
            how = across.how(ref)
            if how is None:
                unread.append(ref)
                continue
            if how & _ROSE:
                moved.append(ref)
            if not how & _NONZERO:
                still.append(ref)
        return cls(tuple(moved), tuple(still), tuple(unread))


# How a counter moved, one bit each (_Moves.how): any sample rose (x > 0), any fell (x < 0),
# any moved at all (x != 0, which a NaN would do without rising or falling).
_ROSE, _FELL, _NONZERO = 1, 2, 4


def _how(moves: Iterable[float] | None) -> int | None:
    """The bits of _ROSE, _FELL and _NONZERO that the moves of one counter show; None when
    the counter was not recorded."""
    if moves is None:
        return None
    how = 0
    for x in moves:
        if x > 0:
            how |= _ROSE | _NONZERO
        elif x < 0:
            how |= _FELL | _NONZERO
        elif x != 0:
            how |= _NONZERO
    return how


def _how_between(ref: str, before: Snapshot, after: Snapshot) -> int | None:
    """_how(counter_moves(ref, before, after)) without sorting: which way a sample moved does
    not depend on the order the samples are taken in, so a family whose samples have the
    same keys on both sides is read in its own order. What the snapshots worked out
    already (their samples and counters) is read straight from their memos: this runs
    for every counter of every request."""
    if ref.startswith("metric:"):
        old = before._samples_.get(ref)
        if old is None:
            old = before.samples(ref)
        new = after._samples_.get(ref)
        if new is None:
            new = after.samples(ref)
        if not old or not new:
            return None
        if old.keys() != new.keys():  # a sample came or went: the moves as counter_moves has them
            return _how(counter_moves(ref, before, after))
        return _how([new[key] - was for key, was in old.items()])
    old_value = before._memo_.get(ref, _UNSET)
    if old_value is _UNSET:
        old_value = before.counter(ref)
    new_value = after._memo_.get(ref, _UNSET)
    if new_value is _UNSET:
        new_value = after.counter(ref)
    if old_value is None or new_value is None:
        return None
    return _how((new_value - old_value,))


class _Moves:
    """How each counter moved between two snapshots, worked out once: a request's proof
    asks for the same counters across it (or since the request before) several times.
    Which way each moved is what the proof reads; the moves themselves (counter_moves) are
    worked out only where it sums them."""

    def __init__(
        self,
        before: Snapshot,
        after: Snapshot,
        refs: Iterable[str] = (),
        unborn: Collection[str] = (),
    ) -> None:
        self.before = before
        self.after = after
        self.unborn = unborn  # lazily created counters not yet created (`_from_zero`)
        self.known: dict[str, list[float] | None] = {}
        # the counters the proof will ask for in any case, worked out here in one go
        hows: dict[str, int | None] = {}
        fell = False
        for ref in refs:
            if ref not in hows:
                how = hows[ref] = self._how(ref)
                if how is not None and how & _FELL:
                    fell = True
        self.hows = hows
        self.fell_any = fell  # whether any counter of `refs` went down

    def __call__(self, ref: str) -> list[float] | None:
        known = self.known
        if ref not in known:
            moves = counter_moves(ref, self.before, self.after)
            if moves is None and ref in self.unborn:
                moves = _from_zero(ref, self.before, self.after)
            known[ref] = moves
        return known[ref]

    def _how(self, ref: str) -> int | None:
        how = _how_between(ref, self.before, self.after)
        if how is None and ref in self.unborn:
            return _how(_from_zero(ref, self.before, self.after))
        return how

    def how(self, ref: str) -> int | None:
        """_how(self(ref)), worked out once."""
        hows = self.hows
        if ref not in hows:
            hows[ref] = self._how(ref)
        return hows[ref]

    def fell(self, ref: str) -> bool:
        """Whether any sample of the counter went down (False when it was not recorded)."""
        how = self.how(ref)
        return how is not None and bool(how & _FELL)

    def fallen(self, refs: Iterable[str]) -> list[str]:
        """The counters of `refs` that went down."""
        return [ref for ref in refs if self.fell(ref)]

    def moved(self, refs: Iterable[str]) -> list[str]:
        """The counters of `refs` that moved at all, either way."""
        return [ref for ref in refs if (how := self.how(ref)) is not None and how & _NONZERO]


def counter_moves(ref: str, before: Snapshot, after: Snapshot) -> list[float] | None:
    """How far each sample of a counter moved (a metric family sample by sample, so that
    one sample's rise cannot hide behind another's fall); None when it was not recorded."""
    if ref.startswith("metric:"):
        old, new = before.samples(ref), after.samples(ref)
        if not old or not new:
            return None
        if len(old) == 1 and len(new) == 1:  # a family of one sample (nearly every one)
            ((key, was),) = old.items()
            if key in new:
                return [new[key] - was]
        return [new.get(k, 0.0) - old.get(k, 0.0) for k in sorted(old.keys() | new.keys())]
    old_value, new_value = before.counter(ref), after.counter(ref)
    return None if old_value is None or new_value is None else [new_value - old_value]


def unmoved_since(earlier: Snapshot, later: Snapshot) -> bool:
    """Whether two snapshots hold the same documents, so that no counter moved between
    them: for `later`'s counters all counts (prove_request has checked), the moves
    _Moves(earlier, later) finds are all zero (a count is finite, so x - x is 0), and
    none went down or moved. Telling that by comparing two dicts costs less than
    working the moves out; nearly every request's snapshot before it is its server's
    snapshot after the request before."""
    return earlier.metrics == later.metrics and earlier.cache_stats == later.cache_stats


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


@functools.cache
def _same_surface(signals: CacheSignals) -> tuple[tuple[str, str], ...]:
    """Each (hit, lookup) pair of counters that one surface keeps (both stats, or both
    metrics)."""
    return tuple(
        (hit, lookup)
        for hit in signals.hits
        for lookup in signals.lookups
        if hit.partition(":")[0] == lookup.partition(":")[0]
    )


def _not_said_on(record: Record, pointer: str | None) -> list[str]:
    """The sides of the request ("before", "after") whose stats say the cache is anything
    but on at `pointer` (`false`, 0, "false"...: not `true`). null, or no such field, says
    nothing; nor does a profile that reads no cache state in its stats (no pointer)."""
    if pointer is None:
        return []
    return [
        side
        for side, snapshot in (("before", record.before), ("after", record.after))
        if (value := snapshot.stat(pointer)) is not None and value is not True
    ]


def _cache_state_disagrees(record: Record, rules: ProfileRules, cached: int | None) -> str | None:
    """The server's own account of its cache against itself and the request: every source
    of cache evidence must agree. More hits than lookups on one surface; and where the stats
    document shows this request using the cache (a stats hit, reuse, lookup or insert
    counter rose), the same document not saying the cache is on, or saying it held no entry
    before tokens were served from it. (Where the stats show no use, their other fields are
    not read against the request: mlxcel's stats do not count a model-owned cache state,
    SERVERS.md.)"""
    # Hits and lookups that one surface counts (two stats fields, or two metrics): one
    # request cannot hit more often than it looked up. (Surfaces are not compared with each
    # other: mlxcel's stats and metrics count differently by design, SERVERS.md.)
    for hit, lookup in _same_surface(rules.signals):
        hits, looked = record.before.deltas(record.after, (hit, lookup))
        if hits is not None and looked is not None and hits > looked:
            return (
                f"{hit} rose by {hits:g} in a request that {lookup} counts {looked:g} "
                "lookups for: more hits than lookups"
            )
    used = _stats_counters(rules.signals)
    if not any(d is not None and d > 0 for d in record.before.deltas(record.after, used)):
        return None
    off = _not_said_on(record, rules.cache_enabled_pointer)
    if off:
        return (
            f"the server's stats do not say its cache is on ({rules.cache_enabled_pointer} not "
            f"true {' and '.join(off)} the request), yet their own counters show the request "
            "used it"
        )
    entries = rules.cache_entries_pointer
    if cached and entries is not None and _is_zero(record.before.stat(entries)):
        return (
            f"{cached} cached tokens from a cache that held no entry before the request "
            f"({entries} 0), by the stats that count its use"
        )
    return None


def _is_zero(value: object) -> bool:
    """0 or 0.0 (not false: a count is never a boolean)."""
    return type(value) in (int, float) and value == 0


@functools.cache
def _stats_counters(signals: CacheSignals) -> tuple[str, ...]:
    """The counters of the cache's use the stats document keeps: hits, reuse, lookups and
    inserts (a cold request inserts what it computed)."""
    used = signals.hits + signals.reuse + signals.lookups + signals.inserts
    return tuple(ref for ref in used if ref.startswith("stats:"))


def prove_request(
    record: Record,
    rules: ProfileRules | None,
    *,
    server_disabled: bool,
    previous: Record | None,
    no_rules_reason: str = "no profile rules apply",
    attached: bool = False,
    unborn: Collection[str] = (),
    unborn_since: Collection[str] = (),
    absent_is_zero: bool = False,
) -> RequestProof:
    """Apply the proof rule of the request's claimed arm to its recorded telemetry.

    `server_disabled` says the record's server instance is declared cache-off with the
    profile's flag in its command line; `previous` is the request before it on the same
    server instance, for counters that must not move between requests; `unborn`, the
    lazily created counters its server had not created before it (`lazy_until`), and
    `unborn_since`, those it had not created before the request before it;
    `absent_is_zero`, that its server leaves a count of cached tokens that is zero out of
    its answer (vLLM: `ServerProfile.omits_no_cached_tokens`), so that an answer without
    one counts none, where every counter of reuse was read and stood still.
    """
    failed = request_failed(record)
    capped = unfinished(record) or _at_cap(record)
    held = tuple(unborn)

    def proof(
        proven: bool,
        reason: str,
        cached: int | None = None,
        prompt: int | None = None,
        contradiction: str | None = None,
        bad: tuple[str, ...] = (),
    ) -> RequestProof:
        return RequestProof(
            record, cached, prompt, failed, capped, proven, reason, contradiction, bad, held
        )

    if failed is not None:
        return proof(False, f"request failed: {failed}")
    if rules is None:
        return proof(False, no_rules_reason)

    raw_cached = record.response_value(rules.cached_tokens_pointer)
    raw_prompt = record.response_value(rules.prompt_tokens_pointer)
    cached, prompt = as_count(raw_cached), as_count(raw_prompt)
    if (cached is None and raw_cached is not None) or (prompt is None and raw_prompt is not None):
        bad = tuple(
            pointer
            for pointer, raw, value in (
                (rules.cached_tokens_pointer, raw_cached, cached),
                (rules.prompt_tokens_pointer, raw_prompt, prompt),
            )
            if raw is not None and value is None
        )
        return proof(False, "a token count is not an integer in 0..2^53", bad=bad)

    def verdict(proven: bool, reason: str, contradiction: str | None = None) -> RequestProof:
        return proof(proven, reason, cached, prompt, contradiction)

    signals: CacheSignals = rules.signals
    everything = signals.all
    if not _all_counts(record.before, everything) or not _all_counts(record.after, everything):
        bad_counters = tuple(
            f"/telemetry/{side}: {ref}"
            for side, snapshot in (("before", record.before), ("after", record.after))
            for ref in everything
            if not counts(snapshot, ref)
        )
        return proof(
            False, "a cache counter is not a whole number >= 0", cached, prompt, bad=bad_counters
        )

    odd = record.before.odd_key()
    if odd is None:
        odd = record.after.odd_key()
    if odd is not None:
        return verdict(
            False,
            f"the telemetry holds a metric key that is no Prometheus sample's name and labels "
            f"({odd[:80]!r}): a cache counter written under it would not be read as its "
            "server wrote it",
        )

    across = _Moves(record.before, record.after, everything, unborn)
    backwards = across.fallen(everything) if across.fell_any else []
    moved_between: list[str] = []
    if previous is not None and not unmoved_since(previous.after, record.before):
        since = _Moves(previous.after, record.before, everything, unborn_since)
        if since.fell_any:
            backwards += [f"{ref} (since the previous request)" for ref in since.fallen(everything)]
        moved_between = since.moved(signals.store_access)
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
    if (
        absent_is_zero
        and record.response_value(rules.cached_tokens_pointer.rpartition("/")[0]) is None
        and hit_evidence.still
        and not hit_evidence.moved
        and not hit_evidence.unread
    ):
        # (the object that holds the count left out; not one that holds no count, or null)
        cached = 0  # (what the answer leaves out, its server's own counters say: none)
    contradiction = _contradiction(cached, hit_evidence) or _cache_state_disagrees(
        record, rules, cached
    )
    if contradiction is not None:
        return verdict(False, contradiction, contradiction)

    arm = record.claimed_arm
    if arm is not Arm.SERVER_DISABLED:
        # Cold, warm and opt-out requests are all served with the cache on (EVIDENCE.md,
        # "Terms"), and every source of cache evidence must agree: stats that say it is off
        # show another arm than the one claimed (a cold baseline from a cache-off server).
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


class _Verdict(Protocol):
    def __call__(
        self, proven: bool, reason: str, contradiction: str | None = None
    ) -> RequestProof: ...


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


def _reset_shown(record: Record, rules: ProfileRules) -> tuple[bool, str]:
    """Whether the reset right before a cold request is proven, and how (or why not)."""
    if rules.reset_proof is ResetProof.STATS_ENTRIES:
        entries = as_count(record.before.stat(rules.cache_entries_pointer))
        if record.before.cache_stats is None or entries is None:
            return False, "no cache stats were read after the reset: the reset is not proven"
        if entries != 0:
            return False, f"the cache held {entries} entries after the reset: reset not proven"
        return True, "reset proven by the stats read after it (0 entries)"
    return True, "reset proven by this request's 0 cached tokens"


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
    missing = [k for k, v in opt_out.items() if k not in body or not _same_json(body[k], v)]
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


# Values whose JSON text is the same exactly when they are == and of the same type (not a
# float: -0.0 == 0.0, yet their texts differ; not an int, whose text json_key may refuse
# to write where == compares it).
_PLAIN_JSON = (bool, str, type(None))


def _same_json(a: object, b: object) -> bool:
    """json_key(a) == json_key(b), without writing the text out for a bool, a string or
    null of the same type on both sides (an opt-out field is one of them)."""
    if type(a) is type(b) and type(a) in _PLAIN_JSON:
        return a == b
    return json_key(a) == json_key(b)


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
    lazy: Collection[str] = (),
    zero_when_absent: Mapping[str, frozenset[int]] | None = None,
) -> list[RequestProof]:
    """Prove every record, in condition and sequence order.

    `disabled_instances` holds, per condition, the instances declared cache-off whose
    command line shows the profile's flag; `lazy`, the profile's counters that its server
    creates on first use (`lazy_until`); `zero_when_absent`, per condition, the instances
    whose answers leave out a count of cached tokens that is zero (`prove_request`'s
    `absent_is_zero`).
    """
    proofs = []
    previous: dict[tuple[str, int], tuple[int, Record]] = {}
    ordered = sorted(records, key=lambda r: (r.condition, r.sequence))
    until = lazy_until(ordered, lazy) if lazy else {}
    for index, record in enumerate(ordered):
        key = (record.condition, record.server_instance)
        before = previous.get(key)
        proofs.append(
            prove_request(
                record,
                rules,
                server_disabled=record.server_instance
                in disabled_instances.get(record.condition, frozenset()),
                previous=before[1] if before is not None else None,
                no_rules_reason=no_rules_reason,
                attached=attached,
                unborn=[ref for ref, last in until.items() if index <= last.get(key, -1)],
                unborn_since=[
                    ref
                    for ref, last in until.items()
                    if before is not None and before[0] <= last.get(key, -1)
                ],
                absent_is_zero=zero_when_absent is not None
                and record.server_instance in zero_when_absent.get(record.condition, ()),
            )
        )
        previous[key] = (index, record)
    return proofs


def lazy_until(
    records: Sequence[Record], lazy: Collection[str]
) -> dict[str, dict[tuple[str, int], int]]:
    """Of each counter the server creates on first use (`lazy`), per server (condition,
    instance), the index (in `records`, in condition and sequence order) of the last
    request before which it had not created it: every snapshot of the server up to that
    request's `before` lacks it, and each was read. Only a counter that some snapshot of the
    bundle holds (the build writes it) is read so: one no snapshot holds may be of a build
    without it, and stays not recorded. A snapshot of a server that lacks the counter after
    one held it is no such request (it was taken out: not recorded)."""
    until: dict[str, dict[tuple[str, int], int]] = {}
    for ref in lazy:
        if not any(r.before.samples(ref) or r.after.samples(ref) for r in records):
            continue
        last: dict[tuple[str, int], int] = {}
        created: set[tuple[str, int]] = set()
        for index, record in enumerate(records):
            key = (record.condition, record.server_instance)
            if key in created:
                continue
            if record.before.metrics is None or record.before.samples(ref):
                created.add(key)  # (not read, or created: from here on read as it is)
                continue
            last[key] = index
            if record.after.metrics is None or record.after.samples(ref):
                created.add(key)
        until[ref] = last
    return until
