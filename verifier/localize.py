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


@dataclass(frozen=True)
class TokenChoice:
    token: str
    logprob: float
    alternatives: dict[str, float]  # top-k token -> logprob, the chosen one included

    def logprob_of(self, token: str) -> float | None:
        if token == self.token:
            return self.logprob
        return self.alternatives.get(token)

    @property
    def gap(self) -> float | None:
        """Top-1 minus top-2 log-probability at this position."""
        ranked = sorted(self.alternatives.values(), reverse=True)
        return ranked[0] - ranked[1] if len(ranked) >= 2 else None

    @property
    def floor(self) -> float | None:
        """The lowest listed log-probability: a token not listed has at most this."""
        return min(self.alternatives.values()) if self.alternatives else None


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
        """How much this side preferred its own token to the other side's (a lower bound
        when the other token is not listed)."""
        if self.other_logprob is not None:
            return self.logprob - self.other_logprob
        if self.other_at_most is not None:
            return self.logprob - self.other_at_most
        return None


@dataclass(frozen=True)
class Localization:
    index: int | None  # zero-based generated-token index; None when the lists agree
    cold: Side | None
    warm: Side | None
    reading: str
    near_tie: bool | None  # None: no reading


class LogprobsError(ValueError):
    """The response's logprobs are not a list of chosen tokens with their alternatives."""


def token_choices(response: Any) -> list[TokenChoice]:
    """The generated tokens of an OpenAI-style chat completion with `logprobs` on."""
    try:
        content = response["choices"][0]["logprobs"]["content"]
    except (KeyError, IndexError, TypeError):
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
        alternatives: dict[str, float] = {}
        for alternative in entry.get("top_logprobs") or []:
            if not isinstance(alternative, dict):
                continue
            alt_token, alt_logprob = alternative.get("token"), _finite(alternative.get("logprob"))
            if isinstance(alt_token, str) and alt_logprob is not None:
                alternatives[alt_token] = max(alt_logprob, alternatives.get(alt_token, -math.inf))
        alternatives.setdefault(token, logprob)
        choices.append(TokenChoice(token, logprob, alternatives))
    return choices


def _finite(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) and number <= 0.0 else None


def _side(own: TokenChoice, other: TokenChoice) -> Side:
    listed = own.logprob_of(other.token)
    return Side(own.token, own.logprob, listed, None if listed is not None else own.floor, own.gap)


def localize(cold: list[TokenChoice], warm: list[TokenChoice]) -> Localization:
    index = next(
        (i for i, (a, b) in enumerate(zip(cold, warm, strict=False)) if a.token != b.token), None
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
    margins = [m for m in (cold_side.margin, warm_side.margin) if m is not None]
    if len(margins) < 2:
        return Localization(index, cold_side, warm_side, "no log-probabilities to compare", None)
    smallest = min(margins)
    if smallest < NEAR_TIE_NATS:
        reading = (
            f"a near tie: one side preferred its token by only {smallest:.3g} nats "
            f"(under {NEAR_TIE_NATS}), which rounding between prefill shapes can flip"
        )
        return Localization(index, cold_side, warm_side, reading, True)
    reading = (
        f"both sides are confident in different tokens (margins {cold_side.margin:.3g} and "
        f"{warm_side.margin:.3g} nats, at least {NEAR_TIE_NATS}): not explained by rounding "
        "alone; worth a bug report"
    )
    return Localization(index, cold_side, warm_side, reading, False)


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
