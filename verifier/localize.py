"""Where a cold and a warm greedy reply part ways, read from their recorded token lists.

The diagnostic phase sends one cold and one warm request with logprobs on. From the two
token lists (never from a claimed index) this finds the first generated token that
differs, the token each side chose, each side's log-probabilities of both tokens, and each
side's top-1/top-2 gap there; then reads it in plain words:

- a near tie on either side (that side's own choice beats the other side's token by less
  than NEAR_TIE_NATS) is what rounding between prefill shapes can flip;
- both sides confident in different tokens (both margins at least NEAR_TIE_NATS) is not
  explained by rounding alone: worth a bug report.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from verifier.model import Arm
from verifier.proofs import RequestProof

NEAR_TIE_NATS = 0.1
"""Margin, in nats of log-probability, under which a greedy choice counts as a near tie.
Cold and warm logprobs of the same token differ by about 1e-2 on the CPU here (SERVERS.md),
so a margin well under 0.1 is within what rounding moves; one above it is a clear choice."""


TokenKey = tuple[Any, ...]
"""A token's identity: its id and bytes where the server sends them, and its text."""


@dataclass(frozen=True)
class TokenChoice:
    """One generated token, its log probability and the alternatives the server listed."""

    token: str  # as shown
    key: TokenKey  # as compared: two tokens that look alike but differ are different
    logprob: float
    alternatives: dict[TokenKey, float]  # top-k token -> logprob, the chosen one included

    def logprob_of(self, key: TokenKey) -> float | None:
        if key == self.key:
            return self.logprob
        return self.alternatives.get(key)

    @property
    def gap(self) -> float | None:
        """Top-1 minus top-2 log-probability at this position."""
        ranked = sorted(self.alternatives.values(), reverse=True)
        return ranked[0] - ranked[1] if len(ranked) >= 2 else None

    @property
    def floor(self) -> float | None:
        """The lowest listed log-probability: a token not listed has at most this."""
        return min(self.alternatives.values()) if self.alternatives else None

    @property
    def greedy(self) -> bool:
        """The chosen token is the most probable one listed (rounding allowed for)."""
        return self.logprob >= max(self.alternatives.values()) - 1e-6


@dataclass(frozen=True)
class Side:
    """One side at the divergence: its token, and its log-probabilities of both tokens."""

    token: str
    logprob: float
    other_logprob: float | None  # None: the other side's token is not in this side's top-k
    other_at_most: float | None  # the bound when it is not listed
    gap: float | None  # top-1 minus top-2 here

    @property
    def margin(self) -> float | None:
        """How much this side preferred its own token to the other side's: exact when the
        other token is listed, else a lower bound (see `margin_is_bound`)."""
        if self.other_logprob is not None:
            return self.logprob - self.other_logprob
        if self.other_at_most is not None:
            return self.logprob - self.other_at_most
        return None

    @property
    def margin_is_bound(self) -> bool:
        return self.other_logprob is None


@dataclass(frozen=True)
class Localization:
    """Where a cold and a warm reply part ways, token by token, and how close it was."""

    index: int | None  # zero-based generated-token index; None when the lists agree
    cold: Side | None
    warm: Side | None
    reading: str
    near_tie: bool | None  # None: no reading


class LogprobsError(ValueError):
    """The response's logprobs are not a list of chosen tokens with their alternatives."""


def _key(entry: dict[str, Any]) -> TokenKey:
    """Id and bytes where the server sends them (the text of a partial UTF-8 piece is not
    the token), else the text."""
    raw = entry.get("bytes")
    ident = entry.get("id")
    ident = ident if isinstance(ident, int) and not isinstance(ident, bool) else None
    if isinstance(raw, list):
        if not all(type(b) is int and 0 <= b < 256 for b in raw):
            raise LogprobsError("a token's bytes are not a list of byte values")
        return (ident, tuple(raw))
    return (ident, entry.get("token"))


def _text_matches_bytes(entry: dict[str, Any]) -> bool:
    raw = entry.get("bytes")
    if not isinstance(raw, list):
        return True
    try:
        return bytes(raw).decode("utf-8") == entry.get("token")
    except (ValueError, TypeError):
        return True  # a partial UTF-8 piece: its text cannot say more than its bytes


def token_choices(response: Any) -> list[TokenChoice]:
    """The generated tokens of an OpenAI-style chat completion with `logprobs` on.

    The list must spell the reply it came with (`message.content`), token by token, and
    every choice must be the greedy one: otherwise the list says nothing about that reply.
    """
    try:
        content = response["choices"][0]["logprobs"]["content"]
        text = response["choices"][0]["message"].get("content")
    except (KeyError, IndexError, TypeError, AttributeError):
        raise LogprobsError("the response has no choices[0].logprobs.content list") from None
    if not isinstance(content, list):
        raise LogprobsError("choices[0].logprobs.content is not a list")
    choices = []
    for position, entry in enumerate(content):
        if not isinstance(entry, dict):
            raise LogprobsError(f"logprobs entry {position} is not an object")
        token, logprob = entry.get("token"), _finite(entry.get("logprob"))
        if not isinstance(token, str) or logprob is None:
            raise LogprobsError(f"logprobs entry {position} lacks a token or a finite logprob")
        alternatives: dict[TokenKey, float] = {}
        listed = entry.get("top_logprobs")
        for alternative in listed if isinstance(listed, list) else []:
            if not isinstance(alternative, dict):
                continue
            alt_logprob = _finite(alternative.get("logprob"))
            if isinstance(alternative.get("token"), str) and alt_logprob is not None:
                key = _key(alternative)
                alternatives[key] = max(alt_logprob, alternatives.get(key, -math.inf))
        if not _text_matches_bytes(entry):
            raise LogprobsError(f"token {position}'s text is not its bytes")
        key = _key(entry)
        alternatives.setdefault(key, logprob)
        choice = TokenChoice(token, key, logprob, alternatives)
        if not choice.greedy:
            raise LogprobsError(
                f"token {position} is not the most probable one listed: not a greedy reply"
            )
        choices.append(choice)
    if not _spells(content, choices, text):
        raise LogprobsError("the token list does not spell the reply's content")
    usage = response.get("usage")
    counted = usage.get("completion_tokens") if isinstance(usage, dict) else None
    if type(counted) is not int:
        raise LogprobsError("the reply does not count its tokens: its list cannot be held to it")
    if len(choices) not in (counted, counted - 1):
        # one token per entry, but an end token the list may leave out: a list of fewer
        # (tokens merged) or more places reads a divergence at a place the reply does not have
        raise LogprobsError(
            f"the token list has {len(choices)} entries for a reply of {counted} tokens"
        )
    if any(not entry["token"] and not entry.get("bytes") for entry in content[:-1]):
        # a piece of no text and no bytes is an end token, the last one: such pieces before
        # it would pad a list of merged tokens to the count
        raise LogprobsError("the token list has an empty token before its last")
    return choices


def _spells(entries: list[Any], choices: list[TokenChoice], text: object) -> bool:
    """Whether the list spells the reply: by its tokens' bytes where every entry has them
    (the tokens are the bytes: a text beside bytes that do not decode says nothing), else
    by its tokens' texts where no entry has them."""
    if not isinstance(text, str):
        return False
    raw = [e.get("bytes") for e in entries]
    if all(isinstance(b, list) and all(type(x) is int and 0 <= x < 256 for x in b)
           for b in raw):  # fmt: skip
        return bytes(x for b in raw for x in b).decode("utf-8", "replace") == text
    if any(b is not None for b in raw):
        return False  # some with bytes and some without: no one spelling to hold it to
    return "".join(c.token for c in choices) == text


def _finite(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) and number <= 0.0 else None


def _side(own: TokenChoice, other: TokenChoice) -> Side:
    listed = own.logprob_of(other.key)
    return Side(own.token, own.logprob, listed, None if listed is not None else own.floor, own.gap)


def localize(cold: list[TokenChoice], warm: list[TokenChoice]) -> Localization:
    index = next(
        (i for i, (a, b) in enumerate(zip(cold, warm, strict=False)) if a.key != b.key), None
    )
    if index is None:
        if len(cold) == len(warm):
            return Localization(None, None, None, "the cold and warm tokens are identical", None)
        return Localization(
            min(len(cold), len(warm)),
            None,
            None,
            "one reply stops where the other goes on: no token alternative to compare",
            None,
        )
    cold_side, warm_side = _side(cold[index], warm[index]), _side(warm[index], cold[index])
    sides = [side for side in (cold_side, warm_side) if side.margin is not None]
    if len(sides) < 2:
        return Localization(index, cold_side, warm_side, "no log-probabilities to compare", None)
    exact_ties = [
        s.margin for s in sides if not s.margin_is_bound and (s.margin or 0) < NEAR_TIE_NATS
    ]
    if exact_ties:
        smallest = min(m for m in exact_ties if m is not None)
        reading = (
            f"a near tie: one side preferred its token by only {smallest:.3g} nats "
            f"(under {NEAR_TIE_NATS}), which rounding between prefill shapes can flip"
        )
        return Localization(index, cold_side, warm_side, reading, True)
    if all((s.margin or 0) >= NEAR_TIE_NATS for s in sides):
        shown = [f"{'at least ' if s.margin_is_bound else ''}{s.margin:.3g}" for s in sides]
        reading = (
            f"both sides are confident in different tokens (margins {shown[0]} and "
            f"{shown[1]} nats, at least {NEAR_TIE_NATS}): not explained by rounding alone; "
            "worth a bug report"
        )
        return Localization(index, cold_side, warm_side, reading, False)
    reading = (
        "the other side's token is not in the top-k alternatives, so its margin is only "
        f"known to be at least {min(s.margin or 0 for s in sides):.3g} nats: no reading"
    )
    return Localization(index, cold_side, warm_side, reading, None)


@dataclass(frozen=True)
class Diagnosis:
    """The diagnostic phase of one condition: a localization, or why there is none."""

    localization: Localization | None
    note: str  # one sentence for the report
    files: tuple[str, ...] = ()


def diagnose(
    proofs: Sequence[RequestProof], baseline_hash: str | None, warm_hash: str | None
) -> Diagnosis | None:
    """Read the condition's diagnostic cold and warm requests, if it has them.

    The reading stands only when both are proven in their arms and gave the same outputs
    as the protocol's cold and warm classes: otherwise logprobs changed the path, and the
    token lists say nothing about the protocol's split.
    """
    cold = [p for p in proofs if p.arm is Arm.COLD]
    warm = [p for p in proofs if p.arm is Arm.WARM]
    if not cold and not warm:
        return None
    files = tuple(p.record.file for p in (*cold, *warm))
    if len(cold) != 1 or len(warm) != 1:
        return Diagnosis(None, "the diagnostic phase lacks one cold and one warm request", files)
    (c,), (w,) = cold, warm
    unproven = [p for p in (c, w) if not p.comparable]
    if unproven:
        return Diagnosis(
            None, f"the diagnostic {unproven[0].arm} request is not proven: no reading", files
        )
    if (c.record.output_hash, w.record.output_hash) != (baseline_hash, warm_hash):
        return Diagnosis(
            None,
            "with logprobs on, the replies differ from the protocol's cold and warm outputs: "
            "logprobs changed the path, so no reading is made",
            files,
        )
    try:
        result = localize(token_choices(c.record.response), token_choices(w.record.response))
    except LogprobsError as exc:
        return Diagnosis(None, f"no token list to read: {exc}", files)
    return Diagnosis(result, result.reading, files)
