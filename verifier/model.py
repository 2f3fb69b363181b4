"""Core value types shared by every stage: arms, verdicts, findings."""

from __future__ import annotations

import enum
from typing import NamedTuple, NewType

Sha256Hex = NewType("Sha256Hex", str)
"""A lowercase hexadecimal SHA-256 digest."""


class Arm(enum.StrEnum):
    """The cache state a request was served in (EVIDENCE.md, Terms)."""

    COLD = "cold"
    WARM = "warm"
    REQUEST_DISABLED = "request-disabled"
    SERVER_DISABLED = "server-disabled"

    @property
    def is_baseline(self) -> bool:
        """Cold and both disabled arms compute the whole prompt: they form the baseline."""
        return self is not Arm.WARM


class Verdict(enum.StrEnum):
    """Classification of a condition or an experiment (EVIDENCE.md, Verdicts)."""

    CACHE_STATE_DEPENDENT = "cache-state-dependent"
    CACHE_STATE_INDEPENDENT = "cache-state-independent"
    NONDETERMINISTIC = "nondeterministic"
    INCONCLUSIVE = "inconclusive"
    INVALID = "invalid"


class Severity(enum.StrEnum):
    """How a finding weighs: an error fails verification, a warning weakens a claim."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


class Finding(NamedTuple):
    """One observation of a check, located as precisely as the check can."""

    check: str
    severity: Severity
    message: str
    file: str | None = None
    pointer: str | None = None
    expected: str | None = None
    actual: str | None = None

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR


def json_pointer(*parts: str | int) -> str:
    """Build an RFC 6901 JSON pointer from path parts."""
    escaped = (str(p).replace("~", "~0").replace("/", "~1") for p in parts)
    return "".join("/" + p for p in escaped)
