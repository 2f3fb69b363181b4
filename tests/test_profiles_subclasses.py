"""Each server's profile is a plain subclass of the frozen ServerProfile dataclass: it has
the dataclass's fields and methods, and its fields cannot be changed."""

from __future__ import annotations

import dataclasses

import pytest

from verifier.profiles import PROFILES
from verifier.profiles.base import ServerProfile


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_a_profile_is_a_frozen_server_profile(name: str) -> None:
    profile = PROFILES[name]
    assert isinstance(profile, ServerProfile) and dataclasses.is_dataclass(profile)
    assert [f.name for f in dataclasses.fields(profile)] == [
        f.name for f in dataclasses.fields(ServerProfile)
    ]
    for field in dataclasses.fields(profile):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(profile, field.name, getattr(profile, field.name))
    copy = dataclasses.replace(profile)
    assert copy == profile and type(copy) is type(profile)
    assert repr(profile).startswith(type(profile).__qualname__ + "(reset=")
    other = next(p for p in PROFILES.values() if type(p) is not type(profile))
    assert profile != other
