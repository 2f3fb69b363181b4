"""Servers and settings: every instance declared with its role, command line and environment,
and a condition's settings equal to what each of its servers ran with."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from verifier import layout
from verifier.checks.context import BundleContext, has_args
from verifier.model import Finding, Severity, json_pointer
from verifier.records import Condition, plain_value, settings_label

CHECK = "servers"


def check_servers(ctx: BundleContext) -> Iterator[Finding]:
    experiment, plan, rules = ctx.experiment, ctx.plan, ctx.rules
    if experiment is None or plan is None:
        return

    def error(message: str, *pointer: str | int, expected: str | None = None,
              actual: str | None = None) -> Finding:  # fmt: skip
        return Finding(
            CHECK, Severity.ERROR, message, file=layout.EXPERIMENT,
            pointer=json_pointer(*pointer), expected=expected, actual=actual,
        )  # fmt: skip

    toggles: dict[str, set[str | None]] = {}
    seen_ids: set[str] = set()
    for ci, condition in enumerate(experiment.conditions):
        if condition.id in seen_ids:
            yield error(f"condition {condition.id!r} is declared twice", "conditions", ci, "id")
        seen_ids.add(condition.id)
    for ci, condition in enumerate(experiment.conditions):
        derived = settings_label(condition.settings, condition.server_args)
        if condition.declared_label is not None and condition.declared_label != derived:
            # Reports name a condition by its settings, never by this free text.
            yield Finding(
                CHECK, Severity.WARNING,
                "the condition's label is not what its settings say: reports show the settings",
                file=layout.EXPERIMENT, pointer=json_pointer("conditions", ci, "label"),
                expected=derived, actual=condition.declared_label,
            )  # fmt: skip
        for name, value in condition.settings.items():
            if not plain_value(value):
                yield error(
                    f"the condition sets {name} to {value!r}: a value with characters "
                    "other than printable ASCII (a look-alike digit, a space around it) "
                    "is not what it shows, and what the server reads of it is not known",
                    "conditions", ci, "settings", name, actual=ascii(value),
                )  # fmt: skip
        for ai, arg in enumerate(condition.server_args):
            if not plain_value(arg):
                yield error(
                    f"the condition's server argument {arg!r} has characters other than "
                    "printable ASCII (a look-alike hyphen, a space around it): it is not what "
                    "it shows, and what the server reads of it is not known",
                    "conditions", ci, "server_args", ai, actual=ascii(arg),
                )  # fmt: skip
        declared = [s.instance for s in condition.servers]
        if len(set(declared)) != len(declared):
            yield error("a server instance is declared twice", "conditions", ci, "servers")
        if sorted(set(declared)) != sorted(plan.roles):
            yield error(
                "the declared server instances are not the ones the protocol starts",
                "conditions", ci, "servers",
                expected=", ".join(map(str, sorted(plan.roles))) or "none (attached)",
                actual=", ".join(map(str, sorted(set(declared)))) or "none",
            )  # fmt: skip
        for si, server in enumerate(condition.servers):
            where = ("conditions", ci, "servers", si)
            role = plan.roles.get(server.instance)
            if role is not None and role != server.cache_disabled:
                yield error(
                    f"server {server.instance} has the wrong role for its place in the protocol",
                    *where, "cache_disabled", expected=str(role).lower(),
                    actual=str(server.cache_disabled).lower(),
                )  # fmt: skip
            if rules is not None and rules.cache_off_args:
                flag = " ".join(rules.cache_off_args)
                shows = has_args(server.argv, rules.cache_off_args)
                if server.cache_disabled and not shows:
                    yield error(
                        f"a cache-off server's command line lacks {flag}", *where, "argv",
                        expected=f"argv with {flag}",
                    )  # fmt: skip
                elif not server.cache_disabled and shows:
                    yield error(
                        f"a cache-on server's command line has {flag}", *where, "argv",
                        expected=f"argv without {flag}",
                    )  # fmt: skip
            if rules is not None and rules.cache_off_args:
                for message, field, named in _cache_spelled_otherwise(
                    server.argv, server.environment, server.cache_disabled, rules.cache_off_args
                ):
                    yield error(message, *where, field, *named)
            if condition.server_args and not has_args(server.argv, condition.server_args):
                yield error(
                    f"the condition's server arguments {' '.join(condition.server_args)!r} are "
                    f"not in server {server.instance}'s command line",
                    *where, "argv", expected=" ".join(condition.server_args),
                )  # fmt: skip
            for name, value in condition.settings.items():
                ran = server.environment.get(name)
                if ran != value:
                    yield error(
                        f"the condition sets {name}={value}, but server {server.instance} ran "
                        + ("without it" if ran is None else f"with {name}={ran}"),
                        *where, "environment", name, expected=value,
                        actual="absent" if ran is None else ran,
                    )  # fmt: skip
    # A toggle no condition declares must be the same everywhere, and one that another
    # condition declares must not be run here undeclared.
    elsewhere = {name for c in experiment.conditions for name in c.settings}
    for ci, condition in enumerate(experiment.conditions):
        for si, server in enumerate(condition.servers):
            # (from the server's environment: the other conditions' settings may be many)
            names = {
                n for n in server.environment if n in elsewhere and n not in condition.settings
            }
            for name in sorted(names):
                yield error(
                    f"{name} is a setting of another condition, yet this condition's server ran "
                    "with it undeclared",
                    "conditions", ci, "servers", si, "environment", name,
                    actual=server.environment[name],
                )  # fmt: skip
    # Each name's values, from each server's own environment, and `absent` (None) for the
    # servers without it: linear in the environments, not names x servers.
    servers = [(c, s) for c in experiment.conditions for s in c.servers]
    counted: dict[str, int] = {}  # servers, of conditions that do not set the name, with it
    for condition, server in servers:
        for name, value in server.environment.items():
            if name not in condition.settings:
                toggles.setdefault(name, set()).add(value)
                counted[name] = counted.get(name, 0) + 1
    setting: dict[str, int] = {}  # servers of the conditions that set the name
    for condition in experiment.conditions:
        for name in condition.settings:
            setting[name] = setting.get(name, 0) + len(condition.servers)
    for name, values in toggles.items():
        if counted[name] < len(servers) - setting.get(name, 0):
            values.add(None)
    for name, values in sorted(toggles.items()):
        if len(values) > 1:
            yield error(
                f"{name} differs between servers but is in no condition's settings: the "
                "conditions differ by a toggle they do not declare",
                "conditions",
                actual=", ".join(sorted("absent" if v is None else v for v in values)),
            )
    # The instances each condition declares (of its first declaration, as
    # Condition.server would find them), worked out once, not once a record.
    first_by_id: dict[str, tuple[Condition, set[int]]] = {}
    for condition in experiment.conditions:
        first_by_id.setdefault(condition.id, (condition, {s.instance for s in condition.servers}))
    for proof in ctx.proofs:
        record = proof.record
        condition, instances = first_by_id[record.condition]  # a proof's condition is declared
        if experiment.attached and not condition.servers:
            continue
        if record.server_instance not in instances:
            yield Finding(
                CHECK,
                Severity.ERROR,
                f"the record names server {record.server_instance}, which its condition does "
                "not declare",
                file=record.file,
                pointer="/server_instance",
            )


def _cache_key(option: str) -> str:
    """The setting an option or environment name is about, whichever way it is spelled or
    turned: `--no-cache-prompt`, `--cache_prompt` and `--cache-prompt=false` are all about
    `cache-prompt` (llama-server reads `_` in a long option as `-`); vLLM's
    `--[no-]enable-prefix-caching` is about `prefix-caching`."""
    key = option.partition("=")[0].lstrip("-").lower().replace("_", "-")
    for turn in ("no-", "disable-", "enable-"):
        key = key.removeprefix(turn)
    return key


def _cache_spelled_otherwise(
    argv: tuple[str, ...], environment: Mapping[str, str], cache_off: bool, flags: tuple[str, ...]
) -> Iterator[tuple[str, str, tuple[str, ...]]]:
    """The cache-off flag shows a server's role only where nothing else sets the same cache:
    another spelling of it (`--no_cache_prompt`), its positive form after it on a cache-off
    server (`--cache-prompt`: the last one given is read), a value given to that form
    (`--cache-prompt=false`), or an environment variable for it (`LLAMA_ARG_NO_CACHE_PROMPT`),
    which a cache-on server would run with too. Each is (message, field, (name,))."""
    keys = {_cache_key(f) for f in flags if f.startswith("-")}
    if not keys:
        return
    exact = set(flags)
    for arg in argv:
        option = arg.partition("=")[0]
        if not option.startswith("-") or option in exact or _cache_key(option) not in keys:
            continue
        bare = option.lstrip("-").lower().replace("_", "-")
        negative = bare.startswith(("no-", "disable-"))
        if negative or cache_off or "=" in arg:
            yield (
                f"the command line gives {arg}, which sets the same cache as the cache-off flag "
                f"{' '.join(flags)}: what the server ran with is not shown by that flag",
                "argv",
                (),
            )
    for name in environment:
        key = name.lower().replace("_", "-")
        if any(key == k or key.endswith("-" + k) for k in keys):
            yield (
                f"the environment sets {name}, which sets the same cache as the cache-off flag "
                f"{' '.join(flags)}: what the server ran with is not shown by that flag",
                "environment",
                (name,),
            )
