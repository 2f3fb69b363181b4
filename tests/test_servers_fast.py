"""The servers check finds a record naming a server its condition does not declare by the
condition's set of instances, worked out once: what Condition.server finds for each."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st
from sample_paths import SAMPLES

from verifier.bundle.reader import Limits, read_bundle
from verifier.checks.context import BundleContext, VerifyOptions
from verifier.checks.servers import check_servers

_BASE = BundleContext(read_bundle(SAMPLES / "seed-mlxcel", Limits()), VerifyOptions())


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 27), st.sampled_from([0, 1, 2, 3, 7, -1])), max_size=5))
def test_undeclared_servers_are_those_condition_server_does_not_find(
    changes: list[tuple[int, int]],
) -> None:
    records = list(_BASE.records)
    for index, instance in changes:
        if index < len(records):
            records[index] = dataclasses.replace(records[index], server_instance=instance)
    context = BundleContext(_BASE.bundle, VerifyOptions())
    context.records = records  # type: ignore[misc]  # (a cached_property, set beforehand)
    experiment = context.experiment
    assert experiment is not None and not experiment.attached
    by_id = {c.id: c for c in reversed(experiment.conditions)}  # the first of each id
    expected = [
        r.file
        for r in sorted(records, key=lambda r: (r.condition, r.sequence))
        if by_id[r.condition].server(r.server_instance) is None
    ]
    found = [f.file for f in check_servers(context) if f.pointer == "/server_instance"]
    assert found == expected


def test_a_record_of_an_undeclared_server_is_found() -> None:
    records = list(_BASE.records)
    records[3] = dataclasses.replace(records[3], server_instance=7)
    context = BundleContext(_BASE.bundle, VerifyOptions())
    context.records = records  # type: ignore[misc]  # (a cached_property, set beforehand)
    found = [f for f in check_servers(context) if f.pointer == "/server_instance"]
    assert [f.file for f in found] == [records[3].file]
    assert "names server 7, which its condition does not declare" in found[0].message
