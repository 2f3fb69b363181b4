"""The records against the declared protocol: every step once, in order, as declared."""

from __future__ import annotations

from collections.abc import Iterator

from verifier import layout
from verifier.checks.context import BundleContext
from verifier.model import Finding, Severity, json_pointer

CHECK = "completeness"


def check_completeness(ctx: BundleContext) -> Iterator[Finding]:
    experiment, plan = ctx.experiment, ctx.plan
    if experiment is None or plan is None:
        return
    for problem in plan.problems:
        yield Finding(
            CHECK,
            Severity.ERROR,
            problem.message,
            file=layout.EXPERIMENT,
            pointer=problem.pointer,
            expected=problem.expected,
            actual=problem.actual,
        )
    by_condition: dict[str, dict[int, str]] = {}
    for record in ctx.records:
        by_condition.setdefault(record.condition, {})[record.sequence] = record.file
    records = {(r.condition, r.sequence): r for r in ctx.records}
    present = {
        path
        for path in ctx.files
        if path.startswith(layout.RECORDS_DIR + "/") and path.endswith(".json")
    }
    for condition in experiment.conditions:
        for step in plan.requests:
            path = layout.record_path(condition.id, step.sequence)
            found = records.get((condition.id, step.sequence))
            if found is None:
                if path not in present:  # an invalid document there has its own finding
                    yield Finding(
                        CHECK,
                        Severity.ERROR,
                        f"step {step.sequence} of the protocol ({step.phase}, {step.arm}) has "
                        "no record: evidence is missing",
                        file=path,
                    )
                continue
            record = found
            declared = {
                "phase": step.phase,
                "claimed_arm": str(step.arm),
                "preceded_by": step.preceded_by,
                "server_instance": step.instance,
            }
            actual = {
                "phase": record.phase,
                "claimed_arm": str(record.claimed_arm),
                "preceded_by": record.preceded_by,
                "server_instance": record.server_instance,
            }
            for key, value in declared.items():
                if actual[key] != value:
                    yield Finding(
                        CHECK,
                        Severity.ERROR,
                        f"the record's {key} is not what step {step.sequence} of the protocol "
                        "declares: records were moved, added or removed",
                        file=record.file,
                        pointer=json_pointer(key),
                        expected=str(value),
                        actual=str(actual[key]),
                    )
        for sequence, file in sorted(by_condition.get(condition.id, {}).items()):
            if sequence > len(plan.requests):
                yield Finding(
                    CHECK,
                    Severity.ERROR,
                    f"a record beyond the protocol's {len(plan.requests)} steps: evidence was "
                    "added",
                    file=file,
                    pointer="/sequence",
                    expected=f"1..{len(plan.requests)}",
                    actual=str(sequence),
                )
