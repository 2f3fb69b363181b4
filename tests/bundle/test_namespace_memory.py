"""The reader's namespace holds memory linear in the names' length, and refuses as before.

It once kept every parent of every name as a string: 9,600 empty members at 32-level,
1 KB paths (a 131 KB .tar.gz) took 382 MB (helper-79's audit, r10_deep_names.sh).
"""

from __future__ import annotations

import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from verifier.bundle.reader import _MAX_DEPTH, _collision, _Namespace, _parts, printable_name

# A component of 10 decomposed 'é' (NFD: folding has work) is 30 bytes of UTF-8.
_DEEP = "e\u0301" * 10


def deep_names(count: int, *, distinct: bool) -> list[str]:
    """Names of 32 levels and about 1 KB each; every component distinct, or only the first."""
    if distinct:
        return [
            "/".join(f"{i:06d}{j:02d}" + "e\u0301" * 7 for j in range(_MAX_DEPTH))
            for i in range(count)
        ]
    return ["/".join([f"{i:06d}"] + [_DEEP] * (_MAX_DEPTH - 1)) for i in range(count)]


def fill(names: list[str]) -> _Namespace:
    namespace = _Namespace()
    for name in names:
        assert namespace.add_file(_parts(name)) is None
    return namespace


def test_deep_names_hold_one_node_per_component() -> None:
    names = deep_names(200, distinct=True)
    nodes, _ = fill(names).footprint()
    assert nodes == 1 + 200 * _MAX_DEPTH  # the root, and each component of each name once


def test_deep_distinct_names_hold_characters_linear_in_their_length() -> None:
    for count in (100, 400):
        names = deep_names(count, distinct=True)
        _, chars = fill(names).footprint()
        # Spelled and folded: at most twice the names (every parent as a string was ~16 times).
        assert chars <= 2 * sum(map(len, names))


def test_a_component_repeated_across_names_is_held_once() -> None:
    names = deep_names(400, distinct=False)
    _, chars = fill(names).footprint()
    firsts = sum(len(name.split("/", 1)[0]) for name in names)
    folded = unicodedata.normalize("NFC", _DEEP)
    assert chars == firsts + len(_DEEP) + len(folded)


def test_growth_is_linear_in_the_number_of_names() -> None:
    small = fill(deep_names(100, distinct=True)).footprint()
    large = fill(deep_names(400, distinct=True)).footprint()
    assert large[0] - 1 == 4 * (small[0] - 1)
    assert large[1] == 4 * small[1]


# --- the tree answers as the map of every prefix did ---------------------------------


class _PrefixNamespace:
    """The namespace as it was before the tree: every parent of every name as a string."""

    def __init__(self) -> None:
        self._files: dict[str, str] = {}
        self._dirs: dict[str, str] = {}

    @staticmethod
    def _fold(path: str) -> str:
        return unicodedata.normalize("NFC", path).casefold()

    def add_file(self, parts: tuple[str, ...]) -> str | None:
        path = "/".join(parts)
        folded = self._fold(path)
        other = self._files.get(folded)
        if other == path:
            return "appears more than once; only the first copy is read"
        if other is not None:
            return _collision(other, path)
        other = self._dirs.get(folded)
        if other is not None:
            return f"is a file, but '{printable_name(other)}' is a directory"
        problem = self._parent_problem(parts)
        if problem is None:
            self._files[folded] = path
            self._add_parents(parts)
        return problem

    def add_dir(self, parts: tuple[str, ...]) -> str | None:
        path = "/".join(parts)
        folded = self._fold(path)
        other = self._files.get(folded)
        if other is not None:
            return f"is a directory, but '{printable_name(other)}' is a file"
        other = self._dirs.get(folded)
        if other is not None and other != path:
            return _collision(other, path)
        problem = self._parent_problem(parts)
        if problem is None:
            self._add_parents(parts)
            self._dirs.setdefault(folded, path)
        return problem

    def _parent_problem(self, parts: tuple[str, ...]) -> str | None:
        for end in range(1, len(parts)):
            prefix = "/".join(parts[:end])
            folded = self._fold(prefix)
            if folded in self._files:
                return f"is inside '{printable_name(self._files[folded])}', which is a file"
            other = self._dirs.get(folded)
            if other is not None and other != prefix:
                return _collision(other, prefix)
        return None

    def _add_parents(self, parts: tuple[str, ...]) -> None:
        for end in range(1, len(parts)):
            prefix = "/".join(parts[:end])
            self._dirs.setdefault(self._fold(prefix), prefix)


# Few components that collide in case and in Unicode form, so most names meet another.
_COMPONENTS = ["a", "A", "b", "caf\u00e9", "cafe\u0301", "CAF\u00c9", "\u00df", "ss", "SS"]
_NAMES = st.lists(st.sampled_from(_COMPONENTS), min_size=1, max_size=4).map(tuple)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.booleans(), _NAMES), max_size=12))
def test_tree_refuses_exactly_as_the_prefix_map_did(
    entries: list[tuple[bool, tuple[str, ...]]],
) -> None:
    tree, reference = _Namespace(), _PrefixNamespace()
    for is_dir, parts in entries:
        if is_dir:
            assert tree.add_dir(parts) == reference.add_dir(parts)
        else:
            assert tree.add_file(parts) == reference.add_file(parts)
