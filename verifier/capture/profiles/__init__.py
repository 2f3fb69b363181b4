"""Server profiles: one small module per server, looked up by name."""

from __future__ import annotations

from verifier.capture.profiles import llamacpp, mlxcel, sglang, vllm
from verifier.capture.profiles.base import ServerProfile
from verifier.errors import UsageError

PROFILES: dict[str, ServerProfile] = {
    module.PROFILE.name: module.PROFILE for module in (mlxcel, llamacpp, vllm, sglang)
}


def get_profile(name: str) -> ServerProfile:
    try:
        return PROFILES[name]
    except KeyError:
        known = ", ".join(sorted(PROFILES))
        raise UsageError(f"unknown server profile {name!r}; known: {known}") from None
