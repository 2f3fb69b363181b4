"""Checks whose work grows with the bundle's declarations stay linear in them.

A hostile experiment.json may declare hundreds of thousands of arguments, conditions,
servers or environment names within the default limits. `occurrences` (what `has_args`
and consistency's `_without` use) against the slice-at-each-place search they replaced;
the servers check's toggle findings against the names x servers table it replaced.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from verifier.bundle.reader import Limits, read_bundle
from verifier.checks import consistency, servers
from verifier.checks.context import BundleContext, VerifyOptions, has_args, occurrences
from verifier.records import Experiment

REPO = Path(__file__).resolve().parent.parent
SEED_EXPERIMENT = REPO / "sample_bundles" / "seed-mlxcel" / "experiment.json"

# Two letters, so that parts repeat and overlap within the lists (KMP's fallbacks), and a
# third now and then.
_ITEMS = st.lists(st.sampled_from(["a", "a", "b", "--x"]), max_size=20)
_PARTS = st.lists(st.sampled_from(["a", "b"]), max_size=5)


def _plain_occurrences(items: list[str], part: list[str]) -> list[int]:
    n = len(part)
    return [i for i in range(len(items) - n + 1) if items[i : i + n] == part]


def _plain_without(argv: list[str], part: tuple[str, ...]) -> None:
    i = 0
    while part and i <= len(argv) - len(part):
        if tuple(argv[i : i + len(part)]) == part:
            del argv[i : i + len(part)]
        else:
            i += 1


@given(_ITEMS, _PARTS)
def test_occurrences_are_the_plain_search_s(items: list[str], part: list[str]) -> None:
    assert list(occurrences(items, part)) == _plain_occurrences(items, part)
    assert has_args(tuple(items), tuple(part)) == bool(_plain_occurrences(items, part))


@given(_ITEMS, _PARTS)
def test_without_removes_what_the_plain_loop_removed(argv: list[str], part: list[str]) -> None:
    ours, plain = list(argv), list(argv)
    consistency._without(ours, tuple(part))
    _plain_without(plain, tuple(part))
    assert ours == plain


def test_long_command_lines_are_searched_in_linear_time() -> None:
    """80,000 arguments against 40,000: the plain search compared a slice at each place."""
    wanted = ("a",) * 39_999 + ("b",)
    argv = ["a"] * 80_000
    started = time.process_time()
    assert not has_args(tuple(argv), wanted)
    consistency._without(argv, wanted)
    assert argv == ["a"] * 80_000
    assert time.process_time() - started < 5  # (was minutes; linear: well under a second)


def _experiment(conditions: list[dict[str, Any]]) -> Experiment:
    document = json.loads(SEED_EXPERIMENT.read_text())
    base = {k: v for k, v in document["conditions"][0].items() if k != "label"}
    document["conditions"] = [
        {**base, "id": c["id"], "settings": c["settings"], "servers": [
            {**base["servers"][0], "instance": i, "environment": env}
            for i, env in enumerate(c["servers"])
        ]}
        for c in conditions
    ]  # fmt: skip
    return Experiment.from_json(document)


def _plain_toggles(experiment: Experiment) -> dict[str, set[str | None]]:
    pairs = [(c, s) for c in experiment.conditions for s in c.servers]
    return {
        name: {s.environment.get(name) for c, s in pairs if name not in c.settings}
        for name in {n for _, s in pairs for n in s.environment}
    }


_NAMES = st.sampled_from(["A", "B", "C"])
_CONDITION = st.fixed_dictionaries(
    {
        "settings": st.dictionaries(_NAMES, st.sampled_from(["0", "1"]), max_size=2),
        "servers": st.lists(
            st.dictionaries(_NAMES, st.sampled_from(["0", "1"]), max_size=3), max_size=3
        ),
    }
)


@given(st.lists(_CONDITION, min_size=1, max_size=4))
def test_the_toggle_findings_are_those_of_the_plain_table(conditions: list[dict[str, Any]]) -> None:
    for index, condition in enumerate(conditions):
        condition["id"] = f"c{index}"
    experiment = _experiment(conditions)
    context = BundleContext(read_bundle(SEED_EXPERIMENT.parent, Limits()), VerifyOptions())
    context.__dict__["experiment"] = experiment  # (a cached property: these conditions)
    found = {f.message for f in servers.check_servers(context) if "in no condition" in f.message}
    expected = {
        f"{name} differs between servers but is in no condition's settings: the conditions "
        "differ by a toggle they do not declare"
        for name, values in _plain_toggles(experiment).items()
        if len(values) > 1
    }
    assert found == expected


@given(st.lists(st.integers(min_value=0, max_value=4), max_size=12), st.integers(-1, 5))
def test_a_condition_finds_the_plain_scan_s_server(instances: list[int], asked: int) -> None:
    from verifier.records import Condition, ServerDeclaration

    declared = tuple(
        ServerDeclaration(instance=n, cache_disabled=bool(i % 2), argv=(str(i),), environment={})
        for i, n in enumerate(instances)
    )
    condition = Condition("c", "", None, {}, declared)
    plain = next((s for s in declared if s.instance == asked), None)
    assert condition.server(asked) is plain  # the first declared, where two share a number
    assert condition.server([asked]) is None  # type: ignore[arg-type]  # unhashable: scanned
