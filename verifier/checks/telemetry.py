"""Per-request telemetry proofs: which claimed arms the recorded telemetry supports."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from verifier.checks.context import BundleContext
from verifier.model import Arm, Finding, Severity
from verifier.profiles.base import ServerLimits
from verifier.profiles.rules import ProfileRules
from verifier.proofs import (
    RequestProof,
    as_count,
    completion_count,
    counter_moves,
    counts,
    least_cap,
    unfinished,
    unmoved_since,
)
from verifier.records import Record, Snapshot

CHECK = "telemetry"


def _said(finish_reason: str | None) -> str:
    """A finish reason as a message quotes it (the bundle's text: quoted, and short)."""
    return "absent" if finish_reason is None else repr(finish_reason[:40])


def check_telemetry(ctx: BundleContext) -> Iterator[Finding]:
    proofs = ctx.proofs
    rules = ctx.rules
    limits = ctx.server_limits
    for proof in proofs:
        record = proof.record
        over = _over_cap(record, limits.get((record.condition, record.server_instance)))
        if over is not None:
            yield Finding(
                CHECK,
                Severity.ERROR,
                f"the reply counts more tokens than it was allowed: {over}",
                file=record.file,
                pointer="/response/usage/completion_tokens",
            )
        for pointer in proof.bad_numbers:
            yield Finding(
                CHECK,
                Severity.ERROR,
                "a number that enters a proof is not a whole number in 0..2^53",
                file=record.file,
                pointer=pointer if pointer.startswith("/telemetry") else "/response" + pointer,
            )
        if proof.contradiction is not None:
            yield Finding(
                CHECK,
                Severity.ERROR,
                f"the record's telemetry contradicts itself: {proof.contradiction}",
                file=record.file,
                pointer="/telemetry",
            )
            continue
        if proof.failed is not None and _carries_completion(record.response):
            yield Finding(
                CHECK,
                Severity.ERROR,
                f"a request marked failed ({proof.failed}) carries a completion: a failed "
                "request must not hide an output from the comparison",
                file=record.file,
                pointer="/http_status",
            )
        elif proof.failed is not None:
            yield Finding(
                CHECK,
                Severity.WARNING,
                f"the request failed ({proof.failed}): left out of the comparison",
                file=record.file,
                pointer="/http_status",
            )
        elif not proof.proven:
            yield Finding(
                CHECK,
                Severity.WARNING,
                f"claimed {record.claimed_arm} not proven: {proof.reason}",
                file=record.file,
                pointer="/telemetry",
            )
        for disagreement in _counts_disagree(record, _answered_cached(proof, rules)):
            yield Finding(
                CHECK,
                Severity.ERROR,
                f"the response's own counts disagree: {disagreement}",
                file=record.file,
                pointer="/response/timings",
            )
        for pointer, value in _not_counts(record.response):
            yield Finding(
                CHECK,
                Severity.ERROR,
                f"{_name(pointer)} is {value!r}, not a whole number in 0..2^53: the counts "
                "read against each other must be counts",
                file=record.file,
                pointer="/response" + pointer,
            )
        total = _total_disagrees(record)
        if total is not None:
            yield Finding(
                CHECK,
                Severity.ERROR,
                f"the response's own counts disagree: {total}",
                file=record.file,
                pointer="/response/usage/total_tokens",
            )
        if proof.capped:
            yield Finding(
                CHECK,
                Severity.WARNING,
                "finish_reason is length: the output hit the token cap and is truncated"
                if record.finish_reason == "length"
                else f"finish_reason is {_said(record.finish_reason)}, not stop or tool_calls: "
                "the reply may have been cut short, and is compared as one that was"
                if unfinished(record)
                else "the output may be truncated: it used every token its request or its "
                "server allowed (or does not count them), whatever its finish_reason says",
                file=record.file,
                pointer="/response/choices/0/finish_reason",
            )
    yield from _counters_kept(ctx)
    yield from _counters_counted(ctx)
    yield from _lacking_in_some(ctx)
    yield from _cache_state_said(ctx)
    yield from _cache_state_in_every_answer(ctx)
    yield from _stats_state_in_every_answer(ctx)
    yield from _reuse_within_lookups(ctx)
    yield from _undisclosed_work(ctx)
    yield from _busy_beside(ctx)
    yield from _work_counted(ctx)
    yield from _cached_tokens_counted(ctx)
    yield from _decodes_counted(ctx)
    yield from _seconds_counted(ctx)
    prompt_tokens: dict[int, list[str]] = {}
    for proof in proofs:
        if proof.failed is None and proof.prompt_tokens is not None:
            prompt_tokens.setdefault(proof.prompt_tokens, []).append(proof.record.file)
    if len(prompt_tokens) > 1:
        (common, _), *others = sorted(prompt_tokens.items(), key=lambda kv: -len(kv[1]))
        for value, files in others:
            for file in files:
                yield Finding(
                    CHECK,
                    Severity.WARNING,
                    "prompt_tokens differs from the other requests: the prompt was not the same",
                    file=file,
                    pointer="/usage/prompt_tokens",
                    expected=str(common),
                    actual=str(value),
                )


# A server that reports its own timings (llama.cpp's `timings`) counts the same tokens twice:
# each pair must agree, or one of them was edited (a reply cut at its cap made to look short,
# a cold request made to look warm).
_TWICE = (
    ("/timings/predicted_n", "/usage/completion_tokens"),
    ("/timings/cache_n", "/usage/prompt_tokens_details/cached_tokens"),
)


# The counts of an answer that `_counts_disagree` and `_decodes_counted` read, and that no
# other rule reads as a number (the proofs report cached_tokens and prompt_tokens that are not
# counts, `_total_disagrees` total_tokens): where one is there but is no count (65.0, "65"),
# the rules that read it would skip it, so it is an error of its own (EVIDENCE.md, "Numbers
# are bounded").
_NOT_COUNTED_ELSEWHERE = (
    ("timings", "prompt_n"),
    ("timings", "cache_n"),
    ("timings", "predicted_n"),
    ("usage", "completion_tokens"),
)


def _not_counts(response: object) -> Iterator[tuple[str, object]]:
    """The pointer and value of each of `_NOT_COUNTED_ELSEWHERE` that the response holds
    (not null) and that is no count (each read as `response_value` would find it)."""
    if not isinstance(response, dict):
        return
    for part, name in _NOT_COUNTED_ELSEWHERE:
        holder = response.get(part)
        if isinstance(holder, dict):
            value = holder.get(name)
            if value is not None and as_count(value) is None:
                yield f"/{part}/{name}", value


def _counts_disagree(record: Record, answered_cached: int | None) -> Iterator[str]:
    """The pairs of `_TWICE` that differ, and the prompt the server says it computed
    (`timings.prompt_n`) against what the answer says: the prompt less the tokens from the
    cache, counted by `timings.cache_n` or, where the timings leave that out, by the
    answer's own `answered_cached` (a forger who makes a cold request look warm, or the
    reverse, and drops cache_n, still leaves prompt_n as the server wrote it)."""
    if not isinstance(record.response_value("/timings"), dict):
        return
    count = {
        pointer: as_count(record.response_value(pointer))
        for pair in (*_TWICE, ("/timings/prompt_n", "/usage/prompt_tokens"))
        for pointer in pair
    }
    for one, other in _TWICE:
        if None not in (count[one], count[other]) and count[one] != count[other]:
            yield f"{_name(one)} is {count[one]}, {_name(other)} is {count[other]}"
    processed, cached = count["/timings/prompt_n"], count["/timings/cache_n"]
    said = count["/usage/prompt_tokens_details/cached_tokens"]
    if said is None and None not in (cached, answered_cached) and cached != answered_cached:
        # (a cache-off answer that leaves its cached_tokens out says none came from the cache)
        yield (
            f"timings.cache_n is {cached}, but the answer says {answered_cached} tokens came "
            "from the cache"
        )
    prompt = count["/usage/prompt_tokens"]
    if processed is None or prompt is None:
        return
    if cached is not None:
        if processed + cached != prompt:
            yield (
                f"timings.prompt_n {processed} and timings.cache_n {cached} are not "
                f"usage.prompt_tokens {prompt}"
            )
    elif answered_cached is not None and processed + answered_cached != prompt:
        yield (
            f"timings.prompt_n {processed} tokens computed, and {answered_cached} from the "
            f"cache by the answer, are not usage.prompt_tokens {prompt}"
        )


def _answered_cached(proof: RequestProof, rules: ProfileRules | None) -> int | None:
    """The tokens the answer says came from the cache: its cached_tokens, or 0 where a
    request of the server-disabled arm leaves them out (EVIDENCE.md: a missing
    cached_tokens is unknown, never zero, except in server-disabled). A cache-off answer
    that leaves the count out still says none came from the cache, and the server's own
    counters must agree with that (a count that is there but not a number stays unknown)."""
    if proof.cached_tokens is not None or proof.failed is not None or rules is None:
        return proof.cached_tokens
    record = proof.record
    if record.claimed_arm is not Arm.SERVER_DISABLED:
        return None
    return 0 if record.response_value(rules.cached_tokens_pointer) is None else None


def _lacking_in_some(ctx: BundleContext) -> Iterator[Finding]:
    """What one server build writes in every answer is in every answer: its timings' counts
    and times (llama.cpp's `timings.prompt_n`, `cache_n`, `predicted_n`, `prompt_ms`,
    `predicted_ms`) and `usage.total_tokens`. An answer without one that the others carry
    had it taken out, where a rule would have read it against the rest. Once a field.
    (Each answer's two objects read once, as `response_value` would find the fields: a
    field that is null is not there.)"""
    lacking: dict[tuple[str, str], list[Record]] = {field: [] for field in _WRITTEN_BY_EVERY_ANSWER}
    answers = 0
    for record in ctx.records:
        if record.http_status != 200:
            continue
        answers += 1
        response = record.response
        parts = (
            {name: response.get(name) for name in ("timings", "usage")}
            if isinstance(response, dict)
            else {}
        )
        for (part, name), records in lacking.items():
            holder = parts.get(part)
            if not isinstance(holder, dict) or holder.get(name) is None:
                records.append(record)
    for (part, name), records in lacking.items():
        if records and len(records) < answers:
            yield Finding(
                CHECK,
                Severity.ERROR,
                f"{len(records)} of {answers} answers lack {part}.{name}, which the others "
                "carry: one server build writes it in every answer or in none",
                file=records[0].file,
                pointer=f"/response/{part}/{name}",
            )


_WRITTEN_BY_EVERY_ANSWER = (
    ("timings", "prompt_n"),
    ("timings", "cache_n"),
    ("timings", "predicted_n"),
    # The times of the work (`consistency._server_seconds`): an answer without them would
    # skip the bound that the server worked no longer than its request took.
    ("timings", "prompt_ms"),
    ("timings", "predicted_ms"),
    ("usage", "total_tokens"),
)


def _over_cap(record: Record, limits: ServerLimits | None) -> str | None:
    """Why a reply's count of tokens is more than its request's or its server's cap allows
    (a server stops at the least of them: the counts, or the cap said, are not what it ran)."""
    used = completion_count(record)
    if used is None:
        return None
    body = least_cap(record)
    if body is not None and used > body:
        return f"{used} completion tokens, under a request cap of {body}"
    server = limits.reply_cap if limits is not None else None
    if server is not None and used > server:
        return f"{used} completion tokens, from a server started with a cap of {server}"
    return None


def _total_disagrees(record: Record) -> str | None:
    """`usage.total_tokens` is `prompt_tokens + completion_tokens` in every server's answer
    (llama.cpp, vLLM and SGLang write it so; every sample holds it): a total left as it
    was while the prompt or completion count was edited shows the edit."""
    usage = record.response_value("/usage")
    if not isinstance(usage, dict) or "total_tokens" not in usage:
        return None
    prompt, completion, total = (
        as_count(usage.get(name)) for name in ("prompt_tokens", "completion_tokens", "total_tokens")
    )
    if total is None:  # there, and not a count (773.0, "773", null): the total is not read
        return f"usage.total_tokens is {usage['total_tokens']!r}, not a whole number in 0..2^53"
    if prompt is None or completion is None or total == prompt + completion:
        return None
    return (
        f"usage.total_tokens {total} is not prompt_tokens {prompt} + completion_tokens {completion}"
    )


def _name(pointer: str) -> str:
    return pointer[1:].replace("/", ".")


def _carries_completion(response: object) -> bool:
    if not isinstance(response, dict):
        return False
    choices = response.get("choices")
    return isinstance(choices, list) and bool(choices)


def _names(refs: list[str]) -> str:
    return ", ".join(ref.removeprefix("metric:") for ref in refs)


def _counters_kept(ctx: BundleContext) -> Iterator[Finding]:
    """The counters the profile's rules read beyond its signals (`work_counters`,
    `cached_tokens_counter`, `decode_counter`, `seconds_counters`) are in every snapshot
    that holds the server's metrics: the server writes them in each /metrics answer, so a
    snapshot without one is one a rule could not read (a counter taken out where it moved,
    in one snapshot or in all). A snapshot without metrics (a read that failed) leaves its
    request unproven instead."""
    profile = ctx.profile
    if profile is None:
        return
    refs = (
        *profile.work_counters,
        *filter(None, (profile.cached_tokens_counter, profile.decode_counter)),
        *(ref for ref, _ in profile.seconds_counters),
    )
    if not refs:
        return
    for record in ctx.records:
        for side, snapshot in (("before", record.before), ("after", record.after)):
            if snapshot.metrics is None:
                continue
            lacking = [r for r, v in zip(refs, snapshot.counters(refs), strict=True) if v is None]
            if lacking:
                names = _names(lacking)
                yield Finding(
                    CHECK,
                    Severity.ERROR,
                    f"the server's metrics lack {names}, which it writes in every /metrics "
                    "answer: what it counted here cannot be read",
                    file=record.file,
                    pointer=f"/telemetry/{side}/metrics",
                )
                return  # once: the rest is the same edit


def _counters_counted(ctx: BundleContext) -> Iterator[Finding]:
    """The counters the profile's rules read beyond its signals (`_extra_counters`) are
    counts, sample by sample, that never go back on one server: across a request, and
    between one request and the next (EVIDENCE.md: "Numbers are bounded", and a counter
    that goes backwards without a restart makes the telemetry unusable). The proofs hold
    the signals to this; these are read by the cross-checks below, which would otherwise
    take -0.5 or a fall for a count. Once a record."""
    refs = _extra_counters(ctx)
    if not refs:
        return
    last: dict[tuple[str, int], Record] = {}
    for record in sorted(ctx.records, key=lambda r: (r.condition, r.sequence)):
        server = (record.condition, record.server_instance)
        previous = last.get(server)
        last[server] = record
        problem = None
        for side, snapshot in (("before", record.before), ("after", record.after)):
            bad = [ref for ref in refs if not counts(snapshot, ref)]
            if bad:
                problem = (
                    f"/telemetry/{side}/metrics",
                    (
                        f"{_names(bad)} is not a whole number >= 0 in every sample: a counter the "
                        "checks read must be a count"
                    ),
                )
                break
        if problem is None:
            fell = [ref for ref in refs if _fell(record.before, record.after, ref)]
            if fell:
                problem = "/telemetry", f"{_names(fell)} went down across this request"
        moved_since = previous is not None and not unmoved_since(previous.after, record.before)
        if problem is None and previous is not None and moved_since:
            fell = [ref for ref in refs if _fell(previous.after, record.before, ref)]
            if fell:
                problem = (
                    "/telemetry/before",
                    (
                        f"{_names(fell)} went down between {previous.file} and this request, on "
                        "the same server"
                    ),
                )
        if problem is not None:
            pointer, message = problem
            yield Finding(
                CHECK,
                Severity.ERROR,
                f"{message}: the telemetry is not usable",
                file=record.file,
                pointer=pointer,
            )


def _extra_counters(ctx: BundleContext) -> tuple[str, ...]:
    """The counters the profile's rules read beyond its signals, each once."""
    profile = ctx.profile
    if profile is None:
        return ()
    refs = (
        *profile.work_counters,
        *(ref for ref, _ in profile.counted_work),
        *filter(None, (profile.cached_tokens_counter, profile.decode_counter)),
    )
    return tuple(dict.fromkeys(refs))


def _fell(before: Snapshot, after: Snapshot, ref: str) -> bool:
    """Whether any sample of the counter went down from one snapshot to the other."""
    if ref.startswith("metric:"):  # a family of one sample on both sides (nearly every one)
        old, new = before.samples(ref), after.samples(ref)
        if len(old) == 1 and old.keys() == new.keys():
            ((key, was),) = old.items()
            return new[key] < was
    moves = counter_moves(ref, before, after)
    return moves is not None and any(move < 0 for move in moves)


def _cache_state_in_every_answer(ctx: BundleContext) -> Iterator[Finding]:
    """Where the server's metrics say whether its prefix cache is on (vLLM's
    `vllm:cache_config_info`), one server build says it in every /metrics answer or in none:
    a cache-off server whose answers leave it out, while the others carry it, had its own
    statement taken out, and it is what shows the cache off (EVIDENCE.md: a cache-off server
    shows it in its command line and, where the server can report it, in its telemetry)."""
    profile = ctx.profile
    if profile is None or not profile.says_cache_state_in_metrics:
        return
    metrics_say = profile.cache_state_in_metrics
    some = _said_in_some_only(
        ctx.records, lambda s: None if s.metrics is None else bool(metrics_say(s.metrics))
    )
    if some is not None:
        record, side, silent, read = some
        yield Finding(
            CHECK,
            Severity.ERROR,
            f"{silent} of {read} metrics snapshots do not say whether the prefix cache is on, "
            "which the others say: one server build says it in every /metrics answer or in "
            "none",
            file=record.file,
            pointer=f"/telemetry/{side}/metrics",
        )


def _stats_state_in_every_answer(ctx: BundleContext) -> Iterator[Finding]:
    """Where the profile reads the cache's state in the stats, one server build writes each
    field of it in every stats answer or in none: a snapshot whose stats leave one out (or
    null), while the others carry it, had it taken out where it would have told against the
    request. The cache state (mlxcel's `enabled`) would have said the cache was off
    (`proofs._not_said_on` reads a field that is not there as saying nothing); the count of
    entries (mlxcel's `entries`) would have said the cache held nothing before tokens were
    served from it (`proofs._cache_state_disagrees` reads only a count of 0 so). The count
    must also be a count where it is there: "0" or 0.5 is read as no count by those rules,
    and would pass for a field left out."""
    rules = ctx.rules
    if rules is None:
        return
    for pointer in (rules.cache_enabled_pointer, rules.cache_entries_pointer):
        if pointer is None:
            continue
        some = _said_in_some_only(ctx.records, _stats_hold(pointer))
        if some is not None:
            record, side, silent, read = some
            yield Finding(
                CHECK,
                Severity.ERROR,
                f"{silent} of {read} stats snapshots lack {pointer} (or hold null), which the "
                "others carry: one server build writes it in every stats answer or in none",
                file=record.file,
                pointer=f"/telemetry/{side}/cache_stats",
            )
    if rules.cache_entries_pointer is not None:
        yield from _entries_counted(ctx.records, rules.cache_entries_pointer)


def _stats_hold(pointer: str) -> Callable[[Snapshot], bool | None]:
    """Whether a snapshot's stats hold `pointer` (not null); None where no stats were read."""
    return lambda s: None if s.cache_stats is None else s.stat(pointer) is not None


def _entries_counted(records: Iterable[Record], pointer: str) -> Iterator[Finding]:
    """The stats' count of cached entries, where a snapshot holds it (not null), is a whole
    number in 0..2^53 (EVIDENCE.md, "Numbers are bounded"). Once a record: one edit is one
    finding, not two."""
    for record in records:
        for side, snapshot in (("before", record.before), ("after", record.after)):
            value = snapshot.stat(pointer)
            if value is not None and as_count(value) is None:
                yield Finding(
                    CHECK,
                    Severity.ERROR,
                    f"the stats' {pointer} is {repr(value)[:40]}, not a whole number in "
                    "0..2^53: the count of the cache's entries must be a count to be read "
                    "against the request",
                    file=record.file,
                    pointer=f"/telemetry/{side}/cache_stats{pointer}",
                )
                break


def _said_in_some_only(
    records: Iterable[Record], says: Callable[[Snapshot], bool | None]
) -> tuple[Record, str, int, int] | None:
    """Where `says(snapshot)` is false for some snapshots and true for others (None: the
    snapshot was not read, and its request is left unproven by the proofs): the first
    silent one (its record and side), how many are silent, and how many were read."""
    read = 0
    silent: list[tuple[Record, str]] = []
    for record in records:
        for side, snapshot in (("before", record.before), ("after", record.after)):
            said = says(snapshot)
            if said is None:
                continue
            read += 1
            if not said:
                silent.append((record, side))
    if not silent or len(silent) == read:
        return None
    return (*silent[0], len(silent), read)


def _reuse_within_lookups(ctx: BundleContext) -> Iterator[Finding]:
    """Where the profile's reuse and lookup counters count the same thing
    (`ServerProfile.reuse_within_lookups`: vLLM's prefix cache hits and queries, both in
    tokens), a request reuses no more than it looked up: sample by sample where the
    families carry labels (an engine's hits are not hidden by another engine's queries)."""
    profile, rules = ctx.profile, ctx.rules
    if profile is None or rules is None or not profile.reuse_within_lookups:
        return
    reuse, lookups = rules.signals.reuse, rules.signals.lookups
    if not reuse or not lookups:
        return
    for record in ctx.records:
        reused = _by_label(reuse, record.before, record.after)
        looked = _by_label(lookups, record.before, record.after)
        if reused is None or looked is None:
            continue  # one not recorded: the proofs leave the request unproven
        over = sorted(label for label, moved in reused.items() if moved > looked.get(label, 0.0))
        if over:
            label = over[0]
            yield Finding(
                CHECK,
                Severity.ERROR,
                f"the telemetry contradicts itself: {_names(list(reuse))}{label} rose by "
                f"{reused[label]:g} across this request, {_names(list(lookups))}{label} by "
                f"{looked.get(label, 0.0):g}: the cache reused more than it was asked for",
                file=record.file,
                pointer="/telemetry",
            )


def _by_label(refs: tuple[str, ...], before: Snapshot, after: Snapshot) -> dict[str, float] | None:
    """How far the counters of `refs` moved across a request, summed by label set (a
    sample's key past its family's name: `{engine="0"}`; "" for one without labels);
    None where one of them was not recorded."""
    moved: dict[str, float] = {}
    for ref in refs:
        if ref.startswith("metric:"):
            old, new = before.samples(ref), after.samples(ref)
            if not old or not new:
                return None
            cut = len(ref) - len("metric:")
            for key in old.keys() | new.keys():
                label = key[cut:]
                moved[label] = moved.get(label, 0.0) + new.get(key, 0.0) - old.get(key, 0.0)
        else:
            was, now = before.counter(ref), after.counter(ref)
            if was is None or now is None:
                return None
            moved[""] = moved.get("", 0.0) + now - was
    return moved


def _cache_state_said(ctx: BundleContext) -> Iterator[Finding]:
    """Where the server's own metrics say whether its prefix cache is on (vLLM's
    `vllm:cache_config_info` gauge: `ServerProfile.cache_state_in_metrics`), they say it of
    the server the record names. A server declared cache-off whose metrics say the cache is
    on is not the server declared (a server never turns its cache on by itself): an error.
    One declared cache-on whose metrics say off may be honest (vLLM turns prefix caching off
    for some models): a warning, and an error only where a warm request of that server is
    proven all the same (its hits and its own statement disagree). Once a server."""
    experiment, profile = ctx.experiment, ctx.profile
    if experiment is None or profile is None or not profile.says_cache_state_in_metrics:
        return
    declared: dict[tuple[str, int], bool] = {}
    for condition in experiment.conditions:
        for server in condition.servers:
            declared.setdefault((condition.id, server.instance), server.cache_disabled)
    proven_warm = {
        (p.record.condition, p.record.server_instance)
        for p in ctx.proofs
        if p.arm is Arm.WARM and p.comparable
    }
    told: set[tuple[str, int]] = set()
    for record in ctx.records:
        key = (record.condition, record.server_instance)
        off = declared.get(key)
        if off is None or key in told:
            continue
        for side, snapshot in (("before", record.before), ("after", record.after)):
            # `off` is also the contradicting state: on (True) for a cache-off server
            if off not in profile.cache_state_in_metrics(snapshot.metrics or {}):
                continue
            told.add(key)
            severity, message = _said_otherwise(record.server_instance, off, key in proven_warm)
            yield Finding(
                CHECK, severity, message, file=record.file, pointer=f"/telemetry/{side}/metrics"
            )
            break


def _said_otherwise(instance: int, off: bool, proven_warm: bool) -> tuple[Severity, str]:
    """How grave a server's own statement of its cache against its declaration is, and why."""
    if off:
        return Severity.ERROR, (
            f"server {instance} is declared cache-off, yet its own metrics say its prefix "
            "cache is on: the evidence is not of the server declared"
        )
    if proven_warm:
        return Severity.ERROR, (
            f"server {instance}'s own metrics say its prefix cache is off, yet its counters "
            "show warm hits: the signals disagree"
        )
    return Severity.WARNING, (
        f"server {instance} is declared cache-on, but its own metrics say its prefix cache is "
        "off (the server turns it off for some models): its warm requests cannot be proven"
    )


def _undisclosed_work(ctx: BundleContext) -> Iterator[Finding]:
    """Counters that only a request served moves (`_only_requests_move`) move only with the
    recorded requests: a server the harness started has done nothing before its first one,
    and nothing between two of them. Work nobody recorded could have filled the cache (a
    "fresh" server that served a prompt before, a warm-up hidden between a reset and a
    cold request)."""
    experiment = ctx.experiment
    at_start, between = _only_requests_move(ctx)
    if experiment is None or not between:
        return
    last: dict[tuple[str, int], Record] = {}
    for record in sorted(ctx.records, key=lambda r: (r.condition, r.sequence)):
        server = (record.condition, record.server_instance)
        previous = last.get(server)
        last[server] = record
        if previous is None:
            if experiment.attached or not at_start:
                continue
            before = record.before.counters(at_start)
            moved = [r for r, v in zip(at_start, before, strict=True) if v not in (None, 0)]
            what = "before its first recorded request"
        else:
            deltas = previous.after.deltas(record.before, between)
            if not any(deltas):  # (None where either is not recorded; 0 where still)
                continue
            moved = [r for r, delta in zip(between, deltas, strict=True) if delta]
            what = f"between {previous.file} and this request"
        if moved:
            names = _names(moved)
            yield Finding(
                CHECK,
                Severity.ERROR,
                f"server {record.server_instance} did work nobody recorded {what} ({names} "
                "moved): requests outside the record could have filled the cache",
                file=record.file,
                pointer="/telemetry/before",
            )


def _only_requests_move(ctx: BundleContext) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The counters that stand at zero on a fresh server, and those that only a request
    served moves (never the time between two): the server's work counters
    (`ServerProfile.work_counters`), its counter of cached tokens (`cached_tokens_counter`),
    its seconds of work (`seconds_counters`) and the rules' misses (a lookup that found
    nothing: a lookup); between requests its decode calls too (`decode_counter`: a warm-up
    may decode before the first request)."""
    profile, rules = ctx.profile, ctx.rules
    if profile is None:
        return (), ()
    misses = rules.signals.misses if rules is not None else ()
    cached = profile.cached_tokens_counter
    seconds = tuple(ref for ref, _ in profile.seconds_counters)
    at_start = (*profile.work_counters, *((cached,) if cached else ()), *seconds, *misses)
    decode = profile.decode_counter
    between = (*at_start, *((decode,) if decode else ()))
    return tuple(dict.fromkeys(at_start)), tuple(dict.fromkeys(between))


def _busy_beside(ctx: BundleContext) -> Iterator[Finding]:
    """The profile's busy gauges (`ServerProfile.busy_gauges`) read 0 in each snapshot, every
    sample of them: a request in flight then, beside the recorded one before or after which
    it was taken, is work nobody recorded, which the counted work shows only once it ends
    (not where it ends after the last snapshot). A gauge one snapshot lacks while another
    of the bundle holds it was taken out (the server writes it in every answer to
    /metrics; a snapshot whose metrics were not read leaves its request unproven, as
    anywhere). The first such snapshot of each record is named."""
    profile = ctx.profile
    gauges = profile.busy_gauges if profile is not None else ()
    if not gauges:
        return
    records = sorted(ctx.records, key=lambda r: (r.condition, r.sequence))
    holds = {  # by any server of the bundle (helper-103: one server's taken out of all)
        ref
        for record in records
        for snapshot in (record.before, record.after)
        for ref in gauges
        if snapshot.samples(ref)
    }
    for record in records:
        for side, snapshot in (("before", record.before), ("after", record.after)):
            busy = [
                f"{key} {value:g}"
                for ref in gauges
                for key, value in snapshot.samples(ref).items()
                if value != 0
            ]
            lacking = [  # (where the metrics were read: a failed read leaves it unproven)
                ref
                for ref in gauges
                if ref in holds and snapshot.metrics is not None and not snapshot.samples(ref)
            ]
            if busy:
                message = (
                    f"server {record.server_instance} was busy in the snapshot {side} this "
                    f"request ({', '.join(busy)}): another request was in flight beside the "
                    "recorded ones, which are serialized"
                )
            elif lacking:
                message = (
                    f"the snapshot {side} this request lacks {_names(lacking)}, which other "
                    "snapshots of the bundle hold: a request in flight then is not ruled out"
                )
            else:
                continue
            yield Finding(
                CHECK, Severity.ERROR, message, file=record.file, pointer=f"/telemetry/{side}"
            )
            break


def _work_counted(ctx: BundleContext) -> Iterator[Finding]:
    """The profile's counted work (`ServerProfile.counted_work`) moves across each answered
    request by what its answer counts, exactly or within the bounds the profile reads: an
    output swapped for another of a different length (its usage edited to match), or a warm
    answer whose server computed the whole prompt, leaves the server's own count behind;
    requests nobody recorded, served beside this one (batched with it), carry it past."""
    profile = ctx.profile
    counted = profile.counted_work if profile is not None else ()
    if not counted:
        return
    yield from _counted_in_some_only(ctx, counted)
    experiment = ctx.experiment
    elsewhere = {  # servers whose cached_tokens count more than their own cache supplied
        (condition.id, server.instance)
        for condition in (experiment.conditions if experiment is not None else ())
        for server in condition.servers
        if profile is not None and profile.cached_tokens_from_elsewhere(server.argv)
    }
    for proof in ctx.proofs:
        if proof.failed is not None:
            continue  # a failed request's work is its own: it is not compared
        record = proof.record
        if (record.condition, record.server_instance) in elsewhere:
            continue
        prompt, cached = proof.prompt_tokens, _answered_cached(proof, ctx.rules)
        completion = completion_count(record)
        for ref, what in counted:
            least, most = _counted_bounds(what, prompt, cached, completion)
            if most is None:
                continue
            before, after = record.before.counter(ref), record.after.counter(ref)
            if before is None or after is None:
                continue
            moved = after - before
            said = _COUNTED_AS.get(what, what)
            if least == most and moved != most:
                yield _moved(
                    record, ref, moved,
                    f"but its answer counts {most} {said}: the answer is not what the server did",
                )  # fmt: skip
            elif moved > most:
                yield _moved(
                    record, ref, moved,
                    f"more than its answer's {most} {said}: other work ran beside this request, "
                    "which nobody recorded (or the answer is not what the server did)",
                )  # fmt: skip
            elif least is not None and moved < least:
                yield _moved(
                    record, ref, moved,
                    f"less than its answer's {least} {_LEAST_AS.get(what, said)}: the answer is "
                    "not what the server did",
                )  # fmt: skip


# What each kind of counted work (`ServerProfile.counted_work`) counts, as a message says its
# most (or its one value), and, where it differs, its least; its keys are every kind known.
_COUNTED_AS = {
    "computed": "prompt tokens computed",
    "completion": "completion tokens",
    "cached": "cached tokens",
    "prompt": "prompt tokens",
    "looked_up": "prompt tokens",
}
_LEAST_AS = {"looked_up": "cached tokens, which the cache was asked for"}
COUNTED_KINDS = frozenset(_COUNTED_AS)


def _counted_bounds(
    what: str, prompt: int | None, cached: int | None, completion: int | None
) -> tuple[int | None, int | None]:
    """The least and the most a counter of `what` (`ServerProfile.counted_work`) moves by
    across a request alone on its server, by its answer's counts (None: not known; a most
    not known leaves the counter unread)."""
    if what == "completion":
        return completion, completion
    if what == "cached":
        return cached, cached
    if prompt is None:
        return None, None
    if what == "computed":
        return (None, None) if cached is None else (prompt - cached, prompt - cached)
    if what == "prompt":  # with or without the cached tokens: only the most is read
        return None, prompt
    if what == "looked_up":  # none where the request did not reach the cache
        return (cached or 0), prompt
    return None, None  # a kind this tool does not know (COUNTED_KINDS): nothing read


def _holds(ref: str) -> Callable[[Snapshot], bool | None]:
    """Whether a snapshot holds the counter `ref`; None where the document that would hold
    it (the metrics, or the stats) was not read."""
    metric = ref.startswith("metric:")

    def holds(snapshot: Snapshot) -> bool | None:
        if (snapshot.metrics if metric else snapshot.cache_stats) is None:
            return None
        return snapshot.counter(ref) is not None

    return holds


def _counted_in_some_only(
    ctx: BundleContext, counted: tuple[tuple[str, str], ...]
) -> Iterator[Finding]:
    """A counter of the profile's counted work that no other rule needs in every snapshot
    (older builds of a server may not write it) is, where the build writes it at all, in
    every snapshot of a server from its first answer on: a labelled counter appears when
    it first counts (SGLang's, with the model's name, after the first request it serves),
    and is not dropped after; one missing after that was taken out where it would have
    told against its request. Nor may it move between two requests of one server: work
    counted there was served beside the record, by requests nobody recorded, that finished
    after the answer's snapshot. One that no snapshot holds is a warning (`_held_by_none`)."""
    profile, rules = ctx.profile, ctx.rules
    if profile is None:
        return
    needed = {
        *profile.work_counters,
        *filter(None, (profile.cached_tokens_counter, profile.decode_counter)),
        *(rules.signals.all if rules is not None else ()),
    }
    records = sorted(ctx.records, key=lambda r: (r.condition, r.sequence))
    firsts: dict[str, str] = {}
    for ref, what in counted:
        firsts.setdefault(ref, what)
    for ref, what in firsts.items():
        holds = _holds(ref)
        if ref not in needed:
            held = [held for r in records for held in (holds(r.before), holds(r.after))]
            if any(held):
                yield from _dropped_after_answers(records, ref, holds)
            elif False in held:
                yield _held_by_none(ref, what)
        if ref not in profile.work_counters:  # (those, `_undisclosed_work` reads)
            yield from _counted_between(records, ref)


def _held_by_none(ref: str, what: str) -> Finding:
    """A counter of counted work that no snapshot holds, where the server's metrics were read
    (`_counted_in_some_only`): the requests are not shown to be alone on their server."""
    return Finding(
        CHECK,
        Severity.WARNING,
        f"no metrics snapshot holds {_names([ref])}, the server's count of "
        f"{_COUNTED_AS.get(what, what)} (an older build may not write it): work served beside "
        "the recorded requests is not ruled out",
    )


def _dropped_after_answers(
    records: list[Record], ref: str, holds: Callable[[Snapshot], bool | None]
) -> Iterator[Finding]:
    """Snapshots that lack `ref` after their server's first answer (`_counted_in_some_only`)."""
    answered: set[tuple[str, int]] = set()
    silent: list[tuple[Record, str]] = []
    for record in records:
        server = (record.condition, record.server_instance)
        if server in answered and holds(record.before) is False:
            silent.append((record, "before"))
        if record.http_status == 200:
            answered.add(server)
            if holds(record.after) is False:
                silent.append((record, "after"))
    if silent:
        record, side = silent[0]
        yield Finding(
            CHECK,
            Severity.ERROR,
            f"{len(silent)} metrics snapshots lack {_names([ref])} after their server's first "
            "answer, which others carry: a server writes it from the first request it counts "
            "on, and does not drop it",
            file=record.file,
            pointer=f"/telemetry/{side}/metrics",
        )


def _counted_between(records: list[Record], ref: str) -> Iterator[Finding]:
    """A counted-work counter that moves between two requests of one server
    (`_counted_in_some_only`): the first such request of each server is named."""
    last: dict[tuple[str, int], Record] = {}
    for record in records:
        server = (record.condition, record.server_instance)
        previous, last[server] = last.get(server), record
        if previous is None:
            continue
        old, new = previous.after.counter(ref), record.before.counter(ref)
        if old is not None and new is not None and old != new:
            yield Finding(
                CHECK,
                Severity.ERROR,
                f"server {record.server_instance} counted work nobody recorded between "
                f"{previous.file} and this request ({_names([ref])} moved by {new - old:g}): "
                "requests served beside the recorded ones, finished after their snapshots",
                file=record.file,
                pointer="/telemetry/before",
            )


def _cached_tokens_counted(ctx: BundleContext) -> Iterator[Finding]:
    """The profile's other counter of cached tokens (`ServerProfile.cached_tokens_counter`)
    moves with what each answer says came from the cache: it does not rise across an answer
    that says 0 cached tokens (or, in the server-disabled arm, leaves the count out:
    `_answered_cached`): a cold answer while it rose by 32 was served from the cache after
    all; and it rises across one that says some came from it: a warm answer while it stood
    still was not served from the cache. (By how much is not read: how the server counts a
    hit is seen in the samples, not documented.)"""
    profile = ctx.profile
    ref = profile.cached_tokens_counter if profile is not None else None
    if ref is None:
        return
    for proof in ctx.proofs:
        record, cached = proof.record, _answered_cached(proof, ctx.rules)
        before, after = record.before.counter(ref), record.after.counter(ref)
        if cached is None or before is None or after is None:
            continue
        rose = after > before
        if rose != (cached > 0) and (rose or proof.failed is None):
            yield _moved(
                record, ref, after - before,
                f"but its answer says {cached} cached tokens: one of them is not this request's",
            )  # fmt: skip


def _decodes_counted(ctx: BundleContext) -> Iterator[Finding]:
    """The server's decode calls (`ServerProfile.decode_counter`) across an answered request
    are at most its prompt tokens computed (`timings.prompt_n`, or the prompt less the cached
    tokens) plus its completion tokens less one: a reply put in place of a longer one, or one
    made to stop a token short of its cap, with every count edited to match, leaves the
    server's decode calls of the real one behind."""
    profile = ctx.profile
    ref = profile.decode_counter if profile is not None else None
    if ref is None:
        return
    for proof in ctx.proofs:
        if proof.failed is not None:
            continue
        record = proof.record
        computed = as_count(record.response_value("/timings/prompt_n"))
        cached = _answered_cached(proof, ctx.rules)
        if computed is None and proof.prompt_tokens is not None and cached is not None:
            computed = proof.prompt_tokens - cached
        completion = completion_count(record)
        before, after = record.before.counter(ref), record.after.counter(ref)
        if computed is None or completion is None or before is None or after is None:
            continue
        most = computed + max(completion - 1, 0)
        if after - before > most:
            yield _moved(
                record, ref, after - before,
                f"more than its answer's {computed} prompt tokens computed and {completion} "
                f"completion tokens take (at most {most} decode calls): the answer is not what "
                "the server did",
            )  # fmt: skip


def _seconds_counted(ctx: BundleContext) -> Iterator[Finding]:
    """The server's seconds of work (`ServerProfile.seconds_counters`) across each request:
    never below zero and never down; by what the answer's timings say where it has them
    (the server adds those very milliseconds as it ends the request: a reply, or its
    timings, put in place of another's leaves them behind); and in all by no more than the
    request took (`elapsed_s`, the harness's clock around it). (At a fresh server's start
    and between two requests they stand still: `_undisclosed_work`.)"""
    profile = ctx.profile
    pairs = profile.seconds_counters if profile is not None else ()
    if not pairs:
        return
    refs = tuple(ref for ref, _ in pairs)
    for record in ctx.records:
        before, after = record.before.counters(refs), record.after.counters(refs)
        if any(v is not None and v < 0 for v in (*before, *after)):
            yield Finding(
                CHECK,
                Severity.ERROR,
                f"{_names(list(refs))} is below zero: a count of seconds spent cannot be",
                file=record.file,
                pointer="/telemetry",
            )
            continue
        spent = 0.0
        for (ref, pointer), old, new in zip(pairs, before, after, strict=True):
            if old is None or new is None:
                continue
            spent += new - old
            if new < old:
                yield _moved(record, ref, new - old, "down: the telemetry is not usable")
                continue
            said = record.response_value(pointer)
            if isinstance(said, bool) or not isinstance(said, int | float):
                continue
            # in milliseconds, as the timings are; /metrics writes about six significant
            # digits of each total, and the prompt's time is added a moment short of the
            # one the answer gives
            moved = (new - old) * 1000
            close = 0.05 + 0.02 * (old + new)
            if not said - max(1.0, 0.05 * said) - close <= moved <= said + close:
                yield _moved(
                    record, ref, new - old,
                    f"but its answer's {pointer[1:].replace('/', '.')} says {said:g} ms: the "
                    "answer, or its timings, is not what the server did",
                )  # fmt: skip
        # (the totals' last digits, as for each counter above, and 10 ms for the clocks)
        slack = 0.01 + 2e-5 * sum(v for v in (*before, *after) if v is not None)
        elapsed = record.elapsed_s
        if (
            isinstance(elapsed, int | float)
            and not isinstance(elapsed, bool)
            and spent > elapsed + slack
        ):
            yield Finding(
                CHECK,
                Severity.ERROR,
                f"the server spent {spent:g} s on this request ({_names(list(refs))}), "
                f"more than the {elapsed:g} s it took: the request's time, or its telemetry, "
                "is not what happened",
                file=record.file,
                pointer="/elapsed_s",
            )


def _moved(record: Record, ref: str, by: float, against: str) -> Finding:
    """The error of a server counter that moved across a request otherwise than its answer
    says (`against`: what the answer says, and what that means)."""
    return Finding(
        CHECK,
        Severity.ERROR,
        f"{ref.removeprefix('metric:')} moved by {by:g} across this request, {against}",
        file=record.file,
        pointer="/telemetry",
    )
