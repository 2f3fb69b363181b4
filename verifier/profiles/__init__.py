"""Server profiles: one small module per server, named and versioned, shared by capture and verify.

A profile holds how capture starts and drives a server (`base.ServerProfile`) and the rules
verify judges its evidence by (`rules.ProfileRules`). A new server is one module here and
one entry in `_MODULES`.
"""

from __future__ import annotations

from verifier.errors import UsageError
from verifier.profiles import llamacpp, mlxcel, sglang, vllm
from verifier.profiles.base import ServerProfile
from verifier.profiles.rules import ProfileRules

_MODULES = (mlxcel, llamacpp, vllm, sglang)

PROFILES: dict[str, ServerProfile] = {module.PROFILE.name: module.PROFILE for module in _MODULES}

# Every rules version this tool knows, by (name, version). A changed rule is a new version;
# an old version stays here for as long as bundles judged by it should keep verifying.
KNOWN_RULES: dict[tuple[str, str], ProfileRules] = {
    (module.RULES.name, module.RULES.version): module.RULES for module in _MODULES
}


def get_profile(name: str) -> ServerProfile:
    try:
        return PROFILES[name]
    except KeyError:
        known = ", ".join(sorted(PROFILES))
        raise UsageError(f"unknown server profile {name!r}; known: {known}") from None


def current_rules(name: str) -> ProfileRules | None:
    """The rules this tool applies today to a server profile, or None for an unknown one."""
    profile = PROFILES.get(name)
    return profile.rules if profile is not None else None


def known_rules(name: str, version: str) -> ProfileRules | None:
    return KNOWN_RULES.get((name, version))
