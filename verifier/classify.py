"""The verdict table of EVIDENCE.md, per condition and for the experiment."""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from verifier.canonical import (
    FirstDifference,
    OutputHashError,
    canonical_output,
    first_difference,
)
from verifier.model import Arm, Verdict
from verifier.profiles.rules import ProfileRules
from verifier.proofs import (
    FINISHED,
    RequestProof,
    completion_count,
    least_cap,
    limited_otherwise,
    miss_reason_refs,
)
from verifier.protocol import Phase
from verifier.records import Condition, Record

if TYPE_CHECKING:  # localize loads only for a bundle with a diagnostic phase
    from verifier.localize import Diagnosis

MIN_PER_SIDE = 2  # proven warm, cold/disabled, and cold requests, each needed for a verdict
CONFIDENCE = 0.95


@dataclass(frozen=True)
class ProtocolContext:
    """What the declared protocol adds to the verdict: the cap, and the controls it skipped."""

    max_tokens: int | None = None
    skipped: dict[Arm, str] = field(default_factory=dict)  # control arm -> why it is absent
    sampled: str | None = None  # why the request body does not ask for greedy decoding
    # per condition: why its servers' own settings sample anyway, and the reply cap where
    # they set one (None where they set a limit that is no one count of tokens)
    sampled_in: dict[str, str] = field(default_factory=dict)
    max_tokens_in: dict[str, int | None] = field(default_factory=dict)


def sampled(body: object) -> str | None:
    """Why a request body does not ask for greedy replies, or None where it does
    (temperature 0, or top_k 1). The question is about greedy replies: sampled ones differ
    without any cache, and a server's default temperature is not 0 (llama.cpp's is 0.8)."""
    if not isinstance(body, dict):
        return "the request body is not an object"

    def number(name: str) -> float | None:
        value = body.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        return None

    if number("temperature") == 0 or number("top_k") == 1:
        return _random_anyway(body, number)
    if "temperature" not in body:
        return "the request body sets no temperature, so the server samples at its default"
    return f"the request body asks for temperature {body['temperature']!r}, not 0"


# Fields that make a server draw at random even at temperature 0 or top_k 1 (llama.cpp:
# dynamic temperature widens 0 to a range, mirostat replaces the samplers, XTC drops the
# top tokens at random before temperature keeps the top one, and a sampler list can leave
# out the ones that would pick the top token), with the value that does not.
_RANDOM_ANYWAY: tuple[tuple[str, object], ...] = (
    ("dynatemp_range", 0),
    ("mirostat", 0),
    ("xtc_probability", 0),
)


def _random_anyway(body: dict[str, Any], number: Callable[[str], float | None]) -> str | None:
    for name, neutral in _RANDOM_ANYWAY:
        if name in body and number(name) != neutral:
            return (
                f"the request body sets {name} {body[name]!r}, which samples even at temperature 0"
            )
    if "samplers" in body or "sampler_seq" in body:
        return "the request body chooses its own samplers: the reply need not be the greedy one"
    return None


@dataclass(frozen=True)
class OutputClass:
    """One distinct output (by its hash) and how many requests gave it."""

    label: str  # A, B, ... in order of first appearance in the experiment
    output_hash: str
    count: int


@dataclass(frozen=True)
class ClassTelemetry:
    """What the telemetry said around the requests of one output class and arm."""

    label: str
    arm: Arm
    requests: int
    cached_tokens: tuple[int | None, ...]  # distinct values seen
    counter_deltas: dict[str, tuple[float, ...]]  # counter or sample -> distinct deltas seen


@dataclass(frozen=True)
class FiniteSampleBound:
    """How many comparable requests there were, how many varied, and the bound they give."""

    requests: int
    variations: int
    upper_bound: float | None  # 95% upper bound on the per-request variation rate

    @property
    def sentence(self) -> str:
        if self.requests == 0:
            return "no comparable request"
        if self.variations:
            return f"{self.variations} variations within arms in {self.requests} requests"
        return (
            f"no variation within arms in {self.requests} requests "
            f"(95% upper bound on the per-request variation rate: {self.upper_bound:.1%})"
        )


@dataclass(frozen=True)
class ConditionResult:
    """The verdict of one condition, with its reasons and what it was read from."""

    condition: Condition
    verdict: Verdict
    reasons: tuple[str, ...]
    counts: dict[Arm, dict[str, int]]  # arm -> class label -> proven requests
    baseline_label: str | None  # A: what cold and disabled requests gave
    warm_label: str | None  # B: what warm requests gave
    excluded: tuple[RequestProof, ...]  # failed or unproven: out of the comparison
    capped: int
    first_differences: tuple[FirstDifference, ...]
    class_telemetry: tuple[ClassTelemetry, ...]
    bound: FiniteSampleBound
    diagnosis: Diagnosis | None = None


@dataclass(frozen=True)
class Classification:
    """The experiment's verdict, its conditions' results and every request's proof."""

    verdict: Verdict
    reasons: tuple[str, ...]
    classes: tuple[OutputClass, ...]
    conditions: tuple[ConditionResult, ...]
    proofs: tuple[RequestProof, ...]
    bound: FiniteSampleBound
    first_differences: tuple[FirstDifference, ...] = field(default=())


def _labels(proofs: Sequence[RequestProof], order: Sequence[str]) -> dict[str, str]:
    rank = {cid: i for i, cid in enumerate(order)}
    labels: dict[str, str] = {}
    for proof in sorted(
        proofs, key=lambda p: (rank.get(p.record.condition, 99), p.record.sequence)
    ):
        digest = proof.record.output_hash
        if digest is not None and proof.failed is None and digest not in labels:
            labels[digest] = class_label(len(labels))
    return labels


def class_label(index: int) -> str:
    name = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        name = chr(ord("A") + rest) + name
    return name


def _bound(requests: int, variations: int) -> FiniteSampleBound:
    upper = 1 - (1 - CONFIDENCE) ** (1 / requests) if requests and not variations else None
    return FiniteSampleBound(requests, variations, upper)


def _variations(by_arm: dict[Arm, Counter[str]]) -> int:
    """Requests whose output differs from the most common output of their arm."""
    return sum(sum(c.values()) - max(c.values()) for c in by_arm.values() if c)


def _differences(left: Record | None, right: Record | None) -> tuple[FirstDifference, ...]:
    if left is None or right is None:
        return ()
    found = [
        first_difference("content", left.content, right.content),
        first_difference("reasoning_content", left.reasoning, right.reasoning),
    ]
    if not any(found):  # the outputs differ elsewhere: in their tool calls
        found.append(first_difference("tool_calls", _tool_calls(left), _tool_calls(right)))
    return tuple(d for d in found if d is not None)


class _Reply:
    """What `_cut_from` reads of one reply, worked out once: a condition's replies are compared
    pair by pair, and each of these is a pass over the reply's text."""

    __slots__ = (
        "calls",
        "content",
        "content_cut",
        "content_stripped",
        "reasoning",
        "reasoning_stripped",
        "size",
        "tool_calls",
        "unparsed",
        "unparsed_cut",
    )  # fmt: skip

    def __init__(self, record: Record) -> None:
        self.reasoning = record.reasoning or ""
        self.content = record.content or ""
        self.calls = _calls(record)
        self.tool_calls = _tool_calls(record)
        self.unparsed = _unparsed(record)
        self.unparsed_cut = _unparsed(record, cut=True)
        self.content_cut = self.content.rstrip("\ufffd").strip()
        self.reasoning_stripped = self.reasoning.strip()
        self.content_stripped = self.content.strip()
        # how many characters it holds: its reasoning, its content and its tool calls
        self.size = len(self.reasoning) + len(self.content) + len(self.tool_calls or "")


def _cut_from(short: Record | _Reply, full: Record | _Reply) -> bool:
    """Whether `short`'s output could be `full`'s cut short: generated in the order reasoning,
    content, tool calls, each of its parts is the other's where a later one has begun, and
    the last it has is the start of the other's (but a character cut in two, which a server
    writes as U+FFFD). Where their tool calls differ with the text the same, it could be."""
    if not isinstance(short, _Reply):
        short = _Reply(short)
    if not isinstance(full, _Reply):
        full = _Reply(full)
    parts = [(short.reasoning, full.reasoning), (short.content, full.content)]
    calls = short.tool_calls, full.tool_calls
    mine = short.unparsed_cut
    if calls[1] is not None and calls[0] is None and (at := mine.find("<tool_call>")) >= 0:
        mine = mine[:at].rstrip()  # a call the other's parser took out, begun and cut here
    if full.unparsed.startswith(mine) or _marked_start(short, full):
        return True
    for index, (mine, theirs) in enumerate(parts):
        if mine != theirs:
            later = any(m for m, _ in parts[index + 1 :]) or calls[0] is not None
            return not later and theirs.startswith(mine.rstrip("\ufffd"))
    return calls[0] != calls[1]


# How long a marker a parser takes out may be: a reasoning tag (`<think>`, `[THINK]`,
# `<seed:think>`, Granite's `Here is my thought process:`) or a tool call's (`[TOOL_CALLS]`).
_MARKER = 64


def _marked_start(short: _Reply, full: _Reply) -> bool:
    """Whether `short` could be `full` cut short where `full`'s parser took out what `short`'s
    left in its content, in a syntax the tool does not know by name (another model family's
    reasoning or tool-call markers; `_unparsed` knows `<think>` and `<tool_call>`): where the
    other has reasoning and this one none, its content is, after a marker, the start of that
    reasoning (8 characters of it at least), or all of it, then a marker and what
    `_content_then_call` reads; else, where their reasonings are one, it is what
    `_content_then_call` reads itself. Read leniently: outputs that differ in a way these
    cannot tell apart are taken as one cut short (fail closed), never the reverse."""
    text = short.content_cut
    reasoning = full.reasoning_stripped
    content = full.content_stripped
    theirs, mine = full.calls or [], short.calls or []
    if not reasoning or short.reasoning:  # (its own reasoning: the other's, or they differ)
        return short.reasoning_stripped == reasoning and _content_then_call(
            text, content, theirs, mine
        )
    # `text[at:].lstrip()` for each `at`, read where it starts (`pos`), not copied: the
    # text may be long, and the pairs of replies many.
    pos, size, head = 0, len(text), reasoning[:_LEAST_REASONING]
    for at in range(min(size, _MARKER) + 1):
        pos = max(pos, at)
        while pos < size and text[pos].isspace():  # (as lstrip: str.isspace's characters)
            pos += 1
        if text.startswith(reasoning, pos):
            after = text[pos + len(reasoning) :]
            return any(
                _content_then_call(after[gap:].strip(), content, theirs, mine)
                for gap in range(min(len(after), _MARKER) + 1)
            )
        rest = size - pos
        if (
            _LEAST_REASONING <= rest <= len(reasoning)
            and text.startswith(head, pos)
            and text.startswith(reasoning[:rest], pos)
        ):
            return True
    return False


# How a call's raw text starts, as parsers leave it: a bracket, a brace or a bar
# (`[TOOL_CALLS]`, `<function=`, `{"name"`, `<|python_tag|>`, DeepSeek's `<｜tool...`), or
# a word some families write (Command R's `Action:`, Phi-4's `functools[`).
_CALL_STARTS = ("[", "<", "{", "|", "\uff5c", "Action:", "functools[")
# The least of the other's reasoning a reply cut in it must hold to be read as its start.
_LEAST_REASONING = 8


def _content_then_call(
    text: str, content: str, theirs: list[dict[str, Any]], mine: list[dict[str, Any]]
) -> bool:
    """Whether `text` (white space at its ends aside) could be what the other reply (its
    `content`, stripped, and its calls `theirs`) generated after its reasoning, cut short:
    the start of its content (this reply made no call: `mine`); or, where it made calls
    this one lacks (those this one has are its first), its content, then nothing, or a
    call's raw text as a parser leaves it: a marker (`_CALL_STARTS`), and at most `_MARKER`
    characters of it or the name of the next call within that much."""
    if content.startswith(text) and not mine:
        return True
    if len(theirs) <= len(mine) or theirs[: len(mine)] != mine or not text.startswith(content):
        return False
    rest = text[len(content) :].strip()
    if not rest:
        return True
    if not rest.startswith(_CALL_STARTS):
        return False
    name = theirs[len(mine)].get("function", {}).get("name")
    named = isinstance(name, str) and bool(name) and name in rest[: _MARKER + len(name)]
    return len(rest) <= _MARKER or named


def _calls(record: Record) -> list[dict[str, Any]] | None:
    """The tool calls as they enter the output hash (None: none, or none to be read)."""
    if record.response is None:
        return None
    try:
        calls: list[dict[str, Any]] | None = canonical_output(record.response)["tool_calls"]
    except OutputHashError:
        return None
    return calls


# A reasoning tag: a server's parser takes it out of a reply that has it whole, and leaves it
# in one cut before it (`<think>\nLet me`).
_THINK_TAG = re.compile(r"</?think>")
# The tags a reply cut short may end inside of (`</thi`), which its parser leaves in it.
_TAGS = ("<think>", "</think>", "<tool_call>")


def _unparsed(record: Record, *, cut: bool = False) -> str:
    """A reply's text as generated, before a parser split it: its reasoning then its
    content, without their reasoning tags and the white space at their ends; with `cut`,
    without what a cut leaves at its end: a character cut in two (U+FFFD), a tag cut in two.
    (String operations, each linear: a pattern anchored at the end would read a long run of
    U+FFFD again from each of its places.)"""
    pieces = [record.reasoning or "", record.content or ""]
    text = "".join(p.strip() for piece in pieces for p in _THINK_TAG.split(piece))
    if not cut:
        return text
    text = text.rstrip("\ufffd")
    start = text.rfind("<")
    if start >= 0 and len(text) - start < 12 and any(t.startswith(text[start:]) for t in _TAGS):
        text = text[:start]
    return text.rstrip()


# The finish reasons of a reply that ended by itself or at the cap.
_CUT_AT_CAP = FINISHED | {"length"}


# The most the comparisons of capped replies read in one bundle (`_cut_short`, every
# condition's together): each reply against each other output counts one, and where their
# texts are compared (`_cut_from`), five more (its loops try a marker's end at 65 places,
# some 9 us in all) and one for each 256 characters the two hold. Past it the replies are
# not compared: 1,000 replies each of its own output, capped alike, took 33 s pair by pair
# (helper-74), and six conditions of 1,000 built to make each pair run those loops took
# 53 s under a bound of each condition's own (helper-76); within it, those six take 4 s.
MOST_CUT_WORK = 1_000_000


class CutWork:
    """What the comparisons of capped replies have read so far in one bundle, against
    MOST_CUT_WORK."""

    def __init__(self) -> None:
        self.spent = 0


def _cut_short(
    comparable: Sequence[RequestProof], labels: dict[str, str], work: CutWork | None = None
) -> str | None:
    """Why outputs that differ prove no difference: a reply that may have been cut short
    (capped) and is not cut where the others could be. Replies cut at one cap are cut at one
    length, so where their tokens differ the whole replies differ (EVIDENCE.md); a capped
    reply that did not finish by the cap (`abort`, `error`, no finish_reason), that counts
    no tokens or fewer than a reply of another output, that is the start of another output
    (`_cut_from`), or that holds less text than one that ended by itself, may agree with
    it as far as it goes, which proves nothing past it. Where telling that would read more
    than MOST_CUT_WORK, it is not told, and the outputs prove no difference either."""
    by_label: dict[str, list[RequestProof]] = {}
    for proof in comparable:
        by_label.setdefault(labels[proof.record.output_hash or ""], []).append(proof)
    if len(by_label) < 2 or not any(p.capped for p in comparable):
        return None
    longest: dict[str, int | None] = {}
    # the outputs of which a reply ended by itself
    ended = {label for label, proofs in by_label.items() if not all(p.capped for p in proofs)}
    for label, proofs in by_label.items():
        counts = [completion_count(p.record) for p in proofs]
        longest[label] = None if None in counts else max(c for c in counts if c is not None)
    # Capped replies of one output, one count and one way of finishing are told the same of
    # every other output: the first of them stands for all (the same first reason).
    firsts: dict[tuple[str, int | None, bool], RequestProof] = {}
    for label, proofs in by_label.items():
        for proof in proofs:
            if proof.capped:
                key = (
                    label,
                    completion_count(proof.record),
                    proof.record.finish_reason in _CUT_AT_CAP,
                )
                firsts.setdefault(key, proof)
    # (replies of one output hold one text: what their texts say is asked once a pair)
    replies = {label: _Reply(proofs[0].record) for label, proofs in by_label.items()}
    start_of: dict[tuple[str, str], bool] = {}
    work = work or CutWork()
    for (label, used, _), proof in firsts.items():
        record = proof.record
        for other, most in longest.items():
            if other == label:
                continue
            work.spent += 1
            if work.spent > MOST_CUT_WORK:
                return _too_many_to_cut(by_label, firsts)
            why = None
            if record.finish_reason not in _CUT_AT_CAP:
                why = "it did not finish by the cap"
            elif used is None or most is None:
                why = "it, or a reply that gave the other, counts no tokens"
            elif used < most:
                why = f"it counts {used} tokens, a reply that gave {other} {most}"
            else:
                if (label, other) not in start_of:
                    mine, theirs = replies[label], replies[other]
                    work.spent += 5 + (mine.size + theirs.size) // 256
                    start_of[label, other] = _cut_from(mine, theirs)
                if start_of[label, other]:
                    why = f"it is the start of {other}"
                elif other in ended and replies[label].size < replies[other].size:
                    # (what a token holds is not known here: less text than a reply that
                    # ended by itself may be less of the same reply, its counts edited where
                    # nothing binds them; two replies cut at one cap differ where they differ)
                    why = f"it holds less text than {other}, which ended by itself"
            if why is not None:
                return (
                    f"{label} may have been cut short ({record.file}: {why}): the replies "
                    f"agree as far as it goes, which proves nothing past it"
                )
    return None


def _too_many_to_cut(
    by_label: dict[str, list[RequestProof]],
    firsts: dict[tuple[str, int | None, bool], RequestProof],
) -> str:
    capped = len({label for label, _, _ in firsts})
    return (
        f"{len(by_label)} outputs, {capped} of them given by replies at the cap: more than "
        f"the tool compares in one bundle (MOST_CUT_WORK, {MOST_CUT_WORK}) to tell whether one "
        "is another cut short, so the replies may agree as far as each goes, which proves "
        "nothing past it"
    )


def _tool_calls(record: Record) -> str | None:
    """The tool calls as they enter the output hash, as canonical JSON text (`_calls`)."""
    calls = _calls(record)
    return None if calls is None else json.dumps(calls, sort_keys=True, ensure_ascii=False)


def _delta(record: Record, ref: str) -> float | None:
    """CounterDelta(ref, before, after).delta of `counter_deltas`, without the object."""
    before, after = record.before.counter(ref), record.after.counter(ref)
    return None if before is None or after is None else after - before


def _store_deltas(
    proofs: Sequence[RequestProof], rules: ProfileRules | None
) -> list[tuple[float | None, ...]]:
    """Each request's _delta of every store signal (rules.signals.store_access), in the
    order of both (`RequestProof.store_deltas`: a lazily created counter its server had
    not created, from zero): _uneven_cache and _class_telemetry read the same ones."""
    refs = rules.signals.store_access if rules is not None else ()
    return [p.store_deltas(refs) for p in proofs]


def _uneven_cache(
    proofs: Sequence[RequestProof],
    rules: ProfileRules | None,
    store_deltas: Sequence[tuple[float | None, ...]],
) -> str | None:
    """Requests of one arm were served in one cache state: their cached tokens and every
    cache counter's delta must agree. When they do not, the arm is not one state.

    `store_deltas`: _store_deltas(proofs, rules)."""
    refs = rules.signals.store_access if rules is not None else ()
    for arm in Arm:
        members = [i for i, p in enumerate(proofs) if p.arm is arm]
        seen: dict[str, set[float | None]] = {
            "cached_tokens": {proofs[i].cached_tokens for i in members}
        }
        for j, ref in enumerate(refs):
            seen[ref] = {store_deltas[i][j] for i in members}
        for name, values in seen.items():
            if len(values) > 1:
                shown = ", ".join(sorted("absent" if v is None else f"{v:g}" for v in values))
                what = name if name == "cached_tokens" else f"{name.partition(':')[2]} moved by"
                return f"the {arm} requests did not meet the same cache state: {what} {shown}"
    return None


def _class_telemetry(
    proofs: Sequence[RequestProof],
    labels: dict[str, str],
    rules: ProfileRules | None,
    store_deltas: Sequence[tuple[float | None, ...]],
) -> tuple[ClassTelemetry, ...]:
    """`store_deltas`: _store_deltas(proofs, rules)."""
    grouped: dict[tuple[str, Arm], list[tuple[RequestProof, tuple[float | None, ...]]]]
    grouped = defaultdict(list)
    for proof, store in zip(proofs, store_deltas, strict=True):
        grouped[(labels[proof.record.output_hash or ""], proof.arm)].append((proof, store))
    result = []
    refs = rules.signals.store_access if rules is not None else ()
    paths = rules.signals.paths if rules is not None else ()
    arm_order = list(Arm)
    for label, arm in sorted(grouped, key=lambda k: (len(k[0]), k[0], arm_order.index(k[1]))):
        members = [proof for proof, _ in grouped[(label, arm)]]
        deltas: dict[str, set[float]] = defaultdict(set)
        for proof, store in grouped[(label, arm)]:
            record = proof.record
            for ref, delta in zip(refs, store, strict=True):
                if delta is not None:
                    deltas[ref].add(delta)
            for ref in miss_reason_refs(record, rules):
                delta = _delta(record, ref)
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


def _cap_met(comparable: Sequence[RequestProof], protocol_cap: int | None) -> int | None:
    """The one count of tokens the compared requests were capped at: the protocol's (or
    their servers') and the least their bodies set by any name (`least_cap`: `n_predict`
    or `max_completion_tokens` below `max_tokens`), where that is one count for them all;
    None where it is not, or where the protocol's is not known (the caller reads a body
    that limits its replies otherwise, `limited_otherwise`, as no count at all)."""
    if protocol_cap is None:
        return None
    caps = {least_cap(p.record) for p in comparable}
    if len(caps) > 1:
        return None
    body = caps.pop() if caps else None
    return protocol_cap if body is None else min(body, protocol_cap)


def _one_output_counted_twice(
    comparable: Sequence[RequestProof], labels: dict[str, str]
) -> str | None:
    """Requests that gave one output but count its tokens differently: either an output was
    put in place of another (its count left as it was), or the same text came from other
    tokens, a difference the output hash cannot see. Either way their outputs are not
    compared."""
    counts: dict[str, set[int]] = {}
    for proof in comparable:
        count = completion_count(proof.record)
        if count is not None:
            counts.setdefault(proof.record.output_hash or "", set()).add(count)
    for output, told in counts.items():
        if len(told) > 1:
            return (
                f"requests that gave {labels[output]} count its completion tokens "
                f"differently ({', '.join(map(str, sorted(told)))}): one text, not one "
                "generation, so nothing is concluded from it"
            )
    return None


def classify_condition(
    condition: Condition,
    proofs: Sequence[RequestProof],
    labels: dict[str, str],
    rules: ProfileRules | None,
    prompt_mismatch: bool,
    context: ProtocolContext | None = None,
    work: CutWork | None = None,
) -> ConditionResult:
    comparable = [p for p in proofs if p.comparable]
    excluded = tuple(p for p in proofs if not p.comparable)
    store_deltas = _store_deltas(comparable, rules)
    by_arm: dict[Arm, Counter[str]] = {arm: Counter() for arm in Arm}
    for proof in comparable:
        by_arm[proof.arm][labels[proof.record.output_hash or ""]] += 1
    counts = {arm: dict(sorted(c.items())) for arm, c in by_arm.items()}
    warm = by_arm[Arm.WARM]
    baseline: Counter[str] = Counter()
    for arm in Arm:
        if arm.is_baseline:
            baseline.update(by_arm[arm])
    capped = sum(1 for p in comparable if p.capped)
    variations = _variations(by_arm)
    bound = _bound(len(comparable), variations)
    reasons: list[str] = []
    unproven_warm = [p for p in excluded if p.arm is Arm.WARM and p.failed is None]
    unproven = list(excluded)  # failed or unproven: either way, evidence the protocol lacks

    context = context or ProtocolContext()
    not_greedy = context.sampled or context.sampled_in.get(condition.id)
    limited = any(limited_otherwise(p.record.request_body) for p in comparable)
    protocol_cap = context.max_tokens_in.get(condition.id, context.max_tokens)
    cap_tokens = None if limited else _cap_met(comparable, protocol_cap)
    limit = "a limit of their requests" if limited else "the token cap"
    cold = by_arm[Arm.COLD]
    verdict: Verdict
    varying = [arm for arm, c in by_arm.items() if len(c) > 1]
    # Outputs that vary within an arm say nothing of the server's determinism where that
    # arm's requests met different cache states or sent different prompts: those come first.
    uneven = _uneven_cache(comparable, rules, store_deltas)
    if not_greedy is not None:
        verdict = Verdict.INCONCLUSIVE
        reasons.append(
            f"the requests do not ask for greedy replies ({not_greedy}): nothing is "
            "concluded from them"
        )
    elif (split := _one_output_counted_twice(comparable, labels)) is not None:
        verdict = Verdict.INCONCLUSIVE
        reasons.append(split)
    elif uneven:
        verdict = Verdict.INCONCLUSIVE
        reasons.append(uneven)
    elif prompt_mismatch:
        verdict = Verdict.INCONCLUSIVE
        reasons.append("prompt_tokens differ between requests: the prompt was not the same")
    elif (cut := _cut_short(comparable, labels, work)) is not None:
        verdict = Verdict.INCONCLUSIVE
        reasons.append(cut)
    elif varying:
        verdict = Verdict.NONDETERMINISTIC
        for arm in varying:
            spread = ", ".join(f"{n}x {label}" for label, n in sorted(by_arm[arm].items()))
            reasons.append(f"the {arm} arm varies within itself: {spread}")
    elif unproven and (comparable or len(unproven) < len(proofs)):
        # Evidence the protocol calls for is missing: leaving a request out could hide a
        # variation, so nothing is concluded from the rest.
        verdict = Verdict.INCONCLUSIVE
        first = unproven[0]
        reasons.append(
            f"{len(unproven)} of {len(proofs)} requests failed or are not proven, so the "
            f"evidence is incomplete (first: {first.record.file}, claimed {first.arm}: "
            f"{first.reason})"
        )
    elif not comparable:
        verdict = Verdict.INCONCLUSIVE
        why = sorted({p.reason for p in excluded})
        reasons.append(
            "no request is both successful and proven" + (f" ({'; '.join(why[:3])})" if why else "")
        )
    elif not warm:
        verdict = Verdict.INCONCLUSIVE
        if unproven_warm:
            reasons.append(
                f"warm hits not proven: {len(unproven_warm)} claimed warm requests lack "
                "hit evidence"
            )
        else:
            reasons.append("the warm arm is empty")
    elif not cold:
        verdict = Verdict.INCONCLUSIVE
        reasons.append("no proven cold request: the controls alone do not make a baseline")
    elif (
        sum(warm.values()) < MIN_PER_SIDE
        or sum(baseline.values()) < MIN_PER_SIDE
        or sum(cold.values()) < MIN_PER_SIDE
    ):
        # (cold apart from the controls too: one cold reply shows no stable baseline)
        verdict = Verdict.INCONCLUSIVE
        reasons.append(
            f"too few requests: {sum(warm.values())} proven warm and {sum(baseline.values())} "
            f"proven cold/disabled, of them {sum(cold.values())} cold; at least "
            f"{MIN_PER_SIDE} of each are needed"
        )
    elif len(baseline) > 1:
        verdict = Verdict.INCONCLUSIVE
        per_arm = "; ".join(
            f"{arm}: {', '.join(sorted(by_arm[arm]))}"
            for arm in Arm
            if arm.is_baseline and by_arm[arm]
        )
        reasons.append(f"the cold and cache-disabled arms disagree ({per_arm})")
    else:
        (a,) = baseline
        (b,) = warm
        if a != b:
            verdict = Verdict.CACHE_STATE_DEPENDENT
            reasons.append(
                f"every proven cold/disabled request gave {a}, every proven warm request gave {b}"
            )
            if capped:
                reasons.append(
                    f"{capped} compared requests hit {limit}: the outputs already differ "
                    "within it (truncated, so the full replies differ too)"
                )
        elif capped:
            # One output, cut at the cap in one request: the same text in all of them, so
            # all are cut there (one that says it stopped short with it contradicts that).
            verdict = Verdict.INCONCLUSIVE
            cap = f"first {cap_tokens} tokens" if cap_tokens is not None else "tokens before it"
            which = "every one" if capped == len(comparable) else f"{capped} of them"
            reasons.append(
                f"every proven request gave {a}, but {which} hit {limit}: they agree "
                f"in the {cap}, which proves nothing past it"
            )
        else:
            verdict = Verdict.CACHE_STATE_INDEPENDENT
            reasons.append(f"every proven request gave {a}, warm and cold alike")
    if unproven_warm and verdict is not Verdict.INCONCLUSIVE:
        reasons.append(
            f"{len(unproven_warm)} claimed warm requests were not proven and were left out"
        )
    if capped and verdict not in (Verdict.INCONCLUSIVE, Verdict.CACHE_STATE_DEPENDENT):
        reasons.append(f"{capped} compared requests hit {limit}: their outputs are truncated")
    for arm in (Arm.REQUEST_DISABLED, Arm.SERVER_DISABLED):
        skipped = context.skipped.get(arm)
        if skipped is not None:
            reasons.append(f"without the {arm} control ({skipped})")
        elif not by_arm[arm]:
            claimed = sum(1 for p in proofs if p.arm is arm)
            if claimed:
                reasons.append(f"the {arm} control proved nothing: {claimed} requests unproven")

    baseline_label = baseline.most_common(1)[0][0] if baseline else None
    warm_label = warm.most_common(1)[0][0] if warm else None

    def example(label: str | None) -> Record | None:
        for proof in comparable:
            if label is not None and labels[proof.record.output_hash or ""] == label:
                return proof.record
        return None

    differences: tuple[FirstDifference, ...] = ()
    if baseline_label and warm_label and baseline_label != warm_label:
        differences = _differences(example(baseline_label), example(warm_label))
    return ConditionResult(
        condition=condition,
        verdict=verdict,
        reasons=tuple(reasons),
        counts=counts,
        baseline_label=baseline_label,
        warm_label=warm_label,
        excluded=excluded,
        capped=capped,
        first_differences=differences,
        class_telemetry=_class_telemetry(comparable, labels, rules, store_deltas),
        bound=bound,
    )


_PRECEDENCE = (
    Verdict.NONDETERMINISTIC,
    Verdict.INCONCLUSIVE,
    Verdict.CACHE_STATE_DEPENDENT,
    Verdict.CACHE_STATE_INDEPENDENT,
)


def _diagnose(
    proofs: Sequence[RequestProof], baseline_hash: str | None, warm_hash: str | None
) -> Diagnosis | None:
    """`localize.diagnose`, imported only where there is a diagnostic request to read."""
    if not proofs:
        return None  # what diagnose gives for no request
    from verifier.localize import diagnose

    return diagnose(proofs, baseline_hash, warm_hash)


def _by_condition(proofs: Sequence[RequestProof]) -> dict[str, list[RequestProof]]:
    """The proofs of each condition, in their order (one pass, not one per condition)."""
    grouped: dict[str, list[RequestProof]] = defaultdict(list)
    for proof in proofs:
        grouped[proof.record.condition].append(proof)
    return grouped


def classify(
    conditions: Sequence[Condition],
    proofs: Sequence[RequestProof],
    rules: ProfileRules | None,
    context: ProtocolContext | None = None,
    notes: Sequence[str] = (),
) -> Classification:
    """Classify each condition, then the experiment.

    The experiment takes the most telling verdict of its conditions: variation within an arm
    outweighs everything; a condition the evidence cannot decide leaves the experiment
    undecided (fail closed: its missing evidence could hide a variation); a proven split in
    one condition outweighs independence in another; `cache-state-independent` needs every
    condition to agree.
    """
    order = [c.id for c in conditions]
    diagnostic = [p for p in proofs if p.record.phase == Phase.DIAGNOSTIC]
    proofs = [p for p in proofs if p.record.phase != Phase.DIAGNOSTIC]  # never judged
    labels = _labels(proofs, order)
    prompts = {p.prompt_tokens for p in proofs if p.failed is None and p.prompt_tokens is not None}
    prompt_mismatch = len(prompts) > 1
    by_condition = _by_condition(proofs)
    diagnostic_by_condition = _by_condition(diagnostic)
    work = CutWork()  # (one bound for the bundle's conditions together)
    results = tuple(
        classify_condition(
            condition,
            list(by_condition.get(condition.id, ())),
            labels,
            rules,
            prompt_mismatch,
            context,
            work,
        )
        for condition in conditions
    )
    hashes = {label: digest for digest, label in labels.items()}
    diagnosed = []
    for r in results:
        diagnosis = _diagnose(
            list(diagnostic_by_condition.get(r.condition.id, ())),
            hashes.get(r.baseline_label or ""),
            hashes.get(r.warm_label or ""),
        )
        # without a diagnosis the result is already what replace() would make of it
        diagnosed.append(r if diagnosis is None else replace(r, diagnosis=diagnosis))
    results = tuple(diagnosed)
    verdicts = {r.verdict for r in results}
    verdict = next((v for v in _PRECEDENCE if v in verdicts), Verdict.INCONCLUSIVE)
    reasons = [*notes, *(f"{r.condition.id}: {r.verdict}" for r in results)]
    if prompt_mismatch:
        reasons.insert(0, "prompt_tokens differ: " + ", ".join(str(p) for p in sorted(prompts)))
    counter: Counter[str] = Counter()
    for proof in proofs:
        if proof.comparable and proof.record.output_hash:
            counter[proof.record.output_hash] += 1
    classes = tuple(
        OutputClass(label, digest, counter[digest])
        for digest, label in sorted(labels.items(), key=lambda kv: (len(kv[1]), kv[1]))
    )
    comparable = sum(r.bound.requests for r in results)
    variations = sum(r.bound.variations for r in results)
    first = next((r.first_differences for r in results if r.first_differences), ())
    return Classification(
        verdict=verdict,
        reasons=tuple(reasons),
        classes=classes,
        conditions=results,
        proofs=(*proofs, *diagnostic),
        bound=_bound(comparable, variations),
        first_differences=first,
    )
